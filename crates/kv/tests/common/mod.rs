//! Setup shared by the KV tests: a small store on the simulated storage.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use larder_io::SimStorage;
use larder_kv::{Kv, KvOptions};
use larder_object::{CreationOptions, StoreOptions};

/// Where the tests put their store.
pub const DIR: &str = "/store";

/// Small containers (growing from 256 KiB) and segments, no background
/// threads, inline values up to 2 KiB: tests reach reuse, flushes and both write paths quickly.
pub fn options() -> KvOptions {
    let mut store = StoreOptions { background_checkpoints: false, ..StoreOptions::default() };
    store.index.background_threads = false;
    store.index.memtable_size_bytes = 32 << 10;
    store.log.buffered_sync_interval = None;
    store.log.max_segments = 4;
    // Containers start at a quarter and grow: crash tests cover growth.
    store.space.initial_container_bytes = 256 << 10;
    KvOptions {
        store,
        creation: CreationOptions {
            container_bytes: 1 << 20,
            log_segment_bytes: 64 << 10,
            inline_max_bytes: 2048,
            ..CreationOptions::default()
        },
        owner: (1000, 1000),
    }
}

pub fn create(sim: &SimStorage) -> Kv {
    Kv::create_with(Arc::new(sim.clone()), Path::new(DIR), options()).unwrap()
}

pub fn open(sim: &SimStorage) -> Kv {
    Kv::open_with(Arc::new(sim.clone()), Path::new(DIR), options()).unwrap()
}

/// Every key of `bucket` and its value.
pub fn bucket_state(kv: &Kv, bucket: &str) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    for e in kv.scan_prefix(bucket, b"").unwrap() {
        let e = e.unwrap();
        let v = kv.get(bucket, &e.key).unwrap().unwrap();
        out.insert(e.key, v);
    }
    out
}
pub mod panicking;
pub mod recorded;
