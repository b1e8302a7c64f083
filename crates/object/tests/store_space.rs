//! The store's free space is rebuilt from the extent map at open: extents
//! that committed extent-map entries reference stay allocated across
//! reopens and crashes, and space allocated by transactions that never
//! committed is free again afterwards (nothing leaks). `verify` agrees.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{assert_consistent, creation, storage, DIR};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_object::meta::{fmap_key, ExtentMapEntry, MetaLimits};
use larder_object::{Durability, Store, StoreOptions};

fn options() -> StoreOptions {
    common::deterministic()
}

/// Allocates `len` bytes for a new object and commits its extent-map
/// entries (data need not be written for this test: only the map counts).
fn commit_object(store: &Store, len: usize, durability: Durability) -> Vec<larder_space::Extent> {
    let limits = MetaLimits::from_superblock(store.superblock());
    let id = store.allocate_object_id().unwrap();
    let extents = store.space().allocate(len as u64).unwrap();
    store
        .transact(&[id], durability, |t| {
            let mut offset = 0u64;
            for e in &extents {
                let data = vec![0u8; e.len as usize];
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
fn committed_extents_survive_reopen_and_are_never_handed_out_again() {
    let sim = SimStorage::new(1);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
    let mut kept = Vec::new();
    for i in 0..10 {
        kept.extend(commit_object(&store, 4096 * (1 + i % 3), Durability::Durable));
    }
    assert_consistent(&store, "before reopen");
    store.close().unwrap();
    let store = Store::open(storage(&sim), Path::new(DIR), options()).unwrap();
    let used = store.used_extents().unwrap();
    assert_eq!(used.len(), kept.len());
    assert_consistent(&store, "after reopen");
    let fresh = store.space().allocate(64 << 10).unwrap();
    for f in &fresh {
        for k in &kept {
            let overlap = f.container == k.container && f.offset < k.end() && k.offset < f.end();
            assert!(!overlap, "{f} overlaps committed {k}");
        }
    }
}

#[test]
fn space_of_transactions_lost_in_a_crash_is_free_again() {
    for mode in [CrashMode::DropAllPending, CrashMode::Random, CrashMode::KeepAllPending] {
        let sim = SimStorage::new(2);
        sim.set_unordered_dir_ops(true);
        let store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
        let durable: Vec<_> = (0..5).flat_map(|_| commit_object(&store, 8192, Durability::Durable)).collect();
        // Allocated, then the machine dies before any record names them.
        let lost = store.space().allocate(256 << 10).unwrap();
        drop(store);
        let image = sim.crash_with(mode);
        let store = Store::open(storage(&image), Path::new(DIR), options()).unwrap();
        assert_consistent(&store, &format!("{mode:?}"));
        let used = store.used_extents().unwrap();
        for d in &durable {
            assert!(used.contains(d), "{mode:?}: durable extent {d} lost");
        }
        let stats = store.space().stats();
        assert_eq!(stats.bytes_allocated, used.iter().map(|e| e.len).sum::<u64>(), "{mode:?}: {stats:?}");
        assert!(lost.iter().all(|l| !used.contains(l)), "{mode:?}");
    }
}
