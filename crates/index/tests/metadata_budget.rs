//! The metadata budget (`metadata_cache_bytes`) against point reads: gets
//! over runs whose metadata exceeds it keep those runs open (over budget,
//! counted) instead of reopening runs on every get, and runs that go
//! unused (or that only the open of the index verified) are still evicted
//! down to the budget as other runs are opened.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use larder_index::{Index, Options, WriteBatch};
use larder_io::{SimStorage, StorageRef};

const RUNS: u32 = 24;
const KEYS_PER_RUN: u32 = 100;

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn options(metadata_cache_bytes: usize) -> Options {
    Options {
        memtable_size_bytes: 1 << 20,
        l0_slowdown_runs: 64,
        l0_stop_runs: 80,
        merge_fanout: 64,
        max_open_runs: 64,
        metadata_cache_bytes,
        ..common::tiny_options(false)
    }
}

/// An index of 24 level-0 runs (merging held back) with disjoint key
/// ranges, so a get of run r's keys reads run r alone; reopened with
/// `metadata_cache_bytes`, with what all 24 runs' metadata takes.
fn index_of_disjoint_runs(metadata_cache_bytes: impl FnOnce(u64) -> usize) -> (Index, u64) {
    let storage: StorageRef = Arc::new(SimStorage::new(7));
    let dir = Path::new("/db/index");
    let index = Index::open(storage.clone(), dir, options(64 << 20)).unwrap();
    for run in 0..RUNS {
        let mut batch = WriteBatch::new();
        for i in run * KEYS_PER_RUN..(run + 1) * KEYS_PER_RUN {
            batch.put(key(i), format!("value of {i}").into_bytes());
        }
        index.write(u64::from(run) + 1, &batch).unwrap();
        index.flush().unwrap();
    }
    assert_eq!(index.stats().runs, u64::from(RUNS), "{:?}", index.stats().runs_per_level);
    let all = index.stats().metadata_bytes;
    assert_eq!(index.stats().open_runs, u64::from(RUNS));
    drop(index);
    (Index::open(storage, dir, options(metadata_cache_bytes(all))).unwrap(), all)
}

fn get_keys_of(index: &Index, runs: std::ops::Range<u32>, rounds: u32) {
    for round in 0..rounds {
        for step in 0..KEYS_PER_RUN {
            for run in runs.clone() {
                let i = run * KEYS_PER_RUN + (step * 37 + round) % KEYS_PER_RUN;
                assert_eq!(index.get(&key(i)).unwrap(), Some(format!("value of {i}").into_bytes()), "key {i}");
            }
        }
    }
}

#[test]
fn gets_over_runs_whose_metadata_exceeds_the_budget_do_not_reopen_them_on_every_get() {
    // Room for about a third of the runs.
    let (index, _) = index_of_disjoint_runs(|all| (all / 3) as usize);
    get_keys_of(&index, 0..RUNS, 1);
    let before = index.stats();
    get_keys_of(&index, 0..RUNS, 4);
    let after = index.stats();
    let (gets, opens) = (after.gets - before.gets, after.run_opens - before.run_opens);
    assert!(opens <= u64::from(RUNS), "{opens} run opens for {gets} gets over {RUNS} runs");
    assert_eq!(after.open_runs, u64::from(RUNS), "the runs every round reads stay open");
    assert!(after.metadata_over_budget_opens > 0, "keeping runs over budget is not counted");
}

#[test]
fn runs_that_go_unused_are_evicted_down_to_the_budget() {
    // Room for about half the runs: reading the first half keeps it open,
    // over budget (it is in use); reading the second half alone, a run at
    // a time, evicts the first as it goes unused.
    let (index, all) = index_of_disjoint_runs(|all| (all / 2) as usize);
    let budget = all / 2;
    // Verifying every run at open is no use: the open leaves the budget.
    assert!(index.stats().metadata_bytes <= budget, "{:?}", index.stats());
    get_keys_of(&index, 0..RUNS / 2 + 2, 2);
    assert!(index.stats().metadata_bytes > budget, "{:?}", index.stats());
    for run in RUNS / 2 + 2..RUNS {
        get_keys_of(&index, run..run + 1, 4);
    }
    let stats = index.stats();
    assert!(stats.metadata_bytes <= budget, "{} bytes held over a budget of {budget}", stats.metadata_bytes);
    assert!(stats.open_runs < u64::from(RUNS), "{} runs open", stats.open_runs);
}
