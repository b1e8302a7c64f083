//! `larder fsck STORE`: checks every invariant of the store (larder-fsck)
//! with a progress bar per phase, prints each problem and a summary.
//! `larder fsck --repair STORE` first rewrites every redundant copy that
//! does not hold the current contents (a damaged superblock slot), printing
//! each, then checks.
//!
//! Exit codes: 0 clean, 1 problems found (or part of the store could not
//! be checked), 2 an error stopped the check (the caller maps an `Err`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use indicatif::ProgressBar;
use larder_fsck::{Options, Phase, Progress};

use crate::{progress, store};

/// Options of `larder fsck`.
#[derive(clap::Args, Debug)]
pub(crate) struct FsckArgs {
    /// Store directory.
    store: PathBuf,
    /// Check metadata and space only, not every data block's checksum
    /// (time proportional to the index instead of to the data).
    #[arg(long)]
    metadata_only: bool,
    /// First rewrite every damaged redundant copy (a superblock slot not
    /// holding the current copy) from the sound one, then check.
    #[arg(long)]
    repair: bool,
}

/// Exit code when problems were found.
const PROBLEMS: u8 = 1;

/// One bar per phase, replaced as the check moves on.
#[derive(Default)]
struct Bars {
    phase: Option<Phase>,
    bar: Option<ProgressBar>,
}

impl Bars {
    fn update(&mut self, p: Progress) {
        if self.phase != Some(p.phase) {
            if let Some(b) = self.bar.take() {
                b.finish_and_clear();
            }
            let what = format!("fsck {}", p.phase);
            self.bar = Some(match p.total {
                Some(total) => progress::items(total, &what),
                None => progress::spinner(&what),
            });
            self.phase = Some(p.phase);
        }
        if let Some(b) = &self.bar {
            b.set_position(p.done);
        }
    }

    fn clear(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// `larder fsck`.
pub(crate) fn run(args: &FsckArgs) -> Result<ExitCode> {
    let kv = store::open(&args.store)?;
    let d = args.store.display();
    if args.repair {
        let repaired = larder_fsck::repair(kv.store()).with_context(|| {
            format!("repairing the store at {d}; nothing after the last line printed was rewritten")
        })?;
        for r in &repaired {
            println!("{r}");
        }
        println!("repair rewrote {} redundant copies", repaired.len());
    }
    let options = Options { verify_checksums: !args.metadata_only, ..Options::default() };
    let mut bars = Bars::default();
    let checked = larder_fsck::check_with(kv.store(), &options, &mut |p| bars.update(p));
    bars.clear();
    let report = checked.with_context(|| format!("checking the store at {d}; the check stopped before its end"))?;
    println!("{report}");
    store::close(kv, &args.store)?;
    if report.is_clean() {
        println!("the store at {d} is clean");
        Ok(ExitCode::SUCCESS)
    } else {
        let n = report.problems.len() as u64 + report.problems_dropped;
        println!(
            "the store at {d} has {n} problems{}",
            if report.skipped.is_empty() { "" } else { " and parts not checked" }
        );
        Ok(ExitCode::from(PROBLEMS))
    }
}
