//! A crash at any write or any sync loses no acknowledged record and
//! replays a gap-free prefix of what was appended. How: a deterministic
//! single-threaded workload (single appends, buffered runs closed by an
//! append, checkpoints, segment rotation and reuse over 4 small segments)
//! is run once to count its writes and syncs; then, for every k, it is
//! rerun on a fresh simulated machine set to crash right after the k-th
//! write (or sync), the crash image is taken in each crash mode, and the
//! log is reopened with the last checkpointed LSN. Replay must be exactly
//! `covered+1..=m` with the right payloads, `m` at least the highest
//! acknowledged LSN and at most the highest appended. The reopened log
//! must then take new records and replay them after another reopen.
#![allow(clippy::unwrap_used)]

mod common;

use common::{check_prefix, open, payload, small_options};
use larder_io::SimStorage;
use larder_log::Lsn;

/// What the workload saw before the crash stopped it.
#[derive(Debug, Default)]
struct Outcome {
    /// Highest LSN for which an append or sync returned Ok.
    acked: Lsn,
    /// Highest LSN handed out.
    appended: Lsn,
    /// LSN of the last checkpoint that returned Ok.
    covered: Lsn,
    /// Segments restarted after a checkpoint freed them.
    reused: u64,
}

const RECORDS: u64 = 60;

fn workload(sim: &SimStorage) -> Outcome {
    let mut out = Outcome::default();
    let Ok((log, _)) = open(sim, small_options(), 0) else { return out };
    let mut lsn = 0;
    while lsn < RECORDS {
        lsn += 1;
        let result = if lsn % 4 == 0 {
            // A run of buffered records made durable by the append after it.
            let buffered = log.append_buffered(payload(lsn)).map(|l| assert_eq!(l, lsn));
            if buffered.is_err() {
                return out;
            }
            out.appended = lsn;
            lsn += 1;
            log.append(payload(lsn))
        } else {
            log.append(payload(lsn))
        };
        match result {
            Ok(l) => {
                assert_eq!(l, lsn);
                out.appended = lsn;
                out.acked = lsn;
            }
            Err(_) => {
                // The record got its LSN before the failure; it may be replayed.
                out.appended = lsn;
                return out;
            }
        }
        out.reused = log.stats().segments_reused;
        if lsn % 5 == 0 {
            // The index lags the log by a few records, as a real one would.
            let covered = lsn.saturating_sub(3);
            if log.checkpoint(covered).is_ok() {
                out.covered = covered;
            }
        }
    }
    out
}

fn check(image: &SimStorage, out: &Outcome, what: &str) {
    let (log, replayed) = open(image, small_options(), out.covered).unwrap_or_else(|e| panic!("{what}: open: {e}"));
    let m = check_prefix(&replayed, out.covered);
    assert!(m >= out.acked, "{what}: acknowledged {} but replay ends at {m} ({out:?})", out.acked);
    assert!(m <= out.appended.max(out.covered), "{what}: replay ends at {m}, beyond what was appended ({out:?})");
    // The recovered log takes new records after the end and keeps them.
    log.checkpoint(m).unwrap();
    for lsn in m + 1..=m + 6 {
        assert_eq!(log.append(payload(lsn)).unwrap(), lsn, "{what}");
    }
    log.close().unwrap();
    let (_, replayed) = open(image, small_options(), m).unwrap_or_else(|e| panic!("{what}: second open: {e}"));
    assert_eq!(check_prefix(&replayed, m), m + 6, "{what}: second reopen");
}

fn run_all(kind: &str, count: u64, arm: impl Fn(&SimStorage, u64)) {
    larder_io::sim::crash_at_every_point(kind, count, arm, workload, |image, out, what| check(image, &out, what));
}

fn probe() -> (u64, u64) {
    let sim = SimStorage::new(0);
    let out = workload(&sim);
    assert!(out.acked >= RECORDS);
    assert!(out.reused >= 8, "the workload should wrap the 4 segments at least twice: {out:?}");
    let c = sim.counters();
    eprintln!("probe: {} writes, {} syncs, {} dir syncs", c.writes, c.syncs, c.dir_syncs);
    // The probe's writes include the sync that closes the log's last group.
    (c.writes, c.syncs + c.dir_syncs)
}

#[test]
fn crash_after_every_write() {
    let (writes, _) = probe();
    assert!(writes > RECORDS / 2, "only {writes} writes");
    run_all("write", writes, |sim, k| sim.crash_after_writes(k));
}

#[test]
fn crash_after_every_sync() {
    let (_, syncs) = probe();
    run_all("sync", syncs, |sim, k| sim.crash_after_syncs(k));
}

#[test]
fn crash_after_every_namespace_op() {
    // Segment creations and removals: each crash lands before the
    // directory sync that would make the name durable.
    let sim = SimStorage::new(0);
    workload(&sim);
    let names = sim.counters().namespace_ops;
    assert!(names >= 4, "only {names} namespace operations");
    run_all("namespace op", names, |sim, k| sim.crash_after_namespace_ops(k));
}

#[test]
fn random_crash_images_of_one_point_all_recover() {
    // Several images of the same pre-crash state, mid-group.
    let (writes, _) = probe();
    for seed in 0..20 {
        let sim = SimStorage::new(1000 + seed);
        sim.set_unordered_dir_ops(true);
        sim.crash_after_writes(writes / 2 + seed % 7);
        let out = workload(&sim);
        for draw in 0..5 {
            check(&sim.crash(), &out, &format!("seed {seed} draw {draw}"));
        }
    }
}
