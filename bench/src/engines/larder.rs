//! Larder's index (the engine under test).

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context, Result};
use larder_index::{Index, IndexStats, Options, WriteBatch};
use larder_io::{CheckedStorage, RealStorage, StorageRef};

use super::{Engine, Kv};
use crate::workload::ChildSpec;

pub struct Larder {
    index: Index,
    seq: u64,
    options: Options,
    /// A scan's key and value, reused entry after entry.
    scan_buffers: (Vec<u8>, Vec<u8>),
}

impl Larder {
    pub fn open(spec: &ChildSpec) -> Result<Larder> {
        // Through a poison latch, as a store's index is: the first failed sync
        // stops every later write.
        let storage: StorageRef = CheckedStorage::new(Arc::new(RealStorage::new())).storage_ref();
        let options = Options {
            memtable_size_bytes: spec.memtable_bytes as usize,
            max_immutable_memtables: spec.max_immutable_memtables,
            block_cache_bytes: spec.cache_bytes as usize,
            bloom_bits_per_key: spec.bloom_bits_per_key,
            // One flusher thread plus the mergers make up the background threads.
            compaction_threads: spec.background_threads.saturating_sub(1).max(1),
            ..Options::default()
        };
        let index = Index::open(storage, &spec.dir.join("index"), options.clone()).context("opening the index")?;
        Ok(Larder { index, seq: 0, options, scan_buffers: (Vec::new(), Vec::new()) })
    }
}

impl Engine for Larder {
    fn describe(&self) -> String {
        let o = &self.options;
        format!(
            "larder-index {} (workspace): memtable {} MiB x (1 + {} immutable), block cache {} MiB, metadata cache {} MiB, \
             bloom {} bits/key, block {} B, {} merge threads + 1 flusher, fanout {}, no WAL, no compression, \
             gets by Index::get_into into the caller's buffer",
            env!("CARGO_PKG_VERSION"),
            o.memtable_size_bytes >> 20,
            o.max_immutable_memtables,
            o.block_cache_bytes >> 20,
            o.metadata_cache_bytes >> 20,
            o.bloom_bits_per_key,
            o.block_size_bytes,
            o.compaction_threads,
            o.merge_fanout
        )
    }

    fn write(&mut self, batch: &[Kv]) -> Result<()> {
        let mut b = WriteBatch::new();
        for kv in batch {
            b.put(kv.key, kv.value);
        }
        self.seq += 1;
        self.index.write(self.seq, &b)?;
        Ok(())
    }

    fn finish_ingest(&mut self) -> Result<()> {
        self.index.flush()?;
        Ok(())
    }

    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        // Into the caller's buffer, as LMDB's peer copies its value.
        Ok(self.index.get_into(key, value)?)
    }

    fn scan_prefix(&mut self, prefix: &[u8]) -> Result<(u64, u64)> {
        let (mut entries, mut bytes) = (0, 0);
        // Into buffers kept across scans, as LMDB's cursor lends its pages.
        let (key, value) = &mut self.scan_buffers;
        let mut scan = self.index.prefix(prefix, true)?;
        while scan.next_into(key, value)? {
            anyhow::ensure!(key.starts_with(prefix), "prefix scan returned a key outside the prefix");
            entries += 1;
            bytes += (key.len() + value.len()) as u64;
        }
        Ok((entries, bytes))
    }

    fn counters(&mut self) -> BTreeMap<String, f64> {
        let s = self.index.stats();
        let mut c = BTreeMap::new();
        let mut put = |name: &str, v: u64| {
            c.insert(name.to_string(), v as f64);
        };
        put("block_cache_hits", s.block_cache_hits);
        put("block_cache_misses", s.block_cache_misses);
        put("block_reads", s.block_reads);
        put("bloom_negatives", s.bloom_negatives);
        put("bloom_true_positives", s.bloom_true_positives);
        put("bloom_false_positives", s.bloom_false_positives);
        put("gets", s.gets);
        put("get_misses", s.get_misses);
        put("missed_gets_reading_data_block", s.missed_gets_reading_data_block);
        put("user_bytes_written", s.user_bytes_written);
        put("bytes_flushed", s.bytes_flushed);
        put("bytes_compacted", s.bytes_compacted);
        put("flushes", s.flushes);
        put("compactions", s.compactions);
        put("stall_micros", s.stall_micros);
        put("slowdowns", s.slowdowns);
        put("stops", s.stops);
        put("run_opens", s.run_opens);
        put("manifest_writes", s.manifest_writes);
        c
    }

    fn gauges(&mut self) -> BTreeMap<String, String> {
        let s: IndexStats = self.index.stats();
        let mut g = BTreeMap::new();
        g.insert("runs".to_string(), s.runs.to_string());
        g.insert("runs_per_level".to_string(), format!("{:?}", s.runs_per_level));
        g.insert("run_bytes".to_string(), s.run_bytes.to_string());
        g.insert("metadata_bytes".to_string(), s.metadata_bytes.to_string());
        g.insert("memtable_bytes".to_string(), s.memtable_bytes.to_string());
        g.insert("write_amplification".to_string(), format!("{:.3}", s.write_amplification()));
        g.insert("stats".to_string(), s.to_string());
        g
    }

    fn write_amp(&mut self) -> Option<f64> {
        Some(self.index.stats().write_amplification())
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.index.close()?;
        Ok(())
    }
}
