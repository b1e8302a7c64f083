//! Growing containers under the store: a new store's containers start at
//! `initial_container_bytes` and grow; a crash at any sync during growths
//! loses no durable extent and leaks nothing; a store made before
//! containers could grow (no superblock bit) keeps whole containers.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{assert_consistent, storage, DIR};
use larder_io::sim::CrashMode;
use larder_io::{OpenOptions, SimStorage, Storage};
use larder_object::meta::{fmap_key, ExtentMapEntry, MetaLimits};
use larder_object::superblock::{self, Superblock, INCOMPAT_GROWING_CONTAINERS, SLOT_BYTES, SUPERBLOCK_FILE};
use larder_object::{CreationOptions, Durability, Store, StoreOptions};

fn creation() -> CreationOptions {
    CreationOptions { container_bytes: 4 << 20, log_segment_bytes: 64 << 10, ..CreationOptions::default() }
}

fn options() -> StoreOptions {
    let mut o = common::deterministic();
    o.space.initial_container_bytes = 64 << 10;
    o
}

fn container_len(sim: &SimStorage, id: u64) -> u64 {
    let path = Path::new(DIR).join("data").join(larder_space::container_file_name(id));
    sim.open(&path, OpenOptions::READ).unwrap().len().unwrap()
}

/// Allocates `len` bytes for a new object, writes them and commits its
/// extent map durably.
fn commit_object(store: &Store, len: u64) -> Vec<larder_space::Extent> {
    let limits = MetaLimits::from_superblock(store.superblock());
    let id = store.allocate_object_id().unwrap();
    let extents = store.space().allocate(len).unwrap();
    store
        .transact(&[id], Durability::Durable, |t| {
            let mut offset = 0u64;
            for e in &extents {
                let data = vec![(id % 251) as u8; e.len as usize];
                larder_io::write_all_at(&*store.space().container_file(e.container).unwrap(), &data, e.offset)?;
                store.space().container_file(e.container).unwrap().sync_data()?;
                let entry = ExtentMapEntry::for_data(*e, &data, &limits)?;
                t.put(&fmap_key(id, offset), &entry.encode(&limits)?);
                offset += e.len;
            }
            Ok(())
        })
        .unwrap();
    extents
}

#[test]
fn a_new_stores_containers_start_small_and_grow() {
    let sim = SimStorage::new(1);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
    assert_ne!(store.superblock().incompat & INCOMPAT_GROWING_CONTAINERS, 0);
    commit_object(&store, 4096);
    assert_eq!(container_len(&sim, 0), 64 << 10);
    for _ in 0..8 {
        commit_object(&store, 96 << 10);
    }
    let len = container_len(&sim, 0);
    assert!((4096 + 8 * (96 << 10)..4 << 20).contains(&len), "container 0 is {len} bytes");
    assert_eq!(store.space().container_ids(), vec![0]);
    assert_consistent(&store, "grown");
}

#[test]
fn a_crash_at_any_sync_during_growth_loses_no_durable_extent() {
    let probe = SimStorage::new(2);
    let store = Store::create(storage(&probe), Path::new(DIR), creation(), options()).unwrap();
    let base = probe.counters().syncs;
    for _ in 0..6 {
        commit_object(&store, 80 << 10);
    }
    let syncs = probe.counters().syncs - base;
    drop(store);
    for k in 1..=syncs {
        let sim = SimStorage::new(2);
        let store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
        sim.crash_after_syncs(k);
        let mut durable = Vec::new();
        for _ in 0..6 {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| commit_object(&store, 80 << 10)));
            match r {
                Ok(extents) => durable.extend(extents),
                Err(_) => break,
            }
        }
        drop(store);
        let image = sim.crash_with(CrashMode::Random);
        let store = Store::open(storage(&image), Path::new(DIR), options()).unwrap();
        assert_consistent(&store, &format!("crash after sync {k}"));
        let used = store.used_extents().unwrap();
        for d in &durable {
            assert!(used.contains(d), "crash after sync {k}: durable extent {d} lost");
        }
        // The store grows on from where the crash left it.
        commit_object(&store, 80 << 10);
        assert_consistent(&store, &format!("crash after sync {k}, then a write"));
    }
}

#[test]
fn a_store_without_the_bit_keeps_whole_containers() {
    let sim = SimStorage::new(3);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
    store.close().unwrap();
    // As a build before growing containers made it.
    let loaded = superblock::load(&sim, Path::new(DIR)).unwrap();
    let mut old: Superblock = loaded.superblock.clone();
    old.incompat &= !INCOMPAT_GROWING_CONTAINERS;
    old.generation += 1;
    let f = sim.open(&Path::new(DIR).join(SUPERBLOCK_FILE), OpenOptions::WRITE).unwrap();
    larder_io::write_all_at(&*f, &old.encode(), ((loaded.slot + 1) % 2 * SLOT_BYTES) as u64).unwrap();
    f.sync_data().unwrap();
    let store = Store::open(storage(&sim), Path::new(DIR), options()).unwrap();
    commit_object(&store, 4096);
    assert_eq!(container_len(&sim, 0), 4 << 20, "an old store got a growing container");
}
