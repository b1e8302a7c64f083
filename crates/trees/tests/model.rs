//! Model test: random transactions (inserts, removes, clears; point reads,
//! scans both ways and lengths inside them; commits, aborts, drops and
//! failing closures), one-operation writes, tree deletions and reopens,
//! checked step by step against a `BTreeMap` per tree, then by fsck.
#![allow(clippy::unwrap_used)]

mod common;

use std::ops::Bound;

use common::State;
use larder_io::SimStorage;
use larder_trees::{Durability, TransactionError, Tree, Trees, TreesError, WriteTransaction};
use proptest::prelude::*;

const TREES: [&str; 3] = ["alpha", "beta", "gamma"];

#[derive(Clone, Debug)]
enum Op {
    Insert(usize, Vec<u8>, Vec<u8>),
    Remove(usize, Vec<u8>),
    Clear(usize),
    Get(usize, Vec<u8>),
    Len(usize),
    Scan { tree: usize, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>, forward: bool, limit: usize },
}

#[derive(Clone, Copy, Debug)]
enum End {
    Commit(Durability),
    Abort,
    Drop,
    /// Through `Trees::transaction` with a closure that fails at the end.
    ClosureFails,
    /// Through `Trees::transaction` with a closure that succeeds.
    ClosureCommits,
}

#[derive(Clone, Debug)]
enum Step {
    Transaction(Vec<Op>, End),
    Insert(usize, Vec<u8>, Vec<u8>),
    Remove(usize, Vec<u8>),
    DeleteTree(usize),
    Reopen,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(vec![0u8, 1, 2, 0x7f, 0xff]), 0..4)
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => prop::collection::vec(any::<u8>(), 0..12),
        1 => (any::<u8>(), 1000usize..4000).prop_map(|(b, n)| vec![b; n]),
    ]
}

fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![Just(Bound::Unbounded), key().prop_map(Bound::Included), key().prop_map(Bound::Excluded),]
}

fn op() -> impl Strategy<Value = Op> {
    let tree = 0..TREES.len();
    prop_oneof![
        6 => (tree.clone(), key(), value()).prop_map(|(t, k, v)| Op::Insert(t, k, v)),
        3 => (tree.clone(), key()).prop_map(|(t, k)| Op::Remove(t, k)),
        1 => tree.clone().prop_map(Op::Clear),
        2 => (tree.clone(), key()).prop_map(|(t, k)| Op::Get(t, k)),
        1 => tree.clone().prop_map(Op::Len),
        3 => (tree, bound(), bound(), any::<bool>(), 0usize..8)
            .prop_map(|(tree, start, end, forward, limit)| Op::Scan { tree, start, end, forward, limit }),
    ]
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![
        4 => Just(End::Commit(Durability::Durable)),
        3 => Just(End::Commit(Durability::Buffered)),
        1 => Just(End::Abort),
        1 => Just(End::Drop),
        1 => Just(End::ClosureFails),
        2 => Just(End::ClosureCommits),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    let tree = 0..TREES.len();
    prop_oneof![
        8 => (prop::collection::vec(op(), 0..12), end()).prop_map(|(ops, end)| Step::Transaction(ops, end)),
        2 => (tree.clone(), key(), value()).prop_map(|(t, k, v)| Step::Insert(t, k, v)),
        1 => (tree.clone(), key()).prop_map(|(t, k)| Step::Remove(t, k)),
        1 => tree.prop_map(Step::DeleteTree),
        1 => Just(Step::Reopen),
    ]
}

/// The entries of `model` in the scan's range and direction, at most `limit`.
fn model_scan(model: &State, start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>, forward: bool, limit: usize) -> State {
    let in_range = |k: &Vec<u8>| {
        let above = match start {
            Bound::Included(s) => k >= s,
            Bound::Excluded(s) => k > s,
            Bound::Unbounded => true,
        };
        let below = match end {
            Bound::Included(e) => k <= e,
            Bound::Excluded(e) => k < e,
            Bound::Unbounded => true,
        };
        above && below
    };
    let all: Vec<_> = model.iter().filter(|(k, _)| in_range(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    if forward {
        all.into_iter().take(limit).collect()
    } else {
        all.into_iter().rev().take(limit).collect()
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

/// Runs `ops` in `tx`, checking every read against `model` (the
/// transaction's view), which it updates.
fn run_ops(tx: &mut WriteTransaction<'_>, trees: &[Tree], ops: &[Op], model: &mut [State]) -> Result<(), TreesError> {
    for op in ops {
        match op {
            Op::Insert(t, k, v) => {
                tx.insert(&trees[*t], k, v)?;
                model[*t].insert(k.clone(), v.clone());
            }
            Op::Remove(t, k) => {
                tx.remove(&trees[*t], k)?;
                model[*t].remove(k);
            }
            Op::Clear(t) => {
                tx.clear(&trees[*t])?;
                model[*t].clear();
            }
            Op::Get(t, k) => assert_eq!(tx.get(&trees[*t], k)?, model[*t].get(k).cloned(), "get {k:?} in {t}"),
            Op::Len(t) => assert_eq!(tx.len(&trees[*t])?, model[*t].len() as u64, "len of {t}"),
            Op::Scan { tree, start, end, forward, limit } => {
                let got: Vec<_> = tx
                    .range(&trees[*tree], (as_ref(start), as_ref(end)), *forward)?
                    .take(*limit)
                    .collect::<Result<_, _>>()?;
                let want = model_scan(&model[*tree], start, end, *forward, *limit);
                let want: Vec<_> = if *forward { want.into_iter().collect() } else { want.into_iter().rev().collect() };
                assert_eq!(got, want, "scan {start:?}..{end:?} forward {forward} limit {limit} of {tree}");
            }
        }
    }
    Ok(())
}

fn handles(trees: &Trees) -> Vec<Tree> {
    TREES.iter().map(|n| trees.open_tree(n).unwrap()).collect()
}

/// Every tree, read several ways, equals the model.
fn check_committed(trees: &Trees, handles: &[Tree], model: &[State]) {
    let read = trees.read();
    for (t, m) in handles.iter().zip(model) {
        assert_eq!(&common::state(t), m, "tree {}", t.name());
        let backward: Vec<_> = t.iter_rev().unwrap().map(|kv| kv.unwrap()).collect();
        assert_eq!(backward, m.iter().rev().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>());
        assert_eq!(t.approximate_len().unwrap(), m.len() as u64);
        assert_eq!(read.len(t).unwrap(), m.len() as u64);
        assert_eq!(t.first().unwrap(), m.iter().next().map(|(k, v)| (k.clone(), v.clone())));
        let mut out = Vec::new();
        for k in m.keys().take(3).chain([&b"never-written"[..].to_vec()]) {
            assert_eq!(read.get(t, k).unwrap(), m.get(k).cloned());
            out.clear();
            out.extend_from_slice(b"an earlier value");
            let found = t.get_into(k, &mut out).unwrap();
            assert_eq!(found.then(|| out.clone()), m.get(k).cloned(), "Tree::get_into {k:?}");
            let found = read.get_into(t, k, &mut out).unwrap();
            assert_eq!(found.then(|| out.clone()), m.get(k).cloned(), "ReadTransaction::get_into {k:?}");
            let gt = m.range::<Vec<u8>, _>((Bound::Excluded(k.clone()), Bound::Unbounded)).next();
            assert_eq!(t.get_gt(k).unwrap(), gt.map(|(k, v)| (k.clone(), v.clone())));
        }
    }
}

fn run(steps: Vec<Step>) {
    let sim = SimStorage::new(7);
    let mut trees = common::create(&sim).unwrap();
    let mut tree_handles = handles(&trees);
    let mut model: Vec<State> = vec![State::new(); TREES.len()];
    for step in steps {
        match step {
            Step::Transaction(ops, end) => {
                let mut view = model.clone();
                match end {
                    End::Commit(d) => {
                        let mut tx = trees.write(d).unwrap();
                        run_ops(&mut tx, &tree_handles, &ops, &mut view).unwrap();
                        tx.commit().unwrap();
                        model = view;
                    }
                    End::Abort | End::Drop => {
                        let mut tx = trees.write(Durability::Durable).unwrap();
                        run_ops(&mut tx, &tree_handles, &ops, &mut view).unwrap();
                        if matches!(end, End::Abort) {
                            tx.abort();
                        } else {
                            drop(tx);
                        }
                    }
                    End::ClosureFails | End::ClosureCommits => {
                        let fails = matches!(end, End::ClosureFails);
                        let out = trees.transaction(Durability::Durable, |tx| {
                            run_ops(tx, &tree_handles, &ops, &mut view).map_err(|e| e.to_string())?;
                            if fails {
                                Err("the closure gives up".to_string())
                            } else {
                                Ok(7)
                            }
                        });
                        match out {
                            Ok(r) => {
                                assert!(!fails);
                                assert_eq!(r, 7);
                                model = view;
                            }
                            Err(TransactionError::Aborted(e)) => assert!(fails, "{e}"),
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            }
            Step::Insert(t, k, v) => {
                tree_handles[t].insert(&k, &v).unwrap();
                model[t].insert(k, v);
            }
            Step::Remove(t, k) => {
                tree_handles[t].remove(&k).unwrap();
                model[t].remove(&k);
            }
            Step::DeleteTree(t) => {
                let old = tree_handles[t].clone();
                assert!(trees.delete_tree(TREES[t]).unwrap());
                assert!(matches!(old.insert(b"k", b"v"), Err(TreesError::NoSuchTree { .. })));
                tree_handles[t] = trees.open_tree(TREES[t]).unwrap();
                assert_ne!(tree_handles[t].id(), old.id(), "a tree id was reused");
                model[t].clear();
            }
            Step::Reopen => {
                drop(tree_handles);
                trees.close().unwrap();
                trees = common::open(&sim).unwrap();
                assert_eq!(trees.list_trees().unwrap(), TREES.to_vec());
                tree_handles = handles(&trees);
            }
        }
        check_committed(&trees, &tree_handles, &model);
    }
    common::assert_fsck_clean(&trees);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    #[test]
    fn transactions_match_a_map_per_tree(steps in prop::collection::vec(step(), 1..24)) {
        run(steps);
    }
}
