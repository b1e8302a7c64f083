//! Property test of `Index::get_many` against a BTreeMap model, on an
//! index whose keys are spread over the memtable and several runs of many
//! small blocks: overwrites and deletes in newer sources over older
//! values, range tombstones over older runs, merges collapsing runs. Every
//! multi-get (keys sorted, unsorted, repeated, absent, beyond every run's
//! range) must equal the model and a point get of each key, on the
//! simulated storage (blocks through the block cache) and on real files
//! (blocks viewed in the mapping).

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{tiny_options, Model};
use larder_index::{Index, WriteBatch};
use larder_io::{RealStorage, SimStorage, StorageRef};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Write {
    Put(u16, u8),
    Delete(u16),
    DeleteRange(u16, u16),
}

#[derive(Clone, Debug)]
enum Step {
    /// Writes in one batch.
    Batch(Vec<Write>),
    Flush,
    CompactAll,
    /// A multi-get of these key numbers, in this order.
    GetMany(Vec<u16>),
}

/// Key numbers above the writes' range are never written.
const KEYS: u16 = 300;

fn key(n: u16) -> Vec<u8> {
    format!("key{n:05}").into_bytes()
}

/// A value whose length varies, so blocks hold different numbers of keys.
fn value(n: u16, version: u8) -> Vec<u8> {
    let mut v = format!("{n}:{version}:").into_bytes();
    v.resize(v.len() + usize::from(version % 40), b'.');
    v
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        8 => (0..KEYS, any::<u8>()).prop_map(|(k, v)| Write::Put(k, v)),
        3 => (0..KEYS).prop_map(Write::Delete),
        1 => (0..KEYS, 1..20u16).prop_map(|(k, len)| Write::DeleteRange(k, k + len)),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => prop::collection::vec(write(), 1..40).prop_map(Step::Batch),
        2 => Just(Step::Flush),
        1 => Just(Step::CompactAll),
        4 => prop::collection::vec(0..KEYS + 20, 0..80).prop_map(Step::GetMany),
    ]
}

fn check(index: &Index, model: &Model, numbers: &[u16]) {
    let keys: Vec<Vec<u8>> = numbers.iter().map(|&n| key(n)).collect();
    let expected: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.map.get(k).cloned()).collect();
    assert_eq!(index.get_many(&keys).unwrap(), expected, "in the order given: {numbers:?}");
    let point: Vec<Option<Vec<u8>>> = keys.iter().map(|k| index.get(k).unwrap()).collect();
    assert_eq!(point, expected, "point gets: {numbers:?}");
    let mut sorted = keys;
    sorted.sort();
    sorted.dedup();
    let expected: Vec<Option<Vec<u8>>> = sorted.iter().map(|k| model.map.get(k).cloned()).collect();
    assert_eq!(index.get_many(&sorted).unwrap(), expected, "sorted: {numbers:?}");
}

fn run(storage: StorageRef, dir: &Path, steps: Vec<Step>) {
    let index = Index::open(storage, dir, tiny_options(false)).unwrap();
    let mut model = Model::default();
    let mut seq = 0u64;
    for step in steps {
        match step {
            Step::Batch(writes) => {
                let mut batch = WriteBatch::new();
                for w in &writes {
                    match *w {
                        Write::Put(k, v) => {
                            batch.put(key(k), value(k, v));
                            model.put(&key(k), &value(k, v));
                        }
                        Write::Delete(k) => {
                            batch.delete(key(k));
                            model.delete(&key(k));
                        }
                        Write::DeleteRange(a, b) => {
                            batch.delete_range(key(a), key(b));
                            model.delete_range(&key(a), &key(b));
                        }
                    }
                }
                seq += 1;
                index.write(seq, &batch).unwrap();
            }
            Step::Flush => index.flush().unwrap(),
            Step::CompactAll => index.compact_all().unwrap(),
            Step::GetMany(numbers) => check(&index, &model, &numbers),
        }
    }
    // Every key ever possible, at once.
    check(&index, &model, &(0..KEYS + 20).collect::<Vec<_>>());
    index.close().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn get_many_matches_the_model_through_the_block_cache(steps in prop::collection::vec(step(), 1..60)) {
        run(Arc::new(SimStorage::new(11)), Path::new("/db/index"), steps);
    }

    #[test]
    fn get_many_matches_the_model_in_mapped_runs(steps in prop::collection::vec(step(), 1..60)) {
        let tmp = tempfile::tempdir().unwrap();
        run(Arc::new(RealStorage::new()), tmp.path(), steps);
    }
}

/// A multi-get of no keys reads nothing and returns nothing.
#[test]
fn no_keys_no_values() {
    let index = Index::open(Arc::new(SimStorage::new(1)), Path::new("/db/index"), tiny_options(false)).unwrap();
    let none: [&[u8]; 0] = [];
    assert!(index.get_many(&none).unwrap().is_empty());
    let before = index.stats().gets;
    let mut batch = WriteBatch::new();
    batch.put(b"a", b"1");
    index.write(1, &batch).unwrap();
    index.flush().unwrap();
    assert_eq!(index.get_many(&[&b"a"[..], b"a", b"b"]).unwrap(), [Some(b"1".to_vec()), Some(b"1".to_vec()), None]);
    // The repeated key is read once.
    assert_eq!(index.stats().gets - before, 2);
}
