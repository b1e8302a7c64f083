//! Heap objects in the object layer: their records and keys round-trip and
//! refuse damage, a heap object is an onode plus a file `heap/<id>`, and
//! opening the store brings files and records back in step (docs/heap.md,
//! "Recovery"), on the simulated storage across crashes.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{creation, storage, DIR};
use larder_io::sim::CrashMode;
use larder_io::{MapAccess, SimStorage};
use larder_object::meta::{
    decode_heap_key, heap_kind_prefix, heap_name_key, heap_object_key, heap_root_key, heap_span_key, heap_type_key,
    DataLocation, HeapObject, HeapRecord, HeapRoot, HeapType, Kind, MetaKey, Name, MAX_TYPE_POINTERS,
};
use larder_object::{Durability, ObjectError, Store};

fn record(durable_size: u64) -> HeapObject {
    HeapObject { heap: 1, type_id: 0, durable_size, flags: 0 }
}

fn new_store(sim: &SimStorage) -> Store {
    Store::create(storage(sim), Path::new(DIR), creation(), common::deterministic()).unwrap()
}

fn reopen(sim: &SimStorage) -> Store {
    Store::open(storage(sim), Path::new(DIR), common::deterministic()).unwrap()
}

/// Creates a heap object of `size` bytes with `record`, durable.
fn create(store: &Store, size: u64, record: &HeapObject) -> u64 {
    let id = store.allocate_object_id().unwrap();
    store.transact(&[id], Durability::Durable, |txn| txn.create_heap_object(id, size, (0o640, 7, 8), record)).unwrap();
    id
}

#[test]
fn heap_keys_round_trip_in_byte_order() {
    let name = Name::new("a name").unwrap();
    let keys = [
        MetaKey::HeapRoot { root: 5 },
        MetaKey::HeapObject { object: 2 },
        MetaKey::HeapObject { object: 300 },
        MetaKey::HeapName { object: 2, name: name.clone() },
        MetaKey::HeapType { type_id: 9 },
        MetaKey::HeapSpan { object: 2, span: 4096 },
        MetaKey::HeapSpan { object: 2, span: u64::MAX },
    ];
    let encoded = [
        heap_root_key(5),
        heap_object_key(2),
        heap_object_key(300),
        heap_name_key(2, &name),
        heap_type_key(9),
        heap_span_key(2, 4096),
        heap_span_key(2, u64::MAX),
    ];
    for (k, e) in keys.iter().zip(&encoded) {
        assert_eq!(&k.encode(), e);
        assert_eq!(&decode_heap_key(e).unwrap(), k);
        assert_eq!(e[0], 0x60);
    }
    assert!(encoded.windows(2).all(|w| w[0] < w[1]), "byte order is record order");
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "derived order is byte order");
    assert_eq!(heap_kind_prefix(HeapRecord::Type), [0x60, 0x04]);
    assert_eq!(heap_object_key(0x0102), vec![0x60, 0x02, 0, 0, 0, 0, 0, 0, 0x01, 0x02]);
}

#[test]
fn damaged_heap_keys_are_refused() {
    for bad in [
        vec![0x60],
        vec![0x60, 0x00, 0, 0, 0, 0, 0, 0, 0, 1],
        vec![0x60, 0x06, 0, 0, 0, 0, 0, 0, 0, 1],
        vec![0x60, 0x02, 0, 0, 0, 0, 0, 0, 1],
        vec![0x60, 0x02, 0, 0, 0, 0, 0, 0, 0, 1, 0],
        vec![0x60, 0x03, 0, 0, 0, 0, 0, 0, 0, 1],
        vec![0x60, 0x03, 0, 0, 0, 0, 0, 0, 0, 1, b'/'],
        vec![0x60, 0x05, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0],
    ] {
        assert!(MetaKey::decode(&bad).is_err(), "{bad:?}");
    }
    assert!(decode_heap_key(&larder_object::meta::onode_key(3)).is_err());
}

#[test]
fn heap_records_round_trip_and_refuse_damage() {
    let root = HeapRoot { objects_dir: 3, names_dir: 4 };
    let bytes = root.encode().unwrap();
    assert_eq!(bytes, [1, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(HeapRoot::decode(&bytes).unwrap(), root);
    assert!(HeapRoot { objects_dir: 3, names_dir: 3 }.encode().is_err());
    assert!(HeapRoot::decode(&bytes[..16]).is_err());

    let object = HeapObject { heap: 1, type_id: 7, durable_size: 4096, flags: 1 };
    let bytes = object.encode().unwrap();
    assert_eq!(bytes.len(), 26);
    assert_eq!(HeapObject::decode(&bytes).unwrap(), object);
    let mut unknown_flag = bytes;
    unknown_flag[25] = 4;
    assert!(HeapObject::decode(&unknown_flag).is_err());
    let mut newer = bytes;
    newer[0] = 2;
    assert!(matches!(HeapObject::decode(&newer), Err(ObjectError::NewerRecord { .. })));
    let mut zero_version = bytes;
    zero_version[0] = 0;
    assert!(matches!(HeapObject::decode(&zero_version), Err(ObjectError::BadRecord { .. })));

    let ty = HeapType { offsets: vec![0, 24, 64] };
    let bytes = ty.encode().unwrap();
    assert_eq!(bytes.len(), 5 + 24);
    assert_eq!(HeapType::decode(&bytes).unwrap(), ty);
    assert_eq!(ty.min_object_bytes(), 88);
    assert!(HeapType::decode(&bytes[..bytes.len() - 1]).is_err());
    for bad in [vec![0, 16], vec![4], vec![24, 0], vec![u64::MAX - 7]] {
        assert!(HeapType { offsets: bad.clone() }.encode().is_err(), "{bad:?}");
    }
    assert!(HeapType { offsets: (0..MAX_TYPE_POINTERS as u64 + 1).map(|i| i * 24).collect() }.encode().is_err());
    // A count the bytes cannot hold is refused before allocating.
    assert!(HeapType::decode(&[1, 0xFF, 0xFF, 0xFF, 0xFF]).is_err());
}

#[test]
fn a_heap_object_is_an_onode_and_a_file() {
    let sim = SimStorage::new(1);
    let store = new_store(&sim);
    let id = create(&store, 5000, &record(0));
    let onode = store.stat(id).unwrap().unwrap();
    assert_eq!(onode.kind, Kind::File);
    assert_eq!(onode.size, 5000);
    assert_eq!((onode.mode & 0o7777, onode.uid, onode.gid), (0o640, 7, 8));
    assert_eq!(onode.location, DataLocation::OwnFile { file: id });
    assert_eq!(store.heap_object(id).unwrap(), Some(record(0)));
    assert_eq!(store.list_heap_files().unwrap(), (vec![id], vec![]));
    assert_eq!(store.open_heap_file(id, false).unwrap().len().unwrap(), 5000);
    assert_eq!(store.read(id, 0, &mut [1u8; 4]).unwrap(), 4, "a new object reads as zeros");

    let region = store.map_heap_file(id, 1 << 20, MapAccess::ReadWrite).unwrap();
    assert_eq!(region.len(), 5000);
    store.extend_heap_file(id, 9000).unwrap();
    store.extend_heap_file(id, 10).unwrap();
    assert_eq!(store.open_heap_file(id, false).unwrap().len().unwrap(), 9000, "never shrinks");
    region.grow_to(9000).unwrap();

    // Deleting the object drops its heap records; the file, now without a
    // record, goes at the next open.
    store
        .transact(&[id], Durability::Durable, |txn| {
            txn.put(&heap_name_key(id, &Name::new("n").unwrap()), &[]);
            Ok(())
        })
        .unwrap();
    store.delete_object(id, Durability::Durable).unwrap();
    assert_eq!(store.heap_object(id).unwrap(), None);
    assert_eq!(store.index().get(&heap_name_key(id, &Name::new("n").unwrap())).unwrap(), None);
    drop(region);
    store.close().unwrap();
    let store = reopen(&sim);
    assert_eq!(store.list_heap_files().unwrap().0, Vec::<u64>::new());
}

#[test]
fn open_removes_stray_files_and_remakes_lost_ones() {
    let sim = SimStorage::new(2);
    let store = new_store(&sim);
    // Made durable: its file synced, the directory synced, durable size set.
    let kept = create(&store, 100, &record(0));
    store.open_heap_file(kept, true).unwrap().sync_data().unwrap();
    store.sync_heap_dir().unwrap();
    store.transact(&[kept], Durability::Durable, |txn| txn.put_heap_object(kept, &record(100))).unwrap();
    // Committed, but its file's name never synced: lost in the crash.
    let lost = create(&store, 300, &record(0));
    // A file whose transaction never committed.
    let stray = store.allocate_object_id().unwrap();
    store.create_heap_file(stray, 50).unwrap();
    store.sync_heap_dir().unwrap();
    store.close().unwrap();
    let after = sim.crash_with(CrashMode::DropAllPending);
    // The drop above lost `lost`'s file; `stray` survived its directory sync.
    let store = reopen(&after);
    let (files, _) = store.list_heap_files().unwrap();
    assert_eq!(files, vec![kept, lost]);
    assert_eq!(store.open_heap_file(lost, false).unwrap().len().unwrap(), 300);
    assert_eq!(store.open_heap_file(kept, false).unwrap().len().unwrap(), 100);
    // Recovery's work is durable: another crash keeps it.
    store.close().unwrap();
    let again = reopen(&after.crash_with(CrashMode::DropAllPending));
    assert_eq!(again.list_heap_files().unwrap().0, vec![kept, lost]);
}

#[test]
fn open_cuts_a_lost_growth_and_leaves_a_shrunk_file_for_attach_to_refuse() {
    let sim = SimStorage::new(3);
    let store = new_store(&sim);
    let grown = create(&store, 100, &record(0));
    let shrunk = create(&store, 8192, &record(0));
    store.sync_heap_dir().unwrap();
    store.transact(&[shrunk], Durability::Durable, |txn| txn.put_heap_object(shrunk, &record(8192))).unwrap();
    // A growth whose transaction never came.
    store.extend_heap_file(grown, 4096).unwrap();
    // Something outside Larder cut the file below its durable size.
    store.open_heap_file(shrunk, true).unwrap().set_len(10).unwrap();
    for id in [grown, shrunk] {
        store.open_heap_file(id, true).unwrap().sync_data().unwrap();
    }
    store.close().unwrap();
    let store = reopen(&sim);
    assert_eq!(store.open_heap_file(grown, false).unwrap().len().unwrap(), 100);
    assert_eq!(store.open_heap_file(shrunk, false).unwrap().len().unwrap(), 10, "left for attach and fsck");
    let report = store.recover_heap_files().unwrap();
    assert_eq!(report.short, vec![shrunk]);
    assert!(report.removed.is_empty() && report.extended.is_empty() && report.truncated.is_empty());
}

#[test]
fn a_heap_object_needs_its_fresh_id_locked() {
    let sim = SimStorage::new(5);
    let store = new_store(&sim);
    let id = store.allocate_object_id().unwrap();
    let unlocked =
        store.transact(&[], Durability::Durable, |txn| txn.create_heap_object(id, 1, (0o600, 0, 0), &record(0)));
    assert!(matches!(unlocked, Err(ObjectError::NotLocked { .. })), "{unlocked:?}");
    let taken = store.transact(&[larder_object::ROOT_ID], Durability::Durable, |txn| {
        txn.create_heap_object(larder_object::ROOT_ID, 1, (0o600, 0, 0), &record(0))
    });
    assert!(taken.is_err(), "an existing object's id is refused");
    assert_eq!(store.list_heap_files().unwrap().0, Vec::<u64>::new(), "nothing made");
}

#[test]
fn non_heap_names_in_the_heap_directory_are_listed_apart() {
    let sim = SimStorage::new(4);
    let store = new_store(&sim);
    let id = create(&store, 1, &record(0));
    store.create_heap_file(0, 1).unwrap_err();
    let sim_path = store.heap_dir().join("007");
    larder_io::Storage::open(&sim, &sim_path, larder_io::OpenOptions::CREATE_NEW).unwrap();
    let (ids, others) = store.list_heap_files().unwrap();
    assert_eq!(ids, vec![id]);
    assert_eq!(others, vec!["007".to_string()]);
}
