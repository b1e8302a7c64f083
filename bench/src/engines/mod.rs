//! The engines compared, behind one small trait. Each peer is compiled only
//! with its cargo feature.

use std::collections::BTreeMap;

use anyhow::{bail, Result};

use crate::workload::ChildSpec;

#[cfg(feature = "fjall")]
pub(crate) mod fjall;
mod larder;
#[cfg(feature = "lmdb")]
pub(crate) mod lmdb;
#[cfg(feature = "rocksdb")]
pub(crate) mod rocksdb;
#[cfg(feature = "rocksdb")]
pub(crate) mod rocksdb_handle;

/// Every engine the benchmark knows, in the order of the first round.
pub const ALL: [&str; 4] = ["larder", "rocksdb", "fjall", "lmdb"];

/// One entry of a write batch.
pub struct Kv<'a> {
    pub key: [u8; crate::workload::KEY_BYTES],
    pub value: &'a [u8],
}

/// What the workloads need of an engine.
pub trait Engine {
    /// Versions and the settings that matter, for the report.
    fn describe(&self) -> String;
    /// Applies one batch of puts (not synced).
    fn write(&mut self, batch: &[Kv]) -> Result<()>;
    /// Makes everything written durable on disk in the engine's own files.
    fn finish_ingest(&mut self) -> Result<()>;
    /// Looks `key` up; on a hit, copies the value into `value`.
    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool>;
    /// Reads every entry starting with `prefix`, forward; returns (entries, key+value bytes).
    fn scan_prefix(&mut self, prefix: &[u8]) -> Result<(u64, u64)>;
    /// Monotonic counters (the child reports their change per phase).
    fn counters(&mut self) -> BTreeMap<String, f64> {
        BTreeMap::new()
    }
    /// State worth printing (runs per level, ...).
    fn gauges(&mut self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    /// Bytes the engine wrote to its files per user byte, as it counts them.
    fn write_amp(&mut self) -> Option<f64> {
        None
    }
    fn close(self: Box<Self>) -> Result<()>;
}

/// Whether this binary was built with `engine`.
// Which arms are `true` depends on the features, so keep the match.
#[allow(clippy::match_like_matches_macro)]
pub fn available(engine: &str) -> bool {
    match engine {
        "larder" => true,
        "rocksdb" => cfg!(feature = "rocksdb"),
        "fjall" => cfg!(feature = "fjall"),
        "lmdb" => cfg!(feature = "lmdb"),
        _ => false,
    }
}

/// Opens `spec.engine` in a fresh directory under `spec.dir`.
pub fn open(spec: &ChildSpec) -> Result<Box<dyn Engine>> {
    match spec.engine.as_str() {
        "larder" => Ok(Box::new(larder::Larder::open(spec)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(rocksdb::RocksDb::open(spec)?)),
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Box::new(fjall::Fjall::open(spec)?)),
        #[cfg(feature = "lmdb")]
        "lmdb" => Ok(Box::new(lmdb::Lmdb::open(spec)?)),
        other => bail!("engine {other:?} is not built into this binary (see --features)"),
    }
}

/// The smallest key greater than every key starting with `prefix`, or None
/// if there is none (the prefix is all 0xff).
#[cfg_attr(not(feature = "rocksdb"), allow(dead_code))]
pub fn prefix_upper_bound(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut bound = prefix.to_vec();
    while let Some(last) = bound.pop() {
        if last < 0xff {
            bound.push(last + 1);
            return Some(bound);
        }
    }
    None
}
