//! The object stores compared, behind one small trait shared by the writer
//! threads. Each peer is compiled only with its cargo feature; Larder's
//! object store only with `larder-kv`.

use anyhow::{bail, Result};

use super::ObjSpec;

mod ext4;
#[cfg(feature = "fjall")]
mod fjall;
#[cfg(feature = "larder-kv")]
mod larder;
#[cfg(feature = "lmdb")]
mod lmdb;
#[cfg(feature = "redb")]
mod redb;
#[cfg(feature = "rocksdb")]
mod rocksdb;
#[cfg(feature = "larder-trees")]
mod trees;

/// Every engine of the object suite, in the order of the first round.
/// `larder-pre` is Larder with its containers created at store creation
/// (untimed, as the ceiling's file is written before it is timed); it runs
/// the 1 MiB puts only.
pub const ALL: [&str; 8] = ["larder", "larder-pre", "larder-trees", "ext4", "rocksdb", "fjall", "lmdb", "redb"];

/// Memtables each LSM peer may hold frozen besides the active one (RocksDB:
/// max_write_buffer_number - 1), as in the index suite's default.
#[cfg_attr(not(feature = "rocksdb"), allow(dead_code))]
pub const MAX_IMMUTABLE_MEMTABLES: usize = 2;

/// What the workloads need of an engine. Shared by reference across the
/// writer threads, so every method takes `&self`.
pub trait Store: Send + Sync {
    /// Version and the settings that matter, for the report.
    fn describe(&self) -> String;
    /// Stores `value` under `key`; `durable` means on disk when this returns.
    fn put(&self, key: &str, value: &[u8], durable: bool) -> Result<()>;
    /// Stores a batch through the engine's fastest non-durable path (bulk loads).
    fn load(&self, items: &[(String, &[u8])]) -> Result<()> {
        for (key, value) in items {
            self.put(key, value, false)?;
        }
        Ok(())
    }
    /// Makes what the bulk loads wrote durable, where the engine buffers it
    /// in the process (the child then syncs the file system).
    fn sync(&self) -> Result<()> {
        Ok(())
    }
    /// Looks `key` up; on a hit, replaces `out` with the value.
    fn get(&self, key: &str, out: &mut Vec<u8>) -> Result<bool>;
    /// Stores one large object from `chunks`, durably, without holding it in memory.
    fn put_stream(&self, key: &str, chunks: &mut dyn Iterator<Item = &[u8]>) -> Result<()> {
        let _ = (key, chunks);
        bail!("{}: streaming puts are not measured for this engine", self.describe())
    }
    /// Deletes `key` durably; whether it existed.
    fn delete(&self, key: &str) -> Result<bool> {
        let _ = key;
        bail!("{}: deletes are not measured for this engine", self.describe())
    }
    /// The engine's own counters since open (for the raw results), if it
    /// keeps any worth reading next to a phase's figures.
    fn counters(&self) -> std::collections::BTreeMap<String, f64> {
        std::collections::BTreeMap::new()
    }
    /// Clean close: everything written is on disk and the engine is shut down.
    fn close(self: Box<Self>) -> Result<()>;
}

/// The cargo feature `engine` needs, or None if this binary has it.
pub fn missing_feature(engine: &str) -> Option<&'static str> {
    let (built, feature) = match engine {
        "larder" | "larder-pre" => (cfg!(feature = "larder-kv"), "larder-kv"),
        "larder-trees" => (cfg!(feature = "larder-trees"), "larder-trees"),
        "rocksdb" => (cfg!(feature = "rocksdb"), "rocksdb"),
        "fjall" => (cfg!(feature = "fjall"), "fjall"),
        "lmdb" => (cfg!(feature = "lmdb"), "lmdb"),
        "redb" => (cfg!(feature = "redb"), "redb"),
        _ => (true, ""),
    };
    (!built).then_some(feature)
}

/// Opens `spec.store` in a new directory under `spec.dir`.
pub fn open(spec: &ObjSpec) -> Result<Box<dyn Store>> {
    match spec.store.as_str() {
        "ext4" => Ok(Box::new(ext4::Ext4::open(spec)?)),
        #[cfg(feature = "larder-kv")]
        "larder" | "larder-pre" => Ok(Box::new(larder::Larder::open(spec)?)),
        #[cfg(feature = "larder-trees")]
        "larder-trees" => Ok(Box::new(trees::LarderTrees::open(spec)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(rocksdb::RocksStore::open(spec)?)),
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Box::new(fjall::FjallStore::open(spec)?)),
        #[cfg(feature = "lmdb")]
        "lmdb" => Ok(Box::new(lmdb::LmdbStore::open(spec)?)),
        #[cfg(feature = "redb")]
        "redb" => Ok(Box::new(redb::RedbStore::open(spec)?)),
        other => bail!("engine {other:?} is not built into this binary (see --features)"),
    }
}
