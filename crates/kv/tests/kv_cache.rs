//! The metadata cache stays coherent under concurrent writes: readers of a
//! key never see its value go backwards, and once the writer is done every
//! reader sees its last value (a stale cached onode would keep an old one).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use larder_io::SimStorage;
use larder_kv::Durability;

#[test]
fn readers_never_see_a_value_go_back() {
    let sim = SimStorage::new(1);
    let kv = Arc::new(common::create(&sim));
    kv.create_bucket("b").unwrap();
    kv.put("b", "k/v", &0u64.to_le_bytes(), Durability::Durable).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    // The highest value any reader has seen: the writer waits for readers
    // to see each value, so the cache is filled with every one in turn.
    let seen = Arc::new(AtomicU64::new(0));
    const WRITES: u64 = 200;
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (kv, done, seen) = (kv.clone(), done.clone(), seen.clone());
            std::thread::spawn(move || {
                let mut last = 0u64;
                let mut cached = Vec::new();
                while !done.load(Ordering::Acquire) {
                    // From the caches alone when they can answer (as the
                    // Python bindings read), else the full read.
                    let v = match kv.get_cached_into("b", "k/v", &mut cached).unwrap() {
                        Some(found) => {
                            assert!(found, "a key never deleted read as absent");
                            cached.clone()
                        }
                        None => kv.get("b", "k/v").unwrap().unwrap(),
                    };
                    let n = u64::from_le_bytes(v[..8].try_into().unwrap());
                    assert!(n >= last, "went back from {last} to {n}");
                    last = n;
                    seen.fetch_max(n, Ordering::AcqRel);
                }
                let v = kv.get("b", "k/v").unwrap().unwrap();
                u64::from_le_bytes(v[..8].try_into().unwrap())
            })
        })
        .collect();
    for i in 1..=WRITES {
        // Alternate durabilities and sizes (inline, then in extents).
        let mut value = i.to_le_bytes().to_vec();
        value.resize(if i % 3 == 0 { 6000 } else { 8 }, 0);
        let d = if i % 2 == 0 { Durability::Durable } else { Durability::Buffered };
        kv.put("b", "k/v", &value, d).unwrap();
        let mut spins = 0u64;
        while seen.load(Ordering::Acquire) < i {
            spins += 1;
            assert!(spins < 2_000_000, "no reader ever saw value {i}");
            std::thread::yield_now();
        }
    }
    done.store(true, Ordering::Release);
    for r in readers {
        assert_eq!(r.join().unwrap(), WRITES);
    }
    let (hits, _, _) = kv.store().meta_cache_stats();
    assert!(hits > 0, "the cache was never used");
}

/// Keys of every length around the cache's inline key limit (38 bytes),
/// sharing long prefixes, read through both the path and metadata caches,
/// then overwritten: each read returns its own key's latest value, inline
/// (up to 4 KiB) or not.
#[test]
fn keys_short_and_long_read_their_own_latest_values() {
    let sim = SimStorage::new(2);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    let keys: Vec<String> = (1..=60).map(|n| format!("{}{n:02}", "k".repeat(n))).collect();
    let value = |key: &str, round: u8| -> Vec<u8> {
        let len = [0, 17, 4096, 4097, 9000][key.len() % 5];
        (0..len).map(|i| (i as u8) ^ round ^ key.len() as u8).collect()
    };
    let mut out = Vec::new();
    for round in 0..3u8 {
        for k in &keys {
            kv.put("b", k, &value(k, round), Durability::Buffered).unwrap();
        }
        // Twice: the second pass is answered by the caches.
        for _ in 0..2 {
            for k in &keys {
                assert!(kv.get_into("b", k, &mut out).unwrap(), "{k}");
                assert!(out == value(k, round), "key of {} bytes, round {round}", k.len());
                assert_eq!(kv.get("b", k).unwrap(), Some(value(k, round)));
            }
        }
    }
    assert!(!kv.get_into("b", "absent", &mut out).unwrap());
}

#[test]
fn cache_only_reads_answer_from_memory_or_not_at_all() {
    let sim = SimStorage::new(2);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    let mut out = Vec::new();
    // Nothing read yet: the path is not cached, so no answer.
    kv.put("b", "k", b"one", Durability::Durable).unwrap();
    assert_eq!(kv.get_cached_into("b", "k", &mut out).unwrap(), None);
    // A full read caches the path and the onode: then the cache answers.
    assert_eq!(kv.get("b", "k").unwrap().as_deref(), Some(&b"one"[..]));
    assert_eq!(kv.get_cached_into("b", "k", &mut out).unwrap(), Some(true));
    assert_eq!(out, b"one");
    // An overwrite is never answered with the old bytes.
    kv.put("b", "k", b"two", Durability::Buffered).unwrap();
    match kv.get_cached_into("b", "k", &mut out).unwrap() {
        None => {}
        Some(found) => assert!(found && out == b"two", "stale answer {out:?}"),
    }
    assert_eq!(kv.get("b", "k").unwrap().as_deref(), Some(&b"two"[..]));
    assert_eq!(kv.get_cached_into("b", "k", &mut out).unwrap(), Some(true));
    assert_eq!(out, b"two");
    // A value in extents needs the disk: no answer, `out` left alone.
    kv.put("b", "big", &vec![7u8; 6000], Durability::Durable).unwrap();
    assert_eq!(kv.get("b", "big").unwrap().map(|v| v.len()), Some(6000));
    assert_eq!(kv.get_cached_into("b", "big", &mut out).unwrap(), None);
    assert_eq!(out, b"two");
    // A delete: absent, once the cache knows it.
    assert!(kv.delete("b", "k", Durability::Durable).unwrap());
    assert_ne!(kv.get_cached_into("b", "k", &mut out).unwrap(), Some(true));
    assert_eq!(kv.get("b", "k").unwrap(), None);
    assert_eq!(kv.get_cached_into("b", "k", &mut out).unwrap(), Some(false));
    // A missing bucket is never answered from the cache as a value.
    assert_ne!(kv.get_cached_into("nope", "k", &mut out).unwrap(), Some(true));
}

/// Many keys, a writer rewriting them in turn (and creating and deleting
/// others, which moves the namespace epoch), readers reading them at
/// random from the cache's path entries when they answer: no key's value
/// ever goes back, and at the end every answer is the last value written.
#[test]
fn readers_of_many_keys_never_see_one_go_back() {
    const KEYS: usize = 16;
    const ROUNDS: u64 = 60;
    let sim = SimStorage::new(5);
    let kv = Arc::new(common::create(&sim));
    kv.create_bucket("b").unwrap();
    let name = |k: usize| format!("d{}/key{k}", k % 3);
    for k in 0..KEYS {
        kv.put("b", name(k), &0u64.to_le_bytes(), Durability::Buffered).unwrap();
    }
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3u64)
        .map(|seed| {
            let (kv, done) = (kv.clone(), done.clone());
            std::thread::spawn(move || {
                let mut last = [0u64; KEYS];
                let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut out = Vec::new();
                let mut answered = 0u64;
                while !done.load(Ordering::Acquire) {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let k = (state % KEYS as u64) as usize;
                    let v = match kv.get_cached_into("b", name(k), &mut out).unwrap() {
                        Some(found) => {
                            assert!(found, "key {k} never deleted read as absent");
                            answered += 1;
                            out.clone()
                        }
                        None => kv.get("b", name(k)).unwrap().unwrap(),
                    };
                    let n = u64::from_le_bytes(v[..8].try_into().unwrap());
                    assert!(n >= last[k], "key {k} went back from {} to {n}", last[k]);
                    last[k] = n;
                }
                answered
            })
        })
        .collect();
    for round in 1..=ROUNDS {
        for k in 0..KEYS {
            let mut value = round.to_le_bytes().to_vec();
            value.resize(if (round + k as u64).is_multiple_of(7) { 6000 } else { 16 }, 0);
            kv.put("b", name(k), &value, Durability::Buffered).unwrap();
        }
        // A create and a delete elsewhere: every path entry is retired.
        kv.put("b", format!("other/{round}"), b"x", Durability::Buffered).unwrap();
        assert!(kv.delete("b", format!("other/{round}"), Durability::Buffered).unwrap());
    }
    done.store(true, Ordering::Release);
    let answered: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    let mut out = Vec::new();
    for k in 0..KEYS {
        let v = kv.get("b", name(k)).unwrap().unwrap();
        assert_eq!(u64::from_le_bytes(v[..8].try_into().unwrap()), ROUNDS, "key {k}");
    }
    // Every key's entry now holds its value; rewritten once more (no
    // dentry changes, so the entries stay), none may answer the old one.
    for k in 0..KEYS {
        kv.put("b", name(k), &(ROUNDS + 1).to_le_bytes(), Durability::Buffered).unwrap();
    }
    for k in 0..KEYS {
        let newest = (ROUNDS + 1).to_le_bytes();
        if let Some(found) = kv.get_cached_into("b", name(k), &mut out).unwrap() {
            assert!(found && out == newest, "key {k}: the cache answered {out:?}");
        }
        assert_eq!(kv.get("b", name(k)).unwrap().as_deref(), Some(&newest[..]), "key {k}");
        assert_eq!(kv.get_cached_into("b", name(k), &mut out).unwrap(), Some(true), "key {k}: read, then cached");
        assert_eq!(out, newest);
    }
    assert!(answered > 0, "the path entries never answered");
}

/// A put of a key a get just read takes the object's onode from the key's
/// path entry: whatever happened to the object since (puts of other sizes,
/// inline or in extents, another get), the value, its size and the object
/// are those of the last put, before and after a reopen.
#[test]
fn puts_after_gets_replace_the_whole_value() {
    let sim = SimStorage::new(2);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    kv.put("b", "k", b"first value", Durability::Buffered).unwrap();
    let object = kv.head("b", "k").unwrap().unwrap().object;
    // Shorter, longer, in extents (above the 2 KiB inline limit), back
    // inline, empty: each after a get that fills the path entry.
    let sizes = [3usize, 900, 5000, 40, 0, 2048, 17];
    let mut last = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        let value: Vec<u8> = (0..size).map(|b| (b as u8) ^ (i as u8 * 37 + 1)).collect();
        assert!(kv.get("b", "k").unwrap().is_some());
        kv.put("b", "k", &value, Durability::Buffered).unwrap();
        assert_eq!(kv.get("b", "k").unwrap().as_deref(), Some(&value[..]), "size {size}");
        let head = kv.head("b", "k").unwrap().unwrap();
        assert_eq!((head.object, head.size), (object, size as u64), "replaced in place");
        last = value;
    }
    // A second key's puts leave this one alone.
    kv.put("b", "other", b"x", Durability::Buffered).unwrap();
    assert_eq!(kv.get("b", "k").unwrap().as_deref(), Some(&last[..]));
    kv.close().unwrap();
    let kv = common::open(&sim);
    assert_eq!(kv.get("b", "k").unwrap().as_deref(), Some(&last[..]));
    assert_eq!(kv.get("b", "other").unwrap().as_deref(), Some(&b"x"[..]));
}

/// A cached key's path is retired only by a write of a dentry it was
/// derived from: creates of other keys (in its bucket, under its level,
/// in another bucket) leave it answered from the cache alone, while a key
/// read as absent, then created (itself, or its missing level first), is
/// found, and a deleted key reads as absent.
#[test]
fn only_the_names_a_key_was_found_through_retire_its_path() {
    let sim = SimStorage::new(3);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    kv.create_bucket("c").unwrap();
    kv.put("b", "k", b"top", Durability::Buffered).unwrap();
    kv.put("b", "d/k", b"under", Durability::Buffered).unwrap();
    let mut out = Vec::new();
    assert!(kv.get_into("b", "k", &mut out).unwrap());
    assert!(kv.get_into("b", "d/k", &mut out).unwrap());
    assert!(!kv.get_into("b", "new", &mut out).unwrap());
    assert!(!kv.get_into("b", "e/new", &mut out).unwrap());
    for i in 0..8 {
        kv.put("b", format!("other{i}"), b"x", Durability::Buffered).unwrap();
        kv.put("b", format!("d/other{i}"), b"x", Durability::Buffered).unwrap();
        kv.put("c", format!("k{i}"), b"x", Durability::Buffered).unwrap();
    }
    let mut cached = Vec::new();
    assert_eq!(kv.get_cached_into("b", "k", &mut cached).unwrap(), Some(true), "a create elsewhere retired b/k");
    assert_eq!(cached, b"top");
    assert_eq!(kv.get_cached_into("b", "d/k", &mut cached).unwrap(), Some(true), "a create elsewhere retired b/d/k");
    assert_eq!(cached, b"under");
    // The absent keys' paths are retired by their creation.
    kv.put("b", "new", b"made", Durability::Buffered).unwrap();
    kv.put("b", "e/new", b"made under", Durability::Buffered).unwrap();
    assert_eq!(kv.get("b", "new").unwrap().as_deref(), Some(&b"made"[..]));
    assert_eq!(kv.get("b", "e/new").unwrap().as_deref(), Some(&b"made under"[..]));
    // And a cached key's by its delete (and the level's, emptied).
    assert!(kv.delete("b", "k", Durability::Buffered).unwrap());
    assert_eq!(kv.get("b", "k").unwrap(), None);
    assert!(!kv.get_cached_into("b", "k", &mut cached).unwrap().unwrap_or(false));
    for i in 0..8 {
        assert!(kv.delete("b", format!("d/other{i}"), Durability::Buffered).unwrap());
    }
    assert!(kv.delete("b", "d/k", Durability::Buffered).unwrap());
    assert_eq!(kv.get("b", "d/k").unwrap(), None);
    kv.put("b", "d", b"now a key", Durability::Buffered).unwrap();
    assert_eq!(kv.get("b", "d").unwrap().as_deref(), Some(&b"now a key"[..]));
    assert_eq!(kv.get("b", "d/k").unwrap(), None);
}
