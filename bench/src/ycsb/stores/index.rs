//! Larder's index used directly (`larder-index`): the LSM tree under the
//! object store, without the store's log, namespace or objects.

use std::ops::Bound;
use std::sync::Arc;

use anyhow::{Context, Result};
use larder_index::{Index, Options, WriteBatch};
use larder_io::{CheckedStorage, RealStorage, StorageRef};

use super::RecordStore;
use crate::ycsb::YcsbSpec;

pub struct LarderIndex {
    index: Index,
    seq: u64,
    batch: WriteBatch,
    settings: String,
    /// The key buffer of scans.
    key: Vec<u8>,
}

impl LarderIndex {
    pub fn open(spec: &YcsbSpec) -> Result<LarderIndex> {
        let storage: StorageRef = CheckedStorage::new(Arc::new(RealStorage::new())).storage_ref();
        let mut options = Options {
            memtable_size_bytes: spec.memtable_bytes as usize,
            block_cache_bytes: spec.cache_bytes as usize,
            compaction_threads: spec.background_threads.saturating_sub(1).max(1),
            ..Options::default()
        };
        if let Some(bytes) = spec.meta_cache_bytes {
            options.metadata_cache_bytes = bytes as usize;
        }
        let settings = format!(
            "larder-index {} (workspace): Index::write of a one-put WriteBatch per operation (one per load batch), reads by \
             Index::get_into, scans by Iter::next_into into the client's buffers; memtable {} MiB x \
             (1 + {} immutable), block cache {} MiB, metadata cache {} MiB, bloom {} bits/key, {} merge threads + \
             1 flusher; no log of its own (a write is durable at the next memtable flush: in a store the log \
             covers it)",
            env!("CARGO_PKG_VERSION"),
            options.memtable_size_bytes >> 20,
            options.max_immutable_memtables,
            options.block_cache_bytes >> 20,
            options.metadata_cache_bytes >> 20,
            options.bloom_bits_per_key,
            options.compaction_threads
        );
        let index = Index::open(storage, &spec.dir.join("index"), options).context("opening the index")?;
        Ok(LarderIndex { index, seq: 0, batch: WriteBatch::new(), settings, key: Vec::new() })
    }
}

impl RecordStore for LarderIndex {
    fn describe(&self) -> String {
        self.settings.clone()
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.batch = WriteBatch::new();
        self.batch.put(key, value);
        self.seq += 1;
        self.index.write(self.seq, &self.batch)?;
        Ok(())
    }

    fn load(&mut self, records: &[(String, &[u8])]) -> Result<()> {
        let mut batch = WriteBatch::new();
        for (key, value) in records {
            batch.put(key, value);
        }
        self.seq += 1;
        self.index.write(self.seq, &batch)?;
        Ok(())
    }

    // Reads and scans fill the caller's buffers through the index's
    // buffer-filling calls (`get_into`, `Iter::next_into`), as the KV
    // store's scan and LMDB's borrowed slices do: no allocation per value.
    fn read(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        Ok(self.index.get_into(key, out)?)
    }

    fn scan(&mut self, start: &[u8], count: usize, out: &mut Vec<u8>) -> Result<usize> {
        let mut scan = self.index.range(Bound::Included(start), Bound::Unbounded, true)?;
        let mut read = 0;
        while read < count && scan.next_into(&mut self.key, out)? {
            read += 1;
        }
        Ok(read)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.index.close()?;
        Ok(())
    }

    fn counters(&self) -> Option<String> {
        Some(super::index_counters(&self.index.stats()))
    }
}
