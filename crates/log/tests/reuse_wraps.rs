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
            sim.crash_after_writes(k);
            let (acked, appended, covered, _) = workload(&sim, 150);
            check(&sim.crash_with(mode), acked, appended, covered, &format!("write {k} {mode:?}"));
        }
    }
    // And the plain helper agrees on a clean run.
    let (_, replayed) = open(&probe.crash_with(CrashMode::KeepAllPending), small_options(), 148).unwrap();
    assert_eq!(replayed.len(), 2);
}
