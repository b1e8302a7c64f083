//! Crash consistency of the store (index + intent log) on the simulated
//! storage.
//!
//! How: a deterministic workload of transactions (each a batch writing
//! three keys and overwriting a shared one, so a half-applied batch would
//! show; every fifth committed as an index run of its own) runs with inline checkpoints and small log segments, so the log
//! wraps through reused segments. A probe run counts its writes; the
//! workload is then rerun crashing after k writes, for every k, under each
//! crash mode. After reopening, the store must show exactly the state after
//! some prefix of the transactions that contains every transaction
//! acknowledged before the crash, and must accept new commits. A crash
//! during recovery itself is covered the same way.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{creation, storage, DIR};
use larder_index::WriteBatch;
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_object::{Durability, Store, StoreOptions};

type State = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> StoreOptions {
    let mut o = common::deterministic();
    o.index.memtable_size_bytes = 16 << 10;
    o.index.merge_fanout = 2;
    o.index.l0_slowdown_runs = 3;
    o.index.l0_stop_runs = 6;
    o.log.max_segments = 4;
    o
}

/// Transaction `t`'s writes (None: a delete), applied to the model.
fn txn(t: u64, model: &mut State) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut ops = Vec::new();
    let value = t.to_le_bytes().repeat(40);
    for part in ["a", "b", "c"] {
        ops.push((format!("t{:04}/{part}", t % 50).into_bytes(), Some(value.clone())));
    }
    ops.push((b"last".to_vec(), Some(t.to_le_bytes().to_vec())));
    if t.is_multiple_of(7) {
        ops.push((format!("t{:04}/a", (t + 25) % 50).into_bytes(), None));
    }
    for (k, v) in &ops {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
    ops
}

/// Commits transaction `t`: every fifth as an index run of its own (an
/// ingest), the others as log records.
fn commit(store: &Store, t: u64, ops: &[(Vec<u8>, Option<Vec<u8>>)]) -> larder_object::Result<()> {
    if t.is_multiple_of(5) {
        store.transact_as_run(&[], |txn| -> larder_object::Result<()> {
            for (k, v) in ops {
                match v {
                    Some(v) => txn.put(k, v),
                    None => txn.delete(k),
                }
            }
            Ok(())
        })?;
        return Ok(());
    }
    let mut b = WriteBatch::new();
    for (k, v) in ops {
        match v {
            Some(v) => b.put(k, v),
            None => b.delete(k),
        };
    }
    store.commit(&b, Durability::Durable).map(|_| ())
}

const TXNS: u64 = 120;

/// Runs the workload; `history[i]` is the state after transaction i.
/// Returns the number of transactions acknowledged (commit returned Ok).
fn workload(sim: &SimStorage, history: &mut Vec<State>) -> u64 {
    let mut model = State::new();
    history.push(model.clone());
    let store = match Store::create(storage(sim), Path::new(DIR), creation(), options()) {
        Ok(s) => s,
        Err(_) => return 0,
    };
    let mut acked = 0;
    for t in 1..=TXNS {
        let ops = txn(t, &mut model);
        history.push(model.clone());
        if commit(&store, t, &ops).is_err() {
            break;
        }
        acked = t;
    }
    acked
}

/// The workload's keys (the store's own metadata, such as the root
/// directory's onode, sorts below them).
fn state(store: &Store) -> State {
    store.index().iter(true).unwrap().map(|r| r.unwrap()).filter(|(k, _)| k[0] >= b'a').collect()
}

/// Reopens a crash image and checks it against the history.
fn check(image: &SimStorage, history: &[State], acked: u64, what: &str) {
    let store = match Store::open(storage(image), Path::new(DIR), options()) {
        Ok(s) => s,
        // The crash came before the store's creation was durable.
        Err(larder_object::ObjectError::NotAStore { .. }) if acked == 0 => return,
        Err(e) => panic!("{what}: reopen failed: {e}"),
    };
    let got = state(&store);
    let m = (0..history.len()).rev().find(|&i| history[i] == got);
    let m = m.unwrap_or_else(|| panic!("{what}: state is no prefix of the transactions"));
    assert!(m as u64 >= acked, "{what}: only {m} transactions survive, {acked} were acknowledged");
    let t = TXNS + 1;
    store.commit(WriteBatch::new().put(b"after", t.to_le_bytes()), Durability::Durable).unwrap();
    drop(store);
    let again = Store::open(storage(image), Path::new(DIR), options()).unwrap();
    assert_eq!(again.index().get(b"after").unwrap(), Some(t.to_le_bytes().to_vec()), "{what}");
}

#[test]
fn crash_at_every_write_recovers_every_acknowledged_transaction() {
    let probe = SimStorage::new(1);
    let acked = workload(&probe, &mut Vec::new());
    assert_eq!(acked, TXNS);
    let writes = probe.counters().writes;
    assert!(writes > 50, "probe made only {writes} writes");
    // Every write for the first part, then every third (the suite stays fast).
    let points: Vec<u64> = (0..writes).filter(|k| *k < 150 || k % 3 == 0).collect();
    for k in points {
        for mode in [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending] {
            let sim = SimStorage::new(k);
            sim.set_unordered_dir_ops(true);
            sim.crash_after_writes(k);
            let mut history = Vec::new();
            let acked = workload(&sim, &mut history);
            let image = sim.crash_with(mode);
            check(&image, &history, acked, &format!("crash after write {k} ({mode:?})"));
        }
    }
}

#[test]
fn crash_at_every_namespace_op_recovers_every_acknowledged_transaction() {
    // Creating the store, its log segments, index runs and manifests,
    // containers: each crash lands before the directory sync that would
    // make the latest name durable.
    let probe = SimStorage::new(1);
    workload(&probe, &mut Vec::new());
    let names = probe.counters().namespace_ops;
    assert!(names > 10, "probe made only {names} namespace operations");
    // Every one while the store is created, then every 20th (the probe
    // makes about 550; the suite stays fast).
    for k in (1..=names).filter(|k| *k <= 60 || k % 20 == 0) {
        let sim = SimStorage::new(k);
        sim.set_unordered_dir_ops(true);
        sim.crash_after_namespace_ops(k);
        let mut history = Vec::new();
        let acked = workload(&sim, &mut history);
        let image = sim.crash_with(CrashMode::Random);
        check(&image, &history, acked, &format!("crash after namespace op {k}"));
    }
}

#[test]
fn a_crash_during_recovery_recovers_again() {
    // A store with unflushed transactions in its log.
    let sim = SimStorage::new(9);
    sim.set_unordered_dir_ops(true);
    let mut history = Vec::new();
    let acked = workload(&sim, &mut history);
    let crashed = sim.crash_with(CrashMode::KeepAllPending);
    // Probe how many writes recovery makes, then crash at each.
    let probe = crashed.crash_with(CrashMode::KeepAllPending);
    drop(Store::open(storage(&probe), Path::new(DIR), options()).unwrap());
    let writes = probe.counters().writes;
    for k in 0..writes {
        let attempt = crashed.crash_with(CrashMode::KeepAllPending);
        attempt.crash_after_writes(k);
        let _ = Store::open(storage(&attempt), Path::new(DIR), options());
        for mode in [CrashMode::Random, CrashMode::DropAllPending] {
            check(&attempt.crash_with(mode), &history, acked, &format!("crash after recovery write {k} ({mode:?})"));
        }
    }
}

#[test]
fn transactions_survive_a_clean_reopen_and_the_log_wraps() {
    let sim = SimStorage::new(3);
    let mut history = Vec::new();
    assert_eq!(workload(&sim, &mut history), TXNS);
    let store = Store::open(storage(&sim), Path::new(DIR), options()).unwrap();
    assert_eq!(state(&store), history[TXNS as usize]);
    store.close().unwrap();
    // 120 transactions of ~1 KiB through 4 segments of 64 KiB: reuse happened.
    let segs = sim.file_names().into_iter().filter(|p| p.to_string_lossy().ends_with(".seg")).count();
    assert!(segs <= 4, "{segs} segments");
}

#[test]
fn a_crash_during_creation_leaves_no_store_or_a_whole_one() {
    let probe = SimStorage::new(9);
    drop(Store::create(storage(&probe), Path::new(DIR), creation(), options()).unwrap());
    let writes = probe.counters().writes;
    for k in 0..writes {
        for seed in 0..8 {
            let sim = SimStorage::new(seed);
            sim.set_unordered_dir_ops(true);
            sim.crash_after_writes(k);
            assert!(Store::create(storage(&sim), Path::new(DIR), creation(), options()).is_err(), "write {k}");
            let image = sim.crash_with(CrashMode::Random);
            let what = format!("crash after write {k} of {writes} of the creation, seed {seed}");
            // Either the superblock is whole (open finishes the store) or
            // there is none: not a store, and a new creation succeeds.
            let store = match Store::open(storage(&image), Path::new(DIR), options()) {
                Ok(store) => store,
                Err(larder_object::ObjectError::NotAStore { .. }) => {
                    Store::create(storage(&image), Path::new(DIR), creation(), options())
                        .unwrap_or_else(|e| panic!("{what}: creating again: {e}"))
                }
                Err(e) => panic!("{what}: open: {e}"),
            };
            store
                .commit(WriteBatch::new().put(b"k", b"v"), Durability::Durable)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            drop(store);
            let store = Store::open(storage(&image), Path::new(DIR), options()).unwrap();
            assert_eq!(store.index().get(b"k").unwrap().as_deref(), Some(&b"v"[..]), "{what}");
        }
    }
}
