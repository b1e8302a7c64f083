//! The log never fills while its owner checkpoints when asked, and fails
//! clearly when nobody does. How: 3 segments of 16 KiB bound the log to
//! 48 KiB; a callback wakes a checkpointer thread (standing in for the
//! index flush) that checkpoints at the durable LSN; 4 threads append
//! 3 MB of records. A second log has no checkpointer and a short
//! `full_wait`, so the append that needs a segment beyond the bound and
//! its reserve fails with `Full`, and the log is poisoned.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::{open, small_options, DIR};
use larder_io::SimStorage;
use larder_log::{LogError, Options};

#[test]
fn appending_far_beyond_the_bound_succeeds_with_a_checkpointer() {
    let sim = SimStorage::new(31);
    let (tx, rx) = mpsc::channel::<()>();
    let tx = std::sync::Mutex::new(tx);
    let options = Options {
        max_segments: 3,
        max_pending_bytes: 8 << 10,
        on_checkpoint_needed: Some(Arc::new(move || {
            let _ = tx.lock().unwrap().send(());
        })),
        ..small_options()
    };
    let (log, _) = open(&sim, options.clone(), 0).unwrap();
    let log = Arc::new(log);
    let done = Arc::new(AtomicBool::new(false));
    let covered = Arc::new(AtomicU64::new(0));
    let checkpointer = {
        let (log, done, covered) = (log.clone(), done.clone(), covered.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                if rx.recv_timeout(Duration::from_millis(20)).is_ok() {
                    let c = log.durable_lsn();
                    log.checkpoint(c).unwrap();
                    covered.store(c, Ordering::Release);
                }
            }
        })
    };
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..750u32 {
                    log.append(vec![(t * 31 + i) as u8; 1000]).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    checkpointer.join().unwrap();
    let stats = log.stats();
    assert_eq!(stats.records, 3000);
    assert!(stats.segments_reused > 20, "{stats:?}");
    assert!(stats.segments_created >= 3, "{stats:?}");
    assert!(stats.segments_created as usize <= 3 + options.reserve_segments(), "{stats:?}");
    assert_eq!(stats.segments_created - 3, stats.reserve_segments, "{stats:?}");
    assert!(stats.checkpoints > 0);
    let covered = covered.load(Ordering::Acquire);
    Arc::try_unwrap(log).unwrap().close().unwrap();
    let (log, replayed) = open(&sim, options, covered).unwrap();
    assert_eq!(replayed.first().map(|r| r.0), Some(covered + 1).filter(|_| covered < 3000));
    assert_eq!(log.last_lsn(), 3000);
}

#[test]
fn full_log_without_checkpoints_fails_clearly() {
    let sim = SimStorage::new(32);
    let options = Options {
        max_segments: 2,
        max_pending_bytes: 8 << 10,
        full_wait: Duration::from_millis(100),
        ..small_options()
    };
    let reserve = options.reserve_segments();
    assert_eq!(reserve, 2);
    let (log, _) = open(&sim, options, 0).unwrap();
    let mut n = 0;
    let err = loop {
        match log.append(vec![1u8; 3000]) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
    };
    // Two segments and two of reserve, of three blocks each.
    assert_eq!(n, 12);
    let LogError::Full { dir, segments: 4, .. } = &err else { panic!("{err}") };
    assert!(dir.ends_with("log") && err.to_string().contains(DIR), "{err}");
    assert!(matches!(log.append(vec![1]), Err(LogError::Poisoned(_))));
    assert_eq!(log.stats().full_waits, 1);
    assert_eq!(log.stats().reserve_segments, 2);
}

#[test]
fn needs_checkpoint_turns_on_at_the_high_water_mark() {
    let sim = SimStorage::new(33);
    let options = Options { max_segments: 4, ..small_options() };
    let (log, _) = open(&sim, options, 0).unwrap();
    // 4 segments x 4 blocks, 50%: two segments' worth of live blocks.
    let mut lsn = 0;
    while !log.needs_checkpoint() {
        lsn = log.append(vec![0u8; 3000]).unwrap();
        assert!(lsn < 10);
    }
    log.checkpoint(lsn).unwrap();
    assert!(!log.needs_checkpoint());
    assert!(matches!(log.checkpoint(lsn + 1), Err(LogError::CheckpointAhead { .. })));
}
