//! Trees used as queues: scans from a tree's start skip the removed front
//! by a hint learned from earlier scans (src/start_hint.rs). Every scan,
//! whatever its snapshot's age, must still see every live key: inserts
//! below the front, old read transactions, write transactions' own view,
//! and scans racing commits.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use larder_io::SimStorage;
use larder_trees::{Durability, Tree, Trees};
use proptest::prelude::*;

/// Keys sort as their numbers do.
fn key(i: u32) -> Vec<u8> {
    format!("q{i:06}").into_bytes()
}

fn keys_of(tree: &Tree) -> Vec<Vec<u8>> {
    tree.iter().unwrap().map(|kv| kv.unwrap().0).collect()
}

#[derive(Clone, Debug)]
enum Op {
    /// Insert key i (often below the front).
    Insert(u32),
    /// Remove the first entry, found by a write transaction's scan.
    PopFront,
    /// Remove key i.
    Remove(u32),
    /// The first entry by `Tree::first` (teaches the hint).
    First,
    /// Open a read transaction, checked at the end against the model then.
    Read,
    /// Clear the tree.
    Clear,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..200).prop_map(Op::Insert),
        4 => Just(Op::PopFront),
        1 => (0u32..200).prop_map(Op::Remove),
        3 => Just(Op::First),
        1 => Just(Op::Read),
        1 => Just(Op::Clear),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Every scan (fresh, inside a write transaction, and from read
    /// transactions opened long before) matches a model of the queue.
    #[test]
    fn queue_scans_match_the_model(ops in proptest::collection::vec(op(), 1..300)) {
        let sim = SimStorage::new(11);
        let trees = common::create(&sim).unwrap();
        let tree = trees.open_tree("queue").unwrap();
        let mut model = BTreeSet::new();
        let mut reads = Vec::new();
        for op in ops {
            match op {
                Op::Insert(i) => {
                    tree.insert(&key(i), b"v").unwrap();
                    model.insert(key(i));
                }
                Op::PopFront => {
                    let mut tx = trees.write(Durability::Buffered).unwrap();
                    let first = tx.iter(&tree, true).unwrap().next().transpose().unwrap().map(|(k, _)| k);
                    prop_assert_eq!(&first, &model.first().cloned());
                    if let Some(first) = first {
                        tx.remove(&tree, &first).unwrap();
                        model.remove(&first);
                    }
                    tx.commit().unwrap();
                }
                Op::Remove(i) => {
                    tree.remove(&key(i)).unwrap();
                    model.remove(&key(i));
                }
                Op::First => {
                    let first = tree.first().unwrap().map(|(k, _)| k);
                    prop_assert_eq!(&first, &model.first().cloned());
                }
                Op::Read => reads.push((trees.read(), model.clone())),
                Op::Clear => {
                    tree.clear().unwrap();
                    model.clear();
                }
            }
        }
        prop_assert_eq!(keys_of(&tree), model.iter().cloned().collect::<Vec<_>>());
        for (read, then) in reads {
            let seen: Vec<Vec<u8>> = read.iter(&tree, true).unwrap().map(|kv| kv.unwrap().0).collect();
            prop_assert_eq!(seen, then.into_iter().collect::<Vec<_>>());
        }
    }
}

/// A read transaction older than the scan that taught the hint still sees
/// the front that was removed after it began.
#[test]
fn an_old_read_transaction_ignores_a_newer_hint() {
    let sim = SimStorage::new(12);
    let trees = common::create(&sim).unwrap();
    let tree = trees.open_tree("queue").unwrap();
    for i in 0..100 {
        tree.insert(&key(i), b"v").unwrap();
    }
    let old = trees.read();
    for i in 0..90 {
        tree.remove(&key(i)).unwrap();
    }
    assert_eq!(tree.first().unwrap().map(|(k, _)| k), Some(key(90)));
    assert_eq!(old.iter(&tree, true).unwrap().count(), 100);
    assert_eq!(old.iter(&tree, true).unwrap().next().unwrap().unwrap().0, key(0));
    // A fresh one uses the hint and agrees with the model.
    assert_eq!(trees.read().iter(&tree, true).unwrap().next().unwrap().unwrap().0, key(90));
}

/// More exceptions than one plan hands out: the scan starts past the
/// handed-out ones, steps over the removed ones beyond, and still finds
/// the first live key, in fresh scans, write transactions and old reads.
#[test]
fn a_hint_with_many_exceptions_still_finds_the_first_live_key() {
    let sim = SimStorage::new(13);
    let trees = common::create(&sim).unwrap();
    let tree = trees.open_tree("queue").unwrap();
    tree.insert(&key(10_000), b"v").unwrap();
    assert_eq!(tree.first().unwrap().map(|(k, _)| k), Some(key(10_000)));
    let mut model: BTreeSet<Vec<u8>> = BTreeSet::from([key(10_000)]);
    for i in 0..300 {
        tree.insert(&key(i * 7), b"v").unwrap();
        model.insert(key(i * 7));
    }
    let before_removals = trees.read();
    let all = model.clone();
    // Remove the front in steps that leave the first live key at the 1st,
    // 64th, 65th, 66th, 200th exception, then none.
    for keep_from in [0usize, 63, 64, 65, 199, 300] {
        for i in 0..keep_from.min(300) {
            tree.remove(&key(i as u32 * 7)).unwrap();
            model.remove(&key(i as u32 * 7));
        }
        assert_eq!(tree.first().unwrap().map(|(k, _)| k), model.first().cloned(), "keep from {keep_from}");
        let tx = trees.write(Durability::Buffered).unwrap();
        let first = tx.iter(&tree, true).unwrap().next().transpose().unwrap().map(|(k, _)| k);
        assert_eq!(first, model.first().cloned(), "write transaction, keep from {keep_from}");
        drop(tx);
        assert_eq!(keys_of(&tree), model.iter().cloned().collect::<Vec<_>>());
    }
    let seen: Vec<Vec<u8>> = before_removals.iter(&tree, true).unwrap().map(|kv| kv.unwrap().0).collect();
    assert_eq!(seen, all.into_iter().collect::<Vec<_>>());
}

/// One writer pops the front and inserts keys anywhere (often below the
/// front) while scanners teach the hint and a checker proves, in each of
/// its read transactions, that no live key lies below the first entry its
/// scan returned (by point reads, which no hint touches).
#[test]
fn scans_racing_commits_never_skip_a_live_key() {
    const UNIVERSE: u32 = 256;
    const COMMITS: u64 = 12_000;
    let sim = SimStorage::new(13);
    let trees: Trees = common::create(&sim).unwrap();
    let tree = trees.open_tree("queue").unwrap();
    for i in (0..UNIVERSE).step_by(3) {
        tree.insert(&key(i), b"v").unwrap();
    }
    let done = AtomicBool::new(false);
    let commits = AtomicU64::new(0);
    /// Ends the other threads' loops however the writer ends (a failed
    /// assertion included).
    struct Done<'a>(&'a AtomicBool);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let checks = AtomicU64::new(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let _done = Done(&done);
            let mut state = 0x2545_f491_u64;
            let mut live: BTreeSet<Vec<u8>> = (0..UNIVERSE).step_by(3).map(key).collect();
            for _ in 0..COMMITS {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let mut tx = trees.write(Durability::Buffered).unwrap();
                let first = tx.iter(&tree, true).unwrap().next().transpose().unwrap().map(|(k, _)| k);
                assert_eq!(first, live.first().cloned(), "a write transaction's scan skipped a live key");
                if state.is_multiple_of(3) {
                    let k = key((state >> 8) as u32 % UNIVERSE);
                    tx.insert(&tree, &k, b"v").unwrap();
                    live.insert(k);
                } else if let Some(first) = first {
                    tx.remove(&tree, &first).unwrap();
                    live.remove(&first);
                }
                tx.commit().unwrap();
                commits.fetch_add(1, Ordering::Relaxed);
            }
        });
        for _ in 0..2 {
            scope.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    let _ = tree.first().unwrap();
                    // Commits land between the scan's snapshot and the
                    // first entry that settles its hint.
                    let mut scan = tree.iter().unwrap();
                    for i in 0..UNIVERSE / 4 {
                        let _ = tree.get(&key(i)).unwrap();
                    }
                    let _ = scan.by_ref().take(3).count();
                }
            });
        }
        scope.spawn(|| {
            while !done.load(Ordering::Acquire) {
                let read = trees.read();
                let first = read.iter(&tree, true).unwrap().next().transpose().unwrap().map(|(k, _)| k);
                let below = match &first {
                    Some(f) => (0..UNIVERSE).map(key).take_while(|k| k < f).collect::<Vec<_>>(),
                    None => (0..UNIVERSE).map(key).collect(),
                };
                for k in below {
                    assert_eq!(read.get(&tree, &k).unwrap(), None, "a scan skipped live key {k:?}");
                }
                if let Some(f) = first {
                    assert!(read.get(&tree, &f).unwrap().is_some());
                }
                checks.fetch_add(1, Ordering::Relaxed);
            }
        });
    });
    assert_eq!(commits.load(Ordering::Relaxed), COMMITS);
    assert!(checks.load(Ordering::Relaxed) > 0, "the checker never ran");
}

#[derive(Clone, Debug)]
enum FirstOp {
    /// Insert key i with a value of this many bytes (large ones fill
    /// memtables, so entries and tombstones spread over runs).
    Insert(u32, usize),
    /// Remove key i (a tombstone, live key or not).
    Remove(u32),
    /// Remove the entry `Tree::first` returns.
    PopFront,
    /// Compare `Tree::first` with a fresh iterator's first item and the
    /// model (keys and values).
    First,
    /// Write a neighbouring tree, whose keys must never show.
    Neighbour(u32),
    /// Close and reopen the store (hints start empty).
    Reopen,
}

fn first_op() -> impl Strategy<Value = FirstOp> {
    prop_oneof![
        5 => (0u32..120, prop::sample::select(vec![1usize, 40, 900, 3000])).prop_map(|(i, n)| FirstOp::Insert(i, n)),
        2 => (0u32..120).prop_map(FirstOp::Remove),
        4 => Just(FirstOp::PopFront),
        4 => Just(FirstOp::First),
        1 => (0u32..120).prop_map(FirstOp::Neighbour),
        1 => Just(FirstOp::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// `Tree::first` (which returns the start hint's live candidate
    /// without building an iterator) gives what a fresh iterator's first
    /// item and the model give, key and value, with removed keys and
    /// tombstones below the candidate, across memtables, runs and reopens.
    #[test]
    fn first_matches_the_iterator_and_the_model(ops in proptest::collection::vec(first_op(), 1..200)) {
        let sim = SimStorage::new(14);
        let mut trees = common::create(&sim).unwrap();
        let mut tree = trees.open_tree("queue").unwrap();
        let mut other = trees.open_tree("queue2").unwrap();
        let mut model = std::collections::BTreeMap::new();
        for (step, op) in ops.into_iter().enumerate() {
            match op {
                FirstOp::Insert(i, n) => {
                    let value = vec![(step % 251) as u8; n];
                    tree.insert(&key(i), &value).unwrap();
                    model.insert(key(i), value);
                }
                FirstOp::Remove(i) => {
                    tree.remove(&key(i)).unwrap();
                    model.remove(&key(i));
                }
                FirstOp::PopFront => {
                    let first = tree.first().unwrap();
                    prop_assert_eq!(&first, &model.first_key_value().map(|(k, v)| (k.clone(), v.clone())));
                    if let Some((k, _)) = first {
                        tree.remove(&k).unwrap();
                        model.remove(&k);
                    }
                }
                FirstOp::First => {
                    let expected = model.first_key_value().map(|(k, v)| (k.clone(), v.clone()));
                    prop_assert_eq!(&tree.first().unwrap(), &expected);
                    prop_assert_eq!(&tree.iter().unwrap().next().transpose().unwrap(), &expected);
                    prop_assert_eq!(&tree.first().unwrap(), &expected);
                    prop_assert_eq!(tree.is_empty().unwrap(), expected.is_none());
                }
                FirstOp::Neighbour(i) => other.insert(&key(i), b"n").unwrap(),
                FirstOp::Reopen => {
                    drop((tree, other));
                    trees.close().unwrap();
                    trees = common::open(&sim).unwrap();
                    tree = trees.open_tree("queue").unwrap();
                    other = trees.open_tree("queue2").unwrap();
                }
            }
        }
        prop_assert_eq!(common::state(&tree), model);
    }
}
