//! fjall (pure Rust LSM tree) from crates.io.

use anyhow::Result;
use fjall::config::{BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::{Engine, Kv};
use crate::workload::ChildSpec;

/// The keyspace options every suite gives fjall: the suite's memtable
/// and bloom filter bits, no compression (as every engine of the suites).
pub(crate) fn keyspace_options(memtable_bytes: u64, bloom_bits_per_key: f32) -> KeyspaceCreateOptions {
    KeyspaceCreateOptions::default()
        .max_memtable_size(memtable_bytes)
        .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(BloomConstructionPolicy::BitsPerKey(
            bloom_bits_per_key,
        ))))
        .data_block_compression_policy(CompressionPolicy::disabled())
        .index_block_compression_policy(CompressionPolicy::disabled())
}

pub struct Fjall {
    db: Database,
    keyspace: Keyspace,
    settings: String,
}

impl Fjall {
    pub fn open(spec: &ChildSpec) -> Result<Fjall> {
        let db = Database::builder(spec.dir.join("fjall"))
            .cache_size(spec.cache_bytes)
            .worker_threads(spec.background_threads.max(1))
            // Batches are not flushed to the OS per write; the journal is
            // synced once at the end (it cannot be turned off).
            .manual_journal_persist(true)
            .open()?;
        let memtable = spec.memtable_bytes;
        let bits = spec.bloom_bits_per_key as f32;
        let keyspace = db.keyspace("bench", || keyspace_options(memtable, bits).manual_journal_persist(true))?;
        let settings = format!(
            "fjall {}: max_memtable_size {} MiB (no bound on sealed memtables, the default), cache {} MiB \
             (blocks, filters, index), bloom {} bits/key on every level, {} worker threads, no compression, \
             journal written but not synced per batch (manual_journal_persist)",
            env!("LARDER_BENCH_FJALL_VERSION"),
            memtable >> 20,
            spec.cache_bytes >> 20,
            spec.bloom_bits_per_key,
            spec.background_threads
        );
        Ok(Fjall { db, keyspace, settings })
    }
}

impl Engine for Fjall {
    fn describe(&self) -> String {
        self.settings.clone()
    }

    fn write(&mut self, batch: &[Kv]) -> Result<()> {
        let mut b = self.db.batch();
        for kv in batch {
            b.insert(&self.keyspace, kv.key.to_vec(), kv.value.to_vec());
        }
        b.commit()?;
        Ok(())
    }

    fn finish_ingest(&mut self) -> Result<()> {
        // Seal the active memtable and wait until every sealed memtable is a
        // table on disk, then sync the journal and metadata.
        self.keyspace.rotate_memtable_and_wait()?;
        self.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }

    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        match self.keyspace.get(key)? {
            Some(v) => {
                value.clear();
                value.extend_from_slice(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan_prefix(&mut self, prefix: &[u8]) -> Result<(u64, u64)> {
        let (mut entries, mut bytes) = (0, 0);
        for guard in self.keyspace.prefix(prefix) {
            let (k, v) = guard.into_inner()?;
            anyhow::ensure!(k.starts_with(prefix), "prefix scan returned a key outside the prefix");
            entries += 1;
            bytes += (k.len() + v.len()) as u64;
        }
        Ok((entries, bytes))
    }

    fn gauges(&mut self) -> std::collections::BTreeMap<String, String> {
        let mut g = std::collections::BTreeMap::new();
        g.insert("tables".to_string(), self.keyspace.table_count().to_string());
        g.insert("l0_tables".to_string(), self.keyspace.l0_table_count().to_string());
        g.insert("disk_space".to_string(), self.keyspace.disk_space().to_string());
        g.insert("journal_count".to_string(), self.db.journal_count().to_string());
        g
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }
}
