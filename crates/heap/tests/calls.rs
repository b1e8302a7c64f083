//! Every heap call on its own, on the simulated storage: what it returns,
//! what it refuses, and what a reopened store still has.
#![allow(clippy::unwrap_used)]

mod common;

use larder_heap::{Credentials, Heap, HeapError, ObjectId, PPtr};
use larder_io::SimStorage;

use common::{heap, reopen_sim, sim_heap, sim_store};

#[test]
fn alloc_write_sync_reopen_reads_the_bytes() {
    let (sim, store, h) = sim_heap(1);
    let a = h.alloc(100).unwrap();
    assert_eq!(h.size(a).unwrap(), 100);
    h.write_at(a, 10, b"hello").unwrap();
    let p = h.pointer(a).unwrap();
    // SAFETY: the object is attached, writable and 100 bytes long.
    #[allow(unsafe_code)]
    unsafe {
        *p.add(99) = 7
    };
    h.add_name(a, "first").unwrap();
    h.sync().unwrap();
    drop(h);
    drop(store);
    let after = sim.crash_with(larder_io::sim::CrashMode::DropAllPending);
    let store = reopen_sim(&after);
    let h = heap(&store);
    let found = h.get_by_name("first").unwrap();
    assert_eq!(found, a);
    let mut buf = [0u8; 5];
    h.read_at(a, 10, &mut buf).unwrap();
    assert_eq!(&buf, b"hello");
    let mut last = [0u8; 1];
    h.read_at(a, 99, &mut last).unwrap();
    assert_eq!(last, [7]);
    assert_eq!(h.names(a).unwrap(), vec!["first".to_string()]);
}

#[test]
fn names_are_create_if_absent() {
    let (_sim, _store, h) = sim_heap(2);
    let (a, b) = (h.alloc(8).unwrap(), h.alloc(8).unwrap());
    h.add_name(a, "n").unwrap();
    assert!(matches!(h.add_name(b, "n"), Err(HeapError::AlreadyExists { .. })));
    h.add_name(a, "second").unwrap();
    assert!(matches!(h.add_name(a, "bad/name"), Err(HeapError::InvalidArgument { .. })));
    assert!(matches!(h.add_name(a, ""), Err(HeapError::InvalidArgument { .. })));
    assert!(matches!(h.get_by_name("absent"), Err(HeapError::NotFound { .. })));
    assert_eq!(h.get_by_name("n").unwrap(), a);
    assert!(matches!(h.add_name(ObjectId(999_999), "x"), Err(HeapError::NotFound { .. })));
}

#[test]
fn free_drops_every_name_and_the_file_once_durable() {
    let (_sim, store, h) = sim_heap(3);
    let a = h.alloc(4096).unwrap();
    h.write_at(a, 0, &[0xAA; 4096]).unwrap();
    h.add_name(a, "x").unwrap();
    h.add_name(a, "y").unwrap();
    h.sync().unwrap();
    h.free(a).unwrap();
    assert!(matches!(h.get_by_name("x"), Err(HeapError::NotFound { .. })));
    assert!(matches!(h.get(a), Err(HeapError::NotFound { .. })));
    assert!(matches!(h.free(a), Err(HeapError::NotFound { .. })));
    assert!(store.list_heap_files().unwrap().0.contains(&a.0), "the file waits for the free to be durable");
    h.sync().unwrap();
    assert!(!store.list_heap_files().unwrap().0.contains(&a.0), "removed, or kept under a new id");
    for id in store.list_heap_files().unwrap().0 {
        let len = store.open_heap_file(id, false).unwrap().len().unwrap();
        assert_eq!(len, 4096, "a small file kept for reuse keeps its bytes, for a copy to overwrite");
    }
    // The name is free again.
    let b = h.alloc(1).unwrap();
    h.add_name(b, "x").unwrap();
    assert_ne!(a, b, "ids are never reused");
    assert_eq!(store.list_heap_files().unwrap().0, vec![b.0], "b took a's file, or a's was removed");
    assert_eq!(store.open_heap_file(b.0, false).unwrap().len().unwrap(), 1);
    let mut byte = [1u8];
    h.read_at(b, 0, &mut byte).unwrap();
    assert_eq!(byte, [0], "an allocation reads zeros, never the freed object's bytes");
}

#[test]
fn grow_keeps_the_base_and_never_shrinks() {
    let (sim, store, h) = sim_heap(4);
    let a = h.alloc(10).unwrap();
    let base = h.pointer(a).unwrap();
    h.write_at(a, 0, b"0123456789").unwrap();
    h.grow(a, 100_000).unwrap();
    assert_eq!(h.pointer(a).unwrap(), base);
    assert_eq!(h.size(a).unwrap(), 100_000);
    h.write_at(a, 99_990, b"end").unwrap();
    assert!(matches!(h.grow(a, 5), Err(HeapError::InvalidArgument { .. })));
    assert!(matches!(h.write_at(a, 99_999, b"xy"), Err(HeapError::OutOfBounds { .. })));
    h.sync().unwrap();
    drop(h);
    drop(store);
    let store = reopen_sim(&sim.crash_with(larder_io::sim::CrashMode::DropAllPending));
    let h = heap(&store);
    let mut buf = [0u8; 10];
    h.read_at(a, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"0123456789");
    let mut end = [0u8; 3];
    h.read_at(a, 99_990, &mut end).unwrap();
    assert_eq!(&end, b"end");
}

#[test]
fn close_object_unmaps_and_keeps_the_bytes() {
    let (sim, store, h) = sim_heap(5);
    let a = h.alloc(16).unwrap();
    h.write_at(a, 0, b"kept after close").unwrap();
    h.close_object(a).unwrap();
    h.sync().unwrap();
    drop(h);
    drop(store);
    let store = reopen_sim(&sim.crash_with(larder_io::sim::CrashMode::DropAllPending));
    let h = heap(&store);
    let mut buf = [0u8; 16];
    h.read_at(a, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"kept after close");
}

#[test]
fn types_persist_and_must_fit() {
    let (sim, store, h) = sim_heap(6);
    let t = h.alloc_type(&[0, 24]).unwrap();
    assert!(matches!(h.alloc_type(&[0, 8]), Err(HeapError::BadType { .. })));
    assert!(matches!(h.alloc_type(&[3]), Err(HeapError::BadType { .. })));
    let small = h.alloc(40).unwrap();
    assert!(matches!(h.attach_type(small, t), Err(HeapError::BadType { .. })));
    let a = h.alloc(48).unwrap();
    h.attach_type(a, t).unwrap();
    assert!(matches!(h.attach_type(a, larder_heap::TypeId(12345)), Err(HeapError::BadType { .. })));
    h.sync().unwrap();
    drop(h);
    drop(store);
    let store = reopen_sim(&sim.crash_with(larder_io::sim::CrashMode::DropAllPending));
    let h = heap(&store);
    assert_eq!(h.type_of(a).unwrap(), Some(t));
    assert_eq!(h.type_of(small).unwrap(), None);
    assert_eq!(h.type_offsets(t).unwrap(), vec![0, 24]);
}

#[test]
fn pointers_deref_with_checks() {
    let (_sim, _store, h) = sim_heap(7);
    let a = h.alloc(64).unwrap();
    let p = h.nptr(a).unwrap();
    assert_eq!(p, PPtr::new(a.0, 0, 0));
    let q: PPtr<u64> = p.cast::<u64>().add_bytes(8).unwrap();
    let address = h.deref(q).unwrap();
    // SAFETY: deref checked bounds and alignment of a writable object.
    #[allow(unsafe_code)]
    unsafe {
        address.write(0xABCD)
    };
    let mut raw = [0u8; 8];
    h.read_at(a, 8, &mut raw).unwrap();
    assert_eq!(u64::from_le_bytes(raw), 0xABCD);
    assert!(matches!(h.deref(PPtr::<u64>::new(a.0, 60, 0)), Err(HeapError::OutOfBounds { .. })));
    assert!(matches!(h.deref(PPtr::<u64>::new(a.0, 4, 0)), Err(HeapError::BadPointer { .. })));
    assert!(matches!(h.deref(PPtr::<u64>::NULL), Err(HeapError::BadPointer { .. })));
    assert!(matches!(h.deref(PPtr::<u64>::new(a.0, 8, 3)), Err(HeapError::Stale { .. })));
    h.free(a).unwrap();
    assert!(matches!(h.deref(q), Err(HeapError::NotFound { .. })));
}

#[test]
fn heaps_are_separate_and_non_heaps_refused() {
    let sim = SimStorage::new(8);
    let store = sim_store(&sim);
    let one = Heap::open(&store, "/one", Credentials::root()).unwrap();
    let two = Heap::open(&store, "two", Credentials::root()).unwrap();
    let a = one.alloc(1).unwrap();
    assert!(matches!(two.get(a), Err(HeapError::NotFound { .. })));
    assert!(matches!(Heap::open(&store, "/one/objects", Credentials::root()), Err(HeapError::NotAHeap { .. })));
    assert!(matches!(Heap::open(&store, "/", Credentials::root()), Err(HeapError::NotAHeap { .. })));
    assert!(matches!(Heap::open(&store, "/missing/h", Credentials::root()), Err(HeapError::NotFound { .. })));
    // Reopening finds the same heap.
    let again = Heap::open(&store, "/one", Credentials::root()).unwrap();
    assert_eq!(again.root_id(), one.root_id());
    assert_eq!(again.get(a).unwrap(), a);
}

#[test]
fn read_only_users_attach_read_only() {
    let sim = SimStorage::new(9);
    let store = sim_store(&sim);
    let owner = Heap::open(&store, "/shared", Credentials::user(1000, 1000)).unwrap_err();
    assert!(matches!(owner, HeapError::PermissionDenied { .. }), "a user cannot create a heap in root's /");
    let admin = Heap::open(&store, "/shared", Credentials::root()).unwrap();
    let a = admin.alloc(8).unwrap();
    admin.write_at(a, 0, b"by root!").unwrap();
    // The simulation's mappings are copies: the bytes reach the file at sync.
    admin.sync().unwrap();
    let reader = Heap::open(&store, "/shared", Credentials::user(1000, 1000)).unwrap();
    assert!(!reader.is_writable(a).unwrap());
    let mut buf = [0u8; 8];
    reader.read_at(a, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"by root!");
    assert!(matches!(reader.write_at(a, 0, b"x"), Err(HeapError::PermissionDenied { .. })));
    assert!(matches!(reader.alloc(1), Err(HeapError::PermissionDenied { .. })));
    assert!(matches!(reader.free(a), Err(HeapError::PermissionDenied { .. })));
    assert!(matches!(reader.grow(a, 100), Err(HeapError::PermissionDenied { .. })));
}

#[test]
fn copy_is_one_object_with_the_same_bytes_and_type() {
    let (_sim, _store, h) = sim_heap(10);
    let t = h.alloc_type(&[0]).unwrap();
    let a = h.alloc(30).unwrap();
    let b = h.alloc(5).unwrap();
    h.write_at(a, 0, &PPtr::<()>::new(b.0, 0, 0).to_bytes()).unwrap();
    h.write_at(a, 24, b"suffix").unwrap();
    h.attach_type(a, t).unwrap();
    let c = h.copy(a).unwrap();
    assert_ne!(c, a);
    let (mut x, mut y) = ([0u8; 30], [0u8; 30]);
    h.read_at(a, 0, &mut x).unwrap();
    h.read_at(c, 0, &mut y).unwrap();
    assert_eq!(x, y, "a copy keeps pointers as they are");
    assert_eq!(h.type_of(c).unwrap(), Some(t));
}

#[test]
fn sync_and_clone_of_many_objects_fit_the_log() {
    // The test store's log segments are 64 KiB: 1,500 objects' durable
    // sizes or 200 copies do not fit one record.
    let (sim, store, h) = sim_heap(11);
    let t = h.alloc_type(&[0]).unwrap();
    let mut chain = Vec::new();
    for _ in 0..200 {
        chain.push(h.alloc(32).unwrap());
    }
    for pair in chain.windows(2) {
        h.write_at(pair[0], 0, &PPtr::<()>::new(pair[1].0, 0, 0).to_bytes()).unwrap();
        h.attach_type(pair[0], t).unwrap();
    }
    for _ in 0..1300 {
        h.alloc(8).unwrap();
    }
    h.sync().unwrap();
    let before = store.list_heap_files().unwrap().0.len();
    let copy = h.clone(chain[0]).unwrap();
    assert_eq!(store.list_heap_files().unwrap().0.len(), before + 200);
    let mut raw = [0u8; 24];
    h.read_at(copy, 0, &mut raw).unwrap();
    assert!(!chain.iter().any(|o| o.0 == PPtr::<()>::from_bytes(&raw).object), "rewritten to a copy");
    h.sync().unwrap();
    drop(h);
    drop(store);
    let store = reopen_sim(&sim.crash_with(larder_io::sim::CrashMode::DropAllPending));
    assert_eq!(store.list_heap_files().unwrap().0.len(), before + 200);
    assert!(store.heap_objects().unwrap().iter().all(|(_, r)| r.durable_size > 0), "every durable size recorded");
}

#[test]
fn alloc_in_blocks_live_through_sync_and_go_stale_when_freed() {
    let (sim, store, h) = sim_heap(12);
    let a = h.alloc(100).unwrap();
    h.write_at(a, 0, b"user bytes").unwrap();
    let mut blocks = Vec::new();
    for i in 0..300u64 {
        let p = h.alloc_in(a, 16 + (i % 7) * 100, 8).unwrap();
        assert_ne!(p.generation, 0);
        let address = h.deref(p.cast::<u64>()).unwrap();
        // SAFETY: deref checked a live, aligned, in-bounds block.
        #[allow(unsafe_code)]
        unsafe {
            address.write(i * 1000 + 7)
        };
        blocks.push(p);
    }
    assert!(h.size(a).unwrap() > 100, "the arena grew the object");
    let freed = blocks.split_off(200);
    for p in &freed {
        h.free_in(*p).unwrap();
        assert!(matches!(h.free_in(*p), Err(HeapError::Stale { .. })), "double free");
        assert!(matches!(h.deref(*p), Err(HeapError::Stale { .. })));
    }
    // User bytes stay user bytes; a generation-0 pointer into a span is refused.
    let mut buf = [0u8; 10];
    h.read_at(a, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"user bytes");
    assert!(matches!(h.deref(blocks[0].cast::<u64>().with_generation(0)), Err(HeapError::Stale { .. })));
    assert!(matches!(h.alloc_in(a, 0, 8), Err(HeapError::InvalidArgument { .. })));
    assert!(matches!(h.alloc_in(a, 8, 3), Err(HeapError::InvalidArgument { .. })));
    h.sync().unwrap();
    // After the sync: one more block, never synced.
    let unsynced = h.alloc_in(a, 64, 8).unwrap();
    drop(h);
    drop(store);
    let store = reopen_sim(&sim.crash_with(larder_io::sim::CrashMode::DropAllPending));
    let h = heap(&store);
    for (i, p) in blocks.iter().enumerate() {
        let address = h.deref(p.cast::<u64>()).unwrap();
        // SAFETY: as above.
        #[allow(unsafe_code)]
        let value = unsafe { address.read() };
        assert_eq!(value, i as u64 * 1000 + 7, "block {i}");
    }
    for p in &freed {
        assert!(matches!(h.deref(*p), Err(HeapError::Stale { .. })));
    }
    assert!(matches!(h.deref(unsynced), Err(HeapError::Stale { .. }) | Err(HeapError::OutOfBounds { .. })));
    // A freed slot handed out again has a new generation: old pointers stay stale.
    let again = h.alloc_in(a, 16, 8).unwrap();
    assert!(freed.iter().all(|p| *p != again.cast()));
    for p in &freed {
        assert!(matches!(h.deref(*p), Err(HeapError::Stale { .. })));
    }
}

#[test]
fn check_counts_the_allocators_growth_before_sync() {
    let (_sim, store, h) = sim_heap(14);
    let a = h.alloc(64).unwrap();
    h.sync().unwrap();
    // Blocks past the committed 64 bytes: the object's size in the store
    // is committed at the next sync, the check must count them already.
    let blocks: Vec<PPtr<u8>> = (0..20).map(|_| h.alloc_in(a, 3000, 8).unwrap()).collect();
    assert_eq!(store.stat(a.0).unwrap().unwrap().size, 64, "the store's size waits for sync");
    let size = h.size(a).unwrap();
    h.close_object(a).unwrap();
    for p in &blocks {
        h.check(*p, 3000).unwrap();
    }
    let end = blocks.iter().map(|p| p.offset + 3000).max().unwrap();
    assert!(size >= end, "the object ({size} bytes) does not cover its blocks (end {end})");
    let past = PPtr::<u8>::new(a.0, size, 0);
    assert!(matches!(h.check(past, 1), Err(HeapError::OutOfBounds { .. })), "past the object");
    h.free_in(blocks[0]).unwrap();
    assert!(matches!(h.check(blocks[0], 1), Err(HeapError::Stale { .. })));
}

#[test]
fn grow_after_alloc_in_keeps_both() {
    let (sim, store, h) = sim_heap(13);
    let a = h.alloc(10).unwrap();
    let p = h.alloc_in(a, 100, 16).unwrap();
    h.write_at(a, p.offset, &[9u8; 100]).unwrap();
    let size = h.size(a).unwrap();
    assert!(matches!(h.grow(a, size - 1), Err(HeapError::InvalidArgument { .. })), "no shrinking into the arena");
    h.grow(a, size + 5000).unwrap();
    h.write_at(a, size, b"after the arena").unwrap();
    // No sync: the grow's transaction carried the allocator's records.
    store.sync().unwrap();
    drop(h);
    drop(store);
    let store = reopen_sim(&sim.crash_with(larder_io::sim::CrashMode::DropAllPending));
    let h = heap(&store);
    assert_eq!(h.size(a).unwrap(), size + 5000);
    h.deref(p).unwrap();
    let q = h.alloc_in(a, 100, 16).unwrap();
    assert!(q.offset + 100 <= size || q.offset >= size + 5000, "new blocks avoid the user's bytes");
}

#[test]
fn read_only_users_cannot_allocate_inside() {
    let sim = SimStorage::new(14);
    let store = sim_store(&sim);
    let admin = Heap::open(&store, "/h", Credentials::root()).unwrap();
    let a = admin.alloc(8).unwrap();
    let p = admin.alloc_in(a, 8, 8).unwrap();
    admin.sync().unwrap();
    let reader = Heap::open(&store, "/h", Credentials::user(5, 5)).unwrap();
    assert!(matches!(reader.alloc_in(a, 8, 8), Err(HeapError::PermissionDenied { .. })));
    assert!(matches!(reader.free_in(p), Err(HeapError::PermissionDenied { .. })));
    reader.deref(p).unwrap();
}

#[test]
fn handles_of_one_heap_share_mappings_and_allocators() {
    let sim = SimStorage::new(15);
    let store = sim_store(&sim);
    let one = Heap::open(&store, "/shared", Credentials::root()).unwrap();
    let two = Heap::open(&store, "/shared", Credentials::root()).unwrap();
    let a = one.alloc(32).unwrap();
    one.write_at(a, 0, b"seen by both").unwrap();
    let mut buf = [0u8; 12];
    two.read_at(a, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"seen by both", "one mapping per object, even on the simulation");
    let p = one.alloc_in(a, 100, 8).unwrap();
    let q = two.alloc_in(a, 100, 8).unwrap();
    assert!(p.offset + 100 <= q.offset || q.offset + 100 <= p.offset, "one allocator: blocks never overlap");
    two.free_in(p).unwrap();
    assert!(matches!(one.deref(p), Err(HeapError::Stale { .. })));
    // Closing one handle keeps the other's mappings.
    let base = two.pointer(a).unwrap();
    one.close().unwrap();
    assert_eq!(two.pointer(a).unwrap(), base);
    two.deref(q).unwrap();
}

#[test]
fn a_persistent_pointer_is_24_bytes_object_offset_generation() {
    assert_eq!(std::mem::size_of::<PPtr<u64>>(), 24);
    assert_eq!(std::mem::align_of::<PPtr<u64>>(), 8);
    assert_eq!(std::mem::offset_of!(PPtr<u8>, object), 0);
    assert_eq!(std::mem::offset_of!(PPtr<u8>, offset), 8);
    assert_eq!(std::mem::offset_of!(PPtr<u8>, generation), 16);
    let p = PPtr::<u8>::new(0x0102, 0x0304, 0x0506);
    let bytes = p.to_bytes();
    assert_eq!(&bytes[..2], &[0x02, 0x01]);
    assert_eq!(&bytes[8..10], &[0x04, 0x03]);
    assert_eq!(&bytes[16..18], &[0x06, 0x05]);
    assert_eq!(PPtr::<u8>::from_bytes(&bytes), p);
    assert!(PPtr::<u8>::NULL.is_null() && PPtr::<u8>::from_bytes(&[0; 24]).is_null());
    // In memory it is the same bytes (little-endian machines only).
    #[allow(unsafe_code)]
    // SAFETY: PPtr is repr(C) of three u64s: 24 initialised bytes.
    let raw: [u8; 24] = unsafe { std::mem::transmute(p) };
    assert_eq!(raw, bytes);
}

#[test]
fn a_copy_carries_its_blocks_and_their_generations() {
    let (sim, store, h) = sim_heap(16);
    let a = h.alloc(8).unwrap();
    let blocks: Vec<PPtr<u8>> = (0..50).map(|i| h.alloc_in(a, 40 + i * 90, 8).unwrap()).collect();
    for (i, p) in blocks.iter().enumerate() {
        h.write_at(a, p.offset, &[i as u8 + 1; 40]).unwrap();
    }
    h.free_in(blocks[7]).unwrap();
    let c = h.copy(a).unwrap();
    assert_eq!(h.size(c).unwrap(), h.size(a).unwrap());
    for (i, p) in blocks.iter().enumerate() {
        let q = PPtr::<u8>::new(c.0, p.offset, p.generation);
        if i == 7 {
            assert!(matches!(h.deref(q), Err(HeapError::Stale { .. })));
            continue;
        }
        h.deref(q).unwrap();
        let mut buf = [0u8; 40];
        h.read_at(c, p.offset, &mut buf).unwrap();
        assert_eq!(buf, [i as u8 + 1; 40]);
    }
    // The copy's allocator is its own: freeing there leaves the original's.
    h.free_in(PPtr::<u8>::new(c.0, blocks[0].offset, blocks[0].generation)).unwrap();
    h.deref(blocks[0]).unwrap();
    h.sync().unwrap();
    drop(h);
    drop(store);
    let store = reopen_sim(&sim.crash_with(larder_io::sim::CrashMode::DropAllPending));
    let h = heap(&store);
    h.deref(PPtr::<u8>::new(c.0, blocks[1].offset, blocks[1].generation)).unwrap();
    assert!(matches!(
        h.deref(PPtr::<u8>::new(c.0, blocks[0].offset, blocks[0].generation)),
        Err(HeapError::Stale { .. })
    ));
}

#[test]
fn open_existing_opens_a_heap_and_never_makes_one() {
    let sim = SimStorage::new(11);
    let store = sim_store(&sim);
    assert!(matches!(Heap::open_existing(&store, "/heap", Credentials::root()), Err(HeapError::NotFound { .. })));
    assert!(matches!(Heap::open_existing(&store, "/no/heap", Credentials::root()), Err(HeapError::NotFound { .. })));
    // The failed opens made nothing: the store's root is still empty.
    assert!(larder_namespace::list::lookup(
        &store,
        larder_object::ROOT_ID,
        &larder_object::meta::Name::new(b"heap").unwrap()
    )
    .unwrap()
    .is_none());
    let h = heap(&store);
    let a = h.alloc(8).unwrap();
    h.add_name(a, "there").unwrap();
    h.sync().unwrap();
    drop(h);
    let h = Heap::open_existing(&store, "/heap", Credentials::root()).unwrap();
    assert_eq!(h.get_by_name("there").unwrap(), a);
}

#[test]
fn a_free_keeps_the_files_of_earlier_frees_once_they_are_durable() {
    let (sim, store, h) = sim_heap(17);
    let (a, b) = (h.alloc(64).unwrap(), h.alloc(64).unwrap());
    h.write_at(b, 0, b"kept").unwrap();
    h.sync().unwrap();
    let files = |store: &std::sync::Arc<larder_object::Store>| store.list_heap_files().unwrap().0;
    h.free(a).unwrap();
    assert_eq!(files(&store), vec![a.0, b.0], "a free not yet durable keeps the file");
    store.sync().unwrap();
    h.free(b).unwrap();
    // The next free keeps the file of the one made durable since (whole:
    // it is small), renamed to the id of the object that will take it.
    let spares: Vec<u64> = files(&store).into_iter().filter(|&f| f != b.0).collect();
    assert_eq!(spares.len(), 1, "b's file and a spare");
    assert!(spares[0] > b.0, "a's file is named by a new id");
    assert!(store.heap_object(spares[0]).unwrap().is_none(), "no object has it yet");
    assert_eq!(store.open_heap_file(spares[0], false).unwrap().len().unwrap(), 64, "kept whole, for reuse");
    // No heap sync: b's free is lost in the crash (taken before the store
    // closes, which would write its log), a's stands.
    let after = sim.crash_with(larder_io::sim::CrashMode::DropAllPending);
    drop(h);
    drop(store);
    let store = reopen_sim(&after);
    let h = heap(&store);
    assert!(matches!(h.get(a), Err(HeapError::NotFound { .. })));
    let mut buf = [0u8; 4];
    h.read_at(b, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"kept", "a free lost in the crash leaves the object with its file");
    assert_eq!(files(&store), vec![b.0], "a removal lost in the crash is redone at open");
}

#[test]
fn a_type_fits_an_object_grown_by_its_allocator_before_the_sync() {
    let (_sim, _store, h) = sim_heap(61);
    let ty = h.alloc_type(&[0, 24, 48]).unwrap();
    let object = h.alloc(0).unwrap();
    // The block grows the object; its size is committed at the next sync.
    h.alloc_in(object, 1, 8).unwrap();
    assert!(h.size(object).unwrap() >= 72);
    h.attach_type(object, ty).unwrap();
    assert_eq!(h.type_of(object).unwrap(), Some(ty));
}
