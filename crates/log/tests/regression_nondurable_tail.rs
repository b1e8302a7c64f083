//! Regression for P1 (review of crates/log): recovery replayed log bytes
//! that were readable but never durable (page cache only: the process died
//! between a group's write and its fdatasync, or the fdatasync failed), and
//! then acknowledged new records and let the caller checkpoint on top of
//! them, so a later reboot lost acknowledged records (`CorruptRecord`) or
//! refused to open (`IndexAhead`). Checks that open makes every byte it
//! trusts durable (rewriting unproven groups, then syncing) before it
//! replays: the three reviewer reproducers, and a sweep that stops the
//! process at every sync (failed sync, and died-before-sync), restarts
//! without a reboot, checkpoints and appends, then reboots in each crash
//! mode and checks nothing acknowledged or checkpointed is lost.
#![allow(clippy::unwrap_used)]

mod common;

use common::{check_prefix, open, open_on, payload, small_options, Stall};
use larder_io::sim::{CrashMode, SimFault, SimOp};
use larder_io::SimStorage;
use larder_log::{Lsn, Options};

fn options() -> Options {
    Options { segment_bytes: 64 << 10, ..small_options() }
}

#[test]
fn failed_fsync_then_reopen_then_index_flush_then_crash() {
    let sim = SimStorage::new(1);
    let (log, _) = open(&sim, options(), 0).unwrap();
    for l in 1..=3 {
        log.append(payload(l)).unwrap();
    }
    sim.fail_nth(SimOp::SyncData, 1, SimFault::Eio);
    assert!(log.append(payload(4)).is_err());
    drop(log);
    // Process restart: record 4 is replayed from the page cache.
    let (log, replayed) = open(&sim, options(), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 4);
    // The caller flushes its index up to 4 and checkpoints, as documented.
    log.checkpoint(4).unwrap();
    log.close().unwrap();
    let image = sim.crash_with(CrashMode::KeepAllPending);
    let (log, replayed) = open(&image, options(), 4).unwrap();
    assert!(replayed.is_empty());
    assert_eq!(log.last_lsn(), 4);
}

#[test]
fn process_crash_before_fsync_then_reopen_append_then_reboot() {
    let sim = SimStorage::new(2);
    let stall = Stall::new(&sim, u64::MAX);
    let (log, _) = open_on(stall.storage(), options(), 0).unwrap();
    for l in 1..=3 {
        log.append(payload(l)).unwrap();
    }
    stall.syncs_left.store(0, std::sync::atomic::Ordering::SeqCst);
    assert!(log.append(payload(4)).is_err()); // written, never synced
    drop(log);
    stall.resume();
    let (log, replayed) = open_on(stall.storage(), options(), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 4);
    assert_eq!(log.append(payload(5)).unwrap(), 5);
    assert_eq!(log.append(payload(6)).unwrap(), 6);
    log.close().unwrap();
    // Reboot: the page cache is lost.
    let image = sim.crash_with(CrashMode::DropAllPending);
    let (_, replayed) = open(&image, options(), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 6, "acknowledged 5 and 6 must survive");
}

#[test]
fn process_crash_before_fsync_then_reopen_flush_then_reboot() {
    let sim = SimStorage::new(3);
    let stall = Stall::new(&sim, u64::MAX);
    let (log, _) = open_on(stall.storage(), options(), 0).unwrap();
    for l in 1..=3 {
        log.append(payload(l)).unwrap();
    }
    stall.syncs_left.store(0, std::sync::atomic::Ordering::SeqCst);
    assert!(log.append(payload(4)).is_err());
    drop(log);
    stall.resume();
    let (log, replayed) = open_on(stall.storage(), options(), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 4);
    log.checkpoint(4).unwrap();
    drop(log);
    let image = sim.crash_with(CrashMode::DropAllPending);
    let (log, _) = open(&image, options(), 4).unwrap();
    assert_eq!(log.last_lsn(), 4);
}

/// What the first session saw.
#[derive(Debug, Default)]
struct Outcome {
    acked: Lsn,
    appended: Lsn,
    covered: Lsn,
}

const RECORDS: u64 = 40;

/// Appends (every fourth buffered) and checkpoints with a lag, over small
/// segments so rotation and reuse happen, until the first error.
fn workload(storage: larder_io::StorageRef) -> Outcome {
    let mut out = Outcome::default();
    let Ok((log, _)) = open_on(storage, small_options(), 0) else { return out };
    for lsn in 1..=RECORDS {
        let result = if lsn % 4 == 0 {
            log.append_buffered(payload(lsn)).map(|_| ())
        } else {
            log.append(payload(lsn)).map(|_| ())
        };
        out.appended = lsn;
        if result.is_err() {
            return out;
        }
        if lsn % 4 != 0 {
            out.acked = lsn;
        }
        if lsn % 5 == 0 && log.checkpoint(lsn.saturating_sub(3)).is_ok() {
            out.covered = lsn.saturating_sub(3);
        }
    }
    out
}

/// What the restarted process does before the reboot.
#[derive(Clone, Copy, Debug)]
enum After {
    /// Flushes its index up to everything replayed and checkpoints (the
    /// reboot then opens with that covered LSN).
    Checkpoint,
    /// Appends (and is acknowledged) three more records.
    Append,
}

/// Restart without a reboot and check the replay; then do `after`, reboot
/// in `mode` and check that nothing acknowledged or covered was lost.
fn restart_then_reboot(sim: &SimStorage, storage: larder_io::StorageRef, out: &Outcome, mode: CrashMode, after: After) {
    let what = format!("{mode:?} {after:?} {out:?}");
    let (log, replayed) = open_on(storage, small_options(), out.covered).unwrap_or_else(|e| panic!("{what}: {e}"));
    let m = check_prefix(&replayed, out.covered);
    assert!(m >= out.acked && m <= out.appended.max(out.covered), "{what}: replay ends at {m}");
    let (covered, end) = match after {
        After::Checkpoint => {
            log.checkpoint(m).unwrap();
            (m, m)
        }
        After::Append => {
            for lsn in m + 1..=m + 3 {
                assert_eq!(log.append(payload(lsn)).unwrap(), lsn, "{what}");
            }
            (out.covered, m + 3)
        }
    };
    drop(log);
    let image = sim.crash_with(mode);
    let (_, replayed) =
        open(&image, small_options(), covered).unwrap_or_else(|e| panic!("{what}: open after reboot: {e} (m {m})"));
    assert_eq!(check_prefix(&replayed, covered), end, "{what}: records acknowledged or covered were lost (m {m})");
}

const MODES: [CrashMode; 3] = [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending];

fn probe_syncs() -> u64 {
    let sim = SimStorage::new(0);
    let stall = Stall::new(&sim, u64::MAX);
    let out = workload(stall.storage());
    assert_eq!(out.acked, RECORDS - 1);
    sim.counters().syncs
}

#[test]
fn failed_sync_at_every_point_then_restart_then_reboot() {
    for k in 1..=probe_syncs() {
        for (mi, mode) in MODES.into_iter().enumerate() {
            for after in [After::Checkpoint, After::Append] {
                let sim = SimStorage::new(k * 8 + mi as u64 * 2 + after as u64 + 100);
                sim.set_unordered_dir_ops(true);
                sim.fail_nth(SimOp::SyncData, k, SimFault::Eio);
                let out = workload(std::sync::Arc::new(sim.clone()));
                restart_then_reboot(&sim, std::sync::Arc::new(sim.clone()), &out, mode, after);
            }
        }
    }
}

#[test]
fn process_death_before_every_sync_then_restart_then_reboot() {
    for k in 0..probe_syncs() {
        for (mi, mode) in MODES.into_iter().enumerate() {
            for after in [After::Checkpoint, After::Append] {
                let sim = SimStorage::new(k * 8 + mi as u64 * 2 + after as u64 + 5000);
                sim.set_unordered_dir_ops(true);
                let stall = Stall::new(&sim, k);
                let out = workload(stall.storage());
                stall.resume();
                restart_then_reboot(&sim, stall.storage(), &out, mode, after);
            }
        }
    }
}
