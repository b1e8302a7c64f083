//! redb with its default durability: every write transaction's commit
//! syncs (`Durability::Immediate`), one transaction per put.

use anyhow::{Context, Result};
use redb::{Database, Durability, ReadableDatabase, TableDefinition};

use super::Store;
use crate::objects::ObjSpec;

/// The one table of the benchmark.
const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("bench");

/// One database file, one table.
pub struct RedbStore {
    db: Database,
    settings: String,
}

impl RedbStore {
    /// Creates a new database with the suite's cache budget and its table.
    pub fn open(spec: &ObjSpec) -> Result<RedbStore> {
        let dir = spec.dir.join("redb");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("bench.redb");
        let db = Database::builder()
            .set_cache_size(spec.cache_bytes as usize)
            .create(&path)
            .with_context(|| format!("creating the redb database {}", path.display()))?;
        let txn = db.begin_write()?;
        txn.open_table(TABLE)?;
        txn.commit().context("creating the redb table")?;
        let settings = format!(
            "redb {}: durable put = one write transaction of one insert, Durability::Immediate (the default: \
             the commit syncs; concurrent writers wait for the single writer); non-durable put = \
             Durability::None; bulk loads one transaction per batch; get = one read transaction; \
             cache {} MiB, other options default",
            env!("LARDER_BENCH_REDB_VERSION"),
            spec.cache_bytes >> 20
        );
        Ok(RedbStore { db, settings })
    }

    fn write(&self, items: &[(&[u8], &[u8])], durable: bool) -> Result<()> {
        let mut txn = self.db.begin_write()?;
        if !durable {
            txn.set_durability(Durability::None)?;
        }
        {
            let mut table = txn.open_table(TABLE)?;
            for (key, value) in items {
                table.insert(*key, *value)?;
            }
        }
        txn.commit()?;
        Ok(())
    }
}

impl Store for RedbStore {
    fn describe(&self) -> String {
        self.settings.clone()
    }

    fn put(&self, key: &str, value: &[u8], durable: bool) -> Result<()> {
        self.write(&[(key.as_bytes(), value)], durable)
    }

    fn load(&self, items: &[(String, &[u8])]) -> Result<()> {
        let items: Vec<(&[u8], &[u8])> = items.iter().map(|(k, v)| (k.as_bytes(), *v)).collect();
        self.write(&items, false)
    }

    fn sync(&self) -> Result<()> {
        // An empty durable commit makes every earlier non-durable one durable.
        self.write(&[], true)
    }

    fn get(&self, key: &str, out: &mut Vec<u8>) -> Result<bool> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(TABLE)?;
        match table.get(key.as_bytes())? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(v.value());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.write(&[], true)
    }
}
