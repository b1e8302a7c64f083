//! Heap objects' bytes through the object layer: reads come from the file
//! `heap/<id>`, writes go in place into it (a mapping sees them), growing
//! file and size, durable with a durable commit; heap objects never
//! shrink (docs/heap.md).
#![allow(clippy::unwrap_used)]

mod common;
#[path = "heap_fixture/mod.rs"]
mod heap_fixture;

use std::path::Path;

use common::{creation, storage, DIR};
use larder_io::sim::CrashMode;
use larder_io::{read_exact_at, write_all_at, MapAccess, SimStorage};
use larder_object::meta::HeapObject;
use larder_object::{Durability, ObjectError, Store};

fn record() -> HeapObject {
    HeapObject { heap: 1, type_id: 0, durable_size: 0, flags: 0 }
}

fn new_store(sim: &SimStorage) -> Store {
    Store::create(storage(sim), Path::new(DIR), creation(), common::deterministic()).unwrap()
}

fn reopen(sim: &SimStorage) -> Store {
    Store::open(storage(sim), Path::new(DIR), common::deterministic()).unwrap()
}

/// A heap object of `size` bytes, durable, its file synced.
fn create(store: &Store, size: u64) -> u64 {
    let id = store.allocate_object_id().unwrap();
    store
        .transact(&[id], Durability::Durable, |txn| txn.create_heap_object(id, size, (0o644, 0, 0), &record()))
        .unwrap();
    store.open_heap_file(id, true).unwrap().sync_data().unwrap();
    store.sync_heap_dir().unwrap();
    id
}

fn file_bytes(store: &Store, id: u64) -> Vec<u8> {
    let file = store.open_heap_file(id, false).unwrap();
    let mut out = vec![0u8; usize::try_from(file.len().unwrap()).unwrap()];
    read_exact_at(&*file, &mut out, 0).unwrap();
    out
}

/// `len` bytes at `offset` of a mapped region.
#[allow(unsafe_code)]
fn mapped(region: &larder_io::SharedRegion, offset: usize, len: usize) -> Vec<u8> {
    assert!(offset + len <= usize::try_from(region.len()).unwrap());
    // SAFETY: the range is inside the region's mapped length (checked
    // above), the region lives for the call, and the bytes are copied out
    // at once; nothing else writes them meanwhile (the test's one thread).
    unsafe { std::slice::from_raw_parts(region.as_ptr().add(offset), len) }.to_vec()
}

#[test]
fn reads_come_from_the_heap_file_up_to_the_size() {
    let sim = SimStorage::new(11);
    let store = new_store(&sim);
    let id = create(&store, 10_000);
    let pattern: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    write_all_at(&*store.open_heap_file(id, true).unwrap(), &pattern, 0).unwrap();

    let mut buf = vec![0u8; 300];
    assert_eq!(store.read(id, 4000, &mut buf).unwrap(), 300);
    assert_eq!(buf, pattern[4000..4300]);
    assert_eq!(store.read(id, 9_900, &mut buf).unwrap(), 100, "cut at the size");
    assert_eq!(&buf[..100], &pattern[9_900..]);
    assert_eq!(store.read(id, 10_000, &mut buf).unwrap(), 0, "nothing past the size");
    assert_eq!(store.read_to_end(id).unwrap().unwrap(), pattern);
    let seen = store.transact(&[id], Durability::Buffered, |txn| txn.read(id, 5, 20_000)).unwrap().0;
    assert_eq!(seen, pattern[5..], "a transaction reads the file too");

    // A file shorter than the size (cut outside Larder) is an error naming
    // it, never made-up zeros.
    store.open_heap_file(id, true).unwrap().set_len(5000).unwrap();
    let err = store.read(id, 4900, &mut buf).unwrap_err();
    assert!(matches!(&err, ObjectError::Corrupt { path, .. } if path.ends_with(id.to_string())), "{err}");
    assert!(err.to_string().contains("shrunk outside Larder"), "{err}");
    assert!(store.read_to_end(id).is_err());
    assert_eq!(store.read(id, 0, &mut buf).unwrap(), 300, "bytes still in the file read");
}

#[test]
fn writes_go_in_place_grow_the_file_and_a_mapping_sees_them() {
    let tmp = tempfile::tempdir().unwrap();
    let store =
        Store::create(std::sync::Arc::new(larder_io::RealStorage::new()), tmp.path(), creation(), Default::default())
            .unwrap();
    let id = create(&store, 8192);
    let region = store.map_heap_file(id, 1 << 20, MapAccess::ReadWrite).unwrap();
    store.write(id, 100, b"in place", Durability::Buffered).unwrap();
    assert!(!region.is_emulated());
    assert_eq!(mapped(&region, 100, 8), b"in place", "the mapping sees a write through the store");
    assert_eq!(store.stat(id).unwrap().unwrap().size, 8192);

    // Past the end: file and size grow, the gap reads as zeros.
    store.write(id, 10_000, b"tail", Durability::Durable).unwrap();
    assert_eq!(store.stat(id).unwrap().unwrap().size, 10_004);
    let bytes = file_bytes(&store, id);
    assert_eq!(bytes.len(), 10_004);
    assert_eq!(&bytes[100..108], b"in place");
    assert!(bytes[8192..10_000].iter().all(|&b| b == 0));
    assert_eq!(&bytes[10_000..], b"tail");
    assert_eq!(store.read_to_end(id).unwrap().unwrap(), bytes);
    // Written in place: no container space taken for the object.
    let onode = store.stat(id).unwrap().unwrap();
    assert_eq!(onode.location, larder_object::meta::DataLocation::OwnFile { file: id });
}

#[test]
fn heap_objects_never_shrink_and_grow_with_zeros() {
    let sim = SimStorage::new(12);
    let store = new_store(&sim);
    let id = create(&store, 4096);
    store.write(id, 0, b"kept", Durability::Buffered).unwrap();
    let before = store.stat(id).unwrap().unwrap();
    let err = store.truncate(id, 10, Durability::Durable).unwrap_err();
    assert!(matches!(err, ObjectError::HeapShrink { object, size: 4096, asked: 10 } if object == id), "{err}");
    assert!(err.to_string().contains("never shrink"), "{err}");
    let err = store.transact(&[id], Durability::Buffered, |txn| txn.truncate(id, 0)).unwrap_err();
    assert!(matches!(err, ObjectError::HeapShrink { .. }));
    assert_eq!(store.stat(id).unwrap().unwrap(), before, "a refused truncate changes nothing");
    assert_eq!(file_bytes(&store, id).len(), 4096);

    store.truncate(id, 4096, Durability::Buffered).unwrap();
    store.truncate(id, 20_000, Durability::Durable).unwrap();
    assert_eq!(store.stat(id).unwrap().unwrap().size, 20_000);
    let bytes = file_bytes(&store, id);
    assert_eq!(bytes.len(), 20_000);
    assert_eq!(&bytes[..4], b"kept");
    assert!(bytes[4..].iter().all(|&b| b == 0));
    let set_aside = store.transact(&[id], Durability::Buffered, |txn| txn.preallocate(id, 0, 1 << 20)).unwrap().0;
    assert_eq!(set_aside, 20_000, "preallocation stays inside the size");
}

#[test]
fn a_durable_write_survives_a_crash_and_a_lost_growth_is_cut_back() {
    let sim = SimStorage::new(13);
    let store = new_store(&sim);
    let id = create(&store, 100);
    store.write(id, 0, b"durable", Durability::Durable).unwrap();
    store.write(id, 5000, b"grown", Durability::Durable).unwrap();
    store.close().unwrap();
    let after = sim.crash_with(CrashMode::DropAllPending);
    let store = reopen(&after);
    assert_eq!(store.stat(id).unwrap().unwrap().size, 5005);
    let bytes = store.read_to_end(id).unwrap().unwrap();
    assert_eq!(&bytes[..7], b"durable");
    assert_eq!(&bytes[5000..], b"grown");

    // A buffered growth never synced: its record is lost with the crash,
    // and the file (whose growth may have reached the disk) is cut back.
    // A buffered write made durable by a later sync (as fsync does).
    store.write(id, 10, b"synced", Durability::Buffered).unwrap();
    store.sync().unwrap();
    let image = after.crash_with(CrashMode::DropAllPending);
    drop(store);
    let store = reopen(&image);
    assert_eq!(&store.read_to_end(id).unwrap().unwrap()[10..16], b"synced", "the sync made the file's bytes durable");
    let after = image;

    // (No background sync in these stores: the record stays buffered.)
    store.write(id, 9000, b"lost", Durability::Buffered).unwrap();
    store.open_heap_file(id, true).unwrap().sync_data().unwrap();
    let image = after.crash_with(CrashMode::DropAllPending);
    drop(store);
    let store = reopen(&image);
    assert_eq!(store.stat(id).unwrap().unwrap().size, 5005);
    assert_eq!(file_bytes(&store, id).len(), 5005, "file cut back to the committed size");
}

#[test]
fn free_removes_entries_names_records_onode_and_then_the_file() {
    use larder_object::meta::{dentry_key, heap_name_key, Name};
    let sim = SimStorage::new(14);
    let store = new_store(&sim);
    let heap = heap_fixture::create_heap(&store, larder_object::ROOT_ID, "heap");
    let other = heap_fixture::create_heap(&store, larder_object::ROOT_ID, "other");
    let id = heap_fixture::add_object(&store, &heap, b"bytes", &["a", "b"]);
    let kept = heap_fixture::add_object(&store, &heap, b"kept", &["c"]);
    assert_eq!(store.heap_names(id).unwrap(), vec![Name::new("a").unwrap(), Name::new("b").unwrap()]);
    assert_eq!(store.heap_roots().unwrap().len(), 2);
    assert_eq!(store.read_to_end(id).unwrap().unwrap(), b"bytes");

    let err = store.free_heap_object(other.root, id, Durability::Durable).unwrap_err();
    assert!(matches!(err, ObjectError::NotInHeap { .. }), "{err}");
    assert!(store.free_heap_object(heap.root, heap.names_dir, Durability::Durable).is_err());
    assert!(store.stat(id).unwrap().is_some(), "a refused free changes nothing");

    let freed = store.free_heap_object(heap.root, id, Durability::Durable).unwrap();
    assert_eq!(freed.names.len(), 2);
    assert!(store.stat(id).unwrap().is_none());
    assert_eq!(store.heap_object(id).unwrap(), None);
    assert!(store.heap_names(id).unwrap().is_empty());
    for (dir, name) in [(heap.names_dir, "a"), (heap.names_dir, "b"), (heap.objects_dir, &*id.to_string())] {
        assert_eq!(store.index().get(&dentry_key(dir, &Name::new(name).unwrap())).unwrap(), None, "{name}");
    }
    assert_eq!(store.index().get(&heap_name_key(id, &Name::new("a").unwrap())).unwrap(), None);
    assert_eq!(store.stat(heap.names_dir).unwrap().unwrap().dir.unwrap().entries, 1);
    assert_eq!(store.stat(heap.objects_dir).unwrap().unwrap().dir.unwrap().entries, 1);
    assert_eq!(store.list_heap_files().unwrap().0, vec![kept], "the file went after the durable free");
    assert_eq!(store.read_to_end(kept).unwrap().unwrap(), b"kept");
    common::assert_consistent(&store, "after a free");
}

#[test]
fn free_runs_under_the_heaps_own_finer_locks() {
    use larder_object::meta::Name;
    use larder_object::LockRequest;
    let sim = SimStorage::new(15);
    let store = new_store(&sim);
    let heap = heap_fixture::create_heap(&store, larder_object::ROOT_ID, "heap");
    let id = heap_fixture::add_object(&store, &heap, b"x", &["a", "b"]);
    // The locks the heap crate's free takes: the object, both directories
    // shared, and each name it removes.
    let mut locks = vec![
        LockRequest::Exclusive(id),
        LockRequest::Shared(heap.objects_dir),
        LockRequest::Name(heap.objects_dir, id.to_string().into_bytes()),
        LockRequest::Shared(heap.names_dir),
        LockRequest::Name(heap.names_dir, b"a".to_vec()),
    ];
    // Without the lock of one name, the free is refused and changes nothing.
    let err = store.transact_locked(&locks, Durability::Buffered, |txn| txn.free_heap_object(heap.root, id));
    assert!(matches!(err, Err(ObjectError::NameNotLocked { .. })), "{err:?}");
    assert_eq!(store.heap_names(id).unwrap().len(), 2);
    locks.push(LockRequest::Name(heap.names_dir, b"b".to_vec()));
    let (freed, _) =
        store.transact_locked(&locks, Durability::Durable, |txn| txn.free_heap_object(heap.root, id)).unwrap();
    assert_eq!(freed.names, vec![Name::new("a").unwrap(), Name::new("b").unwrap()]);
    assert!(store.stat(id).unwrap().is_none());
    assert_eq!(store.stat(heap.names_dir).unwrap().unwrap().dir.unwrap().entries, 0);
}
