//! Point reads over more runs than a read keeps on the stack (16) answer
//! as over few: 24 flushes with merging held back leave 24 level-0 runs,
//! each overwriting or deleting some keys of the ones before; every key's
//! get must agree with a model, and again once merges have run.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use larder_index::{Index, Options, WriteBatch};
use larder_io::{SimStorage, StorageRef};

#[test]
fn gets_over_more_runs_than_fit_the_stack_agree_with_a_model() {
    let sim = SimStorage::new(5);
    let storage: StorageRef = Arc::new(sim);
    let options = Options {
        memtable_size_bytes: 1 << 20,
        l0_slowdown_runs: 64,
        l0_stop_runs: 80,
        merge_fanout: 64,
        ..common::tiny_options(false)
    };
    let index = Index::open(storage, Path::new("/db/index"), options).unwrap();
    let key = |i: u32| format!("k{i:04}").into_bytes();
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
    for i in 0..420 {
        assert_eq!(index.get(&key(i)).unwrap().as_ref(), model.get(&key(i)), "key {i}");
    }
    index.compact_all().unwrap();
    for i in 0..420 {
        assert_eq!(index.get(&key(i)).unwrap().as_ref(), model.get(&key(i)), "key {i} after merging");
    }
}
