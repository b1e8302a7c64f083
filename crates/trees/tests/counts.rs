//! Tree lengths stay exact while write transactions take their trees'
//! committed counts from memory: two `Trees` on one store (sharing one
//! writer lock and one set of counts), transactions that insert, remove,
//! clear, abort or delete and make a tree again, checked against a model
//! after every step (inside a transaction, through a read and through
//! `approximate_len`) and after a reopen.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use larder_io::SimStorage;
use larder_trees::{Durability, Trees};
use proptest::prelude::*;

const NAMES: [&str; 2] = ["a", "b"];

#[derive(Clone, Debug)]
enum Step {
    Insert {
        handle: usize,
        tree: usize,
        key: u8,
    },
    Remove {
        handle: usize,
        tree: usize,
        key: u8,
    },
    Clear {
        handle: usize,
        tree: usize,
    },
    /// Inserts and removes, then aborts: no count changes.
    Aborted {
        handle: usize,
        tree: usize,
        key: u8,
    },
    Recreate {
        handle: usize,
        tree: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let (h, t, k) = (0..2usize, 0..NAMES.len(), 0..12u8);
    prop_oneof![
        5 => (h.clone(), t.clone(), k.clone()).prop_map(|(handle, tree, key)| Step::Insert { handle, tree, key }),
        3 => (h.clone(), t.clone(), k.clone()).prop_map(|(handle, tree, key)| Step::Remove { handle, tree, key }),
        1 => (h.clone(), t.clone()).prop_map(|(handle, tree)| Step::Clear { handle, tree }),
        1 => (h.clone(), t.clone(), k).prop_map(|(handle, tree, key)| Step::Aborted { handle, tree, key }),
        1 => (h, t).prop_map(|(handle, tree)| Step::Recreate { handle, tree }),
    ]
}

fn check(handles: &[Trees; 2], model: &[BTreeMap<u8, ()>], what: &str) {
    for (t, name) in NAMES.iter().enumerate() {
        let want = model[t].len() as u64;
        for trees in handles {
            let tree = trees.open_tree(name).unwrap();
            assert_eq!(tree.approximate_len().unwrap(), want, "{what}: approximate_len of {name}");
            assert_eq!(trees.read().len(&tree).unwrap(), want, "{what}: read len of {name}");
            let tx = trees.write(Durability::Buffered).unwrap();
            assert_eq!(tx.len(&tree).unwrap(), want, "{what}: len of {name} in a transaction");
        }
    }
}

fn run(steps: &[Step]) {
    let sim = SimStorage::new(3);
    let first = common::create(&sim).unwrap();
    let second = Trees::open(first.store().clone()).unwrap();
    let handles = [first, second];
    let mut model = vec![BTreeMap::<u8, ()>::new(); NAMES.len()];
    for (n, s) in steps.iter().enumerate() {
        match *s {
            Step::Insert { handle, tree, key } => {
                let trees = &handles[handle];
                let t = trees.open_tree(NAMES[tree]).unwrap();
                let mut tx = trees.write(Durability::Durable).unwrap();
                tx.insert(&t, &[key], b"v").unwrap();
                // A second write of the same key in one transaction counts once.
                tx.insert(&t, &[key], b"w").unwrap();
                tx.commit().unwrap();
                model[tree].insert(key, ());
            }
            Step::Remove { handle, tree, key } => {
                let t = handles[handle].open_tree(NAMES[tree]).unwrap();
                t.remove(&[key]).unwrap();
                model[tree].remove(&key);
            }
            Step::Clear { handle, tree } => {
                let trees = &handles[handle];
                let t = trees.open_tree(NAMES[tree]).unwrap();
                let mut tx = trees.write(Durability::Buffered).unwrap();
                tx.clear(&t).unwrap();
                tx.insert(&t, b"after", b"x").unwrap();
                tx.commit().unwrap();
                model[tree].clear();
                model[tree].insert(b'\xff', ());
            }
            Step::Aborted { handle, tree, key } => {
                let trees = &handles[handle];
                let t = trees.open_tree(NAMES[tree]).unwrap();
                let mut tx = trees.write(Durability::Durable).unwrap();
                tx.insert(&t, &[key, key], b"gone").unwrap();
                tx.remove(&t, &[key]).unwrap();
                tx.abort();
            }
            Step::Recreate { handle, tree } => {
                let trees = &handles[handle];
                trees.delete_tree(NAMES[tree]).unwrap();
                trees.open_tree(NAMES[tree]).unwrap();
                model[tree].clear();
            }
        }
        check(&handles, &model, &format!("after step {n} ({s:?})"));
    }
    let [first, second] = handles;
    drop(second);
    first.close().unwrap();
    let reopened = common::open(&sim).unwrap();
    let again = Trees::open(reopened.store().clone()).unwrap();
    check(&[reopened, again], &model, "after reopen");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn lengths_match_a_model(steps in prop::collection::vec(step(), 1..40)) {
        run(&steps);
    }
}
