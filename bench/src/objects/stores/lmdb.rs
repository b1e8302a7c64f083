//! LMDB through heed, default flags: every write transaction's commit syncs.

use anyhow::{Context, Result};
use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvOpenOptions};

use super::Store;
use crate::objects::ObjSpec;

/// A sparse map, far larger than any run needs.
const MAP_BYTES: usize = 64 << 30;

/// The unnamed database of one environment.
pub struct LmdbStore {
    env: Env,
    db: Database<'static, Bytes, Bytes>,
}

impl LmdbStore {
    /// Opens a new environment with LMDB's default (durable) flags.
    pub fn open(spec: &ObjSpec) -> Result<LmdbStore> {
        let path = spec.dir.join("lmdb");
        std::fs::create_dir_all(&path)?;
        let mut options = EnvOpenOptions::new();
        options.map_size(MAP_BYTES).max_dbs(1);
        // SAFETY: default flags (commits sync data and meta pages), and this
        // process is the only one that opens the environment, which is the
        // condition `open` asks for.
        let env = unsafe { options.open(&path) }.context("opening the LMDB environment")?;
        let wtxn = env.write_txn()?;
        let db = env
            .create_databases_and_commit(wtxn, |opener, wtxn| {
                opener.create_database::<Bytes, Bytes>(wtxn, None).map(CommitOrAbort::<_, ()>::Commit)
            })?
            .commit()
            .context("creating the LMDB database")?;
        Ok(LmdbStore { env, db })
    }
}

impl Store for LmdbStore {
    fn describe(&self) -> String {
        format!(
            "LMDB (lmdb-master-sys {}, heed {}): default flags (each commit syncs), one write transaction per put \
             (concurrent writers wait for the single writer lock), one read transaction per get; \
             map 64 GiB sparse; no cache of its own (OS page cache, mapped: counts in VmHWM); \
             bulk loads one transaction per batch",
            env!("LARDER_BENCH_LMDB_SYS_VERSION"),
            env!("LARDER_BENCH_HEED_VERSION")
        )
    }

    /// LMDB has no unsynced commit without changing the environment's
    /// flags, so `durable` is ignored: every commit syncs.
    fn put(&self, key: &str, value: &[u8], _durable: bool) -> Result<()> {
        let mut wtxn = self.env.write_txn()?;
        self.db.put(&mut wtxn, key.as_bytes(), value)?;
        wtxn.commit()?;
        Ok(())
    }

    fn load(&self, items: &[(String, &[u8])]) -> Result<()> {
        let mut wtxn = self.env.write_txn()?;
        for (key, value) in items {
            self.db.put(&mut wtxn, key.as_bytes(), value)?;
        }
        wtxn.commit()?;
        Ok(())
    }

    fn get(&self, key: &str, out: &mut Vec<u8>) -> Result<bool> {
        let rtxn = self.env.read_txn()?;
        match self.db.get(&rtxn, key.as_bytes())? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.env.force_sync()?;
        Ok(())
    }
}
