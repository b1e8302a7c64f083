//! `larder stats STORE`: the store's counters in a readable form (shared
//! with `larder bench`), and the byte and rate formats every command uses.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use larder_kv::Kv;

use crate::store;

/// Options of `larder stats`.
#[derive(clap::Args, Debug)]
pub(crate) struct StatsArgs {
    /// Store directory.
    store: PathBuf,
}

/// `larder stats`.
pub(crate) fn run(args: &StatsArgs) -> Result<()> {
    let kv = store::open(&args.store)?;
    print!("{}", report(&kv).with_context(|| format!("reading the store at {}", args.store.display()))?);
    store::close(kv, &args.store)
}

/// `n` bytes with a binary unit.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// A rate of bytes per second.
pub(crate) fn per_sec(bytes_per_sec: f64) -> String {
    format!("{:.1} MB/s", bytes_per_sec / 1e6)
}

/// The counters of the store `kv`, one group per line.
pub(crate) fn report(kv: &Kv) -> Result<String> {
    let store = kv.store();
    let buckets = kv.buckets().context("listing buckets")?.len();
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(s, "store:            {}", store.dir().display());
    let _ = writeln!(s, "buckets:          {buckets}");
    let _ = writeln!(s, "log:              durable LSN {}", store.durable_lsn());
    let sp = store.space().stats();
    let _ = writeln!(
        s,
        "space:            {} containers ({} spare), {} total, {} allocated, {} free, {} pending free, \
         {} punched",
        sp.containers,
        sp.spare_containers,
        bytes(sp.bytes_total),
        bytes(sp.bytes_allocated),
        bytes(sp.bytes_free),
        bytes(sp.bytes_pending_free),
        bytes(sp.bytes_punched_now)
    );
    let _ = writeln!(
        s,
        "since this open:  {} allocations ({} extents), {} frees ({} released, {} pending), {} punches \
         ({}), {} containers created ({} inline)",
        sp.allocations,
        sp.extents_allocated,
        sp.frees,
        sp.frees_released,
        sp.deferred_frees_pending,
        sp.punches,
        bytes(sp.bytes_punched),
        sp.containers_created,
        sp.containers_created_inline
    );
    let _ = writeln!(s, "index (activity since this open):");
    for line in store.index().stats().to_string().lines() {
        let _ = writeln!(s, "  {line}");
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_get_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(10 << 20), "10.0 MiB");
        assert_eq!(bytes(u64::MAX), "16777216.0 TiB");
    }
}
