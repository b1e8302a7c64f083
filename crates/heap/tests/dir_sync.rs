//! `sync` syncs the `heap/` directory after creating files only where a
//! file's own sync does not make its name durable
//! (`Storage::file_sync_keeps_new_entry`); removals always sync it.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use larder_heap::{Credentials, Heap};
use larder_io::{FileRef, IoResult, Lock, MapAccess, OpenOptions, RealStorage, SharedRegion, Storage, StorageRef};
use larder_object::{CreationOptions, Store, StoreOptions};
use parking_lot::Mutex;

/// The real storage, saying `keeps` about new entries and recording every
/// directory it syncs.
#[derive(Debug)]
struct Counting {
    inner: StorageRef,
    keeps: bool,
    synced_dirs: Mutex<Vec<PathBuf>>,
}

impl Storage for Counting {
    fn open(&self, path: &Path, options: OpenOptions) -> IoResult<FileRef> {
        self.inner.open(path, options)
    }
    fn create_dir_all(&self, path: &Path) -> IoResult<()> {
        self.inner.create_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> IoResult<Vec<String>> {
        self.inner.list_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> IoResult<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> IoResult<()> {
        self.inner.remove_file(path)
    }
    fn sync_dir(&self, path: &Path) -> IoResult<()> {
        self.synced_dirs.lock().push(path.to_path_buf());
        self.inner.sync_dir(path)
    }
    fn exists(&self, path: &Path) -> IoResult<bool> {
        self.inner.exists(path)
    }
    fn lock(&self, path: &Path) -> IoResult<Box<dyn Lock>> {
        self.inner.lock(path)
    }
    fn file_sync_keeps_new_entry(&self, _dir: &Path) -> IoResult<bool> {
        Ok(self.keeps)
    }
    fn map_shared(&self, path: &Path, reserve: u64, access: MapAccess) -> IoResult<SharedRegion> {
        self.inner.map_shared(path, reserve, access)
    }
}

/// Heap-directory syncs of one `sync` after creating two objects (one
/// closed, one still mapped), then of one after freeing one of them.
fn heap_dir_syncs(keeps: bool) -> (usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let storage =
        Arc::new(Counting { inner: Arc::new(RealStorage::new()), keeps, synced_dirs: Mutex::new(Vec::new()) });
    let store = Arc::new(
        Store::create(storage.clone(), dir.path(), CreationOptions::default(), StoreOptions::default()).unwrap(),
    );
    let h = Heap::open(&store, "/heap", Credentials::root()).unwrap();
    let heap_dir = store.heap_dir();
    let count = |from: usize| storage.synced_dirs.lock()[from..].iter().filter(|d| **d == heap_dir).count();

    let closed = h.alloc(4096).unwrap();
    h.write_at(closed, 0, b"closed").unwrap();
    h.close_object(closed).unwrap();
    let mapped = h.alloc(100).unwrap();
    h.write_at(mapped, 0, b"mapped").unwrap();
    let before = storage.synced_dirs.lock().len();
    h.sync().unwrap();
    let after_create = count(before);

    h.free(closed).unwrap();
    let before = storage.synced_dirs.lock().len();
    h.sync().unwrap();
    let after_free = count(before);
    assert!(!store.heap_file_path(closed.0).exists(), "the freed object's file is removed");
    drop(h);
    Arc::into_inner(store).unwrap().close().unwrap();

    // The synced bytes are there after a reopen, whichever way.
    let store = Arc::new(Store::open(Arc::new(RealStorage::new()), dir.path(), StoreOptions::default()).unwrap());
    let h = Heap::open(&store, "/heap", Credentials::root()).unwrap();
    let mut buf = [0u8; 6];
    h.read_at(mapped, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"mapped");
    (after_create, after_free)
}

#[test]
fn new_files_need_no_directory_sync_where_their_sync_keeps_their_names() {
    let (after_create, after_free) = heap_dir_syncs(true);
    assert_eq!(after_create, 0, "each new file's sync made its name durable");
    assert_eq!(after_free, 1, "a removal is made durable by the directory's sync");
}

#[test]
fn new_files_are_made_durable_by_a_directory_sync_elsewhere() {
    let (after_create, after_free) = heap_dir_syncs(false);
    assert_eq!(after_create, 1);
    assert_eq!(after_free, 1);
}
