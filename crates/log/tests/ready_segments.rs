//! `Options::min_segments`: a new log creates its segments ahead of need at
//! open, so records fill them without a zero-fill beside them; a clean
//! reopen writes nothing; a value above `max_segments` is refused; and a
//! crash at any write, sync or namespace operation of the creation or of
//! the records written after it loses no acknowledged record.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::crash_points::{check_goes_on, Outcome};
use common::{check_prefix, open, payload, small_options, DIR};
use larder_io::sim::crash_at_every_point;
use larder_io::{SimStorage, Storage};
use larder_log::{LogError, Lsn, Options};

/// Small segments, three of them made at open (of at most four).
fn ready_options() -> Options {
    Options { segment_bytes: 64 << 10, max_segments: 4, min_segments: 3, ..small_options() }
}

fn segment_files(sim: &SimStorage) -> usize {
    sim.list_dir(Path::new(DIR)).unwrap().iter().filter(|n| n.ends_with(".seg")).count()
}

/// Records, each appended durably, whose groups fill about `segments`
/// segments of `options`.
fn records_filling(options: &Options, segments: f64) -> Lsn {
    // payload() averages about 760 bytes; a group of one record takes its
    // payload and header rounded up to a 4 KiB block.
    let usable = (options.segment_bytes - 4096) as f64;
    (usable * segments / 4096.0) as Lsn
}

#[test]
fn a_new_log_makes_its_segments_at_open_and_writes_into_them_without_creating_more() {
    let options = ready_options();
    let sim = SimStorage::new(1);
    let (log, replayed) = open(&sim, options.clone(), 0).unwrap();
    assert!(replayed.is_empty());
    assert_eq!(log.stats().segments_created, 3, "three segments made at open");
    assert_eq!(segment_files(&sim), 3);
    // Two segments and a bit: the third is half full only at 2.5, when a
    // spare would be wanted; until then no segment is created.
    let n = records_filling(&options, 2.2);
    for lsn in 1..=n {
        assert_eq!(log.append(payload(lsn)).unwrap(), lsn);
    }
    let stats = log.stats();
    assert!(stats.groups >= n, "one group per durable append");
    assert_eq!(stats.segments_created, 3, "no segment created while records filled the ready ones: {stats:?}");
    log.close().unwrap();
    let (_, replayed) = open(&sim, options, 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), n);
}

#[test]
fn without_the_option_one_spare_is_made_and_more_as_records_need_them() {
    let options = Options { min_segments: 0, ..ready_options() };
    let sim = SimStorage::new(2);
    let (log, _) = open(&sim, options.clone(), 0).unwrap();
    assert_eq!(log.stats().segments_created, 1, "only the spare at open");
    let n = records_filling(&options, 2.2);
    for lsn in 1..=n {
        log.append(payload(lsn)).unwrap();
    }
    assert!(log.stats().segments_created >= 3, "segments made while writing: {:?}", log.stats());
    log.close().unwrap();
}

#[test]
fn a_clean_reopen_writes_nothing_and_other_reopens_make_what_is_missing() {
    let options = ready_options();
    let sim = SimStorage::new(3);
    // Made without the option: the spare made at open became the active
    // segment, and five records leave it less than half full (no spare).
    let (log, _) = open(&sim, Options { min_segments: 0, ..options.clone() }, 0).unwrap();
    for lsn in 1..=5 {
        log.append(payload(lsn)).unwrap();
    }
    drop(log);
    assert_eq!(segment_files(&sim), 1);
    // Not closed cleanly: the reopen makes the other two.
    let (log, replayed) = open(&sim, options.clone(), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 5);
    assert_eq!(log.stats().segments_created, 2);
    assert_eq!(segment_files(&sim), 3);
    // A clean close with everything covered: the next open reads headers
    // only (see clean_close.rs) and makes no segment.
    log.checkpoint(5).unwrap();
    log.close().unwrap();
    let writes = sim.counters().writes;
    let (log, replayed) = open(&sim, options, 5).unwrap();
    assert!(replayed.is_empty());
    assert!(log.recovery_report().clean);
    assert_eq!(log.stats().segments_created, 0);
    assert_eq!(sim.counters().writes, writes, "a clean reopen wrote");
    log.close().unwrap();
}

#[test]
fn min_segments_above_max_segments_is_refused() {
    let options = Options { min_segments: 5, ..ready_options() };
    let sim = SimStorage::new(4);
    match open(&sim, options, 0) {
        Err(LogError::InvalidOption { name, .. }) => assert_eq!(name, "min_segments"),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("min_segments above max_segments was accepted"),
    }
    assert!(!sim.exists(Path::new(DIR)).unwrap(), "a refused option created the log's directory");
}

#[test]
fn a_full_disk_at_open_makes_what_fits_and_rotations_make_the_rest() {
    let options = ready_options();
    let sim = SimStorage::new(5);
    // Room for about one and a half segments.
    sim.set_capacity(options.segment_bytes * 3 / 2);
    let (log, _) = open(&sim, options.clone(), 0).unwrap();
    assert!(log.stats().segments_created < 3, "{:?}", log.stats());
    sim.set_capacity(1 << 30);
    let n = records_filling(&options, 2.2);
    for lsn in 1..=n {
        assert_eq!(log.append(payload(lsn)).unwrap(), lsn);
    }
    log.close().unwrap();
    let (_, replayed) = open(&sim, options, 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), n);
}

const RECORDS: Lsn = 40;

fn workload(sim: &SimStorage) -> Outcome {
    let mut out = Outcome::default();
    let Ok((log, _)) = open(sim, ready_options(), 0) else { return out };
    for lsn in 1..=RECORDS {
        match log.append(payload(lsn)) {
            Ok(l) => {
                assert_eq!(l, lsn);
                out.acked = lsn;
                out.appended = lsn;
            }
            Err(_) => {
                out.appended = lsn;
                return out;
            }
        }
    }
    out
}

fn run_all(kind: &str, count: u64, arm: impl Fn(&SimStorage, u64)) {
    let check = |image: &SimStorage, out: &Outcome, what: &str| check_goes_on(image, &ready_options(), 0, out, what);
    crash_at_every_point(kind, count, arm, workload, |image, out, what| check(image, &out, what));
}

fn probe() -> SimStorage {
    let sim = SimStorage::new(0);
    let out = workload(&sim);
    assert_eq!(out.acked, RECORDS);
    sim
}

#[test]
fn crash_after_every_write_of_the_creation_and_the_records() {
    let writes = probe().counters().writes;
    run_all("write", writes, |sim, k| sim.crash_after_writes(k));
}

#[test]
fn crash_after_every_sync_of_the_creation_and_the_records() {
    let c = probe().counters();
    run_all("sync", c.syncs + c.dir_syncs, |sim, k| sim.crash_after_syncs(k));
}

#[test]
fn crash_after_every_namespace_op_of_the_creation() {
    let names = probe().counters().namespace_ops;
    assert!(names >= 3, "only {names} namespace operations");
    run_all("namespace op", names, |sim, k| sim.crash_after_namespace_ops(k));
}
