//! RocksDB (the system library, through the bench's C API binding): WAL on,
//! not synced per write (RocksDB's default write options).

use std::ffi::c_char;

use anyhow::{bail, Result};

use super::RecordStore;
use crate::engines::rocksdb::{check, ffi};
use crate::engines::rocksdb_handle::{Handle, Tuning};
use crate::ycsb::YcsbSpec;

pub struct RocksRecords {
    h: Handle,
    write_options: *mut ffi::rocksdb_writeoptions_t,
    read_options: *mut ffi::rocksdb_readoptions_t,
    batch: *mut ffi::rocksdb_writebatch_t,
    settings: String,
}

impl RocksRecords {
    pub fn open(spec: &YcsbSpec) -> Result<RocksRecords> {
        let tuning = Tuning {
            memtable_bytes: spec.memtable_bytes,
            max_write_buffers: 1 + spec.max_immutable_memtables,
            cache_bytes: spec.cache_bytes,
            bloom_bits: spec.bloom_bits_per_key,
            background_threads: spec.background_threads,
            statistics: false,
        };
        let settings = format!(
            "RocksDB {} (system library): rocksdb_put per insert or update with the default write options (WAL \
             on, not synced), a write batch per load batch, rocksdb_get per read, an iterator per scan; write_buffer_size {} MiB, \
             max_write_buffer_number {}, LRU block cache {} MiB, full bloom {} bits/key, max_background_jobs {}, \
             no compression",
            option_env!("LARDER_BENCH_ROCKSDB_VERSION").unwrap_or("unknown"),
            spec.memtable_bytes >> 20,
            tuning.max_write_buffers,
            spec.cache_bytes >> 20,
            spec.bloom_bits_per_key,
            spec.background_threads
        );
        let h = Handle::open(&spec.dir.join("rocksdb"), &tuning)?;
        // SAFETY: plain constructors, checked for null below; Drop frees them.
        let (write_options, read_options, batch) = unsafe {
            (ffi::rocksdb_writeoptions_create(), ffi::rocksdb_readoptions_create(), ffi::rocksdb_writebatch_create())
        };
        let this = RocksRecords { h, write_options, read_options, batch, settings };
        if write_options.is_null() || read_options.is_null() || batch.is_null() {
            bail!("rocksdb: allocating options failed");
        }
        Ok(this)
    }
}

impl Drop for RocksRecords {
    fn drop(&mut self) {
        // SAFETY: each handle is null (skipped) or was made by its
        // constructor and is destroyed exactly once; the database (in
        // `self.h`, dropped after this) holds on to neither.
        unsafe {
            if !self.write_options.is_null() {
                ffi::rocksdb_writeoptions_destroy(self.write_options);
            }
            if !self.read_options.is_null() {
                ffi::rocksdb_readoptions_destroy(self.read_options);
            }
            if !self.batch.is_null() {
                ffi::rocksdb_writebatch_destroy(self.batch);
            }
        }
    }
}

impl RecordStore for RocksRecords {
    fn describe(&self) -> String {
        self.settings.clone()
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the database and write options are live; key and value
        // slices are valid for their lengths and RocksDB copies them.
        unsafe {
            ffi::rocksdb_put(
                self.h.db,
                self.write_options,
                key.as_ptr().cast::<c_char>(),
                key.len(),
                value.as_ptr().cast::<c_char>(),
                value.len(),
                &mut err,
            );
        }
        check(err, "put")
    }

    fn load(&mut self, records: &[(String, &[u8])]) -> Result<()> {
        let pairs = records.iter().map(|(k, v)| (k.as_bytes(), *v));
        self.h.write_pairs(self.batch, self.write_options, pairs)
    }

    fn read(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.h.get(key, out)
    }

    fn scan(&mut self, start: &[u8], count: usize, out: &mut Vec<u8>) -> Result<usize> {
        let mut read = 0;
        let mut err = std::ptr::null_mut();
        // SAFETY: the iterator is created here and destroyed before
        // returning; the key and value pointers it returns are valid until
        // the next call on it and are copied before that.
        unsafe {
            let it = ffi::rocksdb_create_iterator(self.h.db, self.read_options);
            if it.is_null() {
                bail!("rocksdb: creating an iterator failed");
            }
            ffi::rocksdb_iter_seek(it, start.as_ptr().cast::<c_char>(), start.len());
            while read < count && ffi::rocksdb_iter_valid(it) != 0 {
                let mut len = 0usize;
                let v = ffi::rocksdb_iter_value(it, &mut len);
                out.clear();
                out.extend_from_slice(std::slice::from_raw_parts(v.cast::<u8>(), len));
                read += 1;
                ffi::rocksdb_iter_next(it);
            }
            ffi::rocksdb_iter_get_error(it, &mut err);
            ffi::rocksdb_iter_destroy(it);
        }
        check(err, "iterator")?;
        Ok(read)
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self);
        Ok(())
    }
}
