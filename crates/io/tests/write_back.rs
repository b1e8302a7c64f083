//! Write-back without a sync (`File::write_back`): bytes overwriting
//! written blocks are durable once any later sync (the device flush) has
//! returned, and not before; bytes landing in a hole, past the durable end,
//! or whose write-back failed are not made durable by another file's sync.
//! `File::holes` is checked on both backends.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use larder_io::sim::{CrashMode, SimFault, SimOp};
use larder_io::{write_all_at, FileRef, OpenOptions, RealStorage, SimStorage, Storage};

use common::{durable_file, read_all};

const DATA: &str = "/db/data";
const LOG: &str = "/db/log";

/// A simulated store with a durable data file of two written blocks and a
/// durable log file, both opened for writing.
fn setup(seed: u64) -> (SimStorage, FileRef, FileRef) {
    let sim = SimStorage::new(seed);
    durable_file(&sim, Path::new(DATA), &[0; 8192]);
    durable_file(&sim, Path::new(LOG), &[0; 4096]);
    let data = sim.open(Path::new(DATA), OpenOptions::WRITE).unwrap();
    let log = sim.open(Path::new(LOG), OpenOptions::WRITE).unwrap();
    (sim, data, log)
}

#[test]
fn a_written_back_overwrite_is_durable_after_another_files_sync() {
    let (sim, data, log) = setup(1);
    assert_eq!(data.holes().unwrap(), Some(vec![]));
    write_all_at(&*data, &[7; 4096], 4096).unwrap();
    data.write_back(4096, 4096).unwrap();
    assert_eq!(sim.counters().write_backs, 1);
    // Before the flush it is not durable.
    assert_eq!(sim.read_durable(DATA).unwrap(), vec![0; 8192]);
    // After any sync returned, it is durable.
    log.sync_data().unwrap();
    let after = sim.crash_with(CrashMode::DropAllPending);
    let bytes = read_all(&after, Path::new(DATA));
    assert_eq!(&bytes[4096..], &[7; 4096][..]);
    assert_eq!(&bytes[..4096], &[0; 4096][..]);
}

#[test]
fn a_write_outside_the_range_or_over_one_that_stays_pending_stays_pending() {
    let (sim, data, log) = setup(2);
    write_all_at(&*data, &[1; 100], 0).unwrap();
    // Two writes to one page, both in the range: they move together, in
    // order (the kernel writes the page with both).
    write_all_at(&*data, &[2; 100], 1000).unwrap();
    write_all_at(&*data, &[3; 10], 1050).unwrap();
    // One that crosses the range's end stays; the one it overlaps stays
    // with it, so neither jumps ahead of the other.
    write_all_at(&*data, &[4; 100], 5950).unwrap();
    write_all_at(&*data, &[5; 60], 5900).unwrap();
    data.write_back(0, 6000).unwrap();
    log.sync_data().unwrap();
    let after = sim.crash_with(CrashMode::DropAllPending);
    let bytes = read_all(&after, Path::new(DATA));
    assert_eq!(&bytes[..100], &[1; 100][..]);
    assert_eq!(&bytes[1000..1050], &[2; 50][..]);
    assert_eq!(&bytes[1050..1060], &[3; 10][..]);
    assert_eq!(&bytes[1060..1100], &[2; 40][..]);
    assert_eq!(&bytes[5900..6050], &[0; 150][..]);
}

#[test]
fn a_write_into_a_hole_or_past_the_end_needs_its_own_sync() {
    let (sim, data, log) = setup(3);
    data.punch_hole(0, 4096).unwrap();
    assert_eq!(data.holes().unwrap(), Some(vec![(0, 4096)]), "a pending punch is metadata");
    data.sync_data().unwrap();
    assert_eq!(data.holes().unwrap(), Some(vec![(0, 4096)]), "a durable punch leaves a hole");
    write_all_at(&*data, &[5; 4096], 0).unwrap();
    write_all_at(&*data, &[6; 4096], 8192).unwrap();
    assert_eq!(data.holes().unwrap(), Some(vec![(0, 4096), (8192, 12288)]), "growth is metadata");
    data.write_back(0, 0).unwrap();
    log.sync_data().unwrap();
    assert_eq!(sim.read_durable(DATA).unwrap(), vec![0; 8192], "neither write was on written blocks");
    // Its own sync fills the hole for good.
    data.sync_data().unwrap();
    assert_eq!(data.holes().unwrap(), Some(vec![]));
    let after = sim.crash_with(CrashMode::DropAllPending);
    assert_eq!(read_all(&after, Path::new(DATA))[..4096], [5; 4096]);
}

#[test]
fn a_failed_write_back_loses_its_pages_for_good() {
    let (sim, data, log) = setup(4);
    write_all_at(&*data, &[9; 4096], 0).unwrap();
    sim.fail_path(DATA, SimOp::WriteBack, SimFault::Eio);
    assert!(data.write_back(0, 4096).is_err());
    assert_eq!(&read_all(&sim, Path::new(DATA))[..4096], &[9; 4096][..], "the page cache still has them");
    log.sync_data().unwrap();
    data.sync_data().unwrap();
    let after = sim.crash_with(CrashMode::KeepAllPending);
    assert_eq!(&read_all(&after, Path::new(DATA))[..4096], &[0; 4096][..]);
}

#[test]
fn real_files_report_holes_and_write_back() {
    let dir = tempfile::tempdir().unwrap();
    let storage = RealStorage::new();
    let path = dir.path().join("data");
    durable_file(&storage, &path, &[1; 65536]);
    let file = storage.open(&path, OpenOptions::WRITE).unwrap();
    assert_eq!(file.holes().unwrap(), Some(vec![]));
    file.punch_hole(16384, 4096).unwrap();
    file.punch_hole(61440, 4096).unwrap();
    assert_eq!(file.holes().unwrap(), Some(vec![(16384, 20480), (61440, 65536)]));
    write_all_at(&*file, &[2; 4096], 0).unwrap();
    file.start_write_back(0, 4096).unwrap();
    file.write_back(0, 4096).unwrap();
    assert_eq!(&read_all(&storage, &path)[..4096], &[2; 4096][..]);
    assert!(storage.shares_flush(dir.path(), dir.path()).is_ok());
}
