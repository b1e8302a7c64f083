//! Bulk creation through the KV API (`Kv::create_many`): new keys get
//! their values at every level and size, keys already there or repeated
//! are returned untouched, nothing is left behind for them, and a crash
//! keeps whole commits.
#![allow(clippy::unwrap_used)]

mod common;

use larder_io::SimStorage;
use larder_kv::{Durability, KvError};

/// A value of `len` bytes that differs per key.
fn value(key: &str, len: usize) -> Vec<u8> {
    let seed = key.bytes().fold(7u8, |a, b| a.wrapping_mul(31).wrapping_add(b));
    (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
}

fn fsck_clean(kv: &larder_kv::Kv) -> larder_fsck::Report {
    let report = larder_fsck::check(kv.store(), &mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{report}");
    report
}

#[test]
fn new_keys_get_their_values_and_duplicates_stay_as_they_were() {
    let sim = SimStorage::new(11);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    kv.put("b", "a/old", b"kept", Durability::Durable).unwrap();
    kv.put("b", "lvl/x", b"x", Durability::Durable).unwrap();
    // Sizes around the inline limit (2 KiB here) and the block size.
    let sizes = [0, 1, 2047, 2048, 2049, 4096, 4097, 10_000, 70_000];
    let mut owned: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, len) in sizes.iter().enumerate() {
        for dir in ["", "a/", "a/deep/er/", "new/"] {
            let key = format!("{dir}k{i}");
            owned.push((key.clone(), value(&key, *len)));
        }
    }
    // Present already: a value, and a level of other keys; and a repeat.
    owned.push(("a/old".into(), b"replaced?".to_vec()));
    owned.push(("lvl".into(), b"a level".to_vec()));
    owned.push(("new/k3".into(), b"second".to_vec()));
    let items: Vec<(&[u8], &[u8])> = owned.iter().map(|(k, v)| (k.as_bytes(), v.as_slice())).collect();
    let done = kv.create_many("b", &items, Durability::Durable).unwrap();
    let dups: Vec<&[u8]> = done.duplicates.iter().map(|d| d.as_slice()).collect();
    assert_eq!(dups, [&b"a/old"[..], b"lvl", b"new/k3"]);
    assert_eq!(done.created.len(), sizes.len() * 4);
    for (key, v) in &owned[..sizes.len() * 4] {
        assert_eq!(kv.get("b", key).unwrap().as_ref(), Some(v), "{key}");
    }
    assert_eq!(kv.get("b", "a/old").unwrap().as_deref(), Some(&b"kept"[..]));
    assert_eq!(kv.get("b", "lvl/x").unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(kv.get("b", "new/k3").unwrap(), Some(value("new/k3", 2048)), "the first occurrence wins");
    let report = fsck_clean(&kv);
    // Root's bucket, a/old, lvl/x and their levels, the created keys and
    // the new levels (a/deep, a/deep/er, new): nothing for the duplicates.
    assert_eq!(report.counts.dentries, 1 + 4 + sizes.len() as u64 * 4 + 3);
    // All there after a reopen too.
    kv.close().unwrap();
    let kv = common::open(&sim.crash_with(larder_io::sim::CrashMode::DropAllPending));
    for (key, v) in &owned[..sizes.len() * 4] {
        assert_eq!(kv.get("b", key).unwrap().as_ref(), Some(v), "{key} after reopen");
    }
    fsck_clean(&kv);
}

#[test]
fn a_bad_key_or_a_key_under_a_value_fails_cleanly() {
    let sim = SimStorage::new(12);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    kv.put("b", "f", b"value", Durability::Durable).unwrap();
    let items: [(&[u8], &[u8]); 2] = [(b"ok", b"1"), (b"a//b", b"2")];
    assert!(matches!(kv.create_many("b", &items, Durability::Durable), Err(KvError::InvalidKey { .. })));
    assert_eq!(kv.get("b", "ok").unwrap(), None, "nothing written before the keys are checked");
    let items: [(&[u8], &[u8]); 1] = [(b"f/under", b"2")];
    assert!(matches!(kv.create_many("b", &items, Durability::Durable), Err(KvError::KeyConflict { .. })));
    assert!(matches!(kv.create_many("nope", &items, Durability::Durable), Err(KvError::NoSuchBucket { .. })));
    fsck_clean(&kv);
}

/// Keys `prefix{0,1,2}/f{i}` with values of up to 6 KiB (inline and not).
fn batch(prefix: &str) -> Vec<(String, Vec<u8>)> {
    (0..300).map(|i| (format!("{prefix}{}/f{i:03}", i % 3), value(prefix, i * 20))).collect()
}

fn refs(owned: &[(String, Vec<u8>)]) -> Vec<(&[u8], &[u8])> {
    owned.iter().map(|(k, v)| (k.as_bytes(), v.as_slice())).collect()
}

/// A store with `d*` created durably; then the machine crashes after `k`
/// writes of a buffered create of `e*` (never, if `k` is `None`).
fn crash_during_bulk_create(k: Option<u64>) -> (SimStorage, u64) {
    let sim = SimStorage::new(k.unwrap_or(99) + 1);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    kv.create_many("b", &refs(&batch("d")), Durability::Durable).unwrap();
    let before = sim.counters().writes;
    if let Some(k) = k {
        sim.crash_after_writes(k);
    }
    let acked = kv.create_many("b", &refs(&batch("e")), Durability::Durable).is_ok();
    if k.is_none() {
        assert!(acked);
    }
    (sim.crash_with(larder_io::sim::CrashMode::Random), sim.counters().writes - before)
}

#[test]
fn a_crash_keeps_the_durable_calls_and_a_prefix_of_the_one_under_way() {
    let (_, writes) = crash_during_bulk_create(None);
    assert!(writes > 3, "several commits: {writes} writes");
    let mut kept = std::collections::BTreeSet::new();
    for k in 0..=writes {
        let (image, _) = crash_during_bulk_create(Some(k));
        let kv = common::open(&image);
        for (key, v) in &batch("d") {
            assert_eq!(kv.get("b", key).unwrap().as_ref(), Some(v), "{key} was durable (crash at write {k})");
        }
        // Levels commit in order and each level's chunks in name order:
        // the keys there are a prefix of them sorted, each whole.
        let mut sorted = batch("e");
        sorted.sort();
        let present: Vec<bool> = sorted
            .iter()
            .map(|(key, v)| kv.get("b", key).unwrap().inspect(|got| assert_eq!(got, v, "{key}")).is_some())
            .collect();
        assert!(present.windows(2).all(|w| w[0] || !w[1]), "crash at write {k}: not a prefix: {present:?}");
        kept.insert(present.iter().filter(|p| **p).count());
        fsck_clean(&kv);
    }
    assert!(kept.len() > 2, "crashes fell between commits: {kept:?}");
}

#[test]
fn a_large_batch_of_keys_all_there_already_creates_nothing() {
    let sim = SimStorage::new(14);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    // Enough keys in one level to be written as index runs.
    let n = larder_namespace::bulk::BULK_RUN_MIN + 10;
    let owned: Vec<(String, Vec<u8>)> = (0..n).map(|i| (format!("k{i:06}"), vec![i as u8; 8])).collect();
    let items = refs(&owned);
    let first = kv.create_many("b", &items, Durability::Durable).unwrap();
    assert_eq!((first.created.len(), first.duplicates.len()), (n, 0));
    let again = kv.create_many("b", &items, Durability::Durable).unwrap();
    assert_eq!((again.created.len(), again.duplicates.len()), (0, n));
    assert_eq!(kv.get("b", "k000007").unwrap(), Some(vec![7; 8]));
    fsck_clean(&kv);
}
