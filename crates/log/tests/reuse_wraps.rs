//! Segments are reused many times and no stale record from an earlier use
//! is ever replayed. How: 4 segments of 16 KiB (3 blocks of groups each),
//! records of up to 6 KiB, a checkpoint lagging two records behind after
//! every append, so the log wraps through all segments far more than three
//! times; then crash at many points (mid-group, mid-rotation) in every
//! crash mode and reopen with the last checkpoint: replay must be exactly
//! the records after it, up to at least the last acknowledged one, with
//! their own payloads.
#![allow(clippy::unwrap_used)]

mod common;

use common::{open, small_options, DIR};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_log::Lsn;

fn big_payload(lsn: Lsn) -> Vec<u8> {
    let mut p = common::payload(lsn);
    p.resize(100 + (lsn as usize * 977) % 6000, lsn as u8);
    p
}

/// Returns (acked, appended, covered, segments reused).
fn workload(sim: &SimStorage, records: u64) -> (Lsn, Lsn, Lsn, u64) {
    let (mut acked, mut appended, mut covered, mut reused) = (0, 0, 0, 0);
    let Ok((log, _)) = open(sim, small_options(), 0) else { return (0, 0, 0, 0) };
    for lsn in 1..=records {
        appended = lsn;
        if log.append(big_payload(lsn)).is_err() {
            break;
        }
        acked = lsn;
        reused = log.stats().segments_reused;
        let c = lsn.saturating_sub(2);
        if log.checkpoint(c).is_ok() {
            covered = c;
        }
    }
    (acked, appended, covered, reused)
}

fn check(image: &SimStorage, acked: Lsn, appended: Lsn, covered: Lsn, what: &str) {
    let (_, replayed) = open(image, small_options(), covered).unwrap_or_else(|e| panic!("{what}: {e}"));
    // Payloads are checked by size too: a stale record of an earlier use
    // has another LSN, and so another size and content.
    for (lsn, p) in &replayed {
        assert_eq!(p, &big_payload(*lsn), "{what}: stale or wrong payload at {lsn}");
    }
    let lsns: Vec<Lsn> = replayed.iter().map(|r| r.0).collect();
    let m = covered + lsns.len() as u64;
    assert_eq!(lsns, (covered + 1..=m).collect::<Vec<_>>(), "{what}");
    assert!(m >= acked && m <= appended, "{what}: replay ends at {m}, acked {acked}, appended {appended}");
}

#[test]
fn wraps_many_times_without_replaying_stale_records() {
    let sim = SimStorage::new(11);
    let (acked, _, covered, reused) = workload(&sim, 150);
    assert_eq!(acked, 150);
    assert!(reused >= 12, "segments reused only {reused} times: fewer than 3 wraps of 4 segments");
    assert_eq!(
        sim.file_names().iter().filter(|p| p.starts_with(DIR) && p.to_string_lossy().ends_with(".seg")).count(),
        4
    );
    let (_, replayed) = open(&sim.crash_with(CrashMode::DropAllPending), small_options(), covered).unwrap();
    assert_eq!(check_prefix_big(&replayed, covered), 150);
}

fn check_prefix_big(replayed: &[(Lsn, Vec<u8>)], covered: Lsn) -> Lsn {
    for (i, (lsn, p)) in replayed.iter().enumerate() {
        assert_eq!(*lsn, covered + 1 + i as u64);
        assert_eq!(p, &big_payload(*lsn));
    }
    covered + replayed.len() as u64
}

#[test]
fn crashes_after_wrapping_recover_only_live_records() {
    let probe = SimStorage::new(12);
    workload(&probe, 150);
    let writes = probe.counters().writes;
    // Crash points spread over the late part of the run, after several wraps.
    for k in (writes / 2..writes).step_by(3) {
        for mode in [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending] {
            let sim = SimStorage::new(k);
            sim.set_unordered_dir_ops(true);
            sim.crash_after_writes(k);
            let (acked, appended, covered, _) = workload(&sim, 150);
            check(&sim.crash_with(mode), acked, appended, covered, &format!("write {k} {mode:?}"));
        }
    }
    // And the plain helper agrees on a clean run.
    let (_, replayed) = open(&probe.crash_with(CrashMode::KeepAllPending), small_options(), 148).unwrap();
    assert_eq!(replayed.len(), 2);
}

fn segment_files(sim: &SimStorage) -> usize {
    sim.file_names().iter().filter(|p| p.starts_with(DIR) && p.to_string_lossy().ends_with(".seg")).count()
}

#[test]
fn free_segments_released_at_a_clean_close_come_back_when_needed() {
    let sim = SimStorage::new(13);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    for lsn in 1..=40 {
        log.append(big_payload(lsn)).unwrap();
    }
    log.checkpoint(40).unwrap();
    assert!(segment_files(&sim) > 1);
    let removed = log.release_free_segments().unwrap();
    assert!(removed >= 1, "a checkpoint of everything frees all but the active segment");
    assert!(segment_files(&sim) <= 2, "the segment being written is left, and perhaps the highest id");
    // The log goes on, making segments again as it needs them.
    for lsn in 41..=120 {
        log.append(big_payload(lsn)).unwrap();
        log.checkpoint(lsn - 2).unwrap();
    }
    log.close().unwrap();
    // A crash right after (nothing pending), and the release's directory
    // change durable: the reopened log replays exactly what it must.
    let image = sim.crash_with(CrashMode::DropAllPending);
    let (_, replayed) = open(&image, small_options(), 118).unwrap();
    assert_eq!(check_prefix_big(&replayed, 118), 120);
    // Reopened with everything covered, nothing written: no segment is
    // live, and none is released (the newest says where the log ends).
    let before = segment_files(&image);
    let (log, _) = open(&image, small_options(), 120).unwrap();
    log.checkpoint(120).unwrap();
    assert_eq!(log.release_free_segments().unwrap(), 0);
    log.close().unwrap();
    assert_eq!(segment_files(&image), before);
    let (log, replayed) = open(&image.crash_with(CrashMode::DropAllPending), small_options(), 120).unwrap();
    assert!(replayed.is_empty());
    assert_eq!(log.append(big_payload(121)).unwrap(), 121, "LSNs go on after the release");
}
