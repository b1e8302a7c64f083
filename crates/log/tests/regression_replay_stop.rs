//! Regression for P7 (review of crates/log): the replay callback could only
//! accept a record or fail the whole open, and the acknowledged LSN was not
//! exposed, so the architecture's rule (above the acknowledged LSN, replay
//! ends at the first record whose data fails its checksum and the rest is
//! discarded; at or below it, corruption) could not be expressed. Checks
//! `Log::open_with`: the callback sees the acknowledged LSN, `StopBefore`
//! above it ends the log there durably (new records continue at that LSN,
//! discarded records are never replayed again, across crashes), and
//! `StopBefore` at or below it fails open naming the LSN.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{check_prefix, open, payload, small_options, Replayed};
use larder_io::sim::CrashMode;
use larder_io::{SimStorage, StorageRef};
use larder_log::{Log, LogError, Lsn, Replay, ReplayRecord};

/// Opens with a callback that stops before `stop` (if given), collecting
/// the records applied and the acknowledged LSN it was told.
fn open_stopping(sim: &SimStorage, covered: Lsn, stop: Option<Lsn>) -> Result<(Log, Replayed, Lsn), LogError> {
    let storage: StorageRef = Arc::new(sim.clone());
    let (mut replayed, mut acked) = (Vec::new(), 0);
    let log = Log::open_with(storage, Path::new(common::DIR), small_options(), covered, |r: ReplayRecord<'_>| {
        acked = r.acked_lsn;
        if Some(r.lsn) == stop {
            return Ok::<_, std::io::Error>(Replay::StopBefore);
        }
        replayed.push((r.lsn, r.payload.to_vec()));
        Ok(Replay::Continue)
    })?;
    Ok((log, replayed, acked))
}

/// Records 1..=6 acknowledged one group each, then 7..=9 buffered and
/// written as one last group. Nothing written after that group proves it
/// was durable, so the acknowledged LSN recovery can prove is 6.
fn setup() -> SimStorage {
    let sim = SimStorage::new(31);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    for l in 1..=6 {
        log.append(payload(l)).unwrap();
    }
    for l in 7..=9 {
        log.append_buffered(payload(l)).unwrap();
    }
    log.sync().unwrap();
    log.close().unwrap();
    sim
}

#[test]
fn stop_above_the_acknowledged_lsn_ends_the_log_there() {
    let sim = setup();
    let (log, replayed, acked) = open_stopping(&sim, 0, Some(8)).unwrap();
    assert_eq!(acked, 6);
    assert_eq!(log.recovery_report().acked_lsn, 6);
    assert_eq!(log.recovery_report().stopped_before, Some(8));
    assert_eq!(check_prefix(&replayed, 0), 7);
    assert_eq!(log.last_lsn(), 7);
    // New records continue at the stop point, with their own payloads.
    assert_eq!(log.append(payload(8)).unwrap(), 8);
    assert_eq!(log.append(payload(9)).unwrap(), 9);
    log.close().unwrap();
    // The discarded records are gone for good, even after a reboot that
    // drops everything not synced.
    let image = sim.crash_with(CrashMode::DropAllPending);
    let (_, replayed, _) = open_stopping(&image, 0, None).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 9);
}

#[test]
fn stop_before_the_first_record_of_a_group_removes_the_group() {
    let sim = setup();
    let (log, replayed, _) = open_stopping(&sim, 0, Some(7)).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 6);
    drop(log);
    let image = sim.crash_with(CrashMode::DropAllPending);
    let (log, replayed, _) = open_stopping(&image, 0, None).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 6);
    assert_eq!(log.append(payload(7)).unwrap(), 7);
}

#[test]
fn stop_at_or_below_the_acknowledged_lsn_is_corruption() {
    let sim = setup();
    let err = open_stopping(&sim, 0, Some(6)).unwrap_err();
    assert!(matches!(err, LogError::CorruptRecord { lsn: 6, acked: 6, .. }), "{err}");
    // Nothing was cut: a plain open still sees every record.
    let (_, replayed) = open(&sim, small_options(), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 9);
}
