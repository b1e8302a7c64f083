//! `Log::sync_soon`: the background flusher makes buffered records durable
//! when asked, not only at the end of its interval (an hour here, so that
//! only the request can do it within the test's deadline), and a log
//! without a flusher ignores the request.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{open, small_options};
use larder_io::SimStorage;
use larder_log::Options;

/// Waits until `lsn` is durable, failing past `deadline`.
fn wait_durable(log: &larder_log::Log, lsn: u64, deadline: Instant, what: &str) {
    while log.durable_lsn() < lsn {
        assert!(Instant::now() < deadline, "{what}: {lsn} not durable (durable {})", log.durable_lsn());
        std::thread::yield_now();
    }
}

#[test]
fn the_flusher_syncs_buffered_records_when_asked() {
    let sim = SimStorage::new(21);
    let options = Options { buffered_sync_interval: Some(Duration::from_secs(3600)), ..small_options() };
    let (log, _) = open(&sim, options, 0).unwrap();
    for round in 0..20u64 {
        let lsn = log.append_buffered(vec![round as u8; 100]).unwrap();
        assert!(log.durable_lsn() < lsn, "round {round}: buffered records wait for a sync");
        log.sync_soon();
        wait_durable(&log, lsn, Instant::now() + Duration::from_secs(20), &format!("round {round}"));
    }
    // Requests that came while the flusher was syncing are not lost: each
    // burst of appends is followed by one request.
    for burst in 0..5u8 {
        let mut last = 0;
        for i in 0..10u8 {
            last = log.append_buffered(vec![burst ^ i; 50]).unwrap();
            log.sync_soon();
        }
        wait_durable(&log, last, Instant::now() + Duration::from_secs(20), &format!("burst {burst}"));
    }
}

#[test]
fn without_a_flusher_the_request_does_nothing() {
    let sim = SimStorage::new(22);
    let options = Options { buffered_sync_interval: None, ..small_options() };
    let (log, _) = open(&sim, options, 0).unwrap();
    let lsn = log.append_buffered(vec![1; 100]).unwrap();
    log.sync_soon();
    assert!(log.durable_lsn() < lsn, "nothing synced the record");
    log.sync().unwrap();
    assert!(log.durable_lsn() >= lsn);
}
