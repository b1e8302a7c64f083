//! Regression for P3 (review of crates/log): creating the optional spare
//! segment after a group failed (a full disk) and that error was returned
//! to the appender and poisoned the log, although the record was durable
//! and already applied by `on_durable`. Checks that spare creation is best
//! effort: appends keep succeeding until a segment is really needed, and
//! the append that then fails was never applied.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::{Arc, Mutex};

use common::{open, small_options};
use larder_io::SimStorage;
use larder_log::{LogError, Options};

#[test]
fn spare_creation_failure_does_not_fail_a_durable_applied_append() {
    let sim = SimStorage::new(7);
    let applied = Arc::new(Mutex::new(Vec::new()));
    let hook = applied.clone();
    let options = Options {
        segment_bytes: 64 << 10,
        on_durable: Some(Arc::new(move |l, _: &[u8]| {
            hook.lock().unwrap().push(l);
            Ok(())
        })),
        ..small_options()
    };
    let (log, _) = open(&sim, options, 0).unwrap();
    // Room for exactly the segment open created, not for a spare.
    sim.set_capacity(64 << 10);
    let mut failed_at = None;
    for l in 1..=20u64 {
        match log.append(vec![l as u8; 3000]) {
            Ok(lsn) => assert_eq!(lsn, l),
            Err(e) => {
                failed_at = Some((l, e));
                break;
            }
        }
    }
    // One 3000-byte record per block: 15 fit the first segment; the spare
    // (tried from half full on) is not needed before the 16th.
    let (l, err) = failed_at.expect("the disk is full once a second segment is needed");
    assert_eq!(l, 16, "{err}");
    assert!(matches!(err, LogError::Io(_)), "{err}");
    assert_eq!(*applied.lock().unwrap(), (1..=15).collect::<Vec<_>>(), "the failed append was applied");
    assert_eq!(log.durable_lsn(), 15);
}

/// With a flusher thread, the spare segment is made there, not on the
/// thread of the append that passed half the active segment (which waited
/// for the whole zero-fill): it appears without further appends, and the
/// rotation then takes it instead of creating one.
#[test]
fn the_flusher_thread_creates_the_spare_segment() {
    let sim = SimStorage::new(8);
    let options = Options {
        segment_bytes: 64 << 10,
        buffered_sync_interval: Some(std::time::Duration::from_millis(1)),
        ..small_options()
    };
    let (log, _) = open(&sim, options, 0).unwrap();
    let created_at_open = log.stats().segments_created;
    // Open made a segment (the active one starts from it): no spare yet.
    for l in 1..=9u64 {
        assert_eq!(log.append(vec![l as u8; 3000]).unwrap(), l);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while log.stats().segments_created == created_at_open {
        assert!(std::time::Instant::now() < deadline, "no spare segment was created past half the segment");
        std::thread::yield_now();
    }
    let with_spare = log.stats().segments_created;
    for l in 10..=20u64 {
        assert_eq!(log.append(vec![l as u8; 3000]).unwrap(), l);
    }
    // (A segment taken from the free pool counts as reused.)
    assert_eq!(log.stats().segments_created, with_spare, "the rotation created a segment: {:?}", log.stats());
}
