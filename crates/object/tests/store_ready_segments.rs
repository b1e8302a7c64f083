//! A store whose log makes its segments ahead of need
//! (`StoreOptions::log.min_segments`): they are there once the store is
//! created, its commits fill them without creating more, and a crash at
//! any write, sync or namespace operation of the creation, the commits, a
//! close and a reopen loses no acknowledged transaction.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::numbered::{self, commit};
use common::{creation, storage, DIR};
use larder_io::SimStorage;
use larder_object::{Store, StoreOptions};

fn options() -> StoreOptions {
    let mut o = common::deterministic();
    o.log.max_segments = 4;
    o.log.min_segments = 3;
    o
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

fn run_all(kind: &str, count: u64, arm: impl Fn(&SimStorage, u64)) {
    numbered::crash_at_every_point(kind, count, &options(), workload, arm);
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
