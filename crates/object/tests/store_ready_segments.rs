//! A store whose log makes its segments ahead of need
//! (`StoreOptions::log.min_segments`): they are there once the store is
//! created, its commits fill them without creating more, and a crash at
//! any write, sync or namespace operation of the creation, the commits, a
//! close and a reopen loses no acknowledged transaction.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{creation, storage, DIR};
use larder_index::WriteBatch;
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_object::{Durability, Store, StoreOptions};

fn options() -> StoreOptions {
    let mut o = common::deterministic();
    o.log.max_segments = 4;
    o.log.min_segments = 3;
    o
}

fn key(t: u64) -> Vec<u8> {
    format!("t{t:04}").into_bytes()
}

fn commit(store: &Store, t: u64) -> larder_object::Result<()> {
    let mut b = WriteBatch::new();
    b.put(key(t), t.to_le_bytes().repeat(30));
    b.put(b"last", t.to_le_bytes());
    store.commit(&b, Durability::Durable).map(|_| ())
}

const COMMITS: u64 = 6;

/// Create, commit, close, reopen, commit. Returns the highest transaction
/// acknowledged.
fn workload(sim: &SimStorage) -> u64 {
    let mut acked = 0;
    let Ok(store) = Store::create(storage(sim), Path::new(DIR), creation(), options()) else { return 0 };
    for t in 1..=COMMITS {
        if commit(&store, t).is_err() {
            return acked;
        }
        acked = t;
    }
    if store.close().is_err() {
        return acked;
    }
    let Ok(store) = Store::open(storage(sim), Path::new(DIR), options()) else { return acked };
    for t in COMMITS + 1..=2 * COMMITS {
        if commit(&store, t).is_err() {
            return acked;
        }
        acked = t;
    }
    acked
}

fn check(image: &SimStorage, acked: u64, what: &str) {
    let store = match Store::open(storage(image), Path::new(DIR), options()) {
        Ok(s) => s,
        Err(larder_object::ObjectError::NotAStore { .. }) if acked == 0 => return,
        Err(e) => panic!("{what}: reopen failed: {e}"),
    };
    let last = store.index().get(b"last").unwrap().map_or(0, |v| u64::from_le_bytes(v[..8].try_into().unwrap()));
    assert!(last >= acked, "{what}: last transaction {last}, {acked} acknowledged");
    for t in 1..=last {
        assert_eq!(store.index().get(&key(t)).unwrap(), Some(t.to_le_bytes().repeat(30)), "{what}: transaction {t}");
    }
    commit(&store, last + 1).unwrap();
    store.close().unwrap();
    let again = Store::open(storage(image), Path::new(DIR), options()).unwrap();
    assert!(again.index().get(&key(last + 1)).unwrap().is_some(), "{what}");
}

fn run_all(kind: &str, count: u64, arm: impl Fn(&SimStorage, u64)) {
    for k in 1..=count {
        for (mi, mode) in
            [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending].into_iter().enumerate()
        {
            let sim = SimStorage::new(k * 3 + mi as u64);
            sim.set_unordered_dir_ops(true);
            arm(&sim, k);
            let acked = workload(&sim);
            assert!(sim.is_crashed(), "{kind} {k}: the workload finished before the crash point");
            check(&sim.crash_with(mode), acked, &format!("crash after {kind} {k} ({mode:?})"));
        }
    }
}

fn probe() -> larder_io::sim::SimCounters {
    let sim = SimStorage::new(0);
    assert_eq!(workload(&sim), 2 * COMMITS);
    sim.counters()
}

#[test]
fn the_segments_are_made_with_the_store_and_commits_make_no_more() {
    let sim = SimStorage::new(1);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options()).unwrap();
    assert_eq!(store.log_stats().segments_created, 3);
    // Each durable commit is a group of one 4 KiB block; a 64 KiB segment
    // holds 15 after its header. 30 commits fill two segments and start
    // the third, short of its half, where a spare would be wanted.
    for t in 1..=30 {
        commit(&store, t).unwrap();
    }
    let stats = store.log_stats();
    assert!(stats.groups >= 30, "{stats:?}");
    assert_eq!(stats.segments_created, 3, "a segment was created while commits filled the ready ones: {stats:?}");
    store.close().unwrap();
}

#[test]
fn crash_at_every_write_of_creation_commits_and_reopen() {
    run_all("write", probe().writes, |sim, k| sim.crash_after_writes(k));
}

#[test]
fn crash_at_every_sync_of_creation_commits_and_reopen() {
    let c = probe();
    run_all("sync", c.syncs + c.dir_syncs, |sim, k| sim.crash_after_syncs(k));
}

#[test]
fn crash_at_every_namespace_op_of_creation_commits_and_reopen() {
    run_all("namespace op", probe().namespace_ops, |sim, k| sim.crash_after_namespace_ops(k));
}
