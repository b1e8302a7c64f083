//! Larder through its KV API (`larder-kv`): buckets of keys, each value an
//! object of the store, written through the store's log.

use anyhow::{Context, Result};
use larder_kv::{Durability, Kv, KvBatch, KvOptions};

use super::RecordStore;
use crate::ycsb::YcsbSpec;

/// The bucket holding the table (YCSB's `usertable`).
const BUCKET: &str = "usertable";

pub struct LarderKv {
    kv: Kv,
    settings: String,
}

impl LarderKv {
    pub fn open(spec: &YcsbSpec) -> Result<LarderKv> {
        let path = spec.dir.join("larder");
        let mut options = KvOptions::default().with_budgets(spec.memtable_bytes as usize, spec.cache_bytes as usize);
        if let Some(bytes) = spec.meta_cache_bytes {
            options.store.meta_cache_bytes = bytes as usize;
        }
        let meta_cache_mib = options.store.meta_cache_bytes >> 20;
        let kv = Kv::create(&path, options).with_context(|| format!("creating a store in {}", path.display()))?;
        kv.create_bucket(BUCKET).context("creating the bucket")?;
        let settings = format!(
            "larder-kv {} (workspace): Kv::put(Durability::Buffered) per insert or update (logged, not synced), \
             one KvBatch per load batch, Kv::get_into per read, Kv::scan_range sized by Scan::expecting(scan length), stepped by Scan::next_value_into per scanned record (the scan yields each key with its value); \
             index memtable {} MiB and block cache {} MiB (KvOptions::with_budgets), metadata cache {} MiB, other options default",
            env!("CARGO_PKG_VERSION"),
            spec.memtable_bytes >> 20,
            spec.cache_bytes >> 20,
            meta_cache_mib
        );
        Ok(LarderKv { kv, settings })
    }
}

impl RecordStore for LarderKv {
    fn describe(&self) -> String {
        self.settings.clone()
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.kv.put(BUCKET, key, value, Durability::Buffered)?;
        Ok(())
    }

    fn load(&mut self, records: &[(String, &[u8])]) -> Result<()> {
        let mut batch = KvBatch::new();
        for (key, value) in records {
            batch.put(key, *value);
        }
        self.kv.write_batch(BUCKET, &batch, Durability::Buffered)?;
        Ok(())
    }

    fn read(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        Ok(self.kv.get_into(BUCKET, key, out)?)
    }

    fn scan(&mut self, start: &[u8], count: usize, out: &mut Vec<u8>) -> Result<usize> {
        let mut scan = self.kv.scan_range(BUCKET, start, None)?.expecting(count);
        let mut key = Vec::new();
        let mut read = 0;
        // A key listed but deleted meanwhile is skipped by the scan, as
        // YCSB's bindings skip it; nothing deletes in these workloads.
        while read < count && scan.next_value_into(&mut key, out)?.is_some() {
            read += 1;
        }
        Ok(read)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.kv.close()?;
        Ok(())
    }

    fn counters(&self) -> Option<String> {
        Some(super::index_counters(&self.kv.store().index().stats()))
    }
}
