//! A large write's data is written back before the log's sync instead of
//! synced on its own, but only over written blocks: data landing in
//! punched space needs its container's sync (its blocks are allocated at
//! writeback, which is metadata), and survives a crash that drops every
//! unsynced write.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{creation, deterministic, storage, DIR};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_object::meta::Kind;
use larder_object::{Durability, Store, StoreOptions};

fn options() -> StoreOptions {
    let mut o = deterministic();
    o.space.punch_free_threshold = 0.0;
    o.space.punch_min_bytes = 4096;
    o.space.punch_bytes_per_sec = 1 << 30;
    o
}

fn read_all(store: &Store, id: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    assert_eq!(store.read(id, 0, &mut buf).unwrap(), len);
    buf
}

#[test]
fn data_in_punched_space_is_synced_and_data_on_written_blocks_written_back() {
    punched_space_is_synced(false);
}

#[test]
fn holes_found_at_open_are_synced_too() {
    punched_space_is_synced(true);
}

/// Punches an object's space, optionally reopens (the holes are then found
/// in the container file), and writes a new object over that space.
fn punched_space_is_synced(reopen: bool) {
    let sim = SimStorage::new(5);
    let mut store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
    let a = common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
    store.write(a, 0, &[1u8; 65536], Durability::Durable).unwrap();
    let stats = store.log_stats();
    assert_eq!((stats.dependency_write_backs, stats.dependency_syncs), (1, 0), "fresh space is written zeros");
    store.delete_object(a, Durability::Durable).unwrap();
    // Once the index covers the delete, its space may be punched.
    store.checkpoint().unwrap();
    let punched = store.space().punch_some(Instant::now() + Duration::from_secs(3600)).unwrap();
    assert!(punched >= 65536, "punched {punched}");
    if reopen {
        store.close().unwrap();
        store = Store::open(storage(&sim), Path::new(DIR), options()).unwrap();
    }
    // A whole container's worth: its space includes the punched range.
    let len = creation().container_bytes as usize;
    let b = common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
    store.write(b, 0, &vec![2u8; len], Durability::Durable).unwrap();
    assert!(store.used_extents().unwrap().iter().any(|e| e.container == 0 && e.offset == 0));
    assert_eq!(store.log_stats().dependency_syncs, 1, "the punched space's container was synced");
    let image = sim.crash_with(CrashMode::DropAllPending);
    drop(store);
    let store = Store::open(storage(&image), Path::new(DIR), options()).unwrap();
    assert_eq!(read_all(&store, b, len), vec![2u8; len]);
}

#[test]
fn written_back_data_survives_a_crash_that_drops_every_unsynced_write() {
    let sim = SimStorage::new(6);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
    // Large enough to be copied in several chunks, each written back as
    // it is copied, with the checksums computed on another thread.
    let data: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
    let a = common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
    store.write(a, 0, &data, Durability::Durable).unwrap();
    assert_eq!(store.log_stats().dependency_write_backs, 1);
    let image = sim.crash_with(CrashMode::DropAllPending);
    drop(store);
    let store = Store::open(storage(&image), Path::new(DIR), options()).unwrap();
    assert_eq!(read_all(&store, a, data.len()), data);
}
