//! Property test: random KV operations (puts of small and large values,
//! deletes, batches, scans, reopens) against a BTreeMap model, read by
//! `get`, `get_into` and from the cache alone by `get_cached_into`, including
//! the rule that a key cannot also be a directory level of another key;
//! scans with values, by range and partly consumed, against the model; and
//! scans with values racing overwrites and deletes.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use larder_io::SimStorage;
use larder_kv::{Durability, Kv, KvBatch, KvError};
use proptest::prelude::*;

/// Keys chosen to collide: levels shared, keys that are levels of others,
/// names sorting around '/'.
const KEYS: [&str; 12] = ["a", "a/b", "a/c", "a-b", "a.b/c", "b/x/y", "b/x/z", "b/x", "c", "a/b/d", "b!", "b/y"];

#[derive(Clone, Debug)]
enum Op {
    Put(usize, usize, u8),
    Delete(usize),
    Batch(Vec<(usize, Option<(usize, u8)>)>),
    Scan(usize),
    /// Reads of the keys between writes (caches filled, then written over).
    Read,
    Reopen,
}

fn value(len: usize, fill: u8) -> Vec<u8> {
    (0..len).map(|i| fill.wrapping_add(i as u8)).collect()
}

fn op() -> impl Strategy<Value = Op> {
    // Values up to 6 KiB: inline ones and ones in container extents.
    let len = prop_oneof![0usize..64, 1500usize..6000];
    prop_oneof![
        6 => (0..KEYS.len(), len.clone(), any::<u8>()).prop_map(|(k, l, f)| Op::Put(k, l, f)),
        3 => (0..KEYS.len()).prop_map(Op::Delete),
        2 => prop::collection::vec((0..KEYS.len(), prop::option::of((0usize..3000, any::<u8>()))), 1..5)
            .prop_map(Op::Batch),
        2 => (0..4usize).prop_map(Op::Scan),
        3 => Just(Op::Read),
        1 => Just(Op::Reopen),
    ]
}

type Model = BTreeMap<String, Vec<u8>>;

/// Whether `key` can be put: no key is a level of it, and it is a level of
/// no key.
fn conflicts(model: &Model, key: &str) -> bool {
    model.keys().any(|m| m.starts_with(&format!("{key}/")) || key.starts_with(&format!("{m}/")))
}

/// Every `(key, value)` a scan of `prefix` yields through
/// `Scan::next_value_into`, its buffers reused from item to item.
fn scan_values(kv: &Kv, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let mut scan = kv.scan_prefix("b", prefix.as_bytes()).unwrap();
    let (mut key, mut value) = (b"stale key".to_vec(), b"stale value".to_vec());
    let mut out = Vec::new();
    while let Some(object) = scan.next_value_into(&mut key, &mut value).unwrap() {
        let head = kv.head("b", &key).unwrap().unwrap();
        assert_eq!(head.object, object, "the object of {key:?}");
        out.push((String::from_utf8(key.clone()).unwrap(), value.clone()));
    }
    // Ended: it stays so.
    assert!(scan.next_value_into(&mut key, &mut value).unwrap().is_none());
    out
}

fn check_all(kv: &Kv, model: &Model) {
    check_reads(kv, model);
    let got: Vec<(String, u64)> = kv
        .scan_prefix("b", b"")
        .unwrap()
        .map(|e| e.map(|e| (String::from_utf8(e.key).unwrap(), e.size)).unwrap())
        .collect();
    let want: Vec<(String, u64)> = model.iter().map(|(k, v)| (k.clone(), v.len() as u64)).collect();
    assert_eq!(got, want, "keys and sizes");
    let pairs: Vec<(String, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(scan_values(kv, ""), pairs);
    let iterated: Vec<(String, Vec<u8>)> = kv
        .scan_prefix("b", b"")
        .unwrap()
        .with_values()
        .map(|e| e.map(|(k, v)| (String::from_utf8(k).unwrap(), v)).unwrap())
        .collect();
    assert_eq!(iterated, pairs);
}

/// Every key read by `get`, `get_into` and `get_cached_into`, against the
/// model.
fn check_reads(kv: &Kv, model: &Model) {
    // One buffer for every `get_into`, holding the last value read (or a
    // marker a miss must leave alone).
    let mut out = b"left alone".to_vec();
    for k in KEYS {
        assert_eq!(kv.get("b", k).unwrap().as_ref(), model.get(k), "key {k}");
        let before = out.clone();
        let found = kv.get_into("b", k, &mut out).unwrap();
        match model.get(k) {
            Some(v) => assert!(found && &out == v, "get_into of key {k}"),
            None => assert!(!found && out == before, "get_into of missing key {k} changed the buffer"),
        }
        // From the cache's path entries alone: no answer, or the model's.
        let before = out.clone();
        match (kv.get_cached_into("b", k, &mut out).unwrap(), model.get(k)) {
            (None, _) => assert_eq!(out, before, "get_cached_into of {k} without an answer changed the buffer"),
            (Some(found), Some(v)) => assert!(found && &out == v, "get_cached_into of key {k}"),
            (Some(found), None) => assert!(!found && out == before, "get_cached_into of missing key {k}"),
        }
    }
}

fn run(ops: Vec<Op>) {
    let sim = SimStorage::new(11);
    let mut kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    let mut model = Model::new();
    for op in ops {
        match op {
            Op::Put(k, len, fill) => {
                let (key, v) = (KEYS[k], value(len, fill));
                match kv.put("b", key, &v, Durability::Durable) {
                    Ok(()) => {
                        assert!(!conflicts(&model, key), "put {key} should conflict");
                        model.insert(key.to_string(), v);
                    }
                    Err(KvError::KeyConflict { .. }) => assert!(conflicts(&model, key), "put {key} refused"),
                    Err(e) => panic!("put {key}: {e}"),
                }
            }
            Op::Delete(k) => {
                let existed = kv.delete("b", KEYS[k], Durability::Durable).unwrap();
                assert_eq!(existed, model.remove(KEYS[k]).is_some(), "delete {}", KEYS[k]);
            }
            Op::Batch(items) => {
                let mut batch = KvBatch::new();
                let mut next = model.clone();
                let mut ok = true;
                for (k, v) in &items {
                    match v {
                        Some((len, fill)) => {
                            batch.put(KEYS[*k], value(*len, *fill));
                            ok &= !conflicts(&next, KEYS[*k]);
                            next.insert(KEYS[*k].to_string(), value(*len, *fill));
                        }
                        None => {
                            batch.delete(KEYS[*k]);
                            next.remove(KEYS[*k]);
                        }
                    }
                }
                match kv.write_batch("b", &batch, Durability::Buffered) {
                    Ok(()) => {
                        assert!(ok, "batch {items:?} should conflict");
                        model = next;
                    }
                    Err(KvError::KeyConflict { .. }) => assert!(!ok, "batch {items:?} refused"),
                    Err(e) => panic!("batch: {e}"),
                }
            }
            Op::Scan(p) => {
                let prefix = ["", "a", "a/", "b/x"][p];
                let got: Vec<String> = kv
                    .scan_prefix("b", prefix.as_bytes())
                    .unwrap()
                    .map(|e| String::from_utf8(e.unwrap().key).unwrap())
                    .collect();
                let want: Vec<String> = model.keys().filter(|k| k.starts_with(prefix)).cloned().collect();
                assert_eq!(got, want, "scan of {prefix:?}");
                let want: Vec<(String, Vec<u8>)> =
                    model.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(k, v)| (k.clone(), v.clone())).collect();
                assert_eq!(scan_values(&kv, prefix), want, "scan with values of {prefix:?}");
            }
            Op::Read => check_reads(&kv, &model),
            Op::Reopen => {
                kv.close().unwrap();
                kv = common::open(&sim);
            }
        }
    }
    check_all(&kv, &model);
    // Nothing leaks: after deleting everything, no extent is referenced
    // and only the bucket remains.
    for k in model.keys() {
        kv.delete("b", k, Durability::Durable).unwrap();
    }
    assert!(kv.store().used_extents().unwrap().is_empty());
    kv.delete_bucket("b").unwrap();
}

/// Key `i` of the paging tests: names in one level and in a nested one,
/// so that pages of several sizes end inside and around levels.
fn paged_key(i: usize) -> String {
    match i % 3 {
        0 => format!("k{i:04}"),
        1 => format!("k{:04}/v{i:04}", i - i % 7),
        _ => format!("k{i:04}.x"),
    }
}

/// Puts `keys` (index, length, fill) then deletes `deleted`, gets
/// `read_first` (their paths then cached, holding small values: a scan
/// reads those from there and fetches the onodes of the others), then
/// scans with values from `start` taking `take` items (a scan consumed
/// partly, as YCSB's short scans are), against the model.
fn run_paged(
    keys: Vec<(usize, usize, u8)>,
    deleted: Vec<usize>,
    read_first: Vec<usize>,
    (start, end): (usize, Option<usize>),
    take: usize,
) {
    let sim = SimStorage::new(5);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    let mut model = Model::new();
    // Batches of at most 100 puts: one of 400 keys can outgrow the test
    // log's largest record (its segments are small), which is not what
    // this test is about.
    for chunk in keys.chunks(100) {
        let mut batch = KvBatch::new();
        for &(i, len, fill) in chunk {
            let (k, v) = (paged_key(i), value(len, fill));
            // A key that is a level of another is refused: skip those.
            if conflicts(&model, &k) {
                continue;
            }
            batch.put(&k, v.clone());
            model.insert(k, v);
        }
        kv.write_batch("b", &batch, Durability::Buffered).unwrap();
    }
    for i in deleted {
        let k = paged_key(i);
        assert_eq!(kv.delete("b", &k, Durability::Buffered).unwrap(), model.remove(&k).is_some());
    }
    for i in read_first {
        let k = paged_key(i);
        assert_eq!(kv.get("b", &k).unwrap(), model.get(&k).cloned(), "get {k}");
    }
    let (start, end) = (paged_key(start), end.map(paged_key));
    let mut scan = kv.scan_range("b", start.as_bytes(), end.as_deref().map(str::as_bytes)).unwrap();
    let (mut key, mut got) = (Vec::new(), Vec::new());
    let mut value = Vec::new();
    while got.len() < take && scan.next_value_into(&mut key, &mut value).unwrap().is_some() {
        got.push((String::from_utf8(key.clone()).unwrap(), value.clone()));
    }
    let want: Vec<(String, Vec<u8>)> = model
        .range(start..)
        .take_while(|(k, _)| end.as_ref().is_none_or(|e| k < &e))
        .take(take)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(got, want);
}

/// A value of `key` at `version`: names both, and its length (inline or in
/// extents) follows the version, so a torn or misplaced value shows.
fn versioned(key: &str, version: u32) -> Vec<u8> {
    let len = if version.is_multiple_of(2) { 40 } else { 3000 + (version as usize % 5) * 700 };
    let mut v = format!("{key}@{version}:").into_bytes();
    let fill = key.bytes().fold(version as u8, u8::wrapping_add);
    while v.len() < len {
        v.push(fill.wrapping_add(v.len() as u8));
    }
    v
}

/// Checks `value` is `versioned(key, some version)`; returns the version.
fn check_versioned(key: &str, value: &[u8]) -> u32 {
    let text = String::from_utf8_lossy(value);
    let head = format!("{key}@");
    assert!(text.starts_with(&head), "value of {key} names another key: {:?}", &text[..text.len().min(40)]);
    let version: u32 = text[head.len()..].split(':').next().unwrap().parse().unwrap();
    assert_eq!(value, versioned(key, version), "value of {key} at version {version} is torn");
    version
}

#[test]
fn scans_with_values_racing_overwrites_and_deletes_see_whole_values_of_their_keys() {
    let sim = SimStorage::new(23);
    let kv = Arc::new(common::create(&sim));
    kv.create_bucket("b").unwrap();
    // Stable keys are overwritten but never deleted: every scan must yield
    // each exactly once. Churning keys come and go.
    let stable: Vec<String> = (0..60).map(|i| format!("s{i:03}")).collect();
    let churning: Vec<String> = (0..60).map(|i| format!("s{i:03}.c")).collect();
    for k in &stable {
        kv.put("b", k, &versioned(k, 0), Durability::Buffered).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Barrier::new(2));
    let writer = {
        let (kv, stop, started, stable, churning) =
            (kv.clone(), stop.clone(), started.clone(), stable.clone(), churning.clone());
        std::thread::spawn(move || {
            started.wait();
            for round in 1..=40u32 {
                for (i, k) in stable.iter().enumerate().filter(|(i, _)| (i + round as usize).is_multiple_of(3)) {
                    kv.put("b", k, &versioned(k, round + i as u32), Durability::Buffered).unwrap();
                }
                for (i, k) in churning.iter().enumerate() {
                    if (i + round as usize).is_multiple_of(2) {
                        kv.put("b", k, &versioned(k, round), Durability::Buffered).unwrap();
                    } else {
                        kv.delete("b", k, Durability::Buffered).unwrap();
                    }
                }
            }
            stop.store(true, Ordering::Release);
        })
    };
    started.wait();
    let mut scans = 0;
    let (mut key, mut value) = (Vec::new(), Vec::new());
    loop {
        // Read the flag first: the scan after the writer's end checks the
        // final state too.
        let last = stop.load(Ordering::Acquire);
        let mut scan = kv.scan_prefix("b", b"s").unwrap();
        let mut seen_stable = Vec::new();
        let mut previous: Option<Vec<u8>> = None;
        while scan.next_value_into(&mut key, &mut value).unwrap().is_some() {
            assert!(previous.as_ref().is_none_or(|p| p < &key), "keys out of order");
            previous = Some(key.clone());
            let k = String::from_utf8(key.clone()).unwrap();
            check_versioned(&k, &value);
            if !k.ends_with(".c") {
                seen_stable.push(k);
            }
        }
        assert_eq!(seen_stable, stable, "a key present throughout, once each");
        scans += 1;
        if last {
            break;
        }
    }
    writer.join().unwrap();
    assert!(scans >= 2);
    // After the race, the scan yields exactly the final values.
    for k in &stable {
        let final_value = kv.get("b", k).unwrap().unwrap();
        check_versioned(k, &final_value);
    }
    let want: Vec<(String, Vec<u8>)> = kv
        .scan_prefix("b", b"")
        .unwrap()
        .map(|e| e.unwrap().key)
        .map(|k| {
            let v = kv.get("b", &k).unwrap().unwrap();
            (String::from_utf8(k).unwrap(), v)
        })
        .collect();
    assert_eq!(scan_values(&kv, ""), want);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    #[test]
    fn kv_matches_a_model(ops in prop::collection::vec(op(), 1..40)) {
        run(ops);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    #[test]
    fn scans_with_values_page_through_many_keys(
        keys in prop::collection::vec(
            (0usize..600, prop_oneof![4 => 0usize..48, 1 => 2100usize..5000], any::<u8>()),
            1..400,
        ),
        deleted in prop::collection::vec(0usize..600, 0..60),
        read_first in prop::collection::vec(0usize..600, 0..200),
        start in 0usize..600,
        end in prop::option::of(0usize..600),
        take in prop_oneof![1usize..20, 1usize..700],
    ) {
        run_paged(keys, deleted, read_first, (start, end), take);
    }
}
