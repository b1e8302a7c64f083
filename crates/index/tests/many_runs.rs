//! Point reads over more runs than a read keeps on the stack (16) answer
//! as over few: 24 flushes with merging held back leave 24 level-0 runs,
//! each overwriting or deleting some keys of the ones before; every key's
//! get must agree with a model, and again once merges have run; and
//! gets on several threads over those runs, with room for few of them open
//! (every get pins the runs it reads while others open and evict runs),
//! agree with the model and finish; one reader alone evicts and reopens
//! runs (with several, a sweep keeps the runs others use, so how many are
//! evicted depends on the schedule).

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use larder_index::{Index, Options, WriteBatch};
use larder_io::{SimStorage, StorageRef};

fn key(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

/// An index of 24 level-0 runs (merging held back), each overwriting or
/// deleting some keys of the ones before, with `max_open_runs` runs held
/// open at most; and its model.
fn index_of_24_runs(max_open_runs: usize) -> (Index, BTreeMap<Vec<u8>, Vec<u8>>) {
    let sim = SimStorage::new(5);
    let storage: StorageRef = Arc::new(sim);
    let options = Options {
        memtable_size_bytes: 1 << 20,
        l0_slowdown_runs: 64,
        l0_stop_runs: 80,
        merge_fanout: 64,
        max_open_runs,
        ..common::tiny_options(false)
    };
    let index = Index::open(storage, Path::new("/db/index"), options).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut seq = 0;
    for flush in 0..24u32 {
        let mut batch = WriteBatch::new();
        for i in (0..400u32).filter(|i| i % 24 == flush || i % 5 == flush % 5) {
            if (i + flush) % 7 == 0 {
                batch.delete(key(i));
                model.remove(&key(i));
            } else {
                let v = format!("{i} in flush {flush}").into_bytes();
                batch.put(key(i), v.clone());
                model.insert(key(i), v);
            }
        }
        seq += 1;
        index.write(seq, &batch).unwrap();
        index.flush().unwrap();
    }
    assert!(index.stats().runs > 16, "{:?}", index.stats().runs_per_level);
    (index, model)
}

#[test]
fn gets_over_more_runs_than_fit_the_stack_agree_with_a_model() {
    let (index, model) = index_of_24_runs(4);
    for i in 0..420 {
        assert_eq!(index.get(&key(i)).unwrap().as_ref(), model.get(&key(i)), "key {i}");
    }
    index.compact_all().unwrap();
    for i in 0..420 {
        assert_eq!(index.get(&key(i)).unwrap().as_ref(), model.get(&key(i)), "key {i} after merging");
    }
}

#[test]
fn concurrent_gets_while_runs_are_opened_and_evicted_agree_and_finish() {
    let (index, model) = index_of_24_runs(3);
    let index = Arc::new(index);
    let model = Arc::new(model);
    let opens_before = index.stats().run_opens;
    let (done, finished) = mpsc::channel();
    let readers: Vec<_> = (0..4u32)
        .map(|reader| {
            let (index, model, done) = (index.clone(), model.clone(), done.clone());
            std::thread::spawn(move || {
                for round in 0..6u32 {
                    for step in 0..420u32 {
                        // Each reader walks the keys in its own order, so the
                        // threads want different runs open at once.
                        let i = (step * (2 * reader + 1) + round * 37) % 420;
                        assert_eq!(index.get(&key(i)).unwrap().as_ref(), model.get(&key(i)), "key {i}");
                    }
                }
                done.send(()).unwrap();
            })
        })
        .collect();
    drop(done);
    for _ in 0..readers.len() {
        // A deadlock between readers, opens and evictions fails here
        // instead of hanging the suite; a reader that failed is reported
        // by its join.
        match finished.recv_timeout(Duration::from_secs(120)) {
            Ok(()) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("a reader neither finished nor failed in 120 s"),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    for reader in readers {
        reader.join().unwrap();
    }
    // Whether the readers' opens evicted runs depends on the schedule (a
    // sweep keeps a run another reader used or pins meanwhile); that they
    // opened runs does not.
    assert!(index.stats().run_opens > opens_before, "the readers opened no run");
}

#[test]
fn one_reader_over_more_runs_than_stay_open_evicts_and_reopens_them() {
    let (index, model) = index_of_24_runs(3);
    let opens_before = index.stats().run_opens;
    // Every key's newest version is in one of the five newest runs, which
    // take turns in the three places.
    for round in 0..2u32 {
        for i in 0..420u32 {
            assert_eq!(index.get(&key(i)).unwrap().as_ref(), model.get(&key(i)), "key {i}, round {round}");
        }
    }
    let opens = index.stats().run_opens - opens_before;
    assert!(opens > 24, "runs were not evicted and reopened: {opens} opens for 840 gets");
}
