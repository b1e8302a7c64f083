//! A store with no free space left takes writes again once objects are
//! deleted: the deleted objects' space waits for the index to cover their
//! deletes before it is reused, and an allocation that finds no room
//! while such frees wait takes that checkpoint itself rather than
//! failing with NoSpace.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{create_named, creation, storage, DIR};
use larder_io::SimStorage;
use larder_object::meta::Kind;
use larder_object::{Durability, ObjectError, Store, StoreOptions};

/// One 1 MiB container at most, and no checkpointer thread: only the
/// allocation itself can make the frees reusable.
fn options() -> StoreOptions {
    let mut o = common::deterministic();
    o.space.max_containers = 1;
    o
}

fn is_no_space(e: &ObjectError) -> bool {
    matches!(e, ObjectError::Space(larder_space::SpaceError::NoSpace { .. }))
}

/// Writes 16 KiB pieces to a new object until the store is full; returns
/// the object and the bytes written.
fn fill(store: &Store, byte: u8) -> (u64, u64) {
    let filler = create_named(store, Kind::File, 0o644, 0, 0, Durability::Buffered).unwrap();
    let piece = vec![byte; 16 << 10];
    let mut at = 0u64;
    loop {
        match store.write(filler, at, &piece, Durability::Buffered) {
            Ok(()) => at += piece.len() as u64,
            Err(e) if is_no_space(&e) => return (filler, at),
            Err(e) => panic!("filling the store: {e}"),
        }
        assert!(at <= 2 << 20, "a 1 MiB container cannot hold {at} bytes");
    }
}

#[test]
fn a_full_store_reuses_the_space_of_deleted_objects_at_once() {
    let sim = SimStorage::new(11);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
    let (first, filled) = fill(&store, 1);
    assert!(filled >= 512 << 10, "only {filled} bytes fit in a 1 MiB container");
    store.delete_object(first, Durability::Buffered).unwrap();
    // As much again fits, in several rounds of fill and delete.
    for round in 2..5u8 {
        let (next, refilled) = fill(&store, round);
        assert!(refilled + (64 << 10) >= filled, "round {round}: {refilled} bytes fit after a delete of {filled}");
        let mut back = vec![0u8; refilled as usize];
        assert_eq!(store.read(next, 0, &mut back).unwrap(), refilled as usize);
        assert!(back.iter().all(|&b| b == round), "round {round}: the object reads back other bytes");
        store.delete_object(next, Durability::Buffered).unwrap();
    }
    store.sync().unwrap();
    let report = store.space().verify(store.used_extents().unwrap()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    common::assert_consistent(&store, "after the rounds");
}

#[test]
fn a_full_store_with_nothing_deleted_still_says_no_space() {
    let sim = SimStorage::new(12);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
    fill(&store, 1);
    let other = create_named(&store, Kind::File, 0o644, 0, 0, Durability::Buffered).unwrap();
    let e = store.write(other, 0, &[2u8; 16 << 10], Durability::Buffered).unwrap_err();
    assert!(is_no_space(&e), "{e}");
    assert_eq!(store.read(other, 0, &mut [0u8; 16]).unwrap(), 0, "the refused write changed the object");
}

/// With the checkpointer running, a store that goes quiet after a delete
/// of less than a quarter of its space still releases that space (and
/// can give it back to the file system) within seconds, not at the log's
/// next checkpoint.
#[test]
fn a_quiet_store_releases_the_space_of_a_small_delete() {
    let sim = SimStorage::new(13);
    let options = StoreOptions::default();
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options).unwrap();
    let object = create_named(&store, Kind::File, 0o644, 0, 0, Durability::Buffered).unwrap();
    store.write(object, 0, &[5u8; 64 << 10], Durability::Durable).unwrap();
    store.delete_object(object, Durability::Durable).unwrap();
    assert!(store.space().stats().bytes_pending_free > 0, "the delete freed nothing");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while store.space().stats().bytes_pending_free > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "30 s after the delete its space still waits for a checkpoint: {:?}",
            store.space().stats()
        );
        // The checkpointer's round is what is awaited; nothing signals it.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    store.close().unwrap();
}
