//! A full file system through the KV API, on the simulated storage with a
//! byte capacity: puts fill it up to the store's reserve and then get
//! ENOSPC; deletes and bucket removal still succeed and their space is
//! written again; nothing acknowledged is lost; fsck is clean.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use larder_io::{SimStorage, Storage};
use larder_kv::{Durability, Kv, KvOptions};
use larder_object::CreationOptions;

const CAPACITY: u64 = 32 << 20;
const VALUE: usize = 64 << 10;

/// Containers up to 8 MiB starting at 256 KiB, 256 KiB log segments, a log
/// that holds at most 1 MiB queued.
fn options() -> KvOptions {
    let mut o = common::options();
    o.creation = CreationOptions { container_bytes: 8 << 20, log_segment_bytes: 256 << 10, ..o.creation };
    o.store.space.initial_container_bytes = 256 << 10;
    o.store.log.max_pending_bytes = 1 << 20;
    o
}

fn value(i: u32) -> Vec<u8> {
    let mut v = vec![(i % 251) as u8; VALUE];
    v[..4].copy_from_slice(&i.to_le_bytes());
    v
}

/// Puts 64 KiB values from `next` on until one is refused for want of
/// space; returns the keys stored.
fn fill(kv: &Kv, model: &mut BTreeMap<String, Vec<u8>>, next: &mut u32) -> u32 {
    let mut stored = 0;
    loop {
        let key = format!("k{:05}", *next);
        match kv.put("b", &key, &value(*next), Durability::Durable) {
            Ok(()) => {
                model.insert(key, value(*next));
                stored += 1;
                *next += 1;
            }
            Err(e) => {
                assert!(e.is_no_space(), "a put failed for another reason than space: {e}");
                // A refused put changed nothing.
                assert_eq!(kv.get("b", &key).unwrap(), None);
                return stored;
            }
        }
        assert!(stored < 10_000, "the capacity never ran out");
    }
}

fn check(kv: &Kv, model: &BTreeMap<String, Vec<u8>>) {
    assert_eq!(common::bucket_state(kv, "b").len(), model.len());
    for (k, v) in model {
        assert_eq!(kv.get("b", k).unwrap().as_ref(), Some(v), "{k} lost or changed");
    }
}

#[test]
fn a_full_file_system_refuses_puts_and_still_deletes() {
    let sim = SimStorage::new(1);
    sim.set_capacity(CAPACITY);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let kv = Kv::create_with(storage.clone(), Path::new(common::DIR), options()).unwrap();
    kv.create_bucket("b").unwrap();
    kv.create_bucket("small").unwrap();
    for i in 0..50 {
        kv.put("small", format!("s{i}"), &[7u8; 100], Durability::Durable).unwrap();
    }
    let mut model = BTreeMap::new();
    let mut next = 0;
    let first = fill(&kv, &mut model, &mut next);
    let available = sim.available_bytes(Path::new("/")).unwrap();
    let reserve = larder_object::store::reserve::RESERVE_LOG_SEGMENTS * (256 << 10)
        + larder_object::store::reserve::RESERVE_METADATA_BYTES;
    // Full up to the reserve (and one growth of rounding), no further.
    assert!(available >= reserve, "the store ate its reserve: {available} left");
    let data = u64::from(first) * VALUE as u64;
    assert!(data + reserve + (2 << 20) >= CAPACITY - (1 << 20), "stored {data} bytes of {CAPACITY} ({available} left)");
    eprintln!("filled {data} bytes of data, {} of the capacity in use", CAPACITY - available);
    // Deletes, and removing a bucket with its keys, succeed on the full
    // file system.
    for i in (0..next).step_by(2) {
        assert!(kv.delete("b", format!("k{i:05}"), Durability::Durable).unwrap());
        model.remove(&format!("k{i:05}"));
    }
    for i in 0..50 {
        kv.delete("small", format!("s{i}"), Durability::Durable).unwrap();
    }
    kv.delete_bucket("small").unwrap();
    check(&kv, &model);
    // Once the deletes are durable in the index their space is reused:
    // puts go on, about as many as were deleted.
    kv.store().checkpoint().unwrap();
    // On a file system at the reserve, the freed space is punched back to
    // it (what the checkpointer thread does as it goes).
    let punched = kv.store().space().punch_some(std::time::Instant::now()).unwrap();
    let returned = sim.available_bytes(Path::new("/")).unwrap() - available;
    eprintln!("punched {punched} bytes; the file system got {returned} back");
    assert!(returned >= u64::from(first / 2) * VALUE as u64, "deletes gave back only {returned} bytes");
    let second = fill(&kv, &mut model, &mut next);
    assert!(second + 2 >= first / 2, "after deleting {} values only {second} fit again", first / 2);
    check(&kv, &model);
    kv.close().unwrap();
    // Reopened on the full file system: everything acknowledged is there.
    let kv = Kv::open_with(storage, Path::new(common::DIR), options()).unwrap();
    check(&kv, &model);
    let report = larder_fsck::check(kv.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn small_values_stop_at_the_reserve_so_deletes_still_flush() {
    let sim = SimStorage::new(2);
    let capacity = 12 << 20;
    sim.set_capacity(capacity);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let kv = Kv::create_with(storage.clone(), Path::new(common::DIR), options()).unwrap();
    kv.create_bucket("b").unwrap();
    // 1 KiB values live inline, in the log and the index: no container.
    let mut stored = 0u32;
    let refused = loop {
        match kv.put("b", format!("s{stored:06}"), &[stored as u8; 1024], Durability::Durable) {
            Ok(()) => stored += 1,
            Err(e) => break e,
        }
        if stored.is_multiple_of(256) {
            // Index flushes as a busy store's checkpointer makes them.
            kv.store().checkpoint().unwrap();
        }
        assert!(stored < 100_000, "the capacity never ran out");
    };
    assert!(refused.is_no_space(), "{refused}");
    assert_eq!(kv.store().space().stats().containers, 0, "small values went to a container");
    let available = sim.available_bytes(Path::new("/")).unwrap();
    assert!(available > 0, "the file system filled up: nothing left for deletes");
    eprintln!("{stored} small values stored; {available} bytes left");
    // Every delete succeeds, and the index flushes them.
    for i in 0..stored {
        assert!(kv.delete("b", format!("s{i:06}"), Durability::Durable).unwrap());
    }
    kv.store().checkpoint().unwrap();
    assert_eq!(kv.scan_prefix("b", b"").unwrap().count(), 0);
    kv.close().unwrap();
    let kv = Kv::open_with(storage, Path::new(common::DIR), options()).unwrap();
    assert_eq!(kv.scan_prefix("b", b"").unwrap().count(), 0);
    let report = larder_fsck::check(kv.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report:?}");
}
