//! Setup shared by the heap tests: stores on the simulated or the real
//! storage, and a heap in them.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use larder_heap::{Credentials, Heap, ObjectId};
use larder_io::sim::CrashMode;
use larder_io::{SimStorage, StorageRef};
use larder_object::meta::heap_image_prefix;
use larder_object::{CreationOptions, Store, StoreOptions};

/// Where the simulated tests put their store.
pub const DIR: &str = "/store";

/// Small containers and log segments.
pub fn creation() -> CreationOptions {
    CreationOptions { container_bytes: 1 << 20, log_segment_bytes: 64 << 10, ..CreationOptions::default() }
}

/// No background threads: every write happens in the calling thread, so
/// crash points are exact and runs repeat.
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

/// A new store on `sim`.
pub fn sim_store(sim: &SimStorage) -> Arc<Store> {
    Arc::new(Store::create(storage(sim), Path::new(DIR), creation(), deterministic()).unwrap())
}

/// The store on `sim`, reopened (recovering).
pub fn reopen_sim(sim: &SimStorage) -> Arc<Store> {
    Arc::new(Store::open(storage(sim), Path::new(DIR), deterministic()).unwrap())
}

/// A store on the real file system in `dir`, created if absent.
pub fn real_store(dir: &Path) -> Arc<Store> {
    let storage: StorageRef = Arc::new(larder_io::RealStorage::new());
    let store = if dir.join(larder_object::superblock::SUPERBLOCK_FILE).exists() {
        Store::open(storage, dir, StoreOptions::default())
    } else {
        Store::create(storage, dir, creation(), StoreOptions::default())
    };
    Arc::new(store.unwrap())
}

/// The heap `/heap` of `store`, as root.
pub fn heap(store: &Arc<Store>) -> Heap {
    Heap::open(store, "/heap", Credentials::root()).unwrap()
}

/// A new store on a simulated storage of `seed`, and its heap `/heap` as
/// root: the simulation (to crash it), the store and the heap.
pub fn sim_heap(seed: u64) -> (SimStorage, Arc<Store>, Heap) {
    let sim = SimStorage::new(seed);
    let store = sim_store(&sim);
    let heap = heap(&store);
    (sim, store, heap)
}

/// A new store on the real file system in a temporary directory, and its
/// heap `/heap` as root. The directory is removed when the first value is
/// dropped: keep it bound (`_dir`, not `_`) for as long as the store.
pub fn real_heap() -> (tempfile::TempDir, Arc<Store>, Heap) {
    let dir = tempfile::tempdir().unwrap();
    let store = real_store(dir.path());
    let heap = heap(&store);
    (dir, store, heap)
}

/// The heap `/heap` of `store`, as root, or why it could not be opened.
pub fn try_heap(store: &Arc<Store>) -> larder_heap::Result<Heap> {
    Heap::open(store, "/heap", Credentials::root())
}

/// Page images the index holds for `object` (docs/heap.md, "One flush
/// per sync").
pub fn heap_images(store: &Store, object: ObjectId) -> usize {
    store.index().prefix(&heap_image_prefix(object.0), true).unwrap().count()
}

/// Runs `workload` on a store of a new simulated machine of `seed`
/// (directory operations reach the disk in any order) armed by `arm`,
/// and crashes the machine in `mode`: the machine after the crash and
/// what the workload returned.
pub fn crash_sim<T>(
    seed: u64,
    mode: CrashMode,
    arm: impl FnOnce(&SimStorage),
    workload: impl FnOnce(&Arc<Store>) -> T,
) -> (SimStorage, T) {
    let sim = SimStorage::new(seed);
    sim.set_unordered_dir_ops(true);
    let store = sim_store(&sim);
    arm(&sim);
    let seen = workload(&store);
    drop(store);
    (sim.crash_with(mode), seen)
}

/// [`crash_sim`], then the store reopened on the crashed machine,
/// recovering.
pub fn crash_run_sim<T>(
    seed: u64,
    mode: CrashMode,
    arm: impl FnOnce(&SimStorage),
    workload: impl FnOnce(&Arc<Store>) -> T,
) -> (Arc<Store>, T) {
    let (image, seen) = crash_sim(seed, mode, arm, workload);
    (reopen_sim(&image), seen)
}
