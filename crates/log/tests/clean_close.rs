//! The clean-close marker: an open after a clean close whose covered LSN is
//! the log's end reads no segment past its header and replays nothing; the
//! marker never lets a log that changed after it skip recovery.
//!
//! The crash tests run one deterministic workload: open, append and close
//! cleanly (the marker), reopen (from the marker), append more and close
//! again, reopen and append once more. It is rerun crashing after every
//! write, every sync and every namespace operation, in each crash mode;
//! each image is reopened with the LSN the "index" covered (the end of the
//! first close) and must replay every acknowledged record after it: a
//! marker kept past the first write after a reopen would replay none.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::crash_points::{check_goes_on, Outcome};
use common::{check_prefix, open, open_on, payload, small_options, Hooked, Hooks, DIR};
use larder_io::sim::crash_at_every_point;
use larder_io::sim::CrashMode;
use larder_io::{SimStorage, Storage, StorageRef};
use larder_log::Lsn;

const FIRST: Lsn = 7;
const SECOND: Lsn = 5;

fn append_n(log: &larder_log::Log, from: Lsn, n: Lsn, out: &mut Outcome) -> bool {
    for lsn in from..from + n {
        out.appended = lsn;
        match log.append(payload(lsn)) {
            Ok(l) => {
                assert_eq!(l, lsn);
                out.acked = lsn;
            }
            Err(_) => return false,
        }
    }
    true
}

/// The "index" covers FIRST (the first run's end) throughout.
fn workload(sim: &SimStorage) -> Outcome {
    let mut out = Outcome::default();
    let Ok((log, _)) = open(sim, small_options(), 0) else { return out };
    if !append_n(&log, 1, FIRST, &mut out) || log.checkpoint(FIRST).is_err() || log.close().is_err() {
        return out;
    }
    // Reopened from the marker: nothing replayed; then the first write.
    let Ok((log, replayed)) = open(sim, small_options(), FIRST) else { return out };
    assert!(replayed.is_empty());
    if !append_n(&log, FIRST + 1, SECOND, &mut out) || log.close().is_err() {
        return out;
    }
    // A marker with an end above what the index covers: recovery replays.
    let Ok((log, replayed)) = open(sim, small_options(), FIRST) else { return out };
    assert_eq!(check_prefix(&replayed, FIRST), FIRST + SECOND);
    let _ = append_n(&log, FIRST + SECOND + 1, 2, &mut out);
    out
}

fn check(image: &SimStorage, out: &Outcome, what: &str) {
    // Until the first close returned, the index covers nothing; after, FIRST.
    let covered = if out.acked >= FIRST { FIRST } else { 0 };
    check_goes_on(image, &small_options(), covered, out, what);
}

fn run_all(kind: &str, count: u64, arm: impl Fn(&SimStorage, u64)) {
    crash_at_every_point(kind, count, arm, workload, |image, out, what| check(image, &out, what));
}

fn probe() -> larder_io::sim::SimCounters {
    let sim = SimStorage::new(0);
    let out = workload(&sim);
    assert_eq!(out.acked, FIRST + SECOND + 2);
    sim.counters()
}

#[test]
fn crash_after_every_write_around_close_and_reopen() {
    run_all("write", probe().writes, |sim, k| sim.crash_after_writes(k));
}

#[test]
fn crash_after_every_sync_around_close_and_reopen() {
    let c = probe();
    run_all("sync", c.syncs + c.dir_syncs, |sim, k| sim.crash_after_syncs(k));
}

#[test]
fn crash_after_every_namespace_op_around_close_and_reopen() {
    run_all("namespace op", probe().namespace_ops, |sim, k| sim.crash_after_namespace_ops(k));
}

/// Counts reads of segment files past block 0.
#[derive(Debug, Default)]
struct CountReads(std::sync::atomic::AtomicU64);

impl Hooks for CountReads {
    fn before_read(&self, path: &Path, offset: u64, len: usize) {
        let segment = path.extension().is_some_and(|e| e == "seg");
        if segment && offset + len as u64 > 4096 {
            self.0.fetch_add(len as u64, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

#[test]
fn an_open_after_a_clean_close_reads_only_headers_and_writes_nothing() {
    let sim = SimStorage::new(1);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    for lsn in 1..=20 {
        log.append(payload(lsn)).unwrap();
    }
    log.checkpoint(20).unwrap();
    log.close().unwrap();
    let before = sim.counters();
    let hooks = Arc::new(CountReads::default());
    let storage: StorageRef = Hooked { inner: sim.clone(), hooks: hooks.clone() }.storage();
    let (log, replayed) = open_on(storage.clone(), small_options(), 20).unwrap();
    assert!(replayed.is_empty());
    let report = log.recovery_report().clone();
    assert!(report.clean);
    assert_eq!((report.end_lsn, report.acked_lsn, report.rewritten_blocks), (20, 20, 0));
    assert_eq!(hooks.0.load(std::sync::atomic::Ordering::Relaxed), 0, "read past a segment header");
    // Closing without a write keeps the marker and writes nothing.
    log.close().unwrap();
    let after = sim.counters();
    assert_eq!(
        (after.writes, after.syncs, after.dir_syncs, after.namespace_ops),
        (before.writes, before.syncs, before.dir_syncs, before.namespace_ops),
        "an open and close with nothing appended wrote"
    );
    let (log, _) = open_on(storage, small_options(), 20).unwrap();
    assert!(log.recovery_report().clean);
    // The first append removes the marker (durably) before its segment start.
    assert_eq!(log.append(payload(21)).unwrap(), 21);
    assert!(!sim.exists(&Path::new(DIR).join("CLEAN")).unwrap());
    drop(log);
    let (log, replayed) = open(&sim.crash_with(CrashMode::DropAllPending), small_options(), 20).unwrap();
    assert_eq!(check_prefix(&replayed, 20), 21);
    assert!(!log.recovery_report().clean);
}

#[test]
fn a_marker_whose_end_is_not_the_covered_lsn_replays() {
    let sim = SimStorage::new(2);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    for lsn in 1..=12 {
        log.append(payload(lsn)).unwrap();
    }
    log.close().unwrap();
    let (log, replayed) = open(&sim, small_options(), 5).unwrap();
    assert_eq!(check_prefix(&replayed, 5), 12);
    assert!(!log.recovery_report().clean);
    assert!(!sim.exists(&Path::new(DIR).join("CLEAN")).unwrap(), "a marker that did not hold stays");
}

#[test]
fn a_stale_marker_left_by_a_build_that_ignores_it_is_not_trusted() {
    // A build without the marker opens the log, appends and dies, leaving
    // the old marker in place: the tail segment changed, so it is ignored.
    let sim = SimStorage::new(3);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    for lsn in 1..=9 {
        log.append(payload(lsn)).unwrap();
    }
    log.checkpoint(9).unwrap();
    log.close().unwrap();
    let marker_path = Path::new(DIR).join("CLEAN");
    let marker = sim.read_durable(&marker_path).unwrap();
    let (log, _) = open(&sim, small_options(), 9).unwrap();
    for lsn in 10..=14 {
        log.append(payload(lsn)).unwrap();
    }
    drop(log);
    let f = sim.open(&marker_path, larder_io::OpenOptions::CREATE_NEW).unwrap();
    larder_io::write_all_at(&*f, &marker, 0).unwrap();
    f.sync_data().unwrap();
    sim.sync_dir(Path::new(DIR)).unwrap();
    let (log, replayed) = open(&sim.crash_with(CrashMode::DropAllPending), small_options(), 9).unwrap();
    assert_eq!(check_prefix(&replayed, 9), 14);
    assert!(!log.recovery_report().clean);
}

#[test]
fn a_damaged_marker_is_ignored() {
    let sim = SimStorage::new(4);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    for lsn in 1..=6 {
        log.append(payload(lsn)).unwrap();
    }
    log.close().unwrap();
    for at in [0u64, 8, 32, 48, 96] {
        let image = sim.crash_with(CrashMode::KeepAllPending);
        image.corrupt(Path::new(DIR).join("CLEAN"), at, 0x40).unwrap();
        let (log, replayed) = open(&image, small_options(), 3).unwrap();
        assert_eq!(check_prefix(&replayed, 3), 6, "byte {at} flipped");
        assert!(!log.recovery_report().clean);
    }
}

#[test]
fn a_poisoned_log_leaves_no_marker() {
    let sim = SimStorage::new(5);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    log.append(payload(1)).unwrap();
    log.poison("test".into());
    assert!(log.close().is_err());
    assert!(!sim.exists(&Path::new(DIR).join("CLEAN")).unwrap());
    let _: &dyn Storage = &sim;
}
