//! The KV API's behaviour on single calls: levels created and removed,
//! conflicts, refusals that change nothing, scans in whole-key order,
//! streaming, batches.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};

use larder_io::SimStorage;
use larder_kv::{Durability::Durable, KvBatch, KvError};
use larder_namespace::list;
use larder_object::ROOT_ID;

fn keys(kv: &larder_kv::Kv, bucket: &str, prefix: &[u8]) -> Vec<String> {
    kv.scan_prefix(bucket, prefix).unwrap().map(|e| String::from_utf8(e.unwrap().key).unwrap()).collect()
}

#[test]
fn put_get_delete_with_levels() {
    let sim = SimStorage::new(1);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    kv.put("b", "a/b/c", b"one", Durable).unwrap();
    kv.put("b", "a/x", b"two", Durable).unwrap();
    assert_eq!(kv.get("b", "a/b/c").unwrap().as_deref(), Some(&b"one"[..]));
    assert_eq!(kv.get("b", "a/b").unwrap(), None, "a level is not a key");
    kv.put("b", "a/b/c", b"three", Durable).unwrap();
    assert_eq!(kv.get("b", "a/b/c").unwrap().as_deref(), Some(&b"three"[..]));
    assert!(kv.delete("b", "a/b/c", Durable).unwrap());
    assert!(!kv.delete("b", "a/b/c", Durable).unwrap());
    // The emptied level a/b is gone, a (still holding x) stays.
    let bucket = list::lookup(kv.store(), ROOT_ID, &"b".try_into().unwrap()).unwrap().unwrap().child;
    let a = list::lookup(kv.store(), bucket, &"a".try_into().unwrap()).unwrap().unwrap().child;
    assert!(list::lookup(kv.store(), a, &"b".try_into().unwrap()).unwrap().is_none());
    assert_eq!(kv.store().stat(a).unwrap().unwrap().dir.unwrap().entries, 1);
    assert!(kv.delete("b", "a/x", Durable).unwrap());
    assert!(list::lookup(kv.store(), bucket, &"a".try_into().unwrap()).unwrap().is_none());
    assert_eq!(kv.store().stat(bucket).unwrap().unwrap().dir.unwrap().entries, 0);
    kv.delete_bucket("b").unwrap();
    assert!(matches!(kv.get("b", "k"), Err(KvError::NoSuchBucket { .. })));
}

#[test]
fn keys_and_levels_cannot_share_a_name() {
    let sim = SimStorage::new(2);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    kv.put("b", "a/b", b"x", Durable).unwrap();
    assert!(matches!(kv.put("b", "a", b"y", Durable), Err(KvError::KeyConflict { .. })));
    assert!(matches!(kv.put("b", "a/b/c", b"y", Durable), Err(KvError::KeyConflict { .. })));
    assert_eq!(keys(&kv, "b", b""), ["a/b"]);
}

#[test]
fn bad_keys_and_buckets_are_refused_and_change_nothing() {
    let sim = SimStorage::new(3);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    for bad in ["", "/a", "a/", "a//b", "a/../b", ".", "a\0b"] {
        assert!(matches!(kv.put("b", bad, b"v", Durable), Err(KvError::InvalidKey { .. })), "{bad:?}");
    }
    assert!(matches!(kv.create_bucket("a/b"), Err(KvError::InvalidBucket { .. })));
    assert!(matches!(kv.create_bucket("b"), Err(KvError::BucketExists { .. })));
    assert!(matches!(kv.put("nope", "k", b"v", Durable), Err(KvError::NoSuchBucket { .. })));
    assert!(keys(&kv, "b", b"").is_empty());
    assert_eq!(kv.buckets().unwrap(), vec![b"b".to_vec()]);
    kv.put("b", "k", b"v", Durable).unwrap();
    assert!(matches!(kv.delete_bucket("b"), Err(KvError::BucketNotEmpty { .. })));
}

#[test]
fn scans_return_whole_keys_in_byte_order() {
    let sim = SimStorage::new(4);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    // '-' (0x2d) and '.' (0x2e) sort below '/' (0x2f): a-b and a.b come
    // before every key under a/, though the level a sorts first by name.
    let mut all = ["a/z", "a-b", "a.b", "a/b/c", "a0", "b", "a!/x", "a!!", "ab/c"].map(String::from).to_vec();
    for k in &all {
        kv.put("b", k, k.as_bytes(), Durable).unwrap();
    }
    all.sort();
    assert_eq!(keys(&kv, "b", b""), all);
    let under_a: Vec<_> = all.iter().filter(|k| k.starts_with("a/")).cloned().collect();
    assert_eq!(keys(&kv, "b", b"a/"), under_a);
    let from: Vec<_> = all.iter().filter(|k| k.as_str() >= "a-c" && k.as_str() < "a0").cloned().collect();
    let got: Vec<_> =
        kv.scan_range("b", b"a-c", Some(b"a0")).unwrap().map(|e| String::from_utf8(e.unwrap().key).unwrap()).collect();
    assert_eq!(got, from);
    let got: Vec<_> =
        kv.scan_range("b", b"a/b/d", None).unwrap().map(|e| String::from_utf8(e.unwrap().key).unwrap()).collect();
    let want: Vec<_> = all.iter().filter(|k| k.as_str() >= "a/b/d").cloned().collect();
    assert_eq!(got, want);
}

/// A scan sized for the keys its caller means to read lists differently,
/// never returns anything else: from every start, for every expectation
/// (below, at and above what is there, and above the largest listing),
/// keys and values are those of the unsized scan.
#[test]
fn a_sized_scan_returns_what_an_unsized_one_does() {
    let sim = SimStorage::new(4);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    let mut all: Vec<String> = (0..300).map(|i| format!("k{:04}", i * 7 % 300)).collect();
    all.extend(["k0005a/in", "k0005a-x", "k01/a/b", "j", "l"].map(String::from));
    for k in &all {
        kv.put("b", k, k.to_uppercase().as_bytes(), Durable).unwrap();
    }
    let read = |scan: larder_kv::Scan, n: usize| -> Vec<(Vec<u8>, Vec<u8>)> {
        scan.with_values().take(n).map(Result::unwrap).collect()
    };
    for start in [&b""[..], b"k0005", b"k0005a/", b"k01", b"k0299", b"z"] {
        let whole = read(kv.scan_range("b", start, None).unwrap(), usize::MAX);
        for expect in [0, 1, 2, 16, 17, 100, 256, 1000] {
            for n in [1, expect.max(1), usize::MAX] {
                let sized = read(kv.scan_range("b", start, None).unwrap().expecting(expect), n);
                let want: Vec<_> = whole.iter().take(n).cloned().collect();
                assert_eq!(sized, want, "start {start:?}, expecting {expect}, reading {n}");
            }
        }
    }
}

#[test]
fn streams_write_and_read_large_values() {
    let sim = SimStorage::new(5);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    let value: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut w = kv.writer("b", "big/one", Durable).unwrap();
    for chunk in value.chunks(10_000) {
        w.write_all(chunk).unwrap();
    }
    assert_eq!(kv.get("b", "big/one").unwrap(), None, "not visible before finish");
    w.finish().unwrap();
    let mut r = kv.reader("b", "big/one").unwrap().unwrap();
    let mut back = Vec::new();
    r.read_to_end(&mut back).unwrap();
    assert_eq!(back, value);
    // A dropped writer leaves nothing, and replacing frees the old value.
    let mut w = kv.writer("b", "big/two", Durable).unwrap();
    w.write_all(&value).unwrap();
    drop(w);
    assert_eq!(kv.get("b", "big/two").unwrap(), None);
    kv.put("b", "big/one", b"small now", Durable).unwrap();
    assert_eq!(kv.get("b", "big/one").unwrap().as_deref(), Some(&b"small now"[..]));
    assert!(kv.store().used_extents().unwrap().is_empty(), "space of replaced and dropped values is freed");
}

#[test]
fn a_shared_writer_outlives_the_borrow_it_was_made_from() {
    let sim = SimStorage::new(15);
    let kv = std::sync::Arc::new(common::create(&sim));
    kv.create_bucket("b").unwrap();
    let orphans = |kv: &larder_kv::Kv| {
        let prefix = larder_object::meta::map_prefix(larder_object::meta::Map::Orphans);
        kv.store().index().prefix(&prefix, true).unwrap().count()
    };
    // Kept in a structure that holds no borrow of `kv`.
    let mut writers: Vec<larder_kv::KvWriter<'static>> = vec![kv.shared_writer("b", "k", Durable).unwrap()];
    writers[0].write_all(b"hello, ").unwrap();
    writers[0].write_all(b"world").unwrap();
    assert_eq!(writers[0].position(), 12);
    assert_eq!(orphans(&kv), 1, "the unfinished value is an orphan");
    writers.remove(0).finish().unwrap();
    assert_eq!(kv.get("b", "k").unwrap().as_deref(), Some(&b"hello, world"[..]));
    let dropped = kv.shared_writer("b", "gone", Durable).unwrap();
    let object = dropped.object();
    drop(dropped);
    assert_eq!(kv.store().stat(object).unwrap(), None, "a dropped writer frees its object");
    assert_eq!(orphans(&kv), 0);
}

#[test]
fn a_writer_whose_finish_is_refused_frees_its_value() {
    let sim = SimStorage::new(16);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    kv.put("b", "a/b", b"under a", Durable).unwrap();
    let mut w = kv.writer("b", "a", Durable).unwrap();
    w.write_all(&[7; 5000]).unwrap();
    let object = w.object();
    assert!(matches!(w.finish(), Err(KvError::KeyConflict { .. })), "a is a level");
    assert_eq!(kv.store().stat(object).unwrap(), None, "the refused value's object is freed");
    let prefix = larder_object::meta::map_prefix(larder_object::meta::Map::Orphans);
    assert_eq!(kv.store().index().prefix(&prefix, true).unwrap().count(), 0, "no orphan left");
    kv.delete("b", "a/b", Durable).unwrap();
    assert!(kv.store().used_extents().unwrap().is_empty());
}

#[test]
fn keys_and_bucket_names_are_checked_without_a_store() {
    assert!(larder_kv::key::check_key(b"a/b").is_ok());
    assert!(matches!(larder_kv::key::check_key(b"a/../b"), Err(larder_kv::KvError::InvalidKey { .. })));
    assert!(larder_kv::key::check_bucket(b"b").is_ok());
    assert!(matches!(larder_kv::key::check_bucket(b"a/b"), Err(larder_kv::KvError::InvalidBucket { .. })));
}

#[test]
fn batches_apply_all_or_nothing() {
    let sim = SimStorage::new(6);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    kv.put("b", "x", b"0", Durable).unwrap();
    let mut ok = KvBatch::new();
    ok.put("d/1", "one").put("d/2", "two").delete("x").put("d/1", "uno");
    kv.write_batch("b", &ok, Durable).unwrap();
    assert_eq!(keys(&kv, "b", b""), ["d/1", "d/2"]);
    assert_eq!(kv.get("b", "d/1").unwrap().as_deref(), Some(&b"uno"[..]));
    let mut bad = KvBatch::new();
    bad.put("e/1", "e").put("d/1/z", "conflicts with key d/1");
    assert!(matches!(kv.write_batch("b", &bad, Durable), Err(KvError::KeyConflict { .. })));
    assert_eq!(keys(&kv, "b", b""), ["d/1", "d/2"], "a failed batch writes nothing");
}

#[test]
fn a_batch_sees_levels_its_own_deletes_emptied_as_removed() {
    // The levels a/b are created and emptied inside one batch: as after
    // separate calls, they are gone, so a later put may use "a" as a key.
    let sim = SimStorage::new(7);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    kv.put("b", "k/l/m", b"0", Durable).unwrap();
    let mut batch = KvBatch::new();
    batch.put("a/b/d", "1").delete("a/b/d").put("a", "2");
    batch.delete("k/l/m").put("k", "3");
    kv.write_batch("b", &batch, Durable).unwrap();
    assert_eq!(keys(&kv, "b", b""), ["a", "k"]);
    assert_eq!(kv.get("b", "a").unwrap().as_deref(), Some(&b"2"[..]));
    let bucket = list::lookup(kv.store(), ROOT_ID, &"b".try_into().unwrap()).unwrap().unwrap().child;
    assert_eq!(kv.store().stat(bucket).unwrap().unwrap().dir.unwrap().entries, 2);
}

#[test]
fn values_survive_reopen() {
    let sim = SimStorage::new(7);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    kv.put("b", "p/q", &vec![7u8; 10_000], Durable).unwrap();
    kv.put("b", "s", b"small", Durable).unwrap();
    kv.close().unwrap();
    let kv = common::open(&sim);
    assert_eq!(kv.get("b", "p/q").unwrap(), Some(vec![7u8; 10_000]));
    assert_eq!(kv.get("b", "s").unwrap().as_deref(), Some(&b"small"[..]));
}
