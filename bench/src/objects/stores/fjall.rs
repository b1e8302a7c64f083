//! fjall with a sync per durable write: insert, then `persist(SyncData)`.

use anyhow::Result;
use fjall::{Database, Keyspace, PersistMode};

use super::Store;
use crate::objects::ObjSpec;

/// One keyspace of one database.
pub struct FjallStore {
    db: Database,
    keyspace: Keyspace,
    settings: String,
}

impl FjallStore {
    /// Opens a new database with the suite's memtable, cache and bloom settings.
    pub fn open(spec: &ObjSpec) -> Result<FjallStore> {
        let db = Database::builder(spec.dir.join("fjall"))
            .cache_size(spec.cache_bytes)
            .worker_threads(spec.background_threads)
            .open()?;
        let memtable = spec.memtable_bytes;
        let bits = spec.bloom_bits as f32;
        let keyspace = db.keyspace("bench", || crate::engines::fjall::keyspace_options(memtable, bits))?;
        let settings = format!(
            "fjall {}: durable put = insert (journal written to the OS) + Database::persist(SyncData); \
             max_memtable_size {} MiB, cache {} MiB, bloom {} bits/key, {} worker threads, no compression, \
             no key-value separation (the default); bulk loads in unsynced batches",
            env!("LARDER_BENCH_FJALL_VERSION"),
            memtable >> 20,
            spec.cache_bytes >> 20,
            spec.bloom_bits,
            spec.background_threads
        );
        Ok(FjallStore { db, keyspace, settings })
    }
}

impl Store for FjallStore {
    fn describe(&self) -> String {
        self.settings.clone()
    }

    fn put(&self, key: &str, value: &[u8], durable: bool) -> Result<()> {
        self.keyspace.insert(key, value)?;
        if durable {
            self.db.persist(PersistMode::SyncData)?;
        }
        Ok(())
    }

    fn load(&self, items: &[(String, &[u8])]) -> Result<()> {
        let mut batch = self.db.batch();
        for (key, value) in items {
            batch.insert(&self.keyspace, key.as_str(), *value);
        }
        batch.commit()?;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }

    fn get(&self, key: &str, out: &mut Vec<u8>) -> Result<bool> {
        match self.keyspace.get(key)? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }
}
