//! LMDB through heed (which builds LMDB's C source with cc).

use anyhow::{Context, Result};
use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions, RoTxn, WithTls};

use super::{Engine, Kv};
use crate::workload::ChildSpec;

/// A sparse map, far larger than any run needs.
const MAP_BYTES: usize = 64 << 30;

/// An LMDB environment at `path` (created) with its one unnamed
/// database, opened as the index and YCSB suites run LMDB: a 64 GiB map,
/// NO_SYNC | WRITE_MAP | NO_READ_AHEAD (the caller syncs when it must).
pub(crate) fn open_unsynced(path: &std::path::Path) -> Result<(Env, Database<'static, Bytes, Bytes>)> {
    std::fs::create_dir_all(path)?;
    let mut options = EnvOpenOptions::new();
    options.map_size(MAP_BYTES).max_dbs(1);
    // SAFETY: NO_SYNC and WRITE_MAP only trade crash safety for speed
    // (the caller syncs explicitly: at the end of an ingest, at close), and
    // this process is the only one that opens the environment, which is
    // the condition `open` asks for (no other mapping of the same file is
    // modified).
    let env = unsafe {
        options.flags(EnvFlags::NO_SYNC | EnvFlags::WRITE_MAP | EnvFlags::NO_READ_AHEAD);
        options.open(path)
    }
    .context("opening the LMDB environment")?;
    let wtxn = env.write_txn()?;
    let db = env
        .create_databases_and_commit(wtxn, |opener, wtxn| {
            opener.create_database::<Bytes, Bytes>(wtxn, None).map(CommitOrAbort::<_, ()>::Commit)
        })?
        .commit()
        .context("creating the LMDB database")?;
    Ok((env, db))
}

pub struct Lmdb {
    env: Env,
    db: Database<'static, Bytes, Bytes>,
    /// One read transaction per read phase (LMDB's normal use; the data is static then).
    reader: Option<RoTxn<'static, WithTls>>,
}

impl Lmdb {
    pub fn open(spec: &ChildSpec) -> Result<Lmdb> {
        let (env, db) = open_unsynced(&spec.dir.join("lmdb"))?;
        Ok(Lmdb { env, db, reader: None })
    }

    fn reader(&mut self) -> Result<&RoTxn<'static, WithTls>> {
        if self.reader.is_none() {
            self.reader = Some(self.env.clone().static_read_txn()?);
        }
        self.reader.as_ref().context("read transaction")
    }
}

impl Engine for Lmdb {
    fn describe(&self) -> String {
        format!(
            "LMDB (lmdb-master-sys {}, heed {}): MDB_NOSYNC | MDB_WRITEMAP | MDB_NORDAHEAD, one write transaction per \
             batch, mdb_env_sync at the end of ingest; map 64 GiB sparse; no memtable or block cache (OS page cache)",
            env!("LARDER_BENCH_LMDB_SYS_VERSION"),
            env!("LARDER_BENCH_HEED_VERSION")
        )
    }

    fn write(&mut self, batch: &[Kv]) -> Result<()> {
        self.reader = None;
        let mut wtxn = self.env.write_txn()?;
        for kv in batch {
            self.db.put(&mut wtxn, &kv.key, kv.value)?;
        }
        wtxn.commit()?;
        Ok(())
    }

    fn finish_ingest(&mut self) -> Result<()> {
        self.env.force_sync()?;
        Ok(())
    }

    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        let db = self.db;
        let txn = self.reader()?;
        match db.get(txn, key)? {
            Some(v) => {
                value.clear();
                value.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan_prefix(&mut self, prefix: &[u8]) -> Result<(u64, u64)> {
        let db = self.db;
        let txn = self.reader()?;
        let (mut entries, mut bytes) = (0, 0);
        for kv in db.prefix_iter(txn, prefix)? {
            let (k, v) = kv?;
            entries += 1;
            bytes += (k.len() + v.len()) as u64;
        }
        Ok((entries, bytes))
    }

    fn gauges(&mut self) -> std::collections::BTreeMap<String, String> {
        let mut g = std::collections::BTreeMap::new();
        if let Ok(txn) = self.env.read_txn() {
            if let Ok(stat) = self.db.stat(&txn) {
                g.insert("depth".to_string(), stat.depth.to_string());
                g.insert("leaf_pages".to_string(), stat.leaf_pages.to_string());
                g.insert("branch_pages".to_string(), stat.branch_pages.to_string());
            }
        }
        g
    }

    fn close(mut self: Box<Self>) -> Result<()> {
        self.reader = None;
        self.env.force_sync()?;
        Ok(())
    }
}
