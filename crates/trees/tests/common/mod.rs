//! Setup shared by the trees tests: a small store on the simulated
//! storage, and reading whole trees back.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use larder_io::SimStorage;
use larder_object::{CreationOptions, Store, StoreOptions};
use larder_trees::{Tree, Trees};

/// Where the tests put their store.
pub const DIR: &str = "/store";

/// Every key of a tree and its value.
pub type State = BTreeMap<Vec<u8>, Vec<u8>>;

/// Small segments and memtables, no background threads: tests reach log
/// checkpoints and index flushes quickly and deterministically.
pub fn store_options() -> StoreOptions {
    let mut store = StoreOptions { background_checkpoints: false, ..StoreOptions::default() };
    store.index.background_threads = false;
    store.index.memtable_size_bytes = 32 << 10;
    store.log.buffered_sync_interval = None;
    store.log.max_segments = 4;
    store.space.initial_container_bytes = 256 << 10;
    store
}

pub fn creation() -> CreationOptions {
    CreationOptions { container_bytes: 1 << 20, log_segment_bytes: 256 << 10, ..CreationOptions::default() }
}

pub fn create(sim: &SimStorage) -> Result<Trees, larder_trees::TreesError> {
    let store = Store::create(Arc::new(sim.clone()), Path::new(DIR), creation(), store_options())?;
    Trees::open(Arc::new(store))
}

pub fn open(sim: &SimStorage) -> Result<Trees, larder_trees::TreesError> {
    let store = Store::open(Arc::new(sim.clone()), Path::new(DIR), store_options())?;
    Trees::open(Arc::new(store))
}

/// The tree's entries read through a fresh iterator.
pub fn state(tree: &Tree) -> State {
    tree.iter().unwrap().map(|kv| kv.unwrap()).collect()
}

/// Checks the store with fsck and fails on any problem.
pub fn assert_fsck_clean(trees: &Trees) {
    let report = larder_fsck::check(trees.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report}");
}
