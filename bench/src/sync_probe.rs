//! What the device does with concurrent `fdatasync`s: 1, 2, 4, 8 threads,
//! each writing and syncing in a loop, on one shared file (as the
//! objects suite's `fdatasync` ceiling does) or on a file each (as a log
//! of several independently synced lanes would), with a buffered 4 KiB
//! overwrite (the ceiling's) or a direct 8 KiB overwrite (a one-record
//! log group's). Every file is written and synced whole before it is
//! timed, so the timed writes allocate nothing.
//!
//! Printed per case and round: operations a second, the CPU and the
//! voluntary and involuntary context switches of the process per
//! operation, and the write and flush requests the device completed per
//! operation (from `/proc/diskstats`: the whole device's, so a
//! neighbour's I/O counts too). The cases of a round run in an order
//! rotated each round.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;

/// Arguments of `larder-bench sync-probe`.
#[derive(Args, Debug)]
pub struct SyncProbeArgs {
    /// Directory of the probe's files (removed after each case).
    #[arg(long)]
    dir: PathBuf,
    /// Thread counts, comma-separated.
    #[arg(long, default_value = "1,2,4,8", value_delimiter = ',')]
    threads: Vec<usize>,
    /// Operations per case (split between its threads).
    #[arg(long, default_value_t = 4000)]
    ops: u64,
    /// Rounds of every case.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The block device whose counters are read (a name in
    /// /proc/diskstats; the columns are NaN if it is not there).
    #[arg(long, default_value = "vda")]
    device: String,
}

/// One case: how many threads, on what files, with which writes.
#[derive(Clone, Copy, Debug)]
struct Case {
    threads: usize,
    shared: bool,
    direct: bool,
}

impl Case {
    fn len(self) -> usize {
        if self.direct {
            8192
        } else {
            4096
        }
    }

    fn name(self) -> String {
        format!(
            "{} thread(s), {}, {}",
            self.threads,
            if self.shared { "one file" } else { "a file each" },
            if self.direct { "direct 8 KiB" } else { "buffered 4 KiB" }
        )
    }
}

/// Runs the probe and prints one line per case and round.
pub fn run(args: &SyncProbeArgs) -> Result<()> {
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let mut cases = Vec::new();
    for &threads in &args.threads {
        for shared in [true, false] {
            for direct in [false, true] {
                cases.push(Case { threads: threads.max(1), shared, direct });
            }
        }
    }
    println!(
        "case | round | ops/s | CPU µs/op | switches/op (vol+invol) | device writes/op | device flushes/op | load"
    );
    for round in 0..args.rounds {
        for i in 0..cases.len() {
            let case = cases[(i + round) % cases.len()];
            let r = run_case(args, case)?;
            println!(
                "{} | {} | {:.0} | {:.1} | {:.2} | {:.2} | {:.2} | {}",
                case.name(),
                round + 1,
                r.ops_per_sec,
                r.cpu_us_per_op,
                r.switches_per_op,
                r.writes_per_op,
                r.flushes_per_op,
                load_average()
            );
        }
    }
    Ok(())
}

struct CaseResult {
    ops_per_sec: f64,
    cpu_us_per_op: f64,
    switches_per_op: f64,
    writes_per_op: f64,
    flushes_per_op: f64,
}

fn run_case(args: &SyncProbeArgs, case: Case) -> Result<CaseResult> {
    let per_thread = (args.ops / case.threads as u64).max(1);
    let total = per_thread * case.threads as u64;
    let files = if case.shared { 1 } else { case.threads };
    let slots = if case.shared { total } else { per_thread };
    let paths: Vec<PathBuf> = (0..files).map(|f| args.dir.join(format!("sync-probe-{f}"))).collect();
    let result = (|| -> Result<CaseResult> {
        let handles = paths.iter().map(|p| prepare(p, slots, case)).collect::<Result<Vec<File>>>()?;
        let next = AtomicU64::new(0);
        let barrier = Barrier::new(case.threads + 1);
        let (cpu0, sw0, dev0) = (crate::sys::process_cpu_secs(), switches(), device_counts(&args.device));
        let start = std::thread::scope(|s| -> Result<Instant> {
            let workers: Vec<_> = (0..case.threads)
                .map(|t| {
                    let file = &handles[if case.shared { 0 } else { t }];
                    let (next, barrier) = (&next, &barrier);
                    s.spawn(move || -> Result<()> {
                        let buf = AlignedBuf::new(case.len(), t as u8)?;
                        barrier.wait();
                        for i in 0..per_thread {
                            let slot = if case.shared { next.fetch_add(1, Ordering::Relaxed) } else { i };
                            file.write_all_at(buf.as_slice(), slot * case.len() as u64)?;
                            file.sync_data()?;
                        }
                        Ok(())
                    })
                })
                .collect();
            barrier.wait();
            let start = Instant::now();
            for w in workers {
                w.join().map_err(|_| anyhow::anyhow!("a probe thread panicked"))??;
            }
            Ok(start)
        })?;
        let secs = start.elapsed().as_secs_f64();
        let (cpu1, sw1, dev1) = (crate::sys::process_cpu_secs(), switches(), device_counts(&args.device));
        let n = total as f64;
        let per_op = |f: fn((u64, u64)) -> u64| match (dev0, dev1) {
            (Some(a), Some(b)) => f(b).saturating_sub(f(a)) as f64 / n,
            _ => f64::NAN,
        };
        Ok(CaseResult {
            ops_per_sec: n / secs,
            cpu_us_per_op: (cpu1 - cpu0) * 1e6 / n,
            switches_per_op: (sw1 - sw0) as f64 / n,
            writes_per_op: per_op(|c| c.0),
            flushes_per_op: per_op(|c| c.1),
        })
    })();
    for p in &paths {
        let _ = std::fs::remove_file(p);
    }
    result
}

/// Creates `path` with `slots` blocks of the case's size written and
/// synced, and opens it as the case writes it.
fn prepare(path: &Path, slots: u64, case: Case) -> Result<File> {
    let file = OpenOptions::new().create(true).truncate(true).read(true).write(true).open(path)?;
    let zeros = vec![0u8; case.len()];
    for s in 0..slots {
        file.write_all_at(&zeros, s * case.len() as u64)?;
    }
    file.sync_all()?;
    if !case.direct {
        return Ok(file);
    }
    drop(file);
    Ok(OpenOptions::new().read(true).write(true).custom_flags(libc::O_DIRECT).open(path)?)
}

/// A buffer aligned for direct I/O.
struct AlignedBuf {
    bytes: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    fn new(len: usize, fill: u8) -> Result<AlignedBuf> {
        let bytes = vec![fill; len + 4096];
        let start = bytes.as_ptr().align_offset(4096);
        if start + len > bytes.len() {
            bail!("cannot align a probe buffer");
        }
        Ok(AlignedBuf { bytes, start, len })
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[self.start..self.start + self.len]
    }
}

/// Voluntary plus involuntary context switches of this process so far.
fn switches() -> u64 {
    // SAFETY: getrusage writes the struct it is given, which is zeroed
    // plain data and lives for the call.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is a valid target.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0;
    }
    (u.ru_nvcsw + u.ru_nivcsw) as u64
}

/// The device's completed write and flush requests so far, if
/// `/proc/diskstats` names it.
fn device_counts(device: &str) -> Option<(u64, u64)> {
    let stats = std::fs::read_to_string("/proc/diskstats").ok()?;
    parse_diskstats(&stats, device)
}

/// The write and flush requests completed of `device` in a
/// `/proc/diskstats` text: after the name, writes completed is the 5th
/// field and flushes completed the 16th (kernel 5.5 and later).
fn parse_diskstats(stats: &str, device: &str) -> Option<(u64, u64)> {
    let line = stats.lines().map(|l| l.split_whitespace().collect::<Vec<_>>()).find(|f| f.get(2) == Some(&device))?;
    let get = |i: usize| line.get(3 + i).and_then(|f| f.parse::<u64>().ok());
    Some((get(4)?, get(15)?))
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn diskstats_give_the_named_device_writes_and_flushes() {
        let stats = "   7       0 loop0 1 2 3 4 5 6 7 8 0 9 10 0 0 0 0 11 12\n \
                     254       0 vda 3508088 116277 172995558 6544147 23878049 1458185 7261807408 28707156 0 3765492 \
                     36894327 1221236 151 6169034200 799272 6290526 843750\n";
        assert_eq!(parse_diskstats(stats, "vda"), Some((23878049, 6290526)));
        assert_eq!(parse_diskstats(stats, "loop0"), Some((5, 11)));
        assert_eq!(parse_diskstats(stats, "sda"), None);
        let old_kernel = " 254 0 vda 1 2 3 4 5 6 7 8 9 10 11\n";
        assert_eq!(parse_diskstats(old_kernel, "vda"), None, "no flush column");
    }

    #[test]
    fn every_case_writes_and_syncs_each_operation_and_cleans_up() {
        let dir = std::env::temp_dir().join(format!("larder-sync-probe-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let args = SyncProbeArgs { dir: dir.clone(), threads: vec![2], ops: 8, rounds: 1, device: "none".into() };
        for shared in [true, false] {
            for direct in [false, true] {
                let case = Case { threads: 2, shared, direct };
                match run_case(&args, case) {
                    Ok(r) => {
                        assert!(r.ops_per_sec > 0.0, "{}", case.name());
                        assert!(r.writes_per_op.is_nan(), "no such device, no count");
                    }
                    // A file system without O_DIRECT (tmpfs) refuses the open.
                    Err(e) if direct => eprintln!("{}: {e:#}", case.name()),
                    Err(e) => panic!("{}: {e:#}", case.name()),
                }
                assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the probe's files are removed");
            }
        }
        std::fs::remove_dir(&dir).unwrap();
    }
}
