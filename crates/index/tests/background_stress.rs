//! Stress of the background flush and merge threads against concurrent
//! readers, on the simulated storage.
//!
//! How: one writer applies batches that each set two keys (`a/j` and `b/j`)
//! to the same value, so a reader that ever sees them differ has seen half
//! a batch. Readers take snapshots, scan both ways and get keys while the
//! memtable fills every few batches, flushes run on the background thread,
//! two merge threads merge runs, and another thread calls `flush` and
//! `compact_all`. Every read must see whole batches, values never go back
//! in time for one reader, and no operation may fail. Tiny memtables and a
//! fanout of 2 make flushes and merges overlap constantly.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::tiny_options;
use larder_index::{Index, WriteBatch};
use larder_io::{SimStorage, StorageRef};

const KEYS: u64 = 40;

fn value(v: u64) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

fn decode(v: &[u8]) -> u64 {
    u64::from_be_bytes(v.try_into().unwrap())
}

#[test]
fn readers_always_see_whole_batches_while_flushes_and_merges_run() {
    let sim = SimStorage::new(1);
    let storage: StorageRef = Arc::new(sim);
    let index = Arc::new(Index::open(storage, Path::new("/db/index"), tiny_options(true)).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_millis(1500);

    let writer = {
        let (index, stop) = (index.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                seq += 1;
                let j = seq % KEYS;
                let mut b = WriteBatch::new();
                b.put(format!("a/{j:03}"), value(seq)).put(format!("b/{j:03}"), value(seq));
                index.write(seq, &b).unwrap();
            }
            seq
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (index, stop) = (index.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut last_seen = vec![0u64; KEYS as usize];
                let mut checks = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let snap = index.snapshot();
                    let forward = r == 0;
                    let pairs: Vec<(Vec<u8>, Vec<u8>)> = snap.iter(forward).unwrap().map(|x| x.unwrap()).collect();
                    let (a, b): (Vec<_>, Vec<_>) = pairs.iter().partition(|(k, _)| k.starts_with(b"a/"));
                    assert_eq!(a.len(), b.len(), "a scan saw half a batch");
                    for ((ka, va), (kb, vb)) in a.iter().zip(b.iter()) {
                        assert_eq!(&ka[2..], &kb[2..]);
                        assert_eq!(va, vb, "snapshot at {} saw half a batch for {:?}", snap.seq(), ka);
                    }
                    for j in 0..KEYS {
                        let ga = snap.get(format!("a/{j:03}").as_bytes()).unwrap();
                        let gb = snap.get(format!("b/{j:03}").as_bytes()).unwrap();
                        assert_eq!(ga, gb, "gets in one snapshot disagree for {j}");
                        if let Some(v) = ga {
                            let v = decode(&v);
                            assert!(
                                v >= last_seen[j as usize],
                                "key {j} went back from {} to {v}",
                                last_seen[j as usize]
                            );
                            last_seen[j as usize] = v;
                        }
                    }
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    let flusher = {
        let (index, stop) = (index.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if n % 5 == 4 {
                    index.compact_all().unwrap();
                } else {
                    index.flush().unwrap();
                }
                n += 1;
            }
            n
        })
    };
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    let checks: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    let flushes = flusher.join().unwrap();
    index.flush().unwrap();
    let s = index.stats();
    assert!(written > 100 && checks > 10 && flushes > 2, "too little happened: {written} {checks} {flushes}");
    assert!(s.compactions > 0 && s.flushes > 10, "{s}");
    // The final state: each pair equal, at its last written value.
    for j in 0..KEYS {
        let a = index.get(format!("a/{j:03}").as_bytes()).unwrap().map(|v| decode(&v));
        let b = index.get(format!("b/{j:03}").as_bytes()).unwrap().map(|v| decode(&v));
        assert_eq!(a, b);
        let last = (1..=written).rev().find(|s| s % KEYS == j);
        assert_eq!(a, last, "key {j}");
    }
}
