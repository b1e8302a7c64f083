//! `larder stats STORE`: the store's counters in a readable form (shared
//! with `larder bench`), and the byte and rate formats every command uses.

use std::path::PathBuf;

use anyhow::{Context, Result};
use larder_kv::Kv;

use crate::target::Target;

/// Options of `larder stats`.
#[derive(clap::Args, Debug)]
pub(crate) struct StatsArgs {
    /// Store directory.
    store: PathBuf,
}

/// `larder stats`.
pub(crate) fn run(args: &StatsArgs) -> Result<()> {
    let target = Target::open(&args.store)?;
    print!("{}", target.stats().with_context(|| format!("reading the store at {}", args.store.display()))?);
    target.close(&args.store)
}

/// A rate of bytes per second.
pub(crate) fn per_sec(bytes_per_sec: f64) -> String {
    format!("{:.1} MB/s", bytes_per_sec / 1e6)
}

/// `n` bytes with a binary unit.
pub(crate) fn bytes(n: u64) -> String {
    larder_kv::stats::bytes(n)
}

/// The counters of the store `kv`, one group per line.
pub(crate) fn report(kv: &Kv) -> Result<String> {
    Ok(larder_kv::stats::report(kv)?)
}
