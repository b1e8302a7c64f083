//! Crash consistency on the simulated storage: a workload of transactions
//! over two trees (inserts across both, removes, a clear, values large
//! enough to flush the memtable), most durable, some switched to buffered
//! before their commit and some switched from buffered to durable, crashed
//! at every write and at every sync, in every crash mode. After reopen the
//! trees hold exactly the state after some prefix of the transactions that
//! includes every one acknowledged as durable (all-or-nothing, durable
//! before acknowledged; a buffered one is durable with the next durable
//! one), counts match entries, and fsck finds nothing wrong.
#![allow(clippy::unwrap_used)]

mod common;

use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_object::ObjectError;
use larder_trees::{Durability, Trees, TreesError};

/// Both trees' states.
type Both = (common::State, common::State);

const TRANSACTIONS: u64 = 40;

/// The durability transaction `i` begins with and the one it commits
/// with.
fn durabilities(i: u64) -> (Durability, Durability) {
    match i % 5 {
        1 => (Durability::Durable, Durability::Buffered),
        3 => (Durability::Buffered, Durability::Durable),
        _ => (Durability::Durable, Durability::Durable),
    }
}

/// Transaction `i`: deterministic; `model` gets its effect first (an
/// unacknowledged transaction may survive).
fn apply(trees: &Trees, i: u64, model: &mut Both) -> Result<(), TreesError> {
    if i % 17 == 16 {
        // Deleting a tree and making it again (a new id): empty either way.
        model.1.clear();
        trees.delete_tree("b")?;
        trees.open_tree("b")?;
        return Ok(());
    }
    let a = trees.open_tree("a")?;
    let b = trees.open_tree("b")?;
    let key = |n: u64| format!("k{}", n % 9).into_bytes();
    let value = |n: u64| {
        let len = if n.is_multiple_of(4) { 3000 + n as usize * 10 } else { 20 + n as usize };
        vec![n as u8; len]
    };
    let (begun, committed) = durabilities(i);
    let mut tx = trees.write(begun)?;
    // One tag in both trees: all of it or none.
    tx.insert(&a, &key(i), &value(i))?;
    model.0.insert(key(i), value(i));
    tx.insert(&b, &key(i + 3), &value(i))?;
    model.1.insert(key(i + 3), value(i));
    if i % 3 == 2 {
        tx.remove(&a, &key(i + 1))?;
        model.0.remove(&key(i + 1));
    }
    if i % 13 == 12 {
        tx.clear(&b)?;
        model.1.clear();
        tx.insert(&b, b"after-clear", &value(i))?;
        model.1.insert(b"after-clear".to_vec(), value(i));
    }
    tx.set_durability(committed);
    assert_eq!(tx.durability(), committed);
    tx.commit()
}

/// Runs the workload; `history[i]` is the state after `i` transactions.
/// Returns how many transactions a durable acknowledgement covers (the
/// buffered ones acknowledged after the last durable one may be lost).
fn workload(sim: &SimStorage, history: &mut Vec<Both>) -> u64 {
    let mut model = Both::default();
    history.push(model.clone());
    let Ok(trees) = common::create(sim) else { return 0 };
    if trees.open_tree("a").is_err() || trees.open_tree("b").is_err() {
        return 0;
    }
    let mut acked = 0;
    for i in 0..TRANSACTIONS {
        let ok = apply(&trees, i, &mut model).is_ok();
        history.push(model.clone());
        if !ok {
            break;
        }
        // Tree deletions (every 17th) are always durable.
        if i % 17 == 16 || durabilities(i).1 == Durability::Durable {
            acked = i + 1;
        }
    }
    acked
}

fn check(image: &SimStorage, history: &[Both], acked: u64, what: &str) {
    let trees = match common::open(image) {
        Ok(t) => t,
        Err(TreesError::Store(ObjectError::NotAStore { .. })) if acked == 0 => return,
        Err(e) => panic!("{what}: reopen failed: {e}"),
    };
    let read = |name: &str| trees.tree(name).unwrap().map(|t| common::state(&t)).unwrap_or_default();
    let got = (read("a"), read("b"));
    let m = (0..history.len()).rev().find(|&i| history[i] == got);
    let m = m.unwrap_or_else(|| panic!("{what}: state is no prefix of the transactions: {got:?}"));
    assert!(m as u64 >= acked, "{what}: {m} transactions survive, {acked} were acknowledged");
    for name in ["a", "b"] {
        if let Some(t) = trees.tree(name).unwrap() {
            assert_eq!(t.approximate_len().unwrap(), common::state(&t).len() as u64, "{what}: count of {name}");
        }
    }
    common::assert_fsck_clean(&trees);
    // The store works on.
    let t = trees.open_tree("a").unwrap();
    t.insert(b"after", b"x").unwrap();
    assert_eq!(t.get(b"after").unwrap(), Some(b"x".to_vec()));
}

#[test]
fn a_crash_at_any_write_keeps_every_acknowledged_transaction_whole() {
    let probe = SimStorage::new(1);
    assert_eq!(workload(&probe, &mut Vec::new()), TRANSACTIONS);
    let writes = probe.counters().writes;
    assert!(writes > 40, "the probe made only {writes} writes");
    for k in 0..writes {
        for mode in [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending] {
            let sim = SimStorage::new(k);
            sim.set_unordered_dir_ops(true);
            sim.crash_after_writes(k);
            let mut history = Vec::new();
            let acked = workload(&sim, &mut history);
            check(&sim.crash_with(mode), &history, acked, &format!("crash after write {k} ({mode:?})"));
        }
    }
}

#[test]
fn a_crash_at_any_sync_keeps_every_acknowledged_transaction_whole() {
    let probe = SimStorage::new(2);
    assert_eq!(workload(&probe, &mut Vec::new()), TRANSACTIONS);
    let syncs = probe.counters().syncs;
    let durable = (0..TRANSACTIONS).filter(|&i| durabilities(i).1 == Durability::Durable).count() as u64;
    assert!(syncs >= durable, "each durable transaction syncs: only {syncs} syncs");
    for k in 0..syncs {
        let sim = SimStorage::new(100 + k);
        sim.set_unordered_dir_ops(true);
        sim.crash_after_syncs(k);
        let mut history = Vec::new();
        let acked = workload(&sim, &mut history);
        check(&sim.crash_with(CrashMode::Random), &history, acked, &format!("crash after sync {k}"));
    }
}
