//! A failed sync poisons the log: the append whose group failed gets the
//! error, every later append and sync gets `Poisoned` naming the cause, and
//! reopening recovers what is on disk. How: arm one EIO on the next
//! `sync_data` of the simulated storage, then append.
#![allow(clippy::unwrap_used)]

mod common;

use common::{check_prefix, open, payload, small_options};
use larder_io::sim::{CrashMode, SimFault, SimOp};
use larder_io::SimStorage;
use larder_log::{LogError, Options};

/// Segments large enough that the failing sync is a group's, not a
/// segment start's.
fn options() -> Options {
    Options { segment_bytes: 64 << 10, ..small_options() }
}

#[test]
fn failed_sync_poisons_until_reopen() {
    let sim = SimStorage::new(21);
    let (log, _) = open(&sim, options(), 0).unwrap();
    for lsn in 1..=3 {
        log.append(payload(lsn)).unwrap();
    }
    sim.fail_nth(SimOp::SyncData, 1, SimFault::Eio);
    let err = log.append(payload(4)).unwrap_err();
    assert!(matches!(err, LogError::Io(_)), "{err}");
    assert_eq!(log.durable_lsn(), 3);
    for e in
        [log.append(payload(5)).unwrap_err(), log.append_buffered(payload(5)).unwrap_err(), log.sync().unwrap_err()]
    {
        let LogError::Poisoned(cause) = &e else { panic!("{e}") };
        assert!(cause.contains("os error 5") && cause.contains(".seg"), "{e}");
        assert!(e.to_string().contains("reopen"), "{e}");
    }
    drop(log);

    // Without a crash, the live image still holds the failed group.
    let (log, replayed) = open(&sim, options(), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 4);
    drop(log);
    // The failed sync dropped it for good, but the reopen replayed it, so
    // recovery rewrote and synced it before replaying: a crash now keeps
    // it (regression_nondurable_tail.rs has the cases that lost it).
    let image = sim.crash_with(CrashMode::KeepAllPending);
    let (log, replayed) = open(&image, options(), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 4);
    assert_eq!(log.append(payload(5)).unwrap(), 5);
}

#[test]
fn failed_write_poisons_and_waiters_of_the_group_get_an_error() {
    let sim = SimStorage::new(22);
    let (log, _) = open(&sim, options(), 0).unwrap();
    log.append(payload(1)).unwrap();
    let buffered = log.append_buffered(payload(2)).unwrap();
    sim.fail_nth(SimOp::Write, 1, SimFault::Eio);
    assert!(log.sync_to(buffered).is_err());
    assert!(matches!(log.append(payload(3)), Err(LogError::Poisoned(_))));
    drop(log);
    let (_, replayed) = open(&sim, options(), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 1);
}
