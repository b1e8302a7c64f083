//! The engines of the YCSB suite behind one trait: a record store with
//! YCSB's four calls (insert and update are both a put of the whole record).
//! Each peer is compiled only with its cargo feature; Larder's KV API only
//! with `larder-kv`.

use anyhow::{bail, Result};

use super::YcsbSpec;

#[cfg(feature = "fjall")]
mod fjall;
mod index;
#[cfg(feature = "larder-kv")]
mod kv;
#[cfg(feature = "lmdb")]
mod lmdb;
#[cfg(feature = "rocksdb")]
mod rocksdb;

/// Every engine of the suite, in the order of the first round.
pub const ALL: [&str; 5] = ["larder-kv", "larder-index", "rocksdb", "fjall", "lmdb"];

/// The Larder engines (the subjects of the bar).
pub const LARDER: [&str; 2] = ["larder-kv", "larder-index"];

/// What a YCSB workload needs of an engine.
pub trait RecordStore {
    /// Version and the settings that matter, for the report.
    fn describe(&self) -> String;
    /// Stores `value` under `key` (insert or update), not synced.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Stores every record of `records` (the load phase): through the
    /// engine's batch API where it has one, not synced.
    fn load(&mut self, records: &[(String, &[u8])]) -> Result<()> {
        for (key, value) in records {
            self.put(key.as_bytes(), value)?;
        }
        Ok(())
    }
    /// Looks `key` up; on a hit, replaces `out` with the value.
    fn read(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;
    /// Reads up to `count` records from `start` on, in key order, each
    /// value copied out (YCSB's scan returns the records); how many it read.
    fn scan(&mut self, start: &[u8], count: usize, out: &mut Vec<u8>) -> Result<usize>;
    /// Clean close: everything written is on disk.
    fn close(self: Box<Self>) -> Result<()>;
    /// The engine's own counters of what slowed it (Larder's index: write
    /// stalls and runs per level), printed on the child's stderr after
    /// each phase; None where the engine keeps none the suite reads.
    fn counters(&self) -> Option<String> {
        None
    }
}

/// Larder's index counters that explain a phase's tail: writes stopped or
/// delayed, the time they waited, flushes and merges done, runs per level,
/// and runs opened (all, and those kept over the metadata budget: a read
/// phase whose opens grow with its gets is reopening runs, not reading).
pub fn index_counters(stats: &larder_index::IndexStats) -> String {
    format!(
        "stops {}, slowdowns {}, stalled {:.3} s, flushes {}, merges {}, runs per level {:?}, memtables {} MiB, run opens {} ({} over the metadata budget)",
        stats.stops,
        stats.slowdowns,
        stats.stall_micros as f64 / 1e6,
        stats.flushes,
        stats.compactions,
        stats.runs_per_level,
        stats.memtable_bytes >> 20,
        stats.run_opens,
        stats.metadata_over_budget_opens
    )
}

/// The cargo feature `engine` needs, or None if this binary has it.
pub fn missing_feature(engine: &str) -> Option<&'static str> {
    let (built, feature) = match engine {
        "larder-kv" => (cfg!(feature = "larder-kv"), "larder-kv"),
        "rocksdb" => (cfg!(feature = "rocksdb"), "rocksdb"),
        "fjall" => (cfg!(feature = "fjall"), "fjall"),
        "lmdb" => (cfg!(feature = "lmdb"), "lmdb"),
        _ => (true, ""),
    };
    (!built).then_some(feature)
}

/// Opens `spec.engine` in a new directory under `spec.dir`.
pub fn open(spec: &YcsbSpec) -> Result<Box<dyn RecordStore>> {
    match spec.engine.as_str() {
        "larder-index" => Ok(Box::new(index::LarderIndex::open(spec)?)),
        #[cfg(feature = "larder-kv")]
        "larder-kv" => Ok(Box::new(kv::LarderKv::open(spec)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(rocksdb::RocksRecords::open(spec)?)),
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Box::new(fjall::FjallRecords::open(spec)?)),
        #[cfg(feature = "lmdb")]
        "lmdb" => Ok(Box::new(lmdb::LmdbRecords::open(spec)?)),
        other => bail!("engine {other:?} is not built into this binary (see --features)"),
    }
}
