//! Many threads on one store through the KV API: writers on keys of their
//! own under directory levels they all share (so one writer's delete
//! prunes a level while another creates a key in it), readers checking
//! that every value they get is whole and belongs to the key asked for.
//! Afterwards every writer's keys hold exactly what it last wrote, before
//! and after a reopen, and fsck is clean.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use larder_io::SimStorage;
use larder_kv::{Durability, Kv, KvBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const WRITERS: usize = 4;
const READERS: usize = 2;
const OPS: usize = 3000;
/// Shared directory levels: every writer has keys under each.
const LEVELS: [&str; 4] = ["a/", "a/b/", "c/", ""];

fn key(writer: usize, level: usize, k: usize) -> String {
    format!("{}w{writer}k{k}", LEVELS[level])
}

fn keys(writer: usize) -> Vec<String> {
    (0..LEVELS.len()).flat_map(|l| (0..3).map(move |k| key(writer, l, k))).collect()
}

/// A value that names its key and says how long it is, so a reader can
/// check it without knowing which write it came from.
fn value(key: &str, seq: usize, len: usize) -> Vec<u8> {
    let mut v = format!("{key}|{seq}|{len}|").into_bytes();
    let fill = (seq as u8).wrapping_mul(31) | 1;
    v.resize(v.len() + len, fill);
    v
}

/// Checks a value read under `key`: its header names `key`, and its body
/// is whole.
fn check_value(key: &str, v: &[u8]) {
    let text = String::from_utf8_lossy(&v[..v.len().min(200)]).into_owned();
    let mut parts = text.splitn(4, '|');
    let (k, seq, len) = (parts.next(), parts.next(), parts.next());
    assert_eq!(k, Some(key), "a value under {key} names another key: {text:?}");
    let seq: usize = seq.and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("bad header {text:?}"));
    let len: usize = len.and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("bad header {text:?}"));
    let header = format!("{key}|{seq}|{len}|").len();
    assert_eq!(v.len(), header + len, "a torn value under {key}");
    let fill = (seq as u8).wrapping_mul(31) | 1;
    assert!(v[header..].iter().all(|&b| b == fill), "mixed bytes in the value under {key}");
}

fn draw_len(rng: &mut StdRng) -> usize {
    match rng.gen_range(0..4) {
        0 => rng.gen_range(0..100),
        1 => rng.gen_range(1000..3000),
        2 => rng.gen_range(4000..20_000),
        _ => rng.gen_range(20_000..70_000),
    }
}

/// One writer's run; returns what its keys should hold.
fn writer(kv: &Kv, w: usize) -> BTreeMap<String, Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(w as u64 + 1);
    let mine = keys(w);
    let mut model = BTreeMap::new();
    for seq in 0..OPS {
        let k = mine[rng.gen_range(0..mine.len())].clone();
        let durability = if rng.gen_bool(0.2) { Durability::Durable } else { Durability::Buffered };
        match rng.gen_range(0..10) {
            0..=4 => {
                let v = value(&k, seq, draw_len(&mut rng));
                kv.put("b", &k, &v, durability).unwrap();
                model.insert(k, v);
            }
            5..=7 => {
                let was = kv.delete("b", &k, durability).unwrap();
                assert_eq!(was, model.remove(&k).is_some(), "delete of {k} found the wrong thing");
            }
            8 => {
                let mut batch = KvBatch::new();
                for _ in 0..rng.gen_range(1..5) {
                    let k = mine[rng.gen_range(0..mine.len())].clone();
                    if rng.gen_bool(0.7) {
                        let v = value(&k, seq, draw_len(&mut rng));
                        batch.put(&k, v.clone());
                        model.insert(k, v);
                    } else {
                        batch.delete(&k);
                        model.remove(&k);
                    }
                }
                kv.write_batch("b", &batch, durability).unwrap();
            }
            _ => {
                let v = value(&k, seq, draw_len(&mut rng));
                let mut out = kv.writer("b", &k, durability).unwrap();
                for chunk in v.chunks(7000) {
                    std::io::Write::write_all(&mut out, chunk).unwrap();
                }
                out.finish().unwrap();
                model.insert(k, v);
            }
        }
    }
    model
}

fn reader(kv: &Kv, r: usize, stop: &AtomicBool) -> usize {
    let mut rng = StdRng::seed_from_u64(100 + r as u64);
    let mut seen = 0;
    while !stop.load(Ordering::Relaxed) {
        let k = key(rng.gen_range(0..WRITERS), rng.gen_range(0..LEVELS.len()), rng.gen_range(0..3));
        if let Some(v) = kv.get("b", &k).unwrap() {
            check_value(&k, &v);
            seen += 1;
        }
        if rng.gen_range(0..50) == 0 {
            // A scan sees only whole values of real keys.
            for e in kv.scan_prefix("b", b"a/").unwrap() {
                let e = e.unwrap();
                let k = String::from_utf8(e.key).unwrap();
                if let Some(v) = kv.get("b", &k).unwrap() {
                    check_value(&k, &v);
                }
            }
        }
    }
    seen
}

fn assert_holds(kv: &Kv, models: &[BTreeMap<String, Vec<u8>>], what: &str) {
    for (w, model) in models.iter().enumerate() {
        for k in keys(w) {
            let got = kv.get("b", &k).unwrap();
            assert_eq!(got.as_deref(), model.get(&k).map(|v| &v[..]), "{what}: key {k}");
        }
    }
    let all: Vec<String> =
        kv.scan_prefix("b", b"").unwrap().map(|e| String::from_utf8(e.unwrap().key).unwrap()).collect();
    let expected: Vec<String> = {
        let mut v: Vec<String> = models.iter().flat_map(|m| m.keys().cloned()).collect();
        v.sort();
        v
    };
    assert_eq!(all, expected, "{what}: the keys a scan finds");
    let report = larder_fsck::check(kv.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{what}: fsck: {report}");
}

#[test]
fn writers_sharing_levels_and_readers_see_only_whole_values() {
    let sim = SimStorage::new(7);
    let mut o = common::options();
    o.store.background_checkpoints = true;
    o.store.index.background_threads = true;
    o.store.log.buffered_sync_interval = Some(std::time::Duration::from_millis(2));
    let kv = Kv::create_with(Arc::new(sim.clone()), std::path::Path::new(common::DIR), o.clone()).unwrap();
    kv.create_bucket("b").unwrap();
    let stop = AtomicBool::new(false);
    let (models, seen) = std::thread::scope(|s| {
        let (kv, stop) = (&kv, &stop);
        let readers: Vec<_> = (0..READERS).map(|r| s.spawn(move || reader(kv, r, stop))).collect();
        let writers: Vec<_> = (0..WRITERS).map(|w| s.spawn(move || writer(kv, w))).collect();
        let models: Vec<_> = writers.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        let seen: usize = readers.into_iter().map(|h| h.join().unwrap()).sum();
        (models, seen)
    });
    assert!(seen > 0, "the readers found no values");
    assert_holds(&kv, &models, "after the run");
    kv.close().unwrap();
    let kv = Kv::open_with(Arc::new(sim), std::path::Path::new(common::DIR), o).unwrap();
    assert_holds(&kv, &models, "after a reopen");
}

/// Writers putting and deleting the same few keys: a put of a name another
/// writer created or deleted since the put's plan must see that change
/// under its lock on the name (the name's absence is checked there once,
/// and the create relies on it). Afterwards each key holds some writer's
/// whole value or nothing, there is one object per key, and fsck (which
/// counts every object's names) is clean.
#[test]
fn writers_racing_on_the_same_names_leave_one_object_each() {
    const NAMES: usize = 3;
    let sim = SimStorage::new(11);
    let kv = Kv::create_with(Arc::new(sim.clone()), std::path::Path::new(common::DIR), common::options()).unwrap();
    kv.create_bucket("b").unwrap();
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let kv = &kv;
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(w as u64);
                for seq in 0..OPS / 4 {
                    let k = format!("same/{}", rng.gen_range(0..NAMES));
                    if rng.gen_range(0..4) == 0 {
                        kv.delete("b", &k, Durability::Buffered).unwrap();
                    } else {
                        kv.put("b", &k, &value(&k, seq, draw_len(&mut rng)), Durability::Buffered).unwrap();
                    }
                }
            });
        }
    });
    let mut listed = std::collections::BTreeSet::new();
    for k in 0..NAMES {
        let k = format!("same/{k}");
        if let Some(v) = kv.get("b", &k).unwrap() {
            check_value(&k, &v);
        }
    }
    for entry in kv.scan_prefix("b", b"").unwrap() {
        let key = String::from_utf8(entry.unwrap().key).unwrap();
        assert!(listed.insert(key.clone()), "key {key} listed twice");
    }
    assert!(listed.len() <= NAMES, "{listed:?}");
    let report = larder_fsck::check(kv.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "fsck: {report}");
}
