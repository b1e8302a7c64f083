//! Bad input is refused and changes nothing; a failed sync poisons the
//! index until it is reopened; resources stay within their bounds.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::tiny_options;
use larder_index::{Index, IndexError, Options, WriteBatch, MAX_KEY_BYTES};
use larder_io::sim::{SimFault, SimOp};
use larder_io::{SimStorage, StorageRef};

const DIR: &str = "/db/index";

fn open(sim: &SimStorage, options: Options) -> Index {
    let storage: StorageRef = Arc::new(sim.clone());
    Index::open(storage, Path::new(DIR), options).unwrap()
}

#[test]
fn sequence_numbers_must_increase() {
    let sim = SimStorage::new(1);
    let index = open(&sim, tiny_options(false));
    index.write(5, WriteBatch::new().put(b"a", b"1")).unwrap();
    for bad in [5, 4, 0] {
        let e = index.write(bad, WriteBatch::new().put(b"b", b"2")).unwrap_err();
        assert!(matches!(e, IndexError::SequenceNotIncreasing { given, last: 5 } if given == bad), "{e}");
    }
    assert_eq!(index.get(b"b").unwrap(), None);
    assert_eq!(index.last_seq(), 5);
}

#[test]
fn oversized_keys_and_unknown_operators_refuse_the_whole_batch() {
    let sim = SimStorage::new(1);
    let index = open(&sim, tiny_options(false));
    let mut b = WriteBatch::new();
    b.put(b"ok", b"1").put(vec![0u8; MAX_KEY_BYTES + 1], b"x");
    assert!(matches!(index.write(1, &b).unwrap_err(), IndexError::TooLarge { what: "key", .. }));
    let mut b = WriteBatch::new();
    b.put(b"ok", b"1").merge("no.such.operator", b"k", b"1");
    assert!(matches!(index.write(1, &b).unwrap_err(), IndexError::MergeOperatorNotRegistered(_)));
    assert_eq!(index.get(b"ok").unwrap(), None, "a refused batch must change nothing");
    // The sequence number was not consumed.
    index.write(1, WriteBatch::new().put(b"ok", b"1")).unwrap();
}

#[test]
fn a_refused_ingest_changes_nothing_and_a_pending_one_holds_every_write() {
    let sim = SimStorage::new(1);
    let index = open(&sim, tiny_options(false));
    index.write(5, WriteBatch::new().put(b"a", b"1")).unwrap();
    let good = WriteBatch::new().put(b"b", b"2").clone();
    let e = index.prepare_ingest(5, &good).unwrap_err();
    assert!(matches!(e, IndexError::SequenceNotIncreasing { given: 5, last: 5 }), "{e}");
    let mut bad = WriteBatch::new();
    bad.put(b"ok", b"1").merge("no.such.operator", b"k", b"1");
    assert!(matches!(index.prepare_ingest(6, &bad).unwrap_err(), IndexError::MergeOperatorNotRegistered(_)));
    assert_eq!((index.get(b"ok").unwrap(), index.last_seq()), (None, 5), "refused ingests change nothing");
    // A prepared ingest holds sequence number 6: writes and other ingests
    // wait for it, and dropping it leaves the index as it was.
    let run = index.prepare_ingest(6, &good).unwrap();
    assert!(matches!(index.write(7, &good).unwrap_err(), IndexError::IngestPending { seq: 6 }));
    assert!(matches!(index.prepare_ingest(7, &good).unwrap_err(), IndexError::IngestPending { seq: 6 }));
    drop(run);
    assert_eq!((index.get(b"b").unwrap(), index.last_seq()), (None, 5));
    index.write(6, &good).unwrap();
    assert_eq!(index.get(b"b").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn invalid_options_are_refused_by_name() {
    let sim = SimStorage::new(1);
    let storage: StorageRef = Arc::new(sim);
    let e = Index::open(storage, Path::new(DIR), Options { merge_fanout: 1, ..Options::default() }).unwrap_err();
    assert!(e.to_string().contains("merge_fanout"), "{e}");
}

#[test]
fn a_second_open_of_the_same_directory_is_refused() {
    let sim = SimStorage::new(1);
    let _first = open(&sim, tiny_options(false));
    let storage: StorageRef = Arc::new(sim.clone());
    let e = Index::open(storage, Path::new(DIR), tiny_options(false)).unwrap_err();
    assert!(e.to_string().contains("locked"), "{e}");
}

fn failed_sync_poisons(background: bool) {
    let sim = SimStorage::new(1);
    let index = open(&sim, tiny_options(background));
    index.write(1, WriteBatch::new().put(b"a", b"1")).unwrap();
    index.flush().unwrap();
    index.write(2, WriteBatch::new().put(b"b", b"2")).unwrap();
    sim.fail_nth(SimOp::SyncData, 1, SimFault::Eio);
    let e = index.flush().unwrap_err();
    assert!(matches!(e, IndexError::Poisoned(_) | IndexError::Io(_)), "{e}");
    // Every later write and flush is refused, saying why.
    let e = index.write(3, WriteBatch::new().put(b"c", b"3")).unwrap_err();
    assert!(matches!(&e, IndexError::Poisoned(cause) if cause.contains("flush")), "{e}");
    assert!(matches!(index.flush().unwrap_err(), IndexError::Poisoned(_)));
    // Reads still work.
    assert_eq!(index.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    drop(index);
    // Reopen recovers from what is on disk: the durable batch only.
    let index = open(&sim, tiny_options(background));
    assert_eq!(index.durable_seq(), 1);
    assert_eq!(index.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(index.get(b"b").unwrap(), None);
    index.write(2, WriteBatch::new().put(b"b", b"2")).unwrap();
    index.flush().unwrap();
}

#[test]
fn failed_sync_poisons_inline() {
    failed_sync_poisons(false);
}

#[test]
fn failed_sync_poisons_background() {
    failed_sync_poisons(true);
}

#[test]
fn open_runs_stay_within_the_descriptor_budget() {
    let sim = SimStorage::new(1);
    // Merging off (huge fanout) so many runs pile up.
    let options =
        Options { merge_fanout: 64, l0_slowdown_runs: 64, l0_stop_runs: 128, max_open_runs: 3, ..tiny_options(false) };
    let index = open(&sim, options.clone());
    for i in 1..=20u64 {
        index.write(i, WriteBatch::new().put(format!("k{i:03}").into_bytes(), vec![1; 10])).unwrap();
        index.flush().unwrap();
    }
    assert_eq!(index.stats().runs, 20);
    for i in 1..=20u64 {
        assert_eq!(index.get(format!("k{i:03}").as_bytes()).unwrap(), Some(vec![1; 10]));
        assert!(index.stats().open_runs <= 3, "{} runs open", index.stats().open_runs);
    }
    let n = index.iter(true).unwrap().count();
    assert_eq!(n, 20);
}

#[test]
fn background_workers_flush_merge_and_count() {
    let sim = SimStorage::new(1);
    let index = open(&sim, tiny_options(true));
    for i in 1..=3000u64 {
        index
            .write(i, WriteBatch::new().put(format!("k{:05}", (i * 7919) % 3000).into_bytes(), vec![i as u8; 30]))
            .unwrap();
    }
    index.flush().unwrap();
    let s = index.stats();
    assert!(s.flushes > 5 && s.compactions > 0, "{s}");
    assert!(s.write_amplification() > 1.0, "{s}");
    assert_eq!(s.durable_seq, 3000);
    assert_eq!(index.iter(true).unwrap().count(), 3000);
    for i in 0..3000u64 {
        assert!(index.get(format!("k{i:05}").as_bytes()).unwrap().is_some());
    }
    let misses = (0..500u64).filter(|i| index.get(format!("x{i:05}").as_bytes()).unwrap().is_none()).count();
    assert_eq!(misses, 500);
    let s = index.stats();
    assert!(s.bloom_negatives > 0 && s.get_misses == 500, "{s}");
}

/// The run files in the index directory.
fn run_files(sim: &SimStorage) -> std::collections::BTreeSet<String> {
    use larder_io::Storage;
    sim.list_dir(Path::new(DIR)).unwrap().into_iter().filter(|n| n.ends_with(".run")).collect()
}

#[test]
fn a_failed_merge_leaves_no_run_file_behind() {
    let sim = SimStorage::new(1);
    let index = open(&sim, tiny_options(false));
    let mut seq = 0;
    for round in 0..4 {
        for i in 0..60 {
            seq += 1;
            index.write(seq, WriteBatch::new().put(format!("k{i:03}-{round}").into_bytes(), vec![7u8; 40])).unwrap();
        }
        index.flush().unwrap();
    }
    let before = run_files(&sim);
    assert!(before.len() >= 2, "{before:?}");
    // The first write of the merge's output (its first blocks) fails.
    sim.fail_nth(SimOp::Write, 1, SimFault::Eio);
    index.compact_all().unwrap_err();
    // No manifest names the partial output: it is gone at once, not left
    // for the next open (a clean close that cut a merge short left it).
    assert_eq!(run_files(&sim), before);
    drop(index);
    let index = open(&sim, tiny_options(false));
    assert_eq!(index.iter(true).unwrap().count(), 240);
}
