//! Point gets answered from runs, where a get takes a settling put's value
//! straight from the block: the version a snapshot sees among newer ones
//! in the same run, a put deleted by a newer run's range tombstone or by
//! its own run's, a merge operand over a put, and `get_into`'s buffer.

#![allow(clippy::unwrap_used)]

mod common;

use common::tiny_options;
use larder_index::{CounterOperator, Index, Options, WriteBatch};
use larder_io::{SimStorage, StorageRef};

fn options() -> Options {
    // Runs stay apart: no merge takes them together.
    Options { merge_fanout: 16, l0_slowdown_runs: 40, l0_stop_runs: 60, ..tiny_options(false) }
}

/// `get_into` into a buffer holding other bytes, checked against `get`.
fn read(
    get: impl Fn(&[u8]) -> Option<Vec<u8>>,
    get_into: impl Fn(&[u8], &mut Vec<u8>) -> bool,
    key: &[u8],
) -> Option<Vec<u8>> {
    let mut out = b"stale bytes".to_vec();
    let found = get_into(key, &mut out);
    let want = get(key);
    if found {
        assert_eq!(Some(out.clone()), want, "get_into and get of {key:?}");
        Some(out)
    } else {
        assert_eq!(out, b"stale bytes", "a get_into that found nothing changed its buffer");
        assert_eq!(want, None, "get_into found nothing, get found {want:?}");
        None
    }
}

fn write(index: &Index, seq: u64, f: impl FnOnce(&mut WriteBatch)) {
    let mut batch = WriteBatch::new();
    f(&mut batch);
    index.write(seq, &batch).unwrap();
}

#[test]
fn gets_from_runs_see_the_right_version() {
    let storage: StorageRef = std::sync::Arc::new(SimStorage::new(7));
    let index = Index::open(storage, std::path::Path::new("/gets"), options()).unwrap();
    let now = |key: &[u8]| read(|k| index.get(k).unwrap(), |k, out| index.get_into(k, out).unwrap(), key);

    // Run 1: k = v1, and a neighbour on each side.
    write(&index, 1, |b| {
        b.put(b"j", b"j1").put(b"k", b"v1").put(b"l", b"l1");
    });
    index.flush().unwrap();
    let at_1 = index.snapshot();
    // Run 2: k = v2, then v3, both kept (a snapshot sees v2).
    write(&index, 2, |b| {
        b.put(b"k", b"v2");
    });
    let at_2 = index.snapshot();
    write(&index, 3, |b| {
        b.put(b"k", b"v3");
    });
    index.flush().unwrap();
    assert!(index.stats().runs >= 2, "{}", index.stats());
    let snap =
        |s: &larder_index::Snapshot, key: &[u8]| read(|k| s.get(k).unwrap(), |k, out| s.get_into(k, out).unwrap(), key);
    assert_eq!(now(b"k"), Some(b"v3".to_vec()));
    // Both of run 2's versions are newer than this snapshot: run 1 answers.
    assert_eq!(snap(&at_1, b"k"), Some(b"v1".to_vec()));
    // Run 2's newest is newer than this snapshot; the one after it answers.
    assert_eq!(snap(&at_2, b"k"), Some(b"v2".to_vec()));
    assert_eq!(now(b"j"), Some(b"j1".to_vec()));

    // Run 3: a range tombstone over j and k, newer than every put of them.
    write(&index, 4, |b| {
        b.delete_range(b"j", b"l");
    });
    index.flush().unwrap();
    assert_eq!(now(b"k"), None);
    assert_eq!(now(b"j"), None);
    assert_eq!(now(b"l"), Some(b"l1".to_vec()));
    assert_eq!(snap(&at_2, b"k"), Some(b"v2".to_vec()));

    // Run 4: k put again, and m put and range-deleted in the same run.
    write(&index, 5, |b| {
        b.put(b"k", b"v5").put(b"m", b"m5");
    });
    write(&index, 6, |b| {
        b.delete_range(b"m", b"n");
    });
    index.flush().unwrap();
    assert_eq!(now(b"k"), Some(b"v5".to_vec()));
    assert_eq!(now(b"m"), None);

    // Run 5: a merge operand over k's put: folded, not taken.
    write(&index, 7, |b| {
        b.put(b"c", 5i64.to_le_bytes());
    });
    index.flush().unwrap();
    write(&index, 8, |b| {
        b.merge(CounterOperator::NAME, b"c", CounterOperator::operand(2));
    });
    index.flush().unwrap();
    assert_eq!(now(b"c"), Some(7i64.to_le_bytes().to_vec()));
    assert_eq!(now(b"absent"), None);
}
