//! What a simulated crash keeps of file data: synced bytes always survive,
//! unsynced ones are all lost under `DropAllPending` and all kept under
//! `KeepAllPending`, and a sync of one file persists nothing of another.
//! Each test writes through the `Storage` trait, crashes, and reads the
//! rebooted machine.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use larder_io::sim::CrashMode;
use larder_io::{write_all_at, IoError, OpenOptions, SimStorage, Storage};

use common::{durable_file, read_all};

#[test]
fn synced_data_survives_every_crash() {
    for seed in 0..50 {
        let sim = SimStorage::new(seed);
        let path = Path::new("/db/data");
        durable_file(&sim, path, b"durable bytes");
        let after = sim.crash();
        assert_eq!(read_all(&after, path), b"durable bytes", "seed {seed}");
    }
}

#[test]
fn unsynced_writes_are_dropped_or_kept_by_mode() {
    let sim = SimStorage::new(1);
    let path = Path::new("/db/data");
    durable_file(&sim, path, b"AAAA");
    let file = sim.open(path, OpenOptions::WRITE).unwrap();
    write_all_at(&*file, b"BB", 2).unwrap();
    write_all_at(&*file, b"CCCC", 4).unwrap();
    assert_eq!(read_all(&sim, path), b"AABBCCCC", "reads see the live image");
    assert_eq!(sim.read_durable(path).unwrap(), b"AAAA");

    let dropped = sim.crash_with(CrashMode::DropAllPending);
    assert_eq!(read_all(&dropped, path), b"AAAA");
    let kept = sim.crash_with(CrashMode::KeepAllPending);
    assert_eq!(read_all(&kept, path), b"AABBCCCC");
    // The rebooted machine starts clean: live equals durable.
    assert_eq!(kept.read_durable(path).unwrap(), b"AABBCCCC");
}

#[test]
fn random_crash_may_drop_unsynced_writes() {
    // Over many seeds a random crash both keeps and drops an unsynced write.
    let (mut kept, mut dropped) = (0, 0);
    for seed in 0..64 {
        let sim = SimStorage::new(seed);
        let path = Path::new("/db/data");
        durable_file(&sim, path, b"old!");
        let file = sim.open(path, OpenOptions::WRITE).unwrap();
        write_all_at(&*file, b"new!", 0).unwrap();
        match read_all(&sim.crash(), path).as_slice() {
            b"old!" => dropped += 1,
            b"new!" => kept += 1,
            other => panic!("seed {seed}: a 4-byte write inside one sector cannot tear: {other:?}"),
        }
    }
    assert!(kept > 0 && dropped > 0, "kept {kept}, dropped {dropped}");
}

#[test]
fn sync_of_one_file_persists_nothing_of_another() {
    let sim = SimStorage::new(3);
    let (a, b) = (Path::new("/db/a"), Path::new("/db/b"));
    durable_file(&sim, a, b"a0");
    durable_file(&sim, b, b"b0");
    let fa = sim.open(a, OpenOptions::WRITE).unwrap();
    let fb = sim.open(b, OpenOptions::WRITE).unwrap();
    write_all_at(&*fa, b"a1", 0).unwrap();
    write_all_at(&*fb, b"b1", 0).unwrap();
    fb.set_len(10).unwrap();
    fa.sync_data().unwrap();
    assert_eq!(sim.read_durable(a).unwrap(), b"a1");
    assert_eq!(sim.read_durable(b).unwrap(), b"b0");
    let after = sim.crash_with(CrashMode::DropAllPending);
    assert_eq!(read_all(&after, a), b"a1");
    assert_eq!(read_all(&after, b), b"b0");
}

#[test]
fn old_handle_fails_after_crash() {
    let sim = SimStorage::new(4);
    let path = Path::new("/db/data");
    durable_file(&sim, path, b"x");
    let file = sim.open(path, OpenOptions::WRITE).unwrap();
    let rebooted = sim.crash();
    assert!(sim.is_crashed());
    assert!(!rebooted.is_crashed());
    assert!(matches!(file.write_at(b"y", 0), Err(IoError::Crashed)));
    assert!(matches!(file.read_at(&mut [0u8; 1], 0), Err(IoError::Crashed)));
    assert!(matches!(sim.open(path, OpenOptions::READ), Err(IoError::Crashed)));
    assert!(matches!(sim.sync_dir(Path::new("/db")), Err(IoError::Crashed)));
    // The rebooted machine has zeroed counters and no locks held.
    assert_eq!(rebooted.counters(), Default::default());
    let _guard = rebooted.lock(Path::new("/db/LOCK")).unwrap();
}

#[test]
fn set_len_allocate_and_punch_hole_are_pending_until_sync() {
    let sim = SimStorage::new(5);
    let path = Path::new("/db/data");
    durable_file(&sim, path, &[1u8; 1024]);
    let file = sim.open(path, OpenOptions::WRITE).unwrap();
    file.punch_hole(0, 512).unwrap();
    file.allocate(1024, 1024).unwrap();
    assert_eq!(sim.read_durable(path).unwrap(), vec![1u8; 1024]);
    let dropped = sim.crash_with(CrashMode::DropAllPending);
    assert_eq!(read_all(&dropped, path), vec![1u8; 1024]);

    let sim = SimStorage::new(5);
    durable_file(&sim, path, &[1u8; 1024]);
    let file = sim.open(path, OpenOptions::WRITE).unwrap();
    file.punch_hole(0, 512).unwrap();
    file.set_len(2048).unwrap();
    file.sync_data().unwrap();
    let after = sim.crash_with(CrashMode::DropAllPending);
    let content = read_all(&after, path);
    assert_eq!(content.len(), 2048);
    assert!(content[..512].iter().all(|b| *b == 0));
    assert!(content[512..1024].iter().all(|b| *b == 1));
    assert!(content[1024..].iter().all(|b| *b == 0));
}
