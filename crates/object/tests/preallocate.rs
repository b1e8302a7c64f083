//! Space set aside by `Transaction::preallocate` (what `fallocate` uses):
//! the range reads as zeros, survives a reopen, and writes inside it
//! succeed on a store that has no free space left, in place, while a
//! write outside it fails with NoSpace.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{create_named, creation, storage, DIR};
use larder_io::SimStorage;
use larder_object::meta::Kind;
use larder_object::{Durability, ObjectError, Store, StoreOptions};

/// One 1 MiB container at most: the store fills quickly.
fn options() -> StoreOptions {
    let mut o = common::deterministic();
    o.space.max_containers = 1;
    o
}

const RANGE: u64 = 256 << 10;

fn is_no_space(e: &ObjectError) -> bool {
    matches!(e, ObjectError::Space(larder_space::SpaceError::NoSpace { .. }))
}

/// Writes 16 KiB pieces to a new object until the store is full; returns
/// the bytes written.
fn fill(store: &Store) -> u64 {
    let filler = create_named(store, Kind::File, 0o644, 0, 0, Durability::Buffered).unwrap();
    let piece = vec![7u8; 16 << 10];
    let mut at = 0u64;
    loop {
        match store.write(filler, at, &piece, Durability::Buffered) {
            Ok(()) => at += piece.len() as u64,
            Err(e) if is_no_space(&e) => return at,
            Err(e) => panic!("filling the store: {e}"),
        }
        assert!(at <= 2 << 20, "a 1 MiB container cannot hold {at} bytes");
    }
}

fn read(store: &Store, object: u64, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0xeeu8; len];
    let n = store.read(object, offset, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn writes_inside_a_preallocated_range_succeed_on_a_full_store_after_a_reopen() {
    let sim = SimStorage::new(7);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
    let f = create_named(&store, Kind::File, 0o644, 0, 0, Durability::Buffered).unwrap();
    store.write(f, 0, b"head", Durability::Buffered).unwrap();
    store.truncate(f, RANGE, Durability::Buffered).unwrap();
    let (set_aside, _) = store.transact(&[f], Durability::Durable, |t| t.preallocate(f, 0, RANGE)).unwrap();
    assert_eq!(set_aside, RANGE - 4096, "the block holding \"head\" is mapped already");
    let before = read(&store, f, 0, RANGE as usize);
    assert_eq!(&before[..4], b"head");
    assert!(before[4..].iter().all(|&b| b == 0), "set-aside space reads as zeros");

    store.close().unwrap();
    let store = Store::open(storage(&sim), Path::new(DIR), options()).unwrap();
    let filled = fill(&store);
    assert!(filled < 1 << 20, "the set-aside space was not handed to another object ({filled} bytes fit)");
    // Outside the range: no space.
    let outside = store.write(f, RANGE, &[1u8; 8192], Durability::Buffered).unwrap_err();
    assert!(is_no_space(&outside), "{outside}");
    // Inside it: every write succeeds, whole blocks and partial ones.
    let mut expect = before;
    for (at, len) in [(4096u64, 8192usize), (20_000, 5000), (RANGE - 4096, 4096), (65_536, 65_536)] {
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8 + 1).collect();
        store.write(f, at, &data, Durability::Buffered).unwrap();
        expect[at as usize..at as usize + len].copy_from_slice(&data);
    }
    assert_eq!(read(&store, f, 0, RANGE as usize), expect);
    store.sync().unwrap();
    let report = store.space().verify(store.used_extents().unwrap()).unwrap();
    assert!(report.is_clean(), "{report:?}");

    store.close().unwrap();
    let store = Store::open(storage(&sim), Path::new(DIR), options()).unwrap();
    assert_eq!(read(&store, f, 0, RANGE as usize), expect, "the writes are durable");
    // What stays unwritten still reads as zeros, and is still set aside.
    assert!(expect[140_000..200_000].iter().all(|&b| b == 0));
    store.write(f, 139_264, &[9u8; 61_440], Durability::Durable).unwrap();
    let report = store.space().verify(store.used_extents().unwrap()).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn a_preallocated_object_frees_all_its_space_when_deleted_or_truncated() {
    let sim = SimStorage::new(8);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
    let f = create_named(&store, Kind::File, 0o644, 0, 0, Durability::Buffered).unwrap();
    store.truncate(f, RANGE, Durability::Buffered).unwrap();
    store.transact(&[f], Durability::Durable, |t| t.preallocate(f, 0, RANGE)).unwrap();
    store.write(f, 8192, &[3u8; 100], Durability::Buffered).unwrap();
    // Cut in the middle of a set-aside block, then drop the rest.
    store.truncate(f, 100_000, Durability::Durable).unwrap();
    assert!(read(&store, f, 0, 200_000).len() == 100_000);
    store.truncate(f, 0, Durability::Durable).unwrap();
    store.sync().unwrap();
    assert!(store.used_extents().unwrap().is_empty(), "no extent of the object is left");
    let report = store.space().verify(store.used_extents().unwrap()).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

/// Blocks `fallocate` gave an object are unwritten extents on the host
/// file system until the container is synced: after they are freed and
/// handed to another object, a write there changes the container's
/// metadata, so it must sync the container rather than be written back
/// behind the log's sync. Found by fs_crash_random seed 5010: the
/// written-back data stayed behind the pending allocation, the log
/// acknowledged its record, and a crash lost it.
#[test]
fn data_written_over_freed_preallocated_blocks_is_durable_with_its_commit() {
    let sim = SimStorage::new(11);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
    let f = create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
    store.truncate(f, RANGE, Durability::Buffered).unwrap();
    store.transact(&[f], Durability::Durable, |t| t.preallocate(f, 0, RANGE)).unwrap();
    // Everything else full, so the next write lands on those blocks once
    // they are freed and the index covers the free.
    fill(&store);
    store.truncate(f, 0, Durability::Durable).unwrap();
    store.checkpoint().unwrap();
    let g = create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
    let data: Vec<u8> = (0..RANGE).map(|i| (i % 251) as u8).collect();
    store.write(g, 0, &data, Durability::Durable).unwrap();
    drop(store);
    let image = sim.crash_with(larder_io::sim::CrashMode::DropAllPending);
    let store = Store::open(storage(&image), Path::new(DIR), options()).unwrap();
    assert_eq!(read(&store, g, 0, data.len()), data, "a durable write over freed preallocated blocks was lost");
}

/// A large preallocation may take space past a growing container's filled
/// part (`fallocate` extends the file, no zeros written): the record that
/// maps it must not be durable before the container is synced, or a crash
/// keeps the record and loses the file's new length, and the next open
/// finds an extent in use past the container's end.
#[test]
fn a_large_preallocation_past_a_containers_filled_part_survives_a_crash() {
    // Containers of 1 MiB that start at a quarter and grow.
    let mut options = common::deterministic();
    options.space.initial_container_bytes = 256 << 10;
    let sim = SimStorage::new(12);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options.clone()).unwrap();
    let len = 512u64 << 10;
    // The first makes the container (filled as it is made); the second
    // takes its space past the filled part.
    let mut files = Vec::new();
    for _ in 0..2 {
        let f = create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
        store.truncate(f, len, Durability::Buffered).unwrap();
        store.transact(&[f], Durability::Durable, |t| t.preallocate(f, 0, len)).unwrap();
        files.push(f);
    }
    let unfilled = store.space().stats().unfilled_allocations;
    assert!(unfilled >= 1, "the preallocation did not take unwritten space past the filled part");
    store.checkpoint().unwrap();
    drop(store);
    let image = sim.crash_with(larder_io::sim::CrashMode::DropAllPending);
    let store = Store::open(storage(&image), Path::new(DIR), options).unwrap();
    for f in files {
        assert_eq!(read(&store, f, 0, len as usize), vec![0u8; len as usize], "a preallocated range reads as zeros");
    }
}
