//! Setup shared by the object tests: a small store on the simulated
//! storage, with options each test adjusts.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;

use larder_io::{SimStorage, StorageRef};
use larder_object::{CreationOptions, StoreOptions};

/// Where the tests put their store.
pub const DIR: &str = "/store";

/// Small containers and log segments, so tests reach reuse quickly.
pub fn creation() -> CreationOptions {
    CreationOptions { container_bytes: 1 << 20, log_segment_bytes: 64 << 10, ..CreationOptions::default() }
}

/// No background threads anywhere: every write happens in the calling
/// thread, so crash points are exact and runs repeat.
pub fn deterministic() -> StoreOptions {
    let mut o = StoreOptions { background_checkpoints: false, ..StoreOptions::default() };
    o.index.background_threads = false;
    o.log.buffered_sync_interval = None;
    o
}

/// The simulated storage as a store's storage.
pub fn storage(sim: &SimStorage) -> StorageRef {
    Arc::new(sim.clone())
}
