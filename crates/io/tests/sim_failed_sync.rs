//! A failed `sync_data` loses the file's pending writes for good, as Linux
//! may after a failed fsync: reads still return them (page cache), a later
//! sync reports success, yet they never become durable, not even when a
//! crash keeps everything pending. Later writes are unaffected.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use larder_io::sim::{CrashMode, SimFault, SimOp};
use larder_io::{write_all_at, IoError, OpenOptions, SimStorage, Storage};

use common::read_all;

#[test]
fn failed_sync_drops_pending_writes_and_later_sync_succeeds() {
    let sim = SimStorage::new(11);
    let path = Path::new("/db/data");
    let file = sim.open(path, OpenOptions::CREATE_NEW).unwrap();
    sim.sync_dir(Path::new("/db")).unwrap();
    write_all_at(&*file, b"AAAA", 0).unwrap();
    file.sync_data().unwrap();

    write_all_at(&*file, b"BBBB", 0).unwrap();
    sim.fail_nth(SimOp::SyncData, 1, SimFault::Eio);
    match file.sync_data() {
        Err(IoError::Os { op, path: p, source }) => {
            assert_eq!(op, "sync");
            assert_eq!(p, path);
            assert_eq!(source.raw_os_error(), Some(5));
        }
        other => panic!("expected EIO, got {other:?}"),
    }
    assert_eq!(read_all(&sim, path), b"BBBB", "the page cache still has the write");
    assert_eq!(sim.read_durable(path).unwrap(), b"AAAA");

    file.sync_data().unwrap();
    assert_eq!(sim.read_durable(path).unwrap(), b"AAAA", "the retried sync persisted nothing");
    assert_eq!(sim.counters().faults_injected, 1);

    // Later writes are synced normally.
    write_all_at(&*file, b"CCCC", 4).unwrap();
    file.sync_data().unwrap();
    assert_eq!(sim.read_durable(path).unwrap(), b"AAAACCCC");
    let after = sim.crash_with(CrashMode::KeepAllPending);
    assert_eq!(read_all(&after, path), b"AAAACCCC");
}

#[test]
fn failed_sync_of_one_file_leaves_another_pending() {
    let sim = SimStorage::new(12);
    let (a, b) = (Path::new("/db/a"), Path::new("/db/b"));
    let fa = sim.open(a, OpenOptions::CREATE_NEW).unwrap();
    let fb = sim.open(b, OpenOptions::CREATE_NEW).unwrap();
    sim.sync_dir(Path::new("/db")).unwrap();
    write_all_at(&*fa, b"a", 0).unwrap();
    write_all_at(&*fb, b"b", 0).unwrap();
    sim.fail_path(a, SimOp::SyncData, SimFault::Eio);
    assert!(fb.sync_data().is_ok(), "the fault is armed on the other path");
    assert!(fa.sync_data().is_err());
    assert_eq!(sim.read_durable(b).unwrap(), b"b");
    assert!(sim.read_durable(a).unwrap().is_empty());
}
