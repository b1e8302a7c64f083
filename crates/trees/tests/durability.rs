//! Durability chosen before the commit (`WriteTransaction::set_durability`):
//! a transaction switched to buffered commits without a sync and is lost by
//! a crash that drops unsynced writes, until a later durable commit, which
//! makes it durable with its own sync; one switched to durable syncs.
#![allow(clippy::unwrap_used)]

mod common;

use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_trees::{Durability, Trees};

fn commit_one(trees: &Trees, key: &[u8], begun: Durability, committed: Durability) {
    let tree = trees.open_tree("t").unwrap();
    let mut tx = trees.write(begun).unwrap();
    tx.insert(&tree, key, b"value").unwrap();
    tx.set_durability(committed);
    tx.commit().unwrap();
}

fn keys_after_crash(sim: &SimStorage) -> Vec<Vec<u8>> {
    let trees = common::open(&sim.crash_with(CrashMode::DropAllPending)).unwrap();
    let state = trees.tree("t").unwrap().map(|t| common::state(&t)).unwrap_or_default();
    common::assert_fsck_clean(&trees);
    state.into_keys().collect()
}

/// Commits "first" durably and "deferred" switched to buffered, checking
/// that the latter made no sync and left the durable LSN where it was;
/// then, if `then_durable`, "second" switched from buffered to durable,
/// checking it synced both. Returns the keys a crash then keeps.
fn run(then_durable: bool) -> Vec<Vec<u8>> {
    let sim = SimStorage::new(7);
    let trees = common::create(&sim).unwrap();
    commit_one(&trees, b"first", Durability::Durable, Durability::Durable);

    let syncs = sim.counters().syncs;
    let durable = trees.store().durable_lsn();
    commit_one(&trees, b"deferred", Durability::Durable, Durability::Buffered);
    assert_eq!(sim.counters().syncs, syncs, "the buffered commit synced");
    assert_eq!(trees.store().durable_lsn(), durable, "the buffered commit is durable");
    // Visible at once, though not on disk.
    assert_eq!(trees.open_tree("t").unwrap().get(b"deferred").unwrap(), Some(b"value".to_vec()));

    if then_durable {
        commit_one(&trees, b"second", Durability::Buffered, Durability::Durable);
        assert!(sim.counters().syncs > syncs, "the durable commit did not sync");
        assert_eq!(trees.store().durable_lsn(), durable + 2, "both commits are durable");
    }
    keys_after_crash(&sim)
}

#[test]
fn a_transaction_switched_to_buffered_is_lost_by_a_crash_before_any_sync() {
    assert_eq!(run(false), vec![b"first".to_vec()]);
}

#[test]
fn a_transaction_switched_to_durable_makes_the_buffered_one_before_it_durable() {
    assert_eq!(run(true), vec![b"deferred".to_vec(), b"first".to_vec(), b"second".to_vec()]);
}

#[test]
fn durability_reports_the_latest_choice() {
    let sim = SimStorage::new(8);
    let trees = common::create(&sim).unwrap();
    let mut tx = trees.write(Durability::Durable).unwrap();
    assert_eq!(tx.durability(), Durability::Durable);
    tx.set_durability(Durability::Buffered);
    assert_eq!(tx.durability(), Durability::Buffered);
    tx.set_durability(Durability::Durable);
    assert_eq!(tx.durability(), Durability::Durable);
    tx.abort();
}

/// Commits "one" and "two" with `commit_unsynced` (durable transactions),
/// checks they are visible without a sync, then, if `sync`, syncs to the
/// second's position. Returns the keys a crash then keeps.
fn run_unsynced(sync: bool) -> Vec<Vec<u8>> {
    let sim = SimStorage::new(9);
    let trees = common::create(&sim).unwrap();
    let tree = trees.open_tree("t").unwrap();
    let durable = trees.durable_lsn();
    let syncs = sim.counters().syncs;

    let mut tx = trees.write(Durability::Durable).unwrap();
    tx.insert(&tree, b"one", b"1").unwrap();
    let one = tx.commit_unsynced().unwrap().expect("a write gives a position");
    // The writer lock is free: a second transaction commits before any sync.
    let mut tx = trees.write(Durability::Durable).unwrap();
    tx.insert(&tree, b"two", b"2").unwrap();
    let two = tx.commit_unsynced().unwrap().expect("a write gives a position");
    assert!(two > one && one > durable, "positions {durable} {one} {two}");
    assert_eq!(sim.counters().syncs, syncs, "an unsynced commit synced");
    assert_eq!(trees.durable_lsn(), durable);
    assert_eq!(tree.get(b"two").unwrap(), Some(b"2".to_vec()));
    // Nothing written, no position.
    assert_eq!(trees.write(Durability::Durable).unwrap().commit_unsynced().unwrap(), None);

    if sync {
        trees.sync_to(two).unwrap();
        assert!(sim.counters().syncs > syncs, "sync_to did not sync");
        assert!(trees.durable_lsn() >= two);
    }
    keys_after_crash(&sim)
}

#[test]
fn an_unsynced_commit_is_lost_by_a_crash_before_a_sync() {
    assert_eq!(run_unsynced(false), Vec::<Vec<u8>>::new());
}

#[test]
fn an_unsynced_commit_is_durable_once_synced_to_a_later_position() {
    assert_eq!(run_unsynced(true), vec![b"one".to_vec(), b"two".to_vec()]);
}
