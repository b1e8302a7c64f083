//! The server suite's workloads, as plans of steps one client runs:
//! Filebench's varmail and webserver (uFS's evaluation, paper 002) and
//! ScaleFS's smallfile. A plan is generated from a seed before anything
//! is timed, so every peer runs the same steps.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::ops::Random;

/// A workload the suite runs.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Filebench varmail: per iteration, delete a file and create it
    /// again (16 KiB, fsync), append 16 KiB to another (fsync), read two
    /// files whole.
    Varmail,
    /// Filebench webserver: files of 16 KiB opened, read whole and
    /// closed; every 10th read appends 16 KiB to a log.
    Webserver,
    /// ScaleFS smallfile: files of 1 KiB created, one sync, each read,
    /// each unlinked.
    Smallfile,
    /// Filebench webproxy: per iteration, delete a file and create it
    /// again (16 KiB), read five files whole, append 16 KiB to a log.
    Webproxy,
}

/// Every workload, by name.
pub const WORKLOADS: [(&str, Workload); 4] = [
    ("varmail", Workload::Varmail),
    ("webserver", Workload::Webserver),
    ("smallfile", Workload::Smallfile),
    ("webproxy", Workload::Webproxy),
];

impl Workload {
    /// The workload named `name`.
    pub fn parse(name: &str) -> Result<Workload> {
        match WORKLOADS.iter().find(|(n, _)| *n == name) {
            Some((_, w)) => Ok(*w),
            None => bail!("unknown workload {name:?}: varmail, webserver, smallfile, webproxy"),
        }
    }

    /// The workload's name.
    pub fn name(self) -> &'static str {
        WORKLOADS.iter().find(|(_, w)| *w == self).map_or("?", |(n, _)| n)
    }
}

/// One step of a plan. Files are numbered within the client's directory.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Creates file `file` (it must not exist), writes `bytes`, fsyncs
    /// it when `fsync`, closes it.
    Create { file: u32, bytes: u32, fsync: bool },
    /// Opens file `file` to append, appends `bytes`, fsyncs it when
    /// `fsync`, closes it.
    Append { file: u32, bytes: u32, fsync: bool },
    /// Opens file `file`, reads it whole, closes it.
    ReadWhole { file: u32 },
    /// Unlinks file `file`.
    Delete { file: u32 },
    /// Appends `bytes` to the log file, kept open for the whole run.
    LogAppend { bytes: u32 },
    /// Makes everything durable (syncfs).
    SyncAll,
}

/// What one client does: untimed set-up steps, then timed steps.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub setup: Vec<Step>,
    pub timed: Vec<Step>,
}

/// Sizes of a workload (`--workload-scale` multiplies the counts).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// Files of varmail's set (Filebench: 1,000).
    pub varmail_files: u32,
    /// Varmail iterations per client.
    pub varmail_iterations: u32,
    /// Files of the webserver's set (the issue: 10,000).
    pub webserver_files: u32,
    /// Whole-file reads per webserver client.
    pub webserver_reads: u32,
    /// Files per smallfile client (the issue: 10,000).
    pub smallfile_files: u32,
    /// Files of webproxy's set.
    pub webproxy_files: u32,
    /// Webproxy iterations per client.
    pub webproxy_iterations: u32,
}

impl Sizes {
    /// The default sizes times `scale` (at least 1 of each).
    pub fn scaled(scale: f64) -> Sizes {
        let n = |base: f64| ((base * scale).round() as u32).max(1);
        Sizes {
            varmail_files: 1_000,
            varmail_iterations: n(500.0),
            webserver_files: 10_000,
            webserver_reads: n(20_000.0),
            smallfile_files: n(10_000.0),
            webproxy_files: 1_000,
            webproxy_iterations: n(2_000.0),
        }
    }
}

/// Bytes of a varmail or webserver file, and of an append.
pub const FILE_BYTES: u32 = 16 << 10;
/// Bytes of a smallfile file.
pub const SMALL_BYTES: u32 = 1 << 10;
/// The webserver appends to its log once every this many reads.
pub const READS_PER_LOG_APPEND: u32 = 10;

/// The plan of one client of `workload`.
pub fn plan(workload: Workload, sizes: Sizes, seed: u64) -> Plan {
    let mut random = Random::new(seed);
    match workload {
        Workload::Varmail => {
            let files = sizes.varmail_files.max(2);
            let setup = (0..files).map(|file| Step::Create { file, bytes: FILE_BYTES, fsync: false }).collect();
            let pick = |random: &mut Random| random.below(u64::from(files)) as u32;
            let mut timed = Vec::with_capacity(sizes.varmail_iterations as usize * 5);
            for _ in 0..sizes.varmail_iterations {
                let victim = pick(&mut random);
                timed.push(Step::Delete { file: victim });
                timed.push(Step::Create { file: victim, bytes: FILE_BYTES, fsync: true });
                timed.push(Step::Append { file: pick(&mut random), bytes: FILE_BYTES, fsync: true });
                timed.push(Step::ReadWhole { file: pick(&mut random) });
                timed.push(Step::ReadWhole { file: pick(&mut random) });
            }
            Plan { setup, timed }
        }
        Workload::Webserver => {
            let files = sizes.webserver_files.max(1);
            let setup = (0..files).map(|file| Step::Create { file, bytes: FILE_BYTES, fsync: false }).collect();
            let mut timed = Vec::with_capacity(sizes.webserver_reads as usize * 11 / 10 + 1);
            for read in 1..=sizes.webserver_reads {
                timed.push(Step::ReadWhole { file: random.below(u64::from(files)) as u32 });
                if read % READS_PER_LOG_APPEND == 0 {
                    timed.push(Step::LogAppend { bytes: FILE_BYTES });
                }
            }
            Plan { setup, timed }
        }
        Workload::Smallfile => {
            let files = sizes.smallfile_files;
            let mut timed: Vec<Step> =
                (0..files).map(|file| Step::Create { file, bytes: SMALL_BYTES, fsync: false }).collect();
            timed.push(Step::SyncAll);
            timed.extend((0..files).map(|file| Step::ReadWhole { file }));
            timed.extend((0..files).map(|file| Step::Delete { file }));
            Plan { setup: Vec::new(), timed }
        }
        Workload::Webproxy => {
            let files = sizes.webproxy_files.max(1);
            let setup = (0..files).map(|file| Step::Create { file, bytes: FILE_BYTES, fsync: false }).collect();
            let pick = |random: &mut Random| random.below(u64::from(files)) as u32;
            let mut timed = Vec::with_capacity(sizes.webproxy_iterations as usize * 8);
            for _ in 0..sizes.webproxy_iterations {
                let victim = pick(&mut random);
                timed.push(Step::Delete { file: victim });
                timed.push(Step::Create { file: victim, bytes: FILE_BYTES, fsync: false });
                for _ in 0..WEBPROXY_READS {
                    timed.push(Step::ReadWhole { file: pick(&mut random) });
                }
                timed.push(Step::LogAppend { bytes: FILE_BYTES });
            }
            Plan { setup, timed }
        }
    }
}

/// Whole-file reads per webproxy iteration (Filebench: 5).
pub const WEBPROXY_READS: usize = 5;

/// Checks `steps` against a model of the client's files (their sizes):
/// a create of a file that exists, or anything else on one that does
/// not, is an error. Returns the bytes each read of the steps returns,
/// in order, and the model after the steps.
pub fn replay(model: &mut std::collections::BTreeMap<u32, u64>, steps: &[Step]) -> Result<Vec<u64>> {
    let mut reads = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        match *step {
            Step::Create { file, bytes, .. } => {
                if model.insert(file, u64::from(bytes)).is_some() {
                    bail!("step {i}: creates file {file}, which exists");
                }
            }
            Step::Append { file, bytes, .. } => match model.get_mut(&file) {
                Some(size) => *size += u64::from(bytes),
                None => bail!("step {i}: appends to file {file}, which does not exist"),
            },
            Step::ReadWhole { file } => match model.get(&file) {
                Some(size) => reads.push(*size),
                None => bail!("step {i}: reads file {file}, which does not exist"),
            },
            Step::Delete { file } => {
                if model.remove(&file).is_none() {
                    bail!("step {i}: deletes file {file}, which does not exist");
                }
            }
            Step::LogAppend { .. } | Step::SyncAll => {}
        }
    }
    Ok(reads)
}

#[cfg(test)]
#[path = "workloads_tests.rs"]
mod tests;
