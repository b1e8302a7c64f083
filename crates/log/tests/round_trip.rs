//! Records appended from several threads at once come back from a reopen
//! exactly, in LSN order, and group commit really groups them. How: 8
//! threads append records naming (thread, counter) on the simulated
//! storage; each remembers the LSN it got; the log is closed and reopened
//! and the replay compared with the union; the counters must show that
//! records queued together were written as one group.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::open;
use larder_io::SimStorage;
use larder_log::Options;

#[test]
fn concurrent_appends_replay_exactly_in_order() {
    let sim = SimStorage::new(1);
    let options = Options { segment_bytes: 256 << 10, max_segments: 64, ..common::small_options() };
    let (log, replayed) = open(&sim, options.clone(), 0).unwrap();
    assert!(replayed.is_empty());
    let log = Arc::new(log);
    let barrier = Arc::new(std::sync::Barrier::new(8));
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let (log, barrier) = (log.clone(), barrier.clone());
            std::thread::spawn(move || {
                (0..200u64)
                    .map(|i| {
                        let p = format!("thread {t} record {i} {}", "x".repeat((i * 7 % 300) as usize)).into_bytes();
                        if i % 2 == 1 {
                            return (log.append(p.clone()).unwrap(), p);
                        }
                        // Every thread's record is queued before any syncs:
                        // the first to sync writes them all in one group,
                        // however the threads are scheduled.
                        let lsn = log.append_buffered(p.clone()).unwrap();
                        barrier.wait();
                        log.sync_to(lsn).unwrap();
                        (lsn, p)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut expected = BTreeMap::new();
    for h in threads {
        for (lsn, p) in h.join().unwrap() {
            assert!(expected.insert(lsn, p).is_none(), "LSN {lsn} handed out twice");
        }
    }
    let stats = log.stats();
    assert_eq!(stats.records, 1600);
    // At most one group per synchronized round (100) plus one per record
    // of the others (800); more means the queued records were not grouped.
    assert!(stats.groups <= 900, "no grouping: {stats:?}");
    assert_eq!(log.durable_lsn(), 1600);
    eprintln!("groups {} for {} records ({:.1} per group)", stats.groups, stats.records, stats.average_group_records());
    Arc::try_unwrap(log).unwrap().close().unwrap();

    let (log, replayed) = open(&sim, options, 0).unwrap();
    let want: Vec<_> = expected.into_iter().collect();
    assert_eq!(want.first().map(|r| r.0), Some(1));
    assert_eq!(replayed, want);
    assert_eq!(log.last_lsn(), 1600);
    assert_eq!(log.recovery_report().replayed, 1600);
}

#[test]
fn new_log_starts_after_its_base_and_buffered_records_survive_close() {
    let sim = SimStorage::new(2);
    let (log, _) = open(&sim, common::small_options(), 1000).unwrap();
    assert_eq!(log.append(b"a".to_vec()).unwrap(), 1001);
    assert_eq!(log.append_buffered(b"b".to_vec()).unwrap(), 1002);
    assert_eq!(log.durable_lsn(), 1001);
    log.close().unwrap();
    let (log, replayed) = open(&sim, common::small_options(), 1000).unwrap();
    assert_eq!(replayed, vec![(1001, b"a".to_vec()), (1002, b"b".to_vec())]);
    // Covered records are verified, not replayed.
    drop(log);
    let (_, replayed) = open(&sim, common::small_options(), 1001).unwrap();
    assert_eq!(replayed, vec![(1002, b"b".to_vec())]);
}
