//! RocksDB with its WAL on and `sync = true` per durable write, through the
//! C API binding of the index suite (system librocksdb).

use std::ffi::c_char;
use std::ptr;

use anyhow::{bail, Result};

use super::{Store, MAX_IMMUTABLE_MEMTABLES};
use crate::engines::rocksdb::{check, ffi};
use crate::engines::rocksdb_handle::{Handle, Tuning};
use crate::objects::ObjSpec;

/// An open database and its two write modes.
pub struct RocksStore {
    h: Handle,
    sync_write: *mut ffi::rocksdb_writeoptions_t,
    buffered_write: *mut ffi::rocksdb_writeoptions_t,
    settings: String,
}

// SAFETY: a rocksdb_t may be used from several threads at once (Put, Write
// and Get are thread-safe in RocksDB); the options objects are only read
// after `open` returns and freed in Drop, when no other reference exists.
unsafe impl Send for RocksStore {}
// SAFETY: as above; no method mutates the struct or the option objects.
unsafe impl Sync for RocksStore {}

impl RocksStore {
    /// Opens a new database with the suite's memtable, cache and bloom settings.
    pub fn open(spec: &ObjSpec) -> Result<RocksStore> {
        let tuning = Tuning {
            memtable_bytes: spec.memtable_bytes,
            max_write_buffers: 1 + MAX_IMMUTABLE_MEMTABLES,
            cache_bytes: spec.cache_bytes,
            bloom_bits: spec.bloom_bits,
            background_threads: spec.background_threads,
            statistics: false,
        };
        let settings = format!(
            "RocksDB {} (system library): WAL on, durable put = Put with WriteOptions.sync = true (concurrent \
             writers share a write group), write_buffer_size {} MiB, max_write_buffer_number {}, LRU block cache \
             {} MiB, full bloom {} bits/key, max_background_jobs {}, no compression, no BlobDB; bulk loads in \
             unsynced WriteBatches",
            option_env!("LARDER_BENCH_ROCKSDB_VERSION").unwrap_or("unknown"),
            spec.memtable_bytes >> 20,
            tuning.max_write_buffers,
            spec.cache_bytes >> 20,
            spec.bloom_bits,
            spec.background_threads
        );
        let h = Handle::open(&spec.dir.join("rocksdb"), &tuning)?;
        // SAFETY: plain constructors, checked for null; Drop frees them.
        let (sync_write, buffered_write) =
            unsafe { (ffi::rocksdb_writeoptions_create(), ffi::rocksdb_writeoptions_create()) };
        let this = RocksStore { h, sync_write, buffered_write, settings };
        if sync_write.is_null() || buffered_write.is_null() {
            bail!("rocksdb: allocating write options failed");
        }
        // SAFETY: the write options are live.
        unsafe { ffi::rocksdb_writeoptions_set_sync(sync_write, 1) };
        Ok(this)
    }
}

impl Drop for RocksStore {
    fn drop(&mut self) {
        // SAFETY: each handle is null (skipped) or was made by its
        // constructor and is destroyed exactly once; the database (in
        // `self.h`, dropped after this) does not hold on to either.
        unsafe {
            for wo in [self.sync_write, self.buffered_write] {
                if !wo.is_null() {
                    ffi::rocksdb_writeoptions_destroy(wo);
                }
            }
        }
    }
}

impl Store for RocksStore {
    fn describe(&self) -> String {
        self.settings.clone()
    }

    fn put(&self, key: &str, value: &[u8], durable: bool) -> Result<()> {
        let options = if durable { self.sync_write } else { self.buffered_write };
        let mut err = ptr::null_mut();
        // SAFETY: the database and options are live; RocksDB copies the key
        // and value, which are valid for their lengths during the call.
        unsafe {
            ffi::rocksdb_put(
                self.h.db,
                options,
                key.as_ptr().cast::<c_char>(),
                key.len(),
                value.as_ptr().cast::<c_char>(),
                value.len(),
                &mut err,
            );
        }
        check(err, "put")
    }

    fn load(&self, items: &[(String, &[u8])]) -> Result<()> {
        // SAFETY: a plain constructor, checked for null, destroyed below.
        let batch = unsafe { ffi::rocksdb_writebatch_create() };
        if batch.is_null() {
            bail!("rocksdb: allocating a write batch failed");
        }
        let done = self.h.write_pairs(batch, self.buffered_write, items.iter().map(|(k, v)| (k.as_bytes(), *v)));
        // SAFETY: made above, used by nothing else.
        unsafe { ffi::rocksdb_writebatch_destroy(batch) };
        done
    }

    fn get(&self, key: &str, out: &mut Vec<u8>) -> Result<bool> {
        self.h.get(key.as_bytes(), out)
    }

    fn close(self: Box<Self>) -> Result<()> {
        // rocksdb_close in Drop: memtables stay in the (synced) WAL, RocksDB's normal shutdown.
        drop(self);
        Ok(())
    }
}
