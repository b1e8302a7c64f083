//! What a simulated crash keeps of names: a create, rename or remove is
//! durable only after `sync_dir` of its directory, file data and names are
//! durable independently, and a directory whose own entry was lost takes
//! its subtree with it.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use larder_io::sim::CrashMode;
use larder_io::{write_all_at, IoError, OpenOptions, SimStorage, Storage};

fn create_synced_data(sim: &SimStorage, path: &Path, data: &[u8]) {
    let file = sim.open(path, OpenOptions::CREATE_NEW).unwrap();
    write_all_at(&*file, data, 0).unwrap();
    file.sync_data().unwrap();
}

#[test]
fn unsynced_create_is_lost_and_synced_create_survives() {
    let sim = SimStorage::new(1);
    create_synced_data(&sim, Path::new("/db/unsynced"), b"data");
    create_synced_data(&sim, Path::new("/db/synced"), b"data");
    // Only the directory sync after the second create makes names durable;
    // sync both then add a third create after the sync.
    sim.sync_dir(Path::new("/db")).unwrap();
    create_synced_data(&sim, Path::new("/db/late"), b"data");
    assert_eq!(sim.durable_file_names(), vec![PathBuf::from("/db/synced"), PathBuf::from("/db/unsynced")]);

    let after = sim.crash_with(CrashMode::DropAllPending);
    assert!(after.exists(Path::new("/db/synced")).unwrap());
    assert!(!after.exists(Path::new("/db/late")).unwrap());
    assert!(after.open(Path::new("/db/late"), OpenOptions::READ).unwrap_err().is_not_found());
    assert_eq!(after.list_dir(Path::new("/db")).unwrap(), vec!["synced", "unsynced"]);

    let kept = sim.crash_with(CrashMode::KeepAllPending);
    assert!(kept.exists(Path::new("/db/late")).unwrap());
}

#[test]
fn unsynced_rename_and_remove_are_lost() {
    let sim = SimStorage::new(2);
    let (a, b, c) = (Path::new("/db/a"), Path::new("/db/b"), Path::new("/db/c"));
    create_synced_data(&sim, a, b"A");
    create_synced_data(&sim, c, b"C");
    sim.sync_dir(Path::new("/db")).unwrap();
    sim.rename(a, b).unwrap();
    sim.remove_file(c).unwrap();
    assert_eq!(sim.file_names(), vec![PathBuf::from("/db/b")]);

    let dropped = sim.crash_with(CrashMode::DropAllPending);
    assert_eq!(dropped.file_names(), vec![PathBuf::from("/db/a"), PathBuf::from("/db/c")]);
    let kept = sim.crash_with(CrashMode::KeepAllPending);
    assert_eq!(kept.file_names(), vec![PathBuf::from("/db/b")]);
}

#[test]
fn random_crash_keeps_a_prefix_of_directory_ops() {
    // Ops on one directory: create x, rename x -> y, create z. A crash keeps a
    // prefix, so "z without the rename" or "y without x's create" never occur.
    let allowed: Vec<Vec<PathBuf>> = vec![
        vec![],
        vec![PathBuf::from("/db/x")],
        vec![PathBuf::from("/db/y")],
        vec![PathBuf::from("/db/y"), PathBuf::from("/db/z")],
    ];
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..64 {
        let sim = SimStorage::new(seed);
        create_synced_data(&sim, Path::new("/db/x"), b"x");
        sim.rename(Path::new("/db/x"), Path::new("/db/y")).unwrap();
        create_synced_data(&sim, Path::new("/db/z"), b"z");
        let names = sim.crash().file_names();
        assert!(allowed.contains(&names), "seed {seed}: {names:?}");
        seen.insert(names);
    }
    assert_eq!(seen.len(), allowed.len(), "every prefix shows up over 64 seeds");
}

#[test]
fn unordered_crash_keeps_any_subset_of_directory_ops() {
    // The same ops with unordered directory ops: each is kept on its own, so
    // "z without the rename" and "the rename without x's create" occur too.
    let allowed: Vec<Vec<PathBuf>> = vec![
        vec![],
        vec![PathBuf::from("/db/x")],
        vec![PathBuf::from("/db/y")],
        vec![PathBuf::from("/db/z")],
        vec![PathBuf::from("/db/x"), PathBuf::from("/db/z")],
        vec![PathBuf::from("/db/y"), PathBuf::from("/db/z")],
    ];
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..64 {
        let sim = SimStorage::new(seed);
        sim.set_unordered_dir_ops(true);
        create_synced_data(&sim, Path::new("/db/x"), b"x");
        sim.rename(Path::new("/db/x"), Path::new("/db/y")).unwrap();
        create_synced_data(&sim, Path::new("/db/z"), b"z");
        let rebooted = sim.crash();
        let names = rebooted.file_names();
        assert!(allowed.contains(&names), "seed {seed}: {names:?}");
        if names.contains(&PathBuf::from("/db/y")) {
            assert_eq!(read_all(&rebooted, Path::new("/db/y")), b"x", "seed {seed}: a renamed file keeps its data");
        }
        seen.insert(names);
    }
    assert_eq!(seen.len(), allowed.len(), "every subset's outcome shows up over 64 seeds");
}

#[test]
fn unordered_dir_ops_carry_over_a_reboot_and_spare_synced_names() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..64 {
        let sim = SimStorage::new(seed);
        sim.set_unordered_dir_ops(true);
        create_synced_data(&sim, Path::new("/db/kept"), b"k");
        sim.sync_dir(Path::new("/db")).unwrap();
        let rebooted = sim.crash();
        create_synced_data(&rebooted, Path::new("/db/x"), b"x");
        sim.rename(Path::new("/db/x"), Path::new("/db/y")).unwrap_err(); // the old machine is crashed
        rebooted.rename(Path::new("/db/x"), Path::new("/db/y")).unwrap();
        create_synced_data(&rebooted, Path::new("/db/z"), b"z");
        let names = rebooted.crash().file_names();
        assert!(names.contains(&PathBuf::from("/db/kept")), "seed {seed}: {names:?}");
        seen.insert(names);
    }
    // Only an unordered crash keeps the last create without the rename.
    let z_alone = vec![PathBuf::from("/db/kept"), PathBuf::from("/db/z")];
    assert!(seen.contains(&z_alone), "{seen:?}");
}

fn read_all(sim: &SimStorage, path: &Path) -> Vec<u8> {
    let file = sim.open(path, OpenOptions::READ).unwrap();
    let mut buf = vec![0u8; file.len().unwrap() as usize];
    larder_io::read_exact_at(&*file, &mut buf, 0).unwrap();
    buf
}

#[test]
fn lost_directory_entry_takes_its_subtree() {
    let sim = SimStorage::new(3);
    sim.create_dir_all(Path::new("/db/sub/deeper")).unwrap();
    let file_path = Path::new("/db/sub/deeper/f");
    create_synced_data(&sim, file_path, b"f");
    // The file's own directory is synced but /db (holding "sub") is not.
    sim.sync_dir(Path::new("/db/sub/deeper")).unwrap();
    sim.sync_dir(Path::new("/db/sub")).unwrap();
    let after = sim.crash_with(CrashMode::DropAllPending);
    assert!(!after.exists(Path::new("/db/sub")).unwrap());
    assert!(!after.exists(file_path).unwrap());
    assert!(after.file_names().is_empty());

    sim.sync_dir(Path::new("/db")).unwrap_err(); // the old machine is crashed
    let sim = SimStorage::new(3);
    sim.create_dir_all(Path::new("/db/sub")).unwrap();
    create_synced_data(&sim, Path::new("/db/sub/f"), b"f");
    sim.sync_dir(Path::new("/db/sub")).unwrap();
    sim.sync_dir(Path::new("/db")).unwrap();
    let after = sim.crash_with(CrashMode::DropAllPending);
    assert!(after.exists(Path::new("/db/sub/f")).unwrap());
}

#[test]
fn namespace_errors() {
    let sim = SimStorage::new(4);
    create_synced_data(&sim, Path::new("/db/a"), b"a");
    assert!(matches!(sim.open(Path::new("/db/a"), OpenOptions::CREATE_NEW), Err(IoError::AlreadyExists { .. })));
    assert!(sim.open(Path::new("/db/missing"), OpenOptions::WRITE).unwrap_err().is_not_found());
    assert!(sim.open(Path::new("/db/no/such/dir/f"), OpenOptions::CREATE).unwrap_err().is_not_found());
    sim.create_dir_all(Path::new("/db/d")).unwrap();
    assert!(matches!(sim.rename(Path::new("/db/a"), Path::new("/db/d/a")), Err(IoError::InvalidInput { .. })));
    assert!(sim.sync_dir(Path::new("/db/nodir/x")).unwrap_err().is_not_found());
    assert!(sim.create_dir_all(Path::new("/db/a/b")).is_err(), "a file is in the way");
}
