//! A store closed cleanly opens from the log's clean-close marker (no
//! replay, no segment read past its header); a store killed after such an
//! open, once it wrote, replays its log. Crash tests on the simulated
//! storage crash at every write, sync and namespace operation of a run that
//! closes, reopens from the marker, commits (the first write after the
//! reopen), closes and reopens again: every acknowledged transaction is
//! there after each crash.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::numbered::{self, commit, key};
use common::{creation, storage, DIR};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_object::{Store, StoreOptions};

fn options() -> StoreOptions {
    let mut o = common::deterministic();
    o.log.max_segments = 4;
    o
}

/// Transactions per open of the workload.
const ROUND: u64 = 4;

/// Create, commit, close; reopen (clean), commit, close; reopen, commit.
/// Returns the highest transaction acknowledged.
fn workload(sim: &SimStorage) -> u64 {
    let mut acked = 0;
    let Ok(mut store) = Store::create(storage(sim), Path::new(DIR), creation(), options()) else { return 0 };
    for round in 0..3 {
        for t in round * ROUND + 1..=(round + 1) * ROUND {
            if commit(&store, t).is_err() {
                return acked;
            }
            acked = t;
        }
        if round == 2 || store.close().is_err() {
            return acked;
        }
        store = match Store::open(storage(sim), Path::new(DIR), options()) {
            Ok(s) => s,
            Err(_) => return acked,
        };
    }
    acked
}

fn run_all(kind: &str, count: u64, arm: impl Fn(&SimStorage, u64)) {
    numbered::crash_at_every_point(kind, count, &options(), workload, arm);
}

fn probe() -> larder_io::sim::SimCounters {
    let sim = SimStorage::new(0);
    assert_eq!(workload(&sim), 3 * ROUND);
    sim.counters()
}

#[test]
fn crash_at_every_write_around_close_and_reopen() {
    run_all("write", probe().writes, |sim, k| sim.crash_after_writes(k));
}

#[test]
fn crash_at_every_sync_around_close_and_reopen() {
    let c = probe();
    run_all("sync", c.syncs + c.dir_syncs, |sim, k| sim.crash_after_syncs(k));
}

#[test]
fn crash_at_every_namespace_op_around_close_and_reopen() {
    run_all("namespace op", probe().namespace_ops, |sim, k| sim.crash_after_namespace_ops(k));
}

#[test]
fn a_clean_close_opens_without_replay_and_a_kill_after_reopen_replays() {
    let sim = SimStorage::new(7);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
    for t in 1..=5 {
        commit(&store, t).unwrap();
    }
    store.close().unwrap();
    let store = Store::open(storage(&sim), Path::new(DIR), options()).unwrap();
    let report = store.log_recovery().clone();
    assert!(report.clean, "{report:?}");
    assert_eq!(report.replayed, 0);
    for t in 6..=9 {
        commit(&store, t).unwrap();
    }
    // Killed: no close, and the machine loses whatever was not synced.
    drop(store);
    let image = sim.crash_with(CrashMode::DropAllPending);
    let store = Store::open(storage(&image), Path::new(DIR), options()).unwrap();
    let report = store.log_recovery().clone();
    assert!(!report.clean, "the marker outlived the first write after the reopen: {report:?}");
    assert_eq!(report.replayed, 4, "{report:?}");
    for t in 1..=9 {
        assert!(store.index().get(&key(t)).unwrap().is_some(), "transaction {t}");
    }
}

#[test]
fn a_store_opened_and_closed_without_writing_keeps_its_marker_and_writes_nothing() {
    let sim = SimStorage::new(8);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
    commit(&store, 1).unwrap();
    store.close().unwrap();
    let before = sim.counters();
    for _ in 0..3 {
        let store = Store::open(storage(&sim), Path::new(DIR), options()).unwrap();
        assert!(store.log_recovery().clean);
        assert!(store.index().get(&key(1)).unwrap().is_some());
        store.close().unwrap();
    }
    let after = sim.counters();
    assert_eq!(
        (after.writes, after.syncs, after.dir_syncs, after.namespace_ops),
        (before.writes, before.syncs, before.dir_syncs, before.namespace_ops),
        "opening and closing a cleanly closed store wrote"
    );
}
