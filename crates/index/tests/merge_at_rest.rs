//! Merges at rest: once writes stop, each level's runs are merged into one
//! run of that level (`Options::merge_at_rest`, `Index::merge_levels`),
//! and the index still shows every entry, deletion and range deletion.

#![allow(clippy::unwrap_used)]

mod common;

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{tiny_options, Model};
use larder_index::{Index, Options, WriteBatch};
use larder_io::{SimStorage, StorageRef};

/// Fanout 4, so flushes leave several runs in two levels.
fn options(background: bool) -> Options {
    Options { merge_fanout: 4, l0_slowdown_runs: 8, l0_stop_runs: 12, ..tiny_options(background) }
}

/// Batches of puts, deletions and range deletions over 300 keys, with the
/// model they leave.
fn write(index: &Index, batches: u64) -> Model {
    let mut model = Model::default();
    for seq in 1..=batches {
        let mut b = WriteBatch::new();
        for j in 0..8 {
            let k = format!("k{:03}", (seq * 37 + j * 101) % 300).into_bytes();
            if (seq + j) % 11 == 0 {
                model.delete(&k);
                b.delete(k);
            } else {
                let v = vec![(seq + j) as u8; 40];
                model.put(&k, &v);
                b.put(k, v);
            }
        }
        if seq % 50 == 0 {
            let (a, z) = (format!("k{:03}", seq % 300).into_bytes(), format!("k{:03}", seq % 300 + 9).into_bytes());
            model.delete_range(&a, &z);
            b.delete_range(a, z);
        }
        index.write(seq, &b).unwrap();
    }
    index.flush().unwrap();
    model
}

fn check(index: &Index, model: &Model) {
    let got: Vec<_> = index.iter(true).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(got, model.range(Bound::Unbounded, Bound::Unbounded, true));
    for i in 0..300 {
        let k = format!("k{i:03}").into_bytes();
        assert_eq!(index.get(&k).unwrap(), model.map.get(&k).cloned(), "key {i}");
    }
}

fn open(sim: &SimStorage, background: bool) -> Index {
    let storage: StorageRef = Arc::new(sim.clone());
    Index::open(storage, Path::new("/db/index"), options(background)).unwrap()
}

#[test]
fn merge_levels_leaves_one_run_per_level_and_every_entry() {
    let sim = SimStorage::new(3);
    let index = open(&sim, false);
    let model = write(&index, 600);
    let before = index.stats().runs_per_level;
    assert!(before.iter().any(|&n| n >= 2), "no level to merge: {before:?}");
    assert!(before.iter().filter(|&&n| n > 0).count() >= 2, "one level only: {before:?}");
    index.merge_levels().unwrap();
    let after = index.stats().runs_per_level;
    assert!(after.iter().all(|&n| n <= 1), "{after:?}");
    assert_eq!(after.iter().filter(|&&n| n > 0).count(), before.iter().filter(|&&n| n > 0).count());
    check(&index, &model);
    drop(index);
    check(&open(&sim, false), &model);
}

#[test]
fn the_mergers_merge_each_level_once_writes_stop() {
    let sim = SimStorage::new(4);
    let index = open(&sim, true);
    let model = write(&index, 600);
    // Polls the mergers' outcome; the deadline only bounds a failure.
    let deadline = Instant::now() + Duration::from_secs(60);
    while index.stats().runs_per_level.iter().any(|&n| n > 1) {
        assert!(Instant::now() < deadline, "levels not merged at rest: {:?}", index.stats().runs_per_level);
        std::thread::sleep(Duration::from_millis(5));
    }
    check(&index, &model);
    drop(index);
    check(&open(&sim, false), &model);
}
