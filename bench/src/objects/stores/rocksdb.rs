//! RocksDB with its WAL on and `sync = true` per durable write, through the
//! C API binding of the index suite (system librocksdb).

use std::ffi::{c_char, c_int, c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::ptr;

use anyhow::{bail, Result};

use super::{Store, MAX_IMMUTABLE_MEMTABLES};
use crate::engines::rocksdb::{check, ffi};
use crate::objects::ObjSpec;

/// An open database and the options it was opened with.
pub struct RocksStore {
    db: *mut ffi::rocksdb_t,
    options: *mut ffi::rocksdb_options_t,
    table_options: *mut ffi::rocksdb_block_based_table_options_t,
    cache: *mut ffi::rocksdb_cache_t,
    sync_write: *mut ffi::rocksdb_writeoptions_t,
    buffered_write: *mut ffi::rocksdb_writeoptions_t,
    read_options: *mut ffi::rocksdb_readoptions_t,
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
        let path = spec.dir.join("rocksdb");
        let c_path = CString::new(path.as_os_str().as_bytes())?;
        let max_write_buffers = 1 + MAX_IMMUTABLE_MEMTABLES;
        let settings = format!(
            "RocksDB {} (system library): WAL on, durable put = Put with WriteOptions.sync = true (concurrent \
             writers share a write group), write_buffer_size {} MiB, max_write_buffer_number {}, LRU block cache \
             {} MiB, full bloom {} bits/key, max_background_jobs {}, no compression, no BlobDB; bulk loads in \
             unsynced WriteBatches",
            option_env!("LARDER_BENCH_ROCKSDB_VERSION").unwrap_or("unknown"),
            spec.memtable_bytes >> 20,
            max_write_buffers,
            spec.cache_bytes >> 20,
            spec.bloom_bits,
            spec.background_threads
        );
        // SAFETY: plain constructor and setter calls on objects we own,
        // checked for null before use; set_filter_policy takes ownership of
        // the policy, the table factory and cache are shared pointers copied
        // by RocksDB, and Drop frees our handles (the database first).
        unsafe {
            let mut this = RocksStore {
                db: ptr::null_mut(),
                options: ffi::rocksdb_options_create(),
                table_options: ffi::rocksdb_block_based_options_create(),
                cache: ffi::rocksdb_cache_create_lru(spec.cache_bytes as usize),
                sync_write: ffi::rocksdb_writeoptions_create(),
                buffered_write: ffi::rocksdb_writeoptions_create(),
                read_options: ffi::rocksdb_readoptions_create(),
                settings,
            };
            if this.options.is_null()
                || this.table_options.is_null()
                || this.cache.is_null()
                || this.sync_write.is_null()
                || this.buffered_write.is_null()
                || this.read_options.is_null()
            {
                bail!("rocksdb: allocating options failed");
            }
            let o = this.options;
            ffi::rocksdb_options_set_create_if_missing(o, 1);
            ffi::rocksdb_options_set_write_buffer_size(o, spec.memtable_bytes as usize);
            ffi::rocksdb_options_set_max_write_buffer_number(o, max_write_buffers as c_int);
            ffi::rocksdb_options_set_max_background_jobs(o, spec.background_threads as c_int);
            ffi::rocksdb_options_set_compression(o, ffi::NO_COMPRESSION);
            let policy = ffi::rocksdb_filterpolicy_create_bloom_full(f64::from(spec.bloom_bits));
            ffi::rocksdb_block_based_options_set_filter_policy(this.table_options, policy);
            ffi::rocksdb_block_based_options_set_block_cache(this.table_options, this.cache);
            ffi::rocksdb_options_set_block_based_table_factory(o, this.table_options);
            ffi::rocksdb_writeoptions_set_sync(this.sync_write, 1);
            let mut err = ptr::null_mut();
            this.db = ffi::rocksdb_open(o, c_path.as_ptr(), &mut err);
            check(err, "open")?;
            if this.db.is_null() {
                bail!("rocksdb open returned no database");
            }
            Ok(this)
        }
    }
}

impl Drop for RocksStore {
    fn drop(&mut self) {
        // SAFETY: each handle is null (skipped) or was made by its
        // constructor, and is destroyed exactly once, the database first.
        unsafe {
            if !self.db.is_null() {
                ffi::rocksdb_close(self.db);
            }
            for wo in [self.sync_write, self.buffered_write] {
                if !wo.is_null() {
                    ffi::rocksdb_writeoptions_destroy(wo);
                }
            }
            if !self.read_options.is_null() {
                ffi::rocksdb_readoptions_destroy(self.read_options);
            }
            if !self.table_options.is_null() {
                ffi::rocksdb_block_based_options_destroy(self.table_options);
            }
            if !self.cache.is_null() {
                ffi::rocksdb_cache_destroy(self.cache);
            }
            if !self.options.is_null() {
                ffi::rocksdb_options_destroy(self.options);
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
                self.db,
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
        let mut err = ptr::null_mut();
        // SAFETY: the batch is created, filled (RocksDB copies each key and
        // value), written and destroyed here; the database is live.
        unsafe {
            let batch = ffi::rocksdb_writebatch_create();
            if batch.is_null() {
                bail!("rocksdb: allocating a write batch failed");
            }
            for (key, value) in items {
                ffi::rocksdb_writebatch_put(
                    batch,
                    key.as_ptr().cast::<c_char>(),
                    key.len(),
                    value.as_ptr().cast::<c_char>(),
                    value.len(),
                );
            }
            ffi::rocksdb_write(self.db, self.buffered_write, batch, &mut err);
            ffi::rocksdb_writebatch_destroy(batch);
        }
        check(err, "write")
    }

    fn get(&self, key: &str, out: &mut Vec<u8>) -> Result<bool> {
        let mut err = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: the key is valid for its length; the returned buffer
        // (malloc'ed, `len` bytes) is copied, then freed once.
        unsafe {
            let v = ffi::rocksdb_get(
                self.db,
                self.read_options,
                key.as_ptr().cast::<c_char>(),
                key.len(),
                &mut len,
                &mut err,
            );
            check(err, "get")?;
            if v.is_null() {
                return Ok(false);
            }
            out.clear();
            out.extend_from_slice(std::slice::from_raw_parts(v.cast::<u8>(), len));
            ffi::rocksdb_free(v.cast::<c_void>());
        }
        Ok(true)
    }

    fn close(self: Box<Self>) -> Result<()> {
        // rocksdb_close in Drop: memtables stay in the (synced) WAL, RocksDB's normal shutdown.
        drop(self);
        Ok(())
    }
}
