//! LMDB through heed: MDB_NOSYNC (a commit is not synced: the non-durable
//! setting matching the others), one write transaction per insert or update
//! and one read transaction per read or scan.

use std::ops::Bound;

use anyhow::Result;
use heed::types::Bytes;
use heed::{Database, Env};

use super::RecordStore;
use crate::ycsb::YcsbSpec;

pub struct LmdbRecords {
    env: Env,
    db: Database<'static, Bytes, Bytes>,
}

impl LmdbRecords {
    pub fn open(spec: &YcsbSpec) -> Result<LmdbRecords> {
        let (env, db) = crate::engines::lmdb::open_unsynced(&spec.dir.join("lmdb"))?;
        Ok(LmdbRecords { env, db })
    }
}

impl RecordStore for LmdbRecords {
    fn describe(&self) -> String {
        format!(
            "LMDB (lmdb-master-sys {}, heed {}): MDB_NOSYNC | MDB_WRITEMAP | MDB_NORDAHEAD, one write transaction \
             per insert or update and per load batch, one read transaction per read or scan; map 64 GiB sparse; no cache of its own \
             (the OS page cache)",
            env!("LARDER_BENCH_LMDB_SYS_VERSION"),
            env!("LARDER_BENCH_HEED_VERSION")
        )
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut wtxn = self.env.write_txn()?;
        self.db.put(&mut wtxn, key, value)?;
        wtxn.commit()?;
        Ok(())
    }

    fn load(&mut self, records: &[(String, &[u8])]) -> Result<()> {
        let mut wtxn = self.env.write_txn()?;
        for (key, value) in records {
            self.db.put(&mut wtxn, key.as_bytes(), value)?;
        }
        wtxn.commit()?;
        Ok(())
    }

    fn read(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let txn = self.env.read_txn()?;
        match self.db.get(&txn, key)? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(&mut self, start: &[u8], count: usize, out: &mut Vec<u8>) -> Result<usize> {
        let txn = self.env.read_txn()?;
        let mut read = 0;
        for entry in self.db.range(&txn, &(Bound::Included(start), Bound::Unbounded))?.take(count) {
            let (_, v) = entry?;
            out.clear();
            out.extend_from_slice(v);
            read += 1;
        }
        Ok(read)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.env.force_sync()?;
        Ok(())
    }
}
