//! Scans over keys rewritten many times (a queue's keys, put and removed
//! once per request, every version still in the memtables or spread over
//! runs) see exactly the state at their read point: snapshots taken along
//! the way, scanned forward and backward, agree with a model of each
//! moment, range deletes included.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use larder_index::{Index, Options, Snapshot, WriteBatch};
use larder_io::{SimStorage, StorageRef};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn scan(snapshot: &Snapshot, forward: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    snapshot.range(Bound::Unbounded, Bound::Unbounded, forward).unwrap().map(|kv| kv.unwrap()).collect()
}

#[test]
fn scans_of_keys_rewritten_many_times_see_their_read_point() {
    let storage: StorageRef = Arc::new(SimStorage::new(11));
    let options = Options { memtable_size_bytes: 1 << 20, ..common::tiny_options(false) };
    let index = Index::open(storage, Path::new("/db/index"), options).unwrap();
    let hot = |i: u32| format!("queue/{:02}", i % 3).into_bytes();
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let mut seq = 0;
    for round in 0..1500u32 {
        let mut batch = WriteBatch::new();
        match round % 5 {
            // A key put twice in one batch: the later one wins.
            0 | 1 => {
                batch.put(hot(round), b"first");
                let v = format!("v{round}").into_bytes();
                batch.put(hot(round), v.clone());
                model.insert(hot(round), v);
            }
            2 | 3 => {
                batch.delete(hot(round + 1));
                model.remove(&hot(round + 1));
                let cold = format!("cold/{round:05}").into_bytes();
                batch.put(cold.clone(), b"c");
                model.insert(cold, b"c".to_vec());
            }
            _ => {
                // Every queue key, rewritten then cut by a range delete in
                // the next batch.
                batch.put(hot(0), b"doomed");
                seq += 1;
                index.write(seq, &batch).unwrap();
                batch = WriteBatch::new();
                batch.delete_range(b"queue/", b"queue0");
                model.retain(|k, _| !k.starts_with(b"queue/"));
            }
        }
        seq += 1;
        index.write(seq, &batch).unwrap();
        if round % 97 == 0 {
            snapshots.push((index.snapshot(), model.clone()));
        }
        if round % 400 == 399 {
            index.flush().unwrap();
        }
    }
    snapshots.push((index.snapshot(), model.clone()));
    assert!(index.stats().runs > 0, "some versions must be in runs");
    for (n, (snapshot, expected)) in snapshots.iter().enumerate() {
        let forward: Vec<_> = expected.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(scan(snapshot, true), forward, "snapshot {n} forward");
        let backward: Vec<_> = forward.iter().rev().cloned().collect();
        assert_eq!(scan(snapshot, false), backward, "snapshot {n} backward");
        for (k, v) in expected.iter().filter(|(k, _)| k.starts_with(b"queue/")) {
            assert_eq!(snapshot.get(k).unwrap().as_ref(), Some(v), "snapshot {n} get");
        }
    }
    index.compact_all().unwrap();
    let (last, expected) = snapshots.last().unwrap();
    assert_eq!(scan(last, true), expected.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>());
}
