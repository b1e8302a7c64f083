//! The log's timing counters: `busy_micros` is the time with at least one
//! group being written or synced, `at_limit_micros` the time with
//! `max_groups_in_flight` of them. How: every group sync on a segment is
//! made to take at least a known time (a storage hook sleeps, standing in
//! for a slow device), records are appended, and the counters are checked
//! against that lower bound and against the wall time of the appends.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{open_on, payload, Hooked, Hooks};
use larder_io::SimStorage;
use larder_log::Options;

/// How long each segment sync takes at least.
const SLOW_SYNC: Duration = Duration::from_millis(15);

/// Makes every sync of a segment file take at least [`SLOW_SYNC`].
#[derive(Debug)]
struct SlowSegmentSyncs;

impl Hooks for SlowSegmentSyncs {
    fn before_sync(&self, path: &Path) -> larder_io::IoResult<()> {
        if path.extension().is_some_and(|e| e == "seg") {
            std::thread::sleep(SLOW_SYNC);
        }
        Ok(())
    }
}

fn options(in_flight: usize) -> Options {
    Options { segment_bytes: 256 << 10, max_groups_in_flight: in_flight, ..common::small_options() }
}

fn slow_storage() -> Hooked {
    Hooked { inner: SimStorage::new(7), hooks: Arc::new(SlowSegmentSyncs) }
}

#[test]
fn with_one_group_allowed_busy_time_is_all_at_the_limit() {
    let storage = slow_storage();
    let (log, _) = open_on(storage.storage(), options(1), 0).unwrap();
    let before = log.stats();
    let start = Instant::now();
    for lsn in 1..=3 {
        log.append(payload(lsn)).unwrap();
    }
    let elapsed = start.elapsed();
    let s = log.stats();
    let groups = s.groups - before.groups;
    assert_eq!(groups, 3, "one append at a time: a group each");
    let busy = s.busy_micros - before.busy_micros;
    assert!(
        busy >= groups * SLOW_SYNC.as_micros() as u64,
        "{groups} groups each synced for at least {SLOW_SYNC:?}, busy only {busy} us"
    );
    assert!(busy <= elapsed.as_micros() as u64, "busy {busy} us longer than the appends' {elapsed:?}");
    assert_eq!(s.at_limit_micros, s.busy_micros, "with a limit of one group, any group in flight is at the limit");
}

#[test]
fn one_appender_under_a_higher_limit_never_reaches_it() {
    let storage = slow_storage();
    let (log, _) = open_on(storage.storage(), options(4), 0).unwrap();
    let start = Instant::now();
    for lsn in 1..=3 {
        log.append(payload(lsn)).unwrap();
    }
    let elapsed = start.elapsed();
    let s = log.stats();
    assert!(s.busy_micros >= 3 * SLOW_SYNC.as_micros() as u64, "busy only {} us", s.busy_micros);
    assert!(s.busy_micros <= elapsed.as_micros() as u64);
    assert_eq!(s.at_limit_micros, 0, "a single appender has one group in flight at a time");
}

#[test]
fn no_group_means_no_busy_time() {
    let storage = slow_storage();
    let (log, _) = open_on(storage.storage(), options(2), 0).unwrap();
    // Queued, never written: nothing was in flight.
    log.append_buffered(payload(1)).unwrap();
    let s = log.stats();
    assert_eq!((s.groups, s.busy_micros, s.at_limit_micros), (0, 0, 0));
}
