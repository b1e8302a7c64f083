//! RocksDB through a minimal hand-written binding of its C API (rocksdb/c.h),
//! linked against the system library (Debian 12: librocksdb-dev, 7.8).

use std::collections::BTreeMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;

use anyhow::{anyhow, bail, Result};

use super::rocksdb_handle::{Handle, Tuning};
use super::{prefix_upper_bound, Engine, Kv};
use crate::workload::{ChildSpec, ENTRY_BYTES};

/// The part of rocksdb/c.h the benchmarks call (the object suite uses it too).
#[allow(non_camel_case_types)]
pub(crate) mod ffi {
    use std::ffi::{c_char, c_double, c_int, c_uchar, c_void};

    macro_rules! opaque {
        ($($name:ident),*) => {$(
            #[repr(C)]
            pub struct $name {
                _private: [u8; 0],
            }
        )*};
    }
    opaque!(
        rocksdb_t,
        rocksdb_options_t,
        rocksdb_block_based_table_options_t,
        rocksdb_filterpolicy_t,
        rocksdb_cache_t,
        rocksdb_writebatch_t,
        rocksdb_writeoptions_t,
        rocksdb_readoptions_t,
        rocksdb_iterator_t,
        rocksdb_flushoptions_t
    );

    /// rocksdb_no_compression in c.h.
    pub const NO_COMPRESSION: c_int = 0;

    extern "C" {
        pub fn rocksdb_options_create() -> *mut rocksdb_options_t;
        pub fn rocksdb_options_destroy(o: *mut rocksdb_options_t);
        pub fn rocksdb_options_set_create_if_missing(o: *mut rocksdb_options_t, v: c_uchar);
        pub fn rocksdb_options_set_write_buffer_size(o: *mut rocksdb_options_t, v: usize);
        pub fn rocksdb_options_set_max_write_buffer_number(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_set_max_background_jobs(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_set_compression(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_enable_statistics(o: *mut rocksdb_options_t);
        pub fn rocksdb_options_statistics_get_string(o: *mut rocksdb_options_t) -> *mut c_char;
        pub fn rocksdb_options_set_block_based_table_factory(
            o: *mut rocksdb_options_t,
            t: *mut rocksdb_block_based_table_options_t,
        );
        pub fn rocksdb_block_based_options_create() -> *mut rocksdb_block_based_table_options_t;
        pub fn rocksdb_block_based_options_destroy(t: *mut rocksdb_block_based_table_options_t);
        pub fn rocksdb_block_based_options_set_filter_policy(
            t: *mut rocksdb_block_based_table_options_t,
            p: *mut rocksdb_filterpolicy_t,
        );
        pub fn rocksdb_block_based_options_set_block_cache(
            t: *mut rocksdb_block_based_table_options_t,
            c: *mut rocksdb_cache_t,
        );
        pub fn rocksdb_filterpolicy_create_bloom_full(bits_per_key: c_double) -> *mut rocksdb_filterpolicy_t;
        pub fn rocksdb_cache_create_lru(capacity: usize) -> *mut rocksdb_cache_t;
        pub fn rocksdb_cache_destroy(c: *mut rocksdb_cache_t);
        pub fn rocksdb_open(o: *const rocksdb_options_t, name: *const c_char, err: *mut *mut c_char) -> *mut rocksdb_t;
        pub fn rocksdb_close(db: *mut rocksdb_t);
        pub fn rocksdb_free(p: *mut c_void);
        pub fn rocksdb_writebatch_create() -> *mut rocksdb_writebatch_t;
        pub fn rocksdb_writebatch_destroy(b: *mut rocksdb_writebatch_t);
        pub fn rocksdb_writebatch_clear(b: *mut rocksdb_writebatch_t);
        pub fn rocksdb_writebatch_put(
            b: *mut rocksdb_writebatch_t,
            k: *const c_char,
            klen: usize,
            v: *const c_char,
            vlen: usize,
        );
        pub fn rocksdb_writeoptions_create() -> *mut rocksdb_writeoptions_t;
        pub fn rocksdb_writeoptions_destroy(o: *mut rocksdb_writeoptions_t);
        pub fn rocksdb_writeoptions_disable_WAL(o: *mut rocksdb_writeoptions_t, disable: c_int);
        pub fn rocksdb_writeoptions_set_sync(o: *mut rocksdb_writeoptions_t, v: c_uchar);
        pub fn rocksdb_put(
            db: *mut rocksdb_t,
            o: *const rocksdb_writeoptions_t,
            k: *const c_char,
            klen: usize,
            v: *const c_char,
            vlen: usize,
            err: *mut *mut c_char,
        );
        pub fn rocksdb_write(
            db: *mut rocksdb_t,
            o: *const rocksdb_writeoptions_t,
            b: *mut rocksdb_writebatch_t,
            err: *mut *mut c_char,
        );
        pub fn rocksdb_readoptions_create() -> *mut rocksdb_readoptions_t;
        pub fn rocksdb_readoptions_destroy(o: *mut rocksdb_readoptions_t);
        pub fn rocksdb_readoptions_set_iterate_upper_bound(
            o: *mut rocksdb_readoptions_t,
            k: *const c_char,
            klen: usize,
        );
        pub fn rocksdb_get(
            db: *mut rocksdb_t,
            o: *const rocksdb_readoptions_t,
            k: *const c_char,
            klen: usize,
            vlen: *mut usize,
            err: *mut *mut c_char,
        ) -> *mut c_char;
        pub fn rocksdb_create_iterator(db: *mut rocksdb_t, o: *const rocksdb_readoptions_t) -> *mut rocksdb_iterator_t;
        pub fn rocksdb_iter_destroy(i: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_seek(i: *mut rocksdb_iterator_t, k: *const c_char, klen: usize);
        pub fn rocksdb_iter_valid(i: *const rocksdb_iterator_t) -> c_uchar;
        pub fn rocksdb_iter_next(i: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_key(i: *const rocksdb_iterator_t, klen: *mut usize) -> *const c_char;
        pub fn rocksdb_iter_value(i: *const rocksdb_iterator_t, vlen: *mut usize) -> *const c_char;
        pub fn rocksdb_iter_get_error(i: *const rocksdb_iterator_t, err: *mut *mut c_char);
        pub fn rocksdb_flushoptions_create() -> *mut rocksdb_flushoptions_t;
        pub fn rocksdb_flushoptions_destroy(o: *mut rocksdb_flushoptions_t);
        pub fn rocksdb_flushoptions_set_wait(o: *mut rocksdb_flushoptions_t, wait: c_uchar);
        pub fn rocksdb_flush(db: *mut rocksdb_t, o: *const rocksdb_flushoptions_t, err: *mut *mut c_char);
        pub fn rocksdb_property_value(db: *mut rocksdb_t, name: *const c_char) -> *mut c_char;
    }
}

/// Takes ownership of a C string RocksDB malloc'ed (an error or a property)
/// and frees it.
pub(crate) fn take_c_string(p: *mut c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is a non-null, NUL-terminated string allocated by RocksDB
    // that nobody else frees; we copy it out and free it exactly once.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    // SAFETY: as above; rocksdb_free is the matching deallocator.
    unsafe { ffi::rocksdb_free(p.cast::<c_void>()) };
    Some(s)
}

/// Turns RocksDB's error out-parameter into a Result.
pub(crate) fn check(err: *mut c_char, what: &str) -> Result<()> {
    match take_c_string(err) {
        None => Ok(()),
        Some(e) => Err(anyhow!("rocksdb {what}: {e}")),
    }
}

pub struct RocksDb {
    h: Handle,
    write_options: *mut ffi::rocksdb_writeoptions_t,
    batch: *mut ffi::rocksdb_writebatch_t,
    user_bytes: u64,
    settings: String,
}

impl RocksDb {
    pub fn open(spec: &ChildSpec) -> Result<RocksDb> {
        let tuning = Tuning {
            memtable_bytes: spec.memtable_bytes,
            max_write_buffers: 1 + spec.max_immutable_memtables,
            cache_bytes: spec.cache_bytes,
            bloom_bits: spec.bloom_bits_per_key,
            background_threads: spec.background_threads,
            statistics: true,
        };
        let settings = format!(
            "RocksDB {} (system library): write_buffer_size {} MiB, max_write_buffer_number {}, LRU block cache {} MiB \
             (index/filter blocks outside it, the default), full bloom {} bits/key, max_background_jobs {}, \
             no compression, WAL disabled, statistics on",
            option_env!("LARDER_BENCH_ROCKSDB_VERSION").unwrap_or("unknown"),
            spec.memtable_bytes >> 20,
            tuning.max_write_buffers,
            spec.cache_bytes >> 20,
            spec.bloom_bits_per_key,
            spec.background_threads
        );
        let h = Handle::open(&spec.dir.join("rocksdb"), &tuning)?;
        // SAFETY: plain constructors, checked for null; Drop frees them.
        let (write_options, batch) = unsafe { (ffi::rocksdb_writeoptions_create(), ffi::rocksdb_writebatch_create()) };
        let this = RocksDb { h, write_options, batch, user_bytes: 0, settings };
        if write_options.is_null() || batch.is_null() {
            bail!("rocksdb: allocating write options failed");
        }
        // SAFETY: the write options are live.
        unsafe { ffi::rocksdb_writeoptions_disable_WAL(write_options, 1) };
        Ok(this)
    }

    fn property(&self, name: &str) -> Option<String> {
        let name = CString::new(name).ok()?;
        // SAFETY: `self.h.db` is open; the result is a malloc'ed string or null.
        take_c_string(unsafe { ffi::rocksdb_property_value(self.h.db, name.as_ptr()) })
    }

    /// The tickers of the statistics object ("name COUNT : value" lines).
    fn tickers(&self) -> BTreeMap<String, f64> {
        // SAFETY: statistics were enabled on `self.h.options` before open.
        let text = take_c_string(unsafe { ffi::rocksdb_options_statistics_get_string(self.h.options) });
        let mut tickers = BTreeMap::new();
        for line in text.unwrap_or_default().lines() {
            if let Some((name, value)) = line.split_once(" COUNT : ") {
                if let Ok(v) = value.trim().parse::<f64>() {
                    tickers.insert(name.trim().to_string(), v);
                }
            }
        }
        tickers
    }
}

impl Drop for RocksDb {
    fn drop(&mut self) {
        // SAFETY: each handle is null (skipped) or was made by its
        // constructor and is destroyed exactly once; the database (in
        // `self.h`, dropped after this) does not hold on to either.
        unsafe {
            if !self.batch.is_null() {
                ffi::rocksdb_writebatch_destroy(self.batch);
            }
            if !self.write_options.is_null() {
                ffi::rocksdb_writeoptions_destroy(self.write_options);
            }
        }
    }
}

impl Engine for RocksDb {
    fn describe(&self) -> String {
        self.settings.clone()
    }

    fn write(&mut self, batch: &[Kv]) -> Result<()> {
        self.user_bytes += batch.len() as u64 * ENTRY_BYTES;
        let pairs = batch.iter().map(|kv| (&kv.key[..], kv.value));
        self.h.write_pairs(self.batch, self.write_options, pairs)
    }

    fn finish_ingest(&mut self) -> Result<()> {
        let mut err = ptr::null_mut();
        // SAFETY: the flush options are created, used and destroyed here; the db is open.
        unsafe {
            let fo = ffi::rocksdb_flushoptions_create();
            if fo.is_null() {
                bail!("rocksdb: allocating flush options failed");
            }
            ffi::rocksdb_flushoptions_set_wait(fo, 1);
            ffi::rocksdb_flush(self.h.db, fo, &mut err);
            ffi::rocksdb_flushoptions_destroy(fo);
        }
        check(err, "flush")
    }

    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        self.h.get(key, value)
    }

    fn scan_prefix(&mut self, prefix: &[u8]) -> Result<(u64, u64)> {
        let (mut entries, mut bytes) = (0u64, 0u64);
        let upper = prefix_upper_bound(prefix);
        let mut err = ptr::null_mut();
        // SAFETY: the read options and iterator are created here and destroyed
        // before returning; the upper bound is copied into the read options
        // (the C API keeps its own string); key/value pointers returned by the
        // iterator are valid until the next iterator call and used before it.
        unsafe {
            let ro = ffi::rocksdb_readoptions_create();
            if ro.is_null() {
                bail!("rocksdb: allocating read options failed");
            }
            if let Some(upper) = &upper {
                ffi::rocksdb_readoptions_set_iterate_upper_bound(ro, upper.as_ptr().cast::<c_char>(), upper.len());
            }
            let it = ffi::rocksdb_create_iterator(self.h.db, ro);
            ffi::rocksdb_iter_seek(it, prefix.as_ptr().cast::<c_char>(), prefix.len());
            while ffi::rocksdb_iter_valid(it) != 0 {
                let (mut klen, mut vlen) = (0usize, 0usize);
                let k = ffi::rocksdb_iter_key(it, &mut klen);
                let key = std::slice::from_raw_parts(k.cast::<u8>(), klen);
                if !key.starts_with(prefix) {
                    break;
                }
                let _v = ffi::rocksdb_iter_value(it, &mut vlen);
                entries += 1;
                bytes += (klen + vlen) as u64;
                ffi::rocksdb_iter_next(it);
            }
            ffi::rocksdb_iter_get_error(it, &mut err);
            ffi::rocksdb_iter_destroy(it);
            ffi::rocksdb_readoptions_destroy(ro);
        }
        check(err, "iterator")?;
        Ok((entries, bytes))
    }

    fn counters(&mut self) -> BTreeMap<String, f64> {
        const KEEP: [&str; 12] = [
            "rocksdb.block.cache.hit",
            "rocksdb.block.cache.miss",
            "rocksdb.block.cache.data.hit",
            "rocksdb.block.cache.data.miss",
            "rocksdb.bloom.filter.useful",
            "rocksdb.bloom.filter.full.positive",
            "rocksdb.bloom.filter.full.true.positive",
            "rocksdb.flush.write.bytes",
            "rocksdb.compact.write.bytes",
            "rocksdb.compact.read.bytes",
            "rocksdb.stall.micros",
            "rocksdb.number.keys.written",
        ];
        let mut tickers = self.tickers();
        tickers.retain(|k, _| KEEP.contains(&k.as_str()));
        tickers
    }

    fn gauges(&mut self) -> BTreeMap<String, String> {
        let mut g = BTreeMap::new();
        let levels: Vec<String> = (0..7)
            .map(|l| self.property(&format!("rocksdb.num-files-at-level{l}")).unwrap_or_else(|| "?".to_string()))
            .collect();
        g.insert("files_per_level".to_string(), format!("[{}]", levels.join(", ")));
        for name in
            ["rocksdb.total-sst-files-size", "rocksdb.estimate-table-readers-mem", "rocksdb.cur-size-all-mem-tables"]
        {
            if let Some(v) = self.property(name) {
                g.insert(name.trim_start_matches("rocksdb.").to_string(), v);
            }
        }
        g
    }

    fn write_amp(&mut self) -> Option<f64> {
        if self.user_bytes == 0 {
            return None;
        }
        let t = self.tickers();
        let written =
            t.get("rocksdb.flush.write.bytes")? + t.get("rocksdb.compact.write.bytes").copied().unwrap_or(0.0);
        Some(written / self.user_bytes as f64)
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self);
        Ok(())
    }
}
