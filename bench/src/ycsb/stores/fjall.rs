//! fjall (pure Rust LSM tree) from crates.io, with its default journal
//! persistence: every write is flushed to the OS, not synced.

use anyhow::Result;
use fjall::{Database, Keyspace, PersistMode};

use super::RecordStore;
use crate::ycsb::YcsbSpec;

pub struct FjallRecords {
    db: Database,
    keyspace: Keyspace,
    settings: String,
}

impl FjallRecords {
    pub fn open(spec: &YcsbSpec) -> Result<FjallRecords> {
        let db = Database::builder(spec.dir.join("fjall"))
            .cache_size(spec.cache_bytes)
            .worker_threads(spec.background_threads.max(1))
            .open()?;
        let memtable = spec.memtable_bytes;
        let bits = spec.bloom_bits_per_key as f32;
        let keyspace = db.keyspace("usertable", || crate::engines::fjall::keyspace_options(memtable, bits))?;
        let settings = format!(
            "fjall {}: Keyspace::insert per insert or update (journal flushed to the OS per write, not synced: \
             fjall's default), a batch per load batch, get per read, range per scan; max_memtable_size {} MiB, cache {} MiB (blocks, \
             filters, index), bloom {} bits/key, {} worker threads, no compression",
            env!("LARDER_BENCH_FJALL_VERSION"),
            memtable >> 20,
            spec.cache_bytes >> 20,
            spec.bloom_bits_per_key,
            spec.background_threads
        );
        Ok(FjallRecords { db, keyspace, settings })
    }
}

impl RecordStore for FjallRecords {
    fn describe(&self) -> String {
        self.settings.clone()
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.keyspace.insert(key, value)?;
        Ok(())
    }

    fn load(&mut self, records: &[(String, &[u8])]) -> Result<()> {
        let mut batch = self.db.batch();
        for (key, value) in records {
            batch.insert(&self.keyspace, key.as_bytes().to_vec(), value.to_vec());
        }
        batch.commit()?;
        Ok(())
    }

    fn read(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        match self.keyspace.get(key)? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(&mut self, start: &[u8], count: usize, out: &mut Vec<u8>) -> Result<usize> {
        let mut read = 0;
        for guard in self.keyspace.range(start..).take(count) {
            let (_, v) = guard.into_inner()?;
            out.clear();
            out.extend_from_slice(&v);
            read += 1;
        }
        Ok(read)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }
}
