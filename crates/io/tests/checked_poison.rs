//! `CheckedStorage` latches the first failed sync: afterwards every
//! mutating call, on the storage and on files opened before or after, fails
//! with `Poisoned` naming the cause and never reaches the backend, while
//! reads keep working. Driven by `SimStorage` faults.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use larder_io::sim::{SimFault, SimOp};
use larder_io::{read_exact_at, write_all_at, CheckedStorage, IoError, OpenOptions, SimStorage, Storage};

fn assert_poisoned<T: std::fmt::Debug>(result: Result<T, IoError>, what: &str) {
    match result {
        Err(IoError::Poisoned { cause }) => {
            assert!(cause.contains("sync") && cause.contains("/db/data"), "{what}: cause {cause:?}")
        }
        other => panic!("{what}: expected Poisoned, got {other:?}"),
    }
}

#[test]
fn failed_sync_poisons_every_mutating_call() {
    let sim = SimStorage::new(1);
    let checked = CheckedStorage::new(Arc::new(sim.clone()));
    let data = Path::new("/db/data");
    let other = Path::new("/db/other");
    let file = checked.open(data, OpenOptions::CREATE_NEW).unwrap();
    let other_file = checked.open(other, OpenOptions::CREATE_NEW).unwrap();
    write_all_at(&*file, b"payload", 0).unwrap();
    assert!(!checked.is_poisoned());

    sim.fail_nth(SimOp::SyncData, 1, SimFault::Eio);
    let err = file.sync_data().unwrap_err();
    assert!(matches!(err, IoError::Os { .. }), "the first failure itself is returned: {err:?}");
    assert!(checked.is_poisoned());
    let cause = checked.poison_cause().unwrap();
    assert!(cause.starts_with("sync_data of /db/data failed (errno 5): "), "names the call, file and errno: {cause}");
    assert!(cause.ends_with(&err.to_string()), "{cause}");

    let before = sim.counters();
    assert_poisoned(file.write_at(b"x", 0), "write_at");
    assert_poisoned(file.sync_data(), "sync_data");
    assert_poisoned(file.allocate(0, 4096), "allocate");
    assert_poisoned(file.punch_hole(0, 1), "punch_hole");
    assert_poisoned(file.set_len(0), "set_len");
    assert_poisoned(other_file.write_at(b"x", 0), "write_at on another file");
    assert_poisoned(checked.open(Path::new("/db/new"), OpenOptions::CREATE), "open create");
    assert_poisoned(checked.open(data, OpenOptions::WRITE), "open write");
    assert_poisoned(checked.create_dir_all(Path::new("/db/sub")), "create_dir_all");
    assert_poisoned(checked.rename(data, Path::new("/db/renamed")), "rename");
    assert_poisoned(checked.remove_file(other), "remove_file");
    assert_poisoned(checked.sync_dir(Path::new("/db")), "sync_dir");
    let after = sim.counters();
    assert_eq!((after.writes, after.syncs, after.dir_syncs, after.renames), (before.writes, before.syncs, 0, 0));
    assert!(!sim.exists(Path::new("/db/new")).unwrap(), "the backend was not touched");

    // Reads still work.
    let mut buf = [0u8; 7];
    read_exact_at(&*file, &mut buf, 0).unwrap();
    assert_eq!(&buf, b"payload");
    assert_eq!(file.len().unwrap(), 7);
    let reader = checked.open(data, OpenOptions::READ).unwrap();
    read_exact_at(&*reader, &mut buf, 0).unwrap();
    assert!(checked.exists(data).unwrap());
    assert_eq!(checked.list_dir(Path::new("/db")).unwrap(), vec!["data", "other"]);
}

#[test]
fn failed_dir_sync_poisons_and_first_cause_is_kept() {
    let sim = SimStorage::new(2);
    let checked = CheckedStorage::new(Arc::new(sim.clone()));
    checked.open(Path::new("/db/data"), OpenOptions::CREATE_NEW).unwrap();
    sim.fail_nth(SimOp::SyncDir, 1, SimFault::Eio);
    let err = checked.sync_dir(Path::new("/db")).unwrap_err();
    assert!(checked.is_poisoned());
    checked.poison("worker panicked".to_string());
    let cause = checked.poison_cause().unwrap();
    assert!(cause.starts_with("sync_dir of /db failed (errno 5): "), "names the call, file and errno: {cause}");
    assert!(cause.ends_with(&err.to_string()), "{cause}");
    assert!(matches!(checked.rename(Path::new("/db/data"), Path::new("/db/x")), Err(IoError::Poisoned { .. })));
}

#[test]
fn explicit_poison_stops_writes() {
    let sim = SimStorage::new(3);
    let checked = CheckedStorage::new(Arc::new(sim));
    let file = checked.open(Path::new("/db/data"), OpenOptions::CREATE_NEW).unwrap();
    file.write_at(b"ok", 0).unwrap();
    file.sync_data().unwrap();
    assert!(!checked.is_poisoned());
    assert_eq!(checked.poison_cause(), None);
    checked.poison("worker panicked".to_string());
    match file.write_at(b"no", 0) {
        Err(IoError::Poisoned { cause }) => assert_eq!(cause, "worker panicked"),
        other => panic!("expected Poisoned, got {other:?}"),
    }
    let _lock = checked.lock(Path::new("/db/LOCK")).unwrap();
}

#[test]
fn wrapping_a_checked_storage_again_shares_its_latch() {
    let sim = SimStorage::new(3);
    let first = CheckedStorage::wrap(Arc::new(sim.clone()));
    let again = CheckedStorage::wrap(first.storage_ref());
    again.poison("from the second wrapper".into());
    assert!(first.is_poisoned(), "one latch, however often the storage is wrapped");
    assert!(matches!(first.check(), Err(IoError::Poisoned { cause }) if cause == "from the second wrapper"));
}
