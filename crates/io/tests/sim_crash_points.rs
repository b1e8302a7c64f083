//! Exact crash points: a probe run counts the writes and syncs of a
//! workload, then the workload is rerun crashing after each count `k`. The
//! machine must stop right after the `k`-th write (or sync): the `k+1`-th
//! never happens and every later call fails with `Crashed`.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use larder_io::sim::CrashMode;
use larder_io::{read_exact_at, IoError, IoResult, OpenOptions, SimStorage, Storage};

const RECORDS: u64 = 10;
const PATH: &str = "/db/log";

/// Creates the log file durably, before any crash point is armed.
fn setup(seed: u64) -> SimStorage {
    let sim = SimStorage::new(seed);
    sim.open(Path::new(PATH), OpenOptions::CREATE_NEW).unwrap();
    sim.sync_dir(Path::new("/db")).unwrap();
    sim
}

/// Appends 8-byte records `1..=RECORDS`, syncing after every third, and
/// ends with a sync.
fn workload(sim: &SimStorage) -> IoResult<()> {
    let file = sim.open(Path::new(PATH), OpenOptions::WRITE)?;
    for i in 0..RECORDS {
        let n = file.write_at(&(i + 1).to_le_bytes(), i * 8)?;
        assert_eq!(n, 8);
        if i % 3 == 2 {
            file.sync_data()?;
        }
    }
    file.sync_data()
}

fn records(sim: &SimStorage) -> Vec<u64> {
    let file = sim.open(Path::new(PATH), OpenOptions::READ).unwrap();
    let mut buf = vec![0u8; file.len().unwrap() as usize];
    read_exact_at(&*file, &mut buf, 0).unwrap();
    buf.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn crash_after_writes_stops_exactly_at_the_next_write() {
    let probe = setup(1);
    workload(&probe).unwrap();
    let total_writes = probe.counters().writes;
    assert_eq!(total_writes, RECORDS);

    for k in 1..=total_writes {
        let sim = setup(1);
        sim.crash_after_writes(k);
        let err = workload(&sim).unwrap_err();
        assert!(matches!(err, IoError::Crashed), "k={k}: {err:?}");
        assert!(sim.is_crashed());
        assert_eq!(sim.counters().writes, k, "k={k}");
        assert!(matches!(sim.exists(Path::new(PATH)), Err(IoError::Crashed)));
        // Keeping everything pending shows exactly the k writes that happened.
        let kept = sim.crash_with(CrashMode::KeepAllPending);
        assert_eq!(records(&kept), (1..=k).collect::<Vec<_>>(), "k={k}");
        // Dropping everything pending keeps exactly the synced prefix; the
        // sync after the k-th write never ran.
        let synced = ((k - 1) / 3) * 3;
        let dropped = sim.crash_with(CrashMode::DropAllPending);
        assert_eq!(records(&dropped), (1..=synced).collect::<Vec<_>>(), "k={k}");
    }
}

#[test]
fn crash_after_syncs_stops_exactly_at_the_next_sync() {
    let probe = setup(2);
    let before = probe.counters();
    workload(&probe).unwrap();
    let after = probe.counters();
    let total_syncs = (after.syncs + after.dir_syncs) - (before.syncs + before.dir_syncs);
    assert_eq!(total_syncs, 4);

    for k in 1..=total_syncs {
        let sim = setup(2);
        sim.crash_after_syncs(k);
        let result = workload(&sim);
        if k < total_syncs {
            assert!(matches!(result, Err(IoError::Crashed)), "k={k}: {result:?}");
        } else {
            // The last sync was the workload's last call; the crash follows it.
            assert!(result.is_ok(), "{result:?}");
        }
        assert!(sim.is_crashed());
        assert_eq!(sim.counters().syncs, k);
        let durable = (k * 3).min(RECORDS);
        let dropped = sim.crash_with(CrashMode::DropAllPending);
        assert_eq!(records(&dropped), (1..=durable).collect::<Vec<_>>(), "k={k}");
    }
}

#[test]
fn crash_after_zero_crashes_at_once() {
    let sim = setup(3);
    sim.crash_after_writes(0);
    assert!(sim.is_crashed());
    assert!(matches!(sim.open(Path::new(PATH), OpenOptions::READ), Err(IoError::Crashed)));
    let rebooted = sim.crash();
    assert!(!rebooted.is_crashed());
    assert!(records(&rebooted).is_empty());
}

#[test]
fn crash_after_namespace_ops_stops_right_after_the_kth() {
    let sim = SimStorage::new(9);
    sim.crash_after_namespace_ops(2);
    let (a, b, c) = (Path::new("/db/a"), Path::new("/db/b"), Path::new("/db/c"));
    drop(sim.open(a, OpenOptions::CREATE_NEW).unwrap());
    assert!(!sim.is_crashed());
    sim.rename(a, b).unwrap();
    assert!(sim.is_crashed(), "the second namespace op is the crash point");
    assert!(matches!(sim.open(c, OpenOptions::CREATE_NEW), Err(IoError::Crashed)));
    assert_eq!(sim.counters().namespace_ops, 2);
    let image = sim.crash_with(CrashMode::KeepAllPending);
    assert_eq!(image.file_names(), vec![b.to_path_buf()], "the rename happened, the third create did not");
}
