//! An open RocksDB database with the suites' common tuning: the part both
//! the index suite's engine and the object suite's store need (open with
//! memtable, block cache and bloom settings; get; write a batch; close).

use std::ffi::{c_char, c_int, c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

use anyhow::{bail, Result};

use super::rocksdb::{check, ffi};

/// The settings every suite gives RocksDB.
pub(crate) struct Tuning {
    pub(crate) memtable_bytes: u64,
    pub(crate) max_write_buffers: usize,
    pub(crate) cache_bytes: u64,
    pub(crate) bloom_bits: u32,
    pub(crate) background_threads: usize,
    /// Collect tickers (`rocksdb_options_statistics_get_string`).
    pub(crate) statistics: bool,
}

/// An open database, its options, block cache and read options.
pub(crate) struct Handle {
    pub(crate) db: *mut ffi::rocksdb_t,
    pub(crate) options: *mut ffi::rocksdb_options_t,
    table_options: *mut ffi::rocksdb_block_based_table_options_t,
    cache: *mut ffi::rocksdb_cache_t,
    read_options: *mut ffi::rocksdb_readoptions_t,
}

impl Handle {
    /// Opens (creating) the database at `path`: no compression, full bloom
    /// filters, an LRU block cache.
    pub(crate) fn open(path: &Path, t: &Tuning) -> Result<Handle> {
        let c_path = CString::new(path.as_os_str().as_bytes())?;
        // SAFETY: plain constructor and setter calls on objects we own; the
        // pointers come from the matching *_create functions and are checked
        // for null before use. set_filter_policy takes ownership of the
        // policy; set_block_cache and set_block_based_table_factory copy
        // what they need (shared pointers), and Drop frees our handles.
        unsafe {
            let mut h = Handle {
                db: ptr::null_mut(),
                options: ffi::rocksdb_options_create(),
                table_options: ffi::rocksdb_block_based_options_create(),
                cache: ffi::rocksdb_cache_create_lru(t.cache_bytes as usize),
                read_options: ffi::rocksdb_readoptions_create(),
            };
            if h.options.is_null() || h.table_options.is_null() || h.cache.is_null() || h.read_options.is_null() {
                bail!("rocksdb: allocating options failed");
            }
            let o = h.options;
            ffi::rocksdb_options_set_create_if_missing(o, 1);
            ffi::rocksdb_options_set_write_buffer_size(o, t.memtable_bytes as usize);
            ffi::rocksdb_options_set_max_write_buffer_number(o, t.max_write_buffers as c_int);
            ffi::rocksdb_options_set_max_background_jobs(o, t.background_threads as c_int);
            ffi::rocksdb_options_set_compression(o, ffi::NO_COMPRESSION);
            if t.statistics {
                ffi::rocksdb_options_enable_statistics(o);
            }
            let policy = ffi::rocksdb_filterpolicy_create_bloom_full(f64::from(t.bloom_bits));
            ffi::rocksdb_block_based_options_set_filter_policy(h.table_options, policy);
            ffi::rocksdb_block_based_options_set_block_cache(h.table_options, h.cache);
            ffi::rocksdb_options_set_block_based_table_factory(o, h.table_options);
            let mut err = ptr::null_mut();
            h.db = ffi::rocksdb_open(o, c_path.as_ptr(), &mut err);
            check(err, "open")?;
            if h.db.is_null() {
                bail!("rocksdb open returned no database");
            }
            Ok(h)
        }
    }

    /// Reads `key` into `out`; false when absent.
    pub(crate) fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let mut err = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: the key slice is valid for its length; the returned buffer
        // (malloc'ed, `len` bytes) is copied and then freed once.
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

    /// Clears `batch`, fills it with `pairs` and writes it with `write_options`.
    ///
    /// `batch` and `write_options` must be live handles owned by the caller.
    pub(crate) fn write_pairs<'a>(
        &self,
        batch: *mut ffi::rocksdb_writebatch_t,
        write_options: *mut ffi::rocksdb_writeoptions_t,
        pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<()> {
        let mut err = ptr::null_mut();
        // SAFETY: the caller's batch and options are live; key and value
        // slices are valid for their lengths and RocksDB copies them.
        unsafe {
            ffi::rocksdb_writebatch_clear(batch);
            for (key, value) in pairs {
                ffi::rocksdb_writebatch_put(
                    batch,
                    key.as_ptr().cast::<c_char>(),
                    key.len(),
                    value.as_ptr().cast::<c_char>(),
                    value.len(),
                );
            }
            ffi::rocksdb_write(self.db, write_options, batch, &mut err);
        }
        check(err, "write")
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: each handle is null (skipped) or was made by its
        // constructor, and is destroyed exactly once, the database first.
        unsafe {
            if !self.db.is_null() {
                ffi::rocksdb_close(self.db);
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
