//! Larder's object store, `larder-kv` (the engine under test).

use std::io::Write;

use anyhow::{Context, Result};
use larder_kv::{Durability, Kv, KvBatch, KvOptions};

use super::Store;
use crate::objects::ObjSpec;

/// The bucket every object of the suite goes in.
const BUCKET: &str = "bench";

/// One store, one bucket.
pub struct Larder {
    kv: Kv,
    settings: String,
}

fn durability(durable: bool) -> Durability {
    if durable {
        Durability::Durable
    } else {
        Durability::Buffered
    }
}

impl Larder {
    /// Creates a new store with the suite's memtable and cache budgets.
    pub fn open(spec: &ObjSpec) -> Result<Larder> {
        let path = spec.dir.join("larder");
        let mut options = KvOptions::default().with_budgets(spec.memtable_bytes as usize, spec.cache_bytes as usize);
        let space = &mut options.store.space;
        let preallocated = spec.store == "larder-pre";
        if preallocated {
            // Room for every object of the run plus the usual spare, so no
            // container is created while puts are timed.
            let data = spec.ops.saturating_mul(spec.threads as u64).saturating_mul(spec.value_bytes as u64);
            space.min_containers = data.div_ceil(space.container_bytes) + space.spare_containers;
            // And log segments for every record of the run plus the spare,
            // so no segment is zero-filled while puts are timed (as the
            // ceiling's file is written before its overwrites): a put's
            // record takes its value if inline (up to 4 KiB) and up to a
            // block more for the header, the metadata and the rounding.
            let log = &mut options.store.log;
            let puts = spec.ops.saturating_mul(spec.threads as u64);
            let record = (spec.value_bytes as u64).min(4096) + 4096;
            let segments = puts.saturating_mul(record).div_ceil(log.segment_bytes) as usize + 1;
            log.min_segments = segments.min(log.max_segments);
        }
        let prealloc = if preallocated {
            format!(
                "; {} containers of {} MiB and {} log segments of {} MiB created with the store (min_containers, \
                 log.min_segments)",
                options.store.space.min_containers,
                options.store.space.container_bytes >> 20,
                options.store.log.min_segments,
                options.store.log.segment_bytes >> 20
            )
        } else {
            String::new()
        };
        let kv = Kv::create(&path, options).with_context(|| format!("creating a store in {}", path.display()))?;
        kv.create_bucket(BUCKET).context("creating the bucket")?;
        let settings = format!(
            "larder-kv {} (workspace): durable put = Kv::put(Durability::Durable); bulk loads one KvBatch per \
             batch (Buffered); large object through Kv::writer (Durable); index memtable {} MiB and block cache \
             {} MiB (KvOptions::with_budgets), other options default{prealloc}",
            env!("CARGO_PKG_VERSION"),
            spec.memtable_bytes >> 20,
            spec.cache_bytes >> 20
        );
        Ok(Larder { kv, settings })
    }
}

impl Store for Larder {
    fn describe(&self) -> String {
        self.settings.clone()
    }

    fn counters(&self) -> std::collections::BTreeMap<String, f64> {
        let log = self.kv.store().log_stats();
        let space = self.kv.store().space().stats();
        [
            ("log_groups", log.groups),
            ("log_records", log.records),
            ("log_syncs", log.syncs),
            ("log_sync_micros", log.sync_micros),
            ("log_dependency_syncs", log.dependency_syncs),
            ("log_dependency_write_backs", log.dependency_write_backs),
            ("log_overlapped_groups", log.overlapped_groups),
            ("log_busy_micros", log.busy_micros),
            ("log_at_limit_micros", log.at_limit_micros),
            ("log_bytes_written", log.bytes_written),
            ("log_zero_fill_bytes", log.zero_fill_bytes),
            ("log_segments_created", log.segments_created),
            ("space_bytes_total", space.bytes_total),
            ("containers_created", space.containers_created),
            ("containers_created_inline", space.containers_created_inline),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v as f64))
        .collect()
    }

    fn put(&self, key: &str, value: &[u8], durable: bool) -> Result<()> {
        self.kv.put(BUCKET, key, value, durability(durable))?;
        Ok(())
    }

    fn load(&self, items: &[(String, &[u8])]) -> Result<()> {
        let mut batch = KvBatch::new();
        for (key, value) in items {
            batch.put(key, *value);
        }
        self.kv.write_batch(BUCKET, &batch, Durability::Buffered)?;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.kv.sync()?;
        Ok(())
    }

    fn get(&self, key: &str, out: &mut Vec<u8>) -> Result<bool> {
        Ok(self.kv.get_into(BUCKET, key, out)?)
    }

    fn put_stream(&self, key: &str, chunks: &mut dyn Iterator<Item = &[u8]>) -> Result<()> {
        let mut writer = self.kv.writer(BUCKET, key, Durability::Durable)?;
        for chunk in chunks {
            writer.write_all(chunk)?;
        }
        writer.finish()?;
        Ok(())
    }

    fn delete(&self, key: &str) -> Result<bool> {
        Ok(self.kv.delete(BUCKET, key, Durability::Durable)?)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.kv.close()?;
        Ok(())
    }
}
