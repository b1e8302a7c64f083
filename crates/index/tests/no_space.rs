//! A full file system is not a poison: a flush or merge that finds no
//! space changes nothing, reports ENOSPC, and succeeds once space returns;
//! no partial run or manifest is left holding space.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::tiny_options;
use larder_index::{Index, Options, WriteBatch};
use larder_io::sim::{SimFault, SimOp};
use larder_io::{SimStorage, Storage, StorageRef};

const DIR: &str = "/db/index";

fn open(sim: &SimStorage, options: Options) -> Index {
    let storage: StorageRef = Arc::new(sim.clone());
    Index::open(storage, Path::new(DIR), options).unwrap()
}

fn files(sim: &SimStorage, suffix: &str) -> usize {
    sim.list_dir(Path::new(DIR)).unwrap().iter().filter(|n| n.ends_with(suffix)).count()
}

fn put(index: &Index, seq: u64) {
    index.write(seq, WriteBatch::new().put(format!("k{seq:04}").into_bytes(), vec![seq as u8; 100])).unwrap();
}

/// Fills the index, then fails the flush's `nth` call of `op` with ENOSPC.
fn a_flush_without_space_is_retried(background: bool, op: SimOp, nth: u64) {
    let sim = SimStorage::new(nth);
    let index = open(&sim, tiny_options(background));
    put(&index, 1);
    index.flush().unwrap();
    put(&index, 2);
    sim.fail_nth(op, nth, SimFault::NoSpace);
    let first = index.flush();
    sim.clear_faults();
    if let Err(e) = &first {
        assert!(e.is_no_space(), "{op:?} {nth}: {e}");
        assert_eq!(index.poisoned(), None, "{op:?} {nth}: ENOSPC poisoned the index");
        // Writes go on, and the flush succeeds once space is back.
        put(&index, 3);
    }
    index.flush().unwrap_or_else(|e| panic!("{op:?} {nth}: the retried flush failed: {e}"));
    assert_eq!(index.poisoned(), None);
    let last = if first.is_err() { 3 } else { 2 };
    assert_eq!(index.durable_seq(), last);
    drop(index);
    let index = open(&sim, tiny_options(background));
    for seq in 1..=last {
        assert!(index.get(format!("k{seq:04}").as_bytes()).unwrap().is_some(), "{op:?} {nth}: k{seq} lost");
    }
    // Nothing left over: every run file is named, one manifest.
    assert_eq!(files(&sim, ".run"), index.stats().runs as usize, "{op:?} {nth}: a stray run holds space");
    assert_eq!(files(&sim, ".tmp"), 0);
}

#[test]
fn a_flush_without_space_is_retried_inline() {
    // Syncs of a flush: the run, the manifest, CURRENT's new copy; opens
    // and writes likewise; the rename of CURRENT.
    for (op, calls) in [(SimOp::SyncData, 4), (SimOp::Open, 4), (SimOp::Write, 6), (SimOp::Rename, 1)] {
        for nth in 1..=calls {
            a_flush_without_space_is_retried(false, op, nth);
        }
    }
}

#[test]
fn a_flush_without_space_is_retried_in_the_background() {
    for (op, calls) in [(SimOp::SyncData, 3), (SimOp::Write, 3)] {
        for nth in 1..=calls {
            a_flush_without_space_is_retried(true, op, nth);
        }
    }
}

#[test]
fn a_full_file_system_stops_flushes_and_merges_until_space_returns() {
    let sim = SimStorage::new(7);
    let index = open(&sim, tiny_options(true));
    let mut seq = 0;
    for _ in 0..200 {
        seq += 1;
        put(&index, seq);
    }
    index.flush().unwrap();
    // The file system is full now: the next flush has nowhere to go.
    sim.set_capacity(0);
    let mut refused = None;
    for _ in 0..2000 {
        seq += 1;
        if let Err(e) = index.write(seq, WriteBatch::new().put(format!("k{seq:04}").into_bytes(), vec![1; 100])) {
            refused = Some(e);
            seq -= 1;
            break;
        }
    }
    // Writes stall behind the flushes and get ENOSPC; nothing is poisoned.
    let e = refused.expect("writes never stalled on a full file system");
    assert!(e.is_no_space(), "{e}");
    assert!(index.flush().unwrap_err().is_no_space());
    assert_eq!(index.poisoned(), None);
    sim.set_capacity(u64::MAX);
    index.flush().unwrap();
    assert_eq!(index.durable_seq(), seq);
    index.compact_all().unwrap();
    assert_eq!(index.iter(true).unwrap().count() as u64, seq);
}
