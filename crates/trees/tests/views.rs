//! Stable views and snapshots: an iterator and a read transaction keep the
//! state of their start while writes (inserts, removes, a clear, enough to
//! flush the memtable and checkpoint the log) go on; `snapshot(path)`
//! writes a consistent copy, taken while writers run, that opens as a
//! store.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};

use larder_io::SimStorage;
use larder_trees::{Durability, Trees, TreesError};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

#[test]
fn iterators_and_read_transactions_keep_their_view_while_writes_go_on() {
    let sim = SimStorage::new(5);
    let trees = common::create(&sim).unwrap();
    let t = trees.open_tree("t").unwrap();
    let mut tx = trees.write(Durability::Durable).unwrap();
    for i in 0..300 {
        tx.insert(&t, &key(i), &[i as u8; 64]).unwrap();
    }
    tx.commit().unwrap();
    let before = common::state(&t);
    let forward = t.iter().unwrap();
    let backward = t.iter_rev().unwrap();
    let mut partly = t.iter().unwrap();
    let first: Vec<_> = partly.by_ref().take(10).map(|kv| kv.unwrap()).collect();
    let read = trees.read();

    // Enough bytes to flush the 32 KiB memtable several times.
    for round in 0..4u8 {
        let mut tx = trees.write(Durability::Buffered).unwrap();
        for i in (0..600).step_by(2) {
            tx.insert(&t, &key(i), &[round; 200]).unwrap();
        }
        for i in (1..300).step_by(3) {
            tx.remove(&t, &key(i)).unwrap();
        }
        tx.commit().unwrap();
    }
    t.clear().unwrap();
    t.insert(b"new", b"entry").unwrap();
    trees.store().checkpoint().unwrap();

    let got: common::State = forward.map(|kv| kv.unwrap()).collect();
    assert_eq!(got, before, "the forward iterator moved with the writes");
    let got: Vec<_> = backward.map(|kv| kv.unwrap()).collect();
    assert_eq!(got, before.clone().into_iter().rev().collect::<Vec<_>>());
    let rest: Vec<_> = partly.map(|kv| kv.unwrap()).collect();
    assert_eq!(first.into_iter().chain(rest).collect::<common::State>(), before);
    assert_eq!(read.len(&t).unwrap(), 300);
    assert_eq!(read.get(&t, &key(1)).unwrap(), Some(vec![1u8; 64]));
    assert_eq!(read.iter(&t, true).unwrap().count(), 300);
    drop(read);
    assert_eq!(common::state(&t).into_iter().collect::<Vec<_>>(), vec![(b"new".to_vec(), b"entry".to_vec())]);
    assert_eq!(t.approximate_len().unwrap(), 1);
    common::assert_fsck_clean(&trees);
}

#[test]
fn a_snapshot_is_one_consistent_state_and_opens_as_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    let trees = Trees::open_dir(&tmp.path().join("store")).unwrap();
    let a = trees.open_tree("a").unwrap();
    let b = trees.open_tree("b").unwrap();
    // Every transaction writes the same counter to both trees: a copy
    // holding two different counters mixed two states.
    let stop = AtomicBool::new(false);
    let copy = tmp.path().join("copy");
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) || n < 50 {
                let mut tx = trees.write(Durability::Buffered).unwrap();
                let k = format!("k{}", n % 40).into_bytes();
                tx.insert(&a, &k, &n.to_le_bytes()).unwrap();
                tx.insert(&a, b"counter", &n.to_le_bytes()).unwrap();
                tx.insert(&b, b"counter", &n.to_le_bytes()).unwrap();
                tx.commit().unwrap();
                n += 1;
            }
            n
        });
        // Let the writer run for a few transactions first.
        while a.get(b"counter").unwrap().is_none() {
            std::thread::yield_now();
        }
        trees.snapshot(&copy).unwrap();
        stop.store(true, Ordering::Relaxed);
        assert!(writer.join().unwrap() >= 50);
    });
    let err = trees.snapshot(&copy).unwrap_err();
    assert!(matches!(err, TreesError::SnapshotExists { .. }), "{err}");
    // A `.partial` directory beside the destination is refused, not removed.
    let other = tmp.path().join("other");
    std::fs::create_dir(tmp.path().join("other.partial")).unwrap();
    std::fs::write(tmp.path().join("other.partial/mine"), b"keep").unwrap();
    let err = trees.snapshot(&other).unwrap_err();
    assert!(matches!(err, TreesError::SnapshotExists { .. }), "{err}");
    assert_eq!(std::fs::read(tmp.path().join("other.partial/mine")).unwrap(), b"keep");
    assert!(!other.exists());
    trees.close().unwrap();

    let copied = Trees::open_dir(&copy).unwrap();
    assert_eq!(copied.list_trees().unwrap(), vec!["a".to_string(), "b".to_string()]);
    let ca = copied.tree("a").unwrap().unwrap();
    let cb = copied.tree("b").unwrap().unwrap();
    let counter = ca.get(b"counter").unwrap().unwrap();
    assert_eq!(cb.get(b"counter").unwrap().unwrap(), counter, "the copy mixes two states");
    let n = u64::from_le_bytes(counter.try_into().unwrap());
    // The copy's tree `a` is exactly the state after transaction n.
    let mut want = common::State::new();
    for i in 0..=n {
        want.insert(format!("k{}", i % 40).into_bytes(), i.to_le_bytes().to_vec());
    }
    want.insert(b"counter".to_vec(), n.to_le_bytes().to_vec());
    assert_eq!(common::state(&ca), want);
    assert_eq!(ca.approximate_len().unwrap(), want.len() as u64);
    common::assert_fsck_clean(&copied);
    // The copy is a store of its own: it takes writes and new trees.
    copied.open_tree("c").unwrap().insert(b"x", b"y").unwrap();
    copied.close().unwrap();
}
