//! The metadata cache: a small commit writes its onode and dentry values
//! through, so reading back what was just written is a hit, and the value
//! read is the latest (a later commit replaces it, a delete caches the
//! absence); an entry-count operand is folded into a cached directory
//! onode, and one on an uncached onode leaves the value to the index.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{creation, storage, DIR};
use larder_io::SimStorage;
use larder_object::meta::{DirDelta, Kind};
use larder_object::{Durability, Store};

/// The stat of `id` and whether it was a cache hit.
fn stat_hit(store: &Store, id: u64) -> (Option<u64>, bool) {
    let (hits, misses, _) = store.meta_cache_stats();
    let size = store.stat(id).unwrap().map(|o| o.size);
    let (h, m, _) = store.meta_cache_stats();
    assert_eq!(h + m, hits + misses + 1, "one cache lookup per stat");
    (size, h > hits)
}

#[test]
fn small_commits_write_through_and_stay_coherent() {
    let sim = SimStorage::new(9);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), common::deterministic()).unwrap();
    let id = common::create_named(&store, Kind::File, 0o644, 1, 2, Durability::Buffered).unwrap();
    assert_eq!(stat_hit(&store, id), (Some(0), true), "a new onode is cached by its commit");
    store.write(id, 0, b"hello", Durability::Buffered).unwrap();
    assert_eq!(stat_hit(&store, id), (Some(5), true), "the rewritten onode replaces the cached one");
    store.delete_object(id, Durability::Buffered).unwrap();
    assert_eq!(stat_hit(&store, id), (None, true), "a delete caches the absence");
}

#[test]
fn an_entry_count_operand_is_folded_into_the_cached_onode() {
    let sim = SimStorage::new(10);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), common::deterministic()).unwrap();
    let dir = common::create_named(&store, Kind::Directory, 0o755, 0, 0, Durability::Buffered).unwrap();
    let entries = |s: &Store| s.stat(dir).unwrap().unwrap().dir.unwrap().entries;
    assert_eq!(entries(&store), 0);
    // A transaction that only counts an entry writes a merge operand: with
    // the directory's onode cached, the cache applies it too.
    for n in 1..=3 {
        store
            .transact(&[dir], Durability::Buffered, |txn| txn.change_dir(dir, DirDelta { entries: 1, links: 0 }))
            .unwrap();
        let (hits, _, _) = store.meta_cache_stats();
        assert_eq!(entries(&store), n, "the operand is folded in");
        assert_eq!(store.meta_cache_stats().0, hits + 1, "the folded onode was served from the cache");
    }
    // After a reopen nothing is cached: the operand goes to the index
    // alone, and the read folds it there.
    store.close().unwrap();
    let store = Store::open(storage(&sim), Path::new(DIR), common::deterministic()).unwrap();
    store
        .transact(&[dir], Durability::Buffered, |txn| txn.change_dir(dir, DirDelta { entries: -2, links: 0 }))
        .unwrap();
    let (hits, _, _) = store.meta_cache_stats();
    assert_eq!(entries(&store), 1);
    assert_eq!(store.meta_cache_stats().0, hits, "an operand on an uncached onode leaves it to the index");
    assert_eq!(entries(&store), 1);
    assert_eq!(store.meta_cache_stats().0, hits + 1, "then it is cached");
}

/// Onodes fetched together (`Store::fetch_onodes`, one multi-get of the
/// index for the ones not cached) read as `Store::read_to_end_into` reads
/// each, in any order, repeats and absent objects included; the ones
/// loaded are not kept in the cache, the ones it held are answered from
/// it (marked used), and a fetched onode keeps the value it had when
/// fetched while later reads see later writes.
#[test]
fn onodes_fetched_together_read_as_one_by_one_and_stay_coherent() {
    let sim = SimStorage::new(12);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), common::deterministic()).unwrap();
    let value = |i: u64| -> Vec<u8> {
        // Small ones inline, every fifth one in extents.
        let len = if i.is_multiple_of(5) { 6000 } else { 10 + i as usize };
        (0..len).map(|b| (b as u64 * 7 + i) as u8).collect()
    };
    let ids: Vec<u64> = (0..40)
        .map(|i| {
            let id = common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Buffered).unwrap();
            store.write(id, 0, &value(i), Durability::Buffered).unwrap();
            id
        })
        .collect();
    // Out of the cache, so that the fetch reads the index: reopen.
    store.close().unwrap();
    let store = Store::open(storage(&sim), Path::new(DIR), common::deterministic()).unwrap();
    let absent = ids.iter().max().unwrap() + 1000;
    // Reversed, with a repeat and an object that never existed.
    let mut asked: Vec<u64> = ids.iter().rev().copied().collect();
    asked.push(ids[3]);
    asked.push(absent);
    let (_, misses_before, _) = store.meta_cache_stats();
    let fetched = store.fetch_onodes(&asked).unwrap();
    assert_eq!(fetched.len(), ids.len() + 1, "distinct objects");
    let (_, misses_after, _) = store.meta_cache_stats();
    assert_eq!(misses_after - misses_before, ids.len() as u64 + 1, "each onode missed the cache once");
    let mut out = b"stale".to_vec();
    for (i, &id) in ids.iter().enumerate() {
        assert!(fetched.holds(id));
        assert!(store.read_to_end_fetched(&fetched, id, &mut out).unwrap());
        assert_eq!(out, value(i as u64), "object {i}");
    }
    for (i, &id) in ids.iter().enumerate() {
        let size = store.with_attributes_fetched(&fetched, id, |o| o.size).unwrap();
        assert_eq!(size, Some(value(i as u64).len() as u64), "object {i}'s size");
    }
    assert_eq!(store.with_attributes_fetched(&fetched, absent, |o| o.size).unwrap(), None);
    assert!(fetched.holds(absent));
    assert!(!store.read_to_end_fetched(&fetched, absent, &mut out).unwrap(), "an absent object reads as absent");
    // Not among them: read now.
    assert!(!fetched.holds(absent + 1));
    assert!(!store.read_to_end_fetched(&fetched, absent + 1, &mut out).unwrap());
    // The fetch did not keep what it loaded: a stat misses, and then
    // keeps it (a stat reads through the cache).
    assert!(!stat_hit(&store, ids[1]).1, "loaded onodes are not kept");
    assert!(stat_hit(&store, ids[1]).1, "the stat kept it");
    // A fetch of a cached onode is answered by the cache.
    let (hits_before, misses_before, _) = store.meta_cache_stats();
    let cached = store.fetch_onodes(&[ids[1], ids[2]]).unwrap();
    let (hits_after, misses_after, _) = store.meta_cache_stats();
    assert_eq!((hits_after - hits_before, misses_after - misses_before), (1, 1), "one hit, one miss");
    assert!(store.read_to_end_fetched(&cached, ids[2], &mut out).unwrap());
    assert_eq!(out, value(2));
    assert!(!stat_hit(&store, ids[2]).1, "the one loaded was not kept");
    // A write after the fetch: the cache shows it, the fetched onode is
    // the value as fetched.
    store.write(ids[1], 0, b"new bytes", Durability::Buffered).unwrap();
    assert_eq!(store.read_to_end(ids[1]).unwrap().unwrap()[..9], b"new bytes"[..]);
    assert!(store.read_to_end_fetched(&fetched, ids[1], &mut out).unwrap());
    assert_eq!(out, value(1), "the value when fetched");
    // Fetched again: the new value.
    let again = store.fetch_onodes(&[ids[1]]).unwrap();
    assert!(store.read_to_end_fetched(&again, ids[1], &mut out).unwrap());
    assert_eq!(out[..9], b"new bytes"[..]);
}
