//! Injected faults hit exactly the armed call and do exactly what the fault
//! model says: EIO and NoSpace change nothing, a short write writes a
//! prefix, a bit flip changes one bit of what a read returns and nothing on
//! disk; also path-restricted faults, the capacity limit and `corrupt`.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use larder_io::sim::{SimFault, SimOp};
use larder_io::{read_exact_at, write_all_at, FileRef, IoError, OpenOptions, SimStorage, Storage};

fn new_file(sim: &SimStorage, path: &Path, data: &[u8]) -> FileRef {
    let file = sim.open(path, OpenOptions::CREATE_NEW).unwrap();
    write_all_at(&*file, data, 0).unwrap();
    file
}

fn is_eio(err: &IoError) -> bool {
    matches!(err, IoError::Os { source, .. } if source.raw_os_error() == Some(5))
}

#[test]
fn eio_hits_the_nth_call_after_arming_and_changes_nothing() {
    let sim = SimStorage::new(1);
    let file = new_file(&sim, Path::new("/db/f"), b"0");
    // Calls made before arming do not count.
    sim.fail_nth(SimOp::Write, 3, SimFault::Eio);
    assert_eq!(file.write_at(b"1", 1).unwrap(), 1);
    assert_eq!(file.write_at(b"2", 2).unwrap(), 1);
    let err = file.write_at(b"3", 3).unwrap_err();
    assert!(is_eio(&err), "{err:?}");
    assert_eq!(file.len().unwrap(), 3, "the failed write changed nothing");
    assert_eq!(file.write_at(b"3", 3).unwrap(), 1, "the fault fires once");
    assert_eq!(sim.counters().writes, 4);
}

#[test]
fn eio_on_namespace_calls_changes_nothing() {
    let sim = SimStorage::new(2);
    new_file(&sim, Path::new("/db/a"), b"a");
    sim.fail_nth(SimOp::Open, 1, SimFault::Eio);
    assert!(is_eio(&sim.open(Path::new("/db/b"), OpenOptions::CREATE).unwrap_err()));
    assert!(!sim.exists(Path::new("/db/b")).unwrap());
    sim.fail_nth(SimOp::Rename, 1, SimFault::Eio);
    assert!(is_eio(&sim.rename(Path::new("/db/a"), Path::new("/db/b")).unwrap_err()));
    assert!(sim.exists(Path::new("/db/a")).unwrap());
    sim.fail_nth(SimOp::Remove, 1, SimFault::Eio);
    assert!(is_eio(&sim.remove_file(Path::new("/db/a")).unwrap_err()));
    assert!(sim.exists(Path::new("/db/a")).unwrap());
    sim.fail_nth(SimOp::SyncDir, 1, SimFault::Eio);
    assert!(is_eio(&sim.sync_dir(Path::new("/db")).unwrap_err()));
    assert!(sim.durable_file_names().is_empty());
    sim.sync_dir(Path::new("/db")).unwrap();
    assert_eq!(sim.durable_file_names().len(), 1);
}

#[test]
fn eio_on_file_calls() {
    let sim = SimStorage::new(3);
    let file = new_file(&sim, Path::new("/db/f"), &[7u8; 100]);
    for (op, call) in [
        (SimOp::Read, Box::new(|f: &FileRef| f.read_at(&mut [0u8; 4], 0).map(|_| ())) as Box<dyn Fn(&FileRef) -> _>),
        (SimOp::Allocate, Box::new(|f: &FileRef| f.allocate(0, 4096))),
        (SimOp::PunchHole, Box::new(|f: &FileRef| f.punch_hole(0, 50))),
        (SimOp::SetLen, Box::new(|f: &FileRef| f.set_len(1))),
    ] {
        sim.fail_nth(op, 1, SimFault::Eio);
        let err = call(&file).unwrap_err();
        assert!(is_eio(&err), "{op:?}: {err:?}");
    }
    let mut buf = [0u8; 100];
    read_exact_at(&*file, &mut buf, 0).unwrap();
    assert_eq!(buf, [7u8; 100], "no failed call changed the file");
}

#[test]
fn short_write_writes_a_prefix_and_returns_its_length() {
    let sim = SimStorage::new(4);
    let file = new_file(&sim, Path::new("/db/f"), b"");
    sim.fail_nth(SimOp::Write, 1, SimFault::ShortWrite);
    let n = file.write_at(b"0123456789", 0).unwrap();
    assert!(n > 0 && n < 10, "{n}");
    assert_eq!(file.len().unwrap(), n as u64);
    let mut buf = vec![0u8; n];
    read_exact_at(&*file, &mut buf, 0).unwrap();
    assert_eq!(buf, &b"0123456789"[..n]);
    // write_all_at retries the rest.
    sim.fail_nth(SimOp::Write, 1, SimFault::ShortWrite);
    write_all_at(&*file, b"abcdefgh", 10).unwrap();
    let mut all = [0u8; 18];
    read_exact_at(&*file, &mut all, 0).unwrap();
    assert_eq!(&all[10..], b"abcdefgh");
}

#[test]
fn no_space_is_returned_by_the_chosen_call() {
    let sim = SimStorage::new(5);
    let file = new_file(&sim, Path::new("/db/f"), b"x");
    sim.fail_nth(SimOp::Write, 2, SimFault::NoSpace);
    file.write_at(b"y", 1).unwrap();
    assert!(matches!(file.write_at(b"z", 2), Err(IoError::NoSpace { .. })));
    assert_eq!(file.len().unwrap(), 2);
    sim.fail_nth(SimOp::Allocate, 1, SimFault::NoSpace);
    assert!(matches!(file.allocate(0, 1 << 20), Err(IoError::NoSpace { .. })));
    assert_eq!(file.len().unwrap(), 2);
}

#[test]
fn bit_flip_flips_exactly_one_bit_of_one_read() {
    let sim = SimStorage::new(6);
    let data: Vec<u8> = (0..=255u8).collect();
    let file = new_file(&sim, Path::new("/db/f"), &data);
    file.sync_data().unwrap();
    sim.fail_nth(SimOp::Read, 1, SimFault::BitFlip);
    let mut buf = vec![0u8; 256];
    assert_eq!(file.read_at(&mut buf, 0).unwrap(), 256);
    let flipped: u32 = buf.iter().zip(&data).map(|(a, b)| (a ^ b).count_ones()).sum();
    assert_eq!(flipped, 1);
    // The file itself is intact: the next read and the durable image are clean.
    assert_eq!(file.read_at(&mut buf, 0).unwrap(), 256);
    assert_eq!(buf, data);
    assert_eq!(sim.read_durable(Path::new("/db/f")).unwrap(), data);
}

#[test]
fn path_fault_ignores_other_files() {
    let sim = SimStorage::new(7);
    let a = new_file(&sim, Path::new("/db/a"), b"a");
    let b = new_file(&sim, Path::new("/db/b"), b"b");
    sim.fail_path("/db/b", SimOp::Write, SimFault::Eio);
    a.write_at(b"1", 1).unwrap();
    assert!(b.write_at(b"1", 1).is_err());
    b.write_at(b"1", 1).unwrap();
}

#[test]
fn capacity_limits_growth() {
    let sim = SimStorage::new(8);
    sim.set_capacity(1000);
    let a = new_file(&sim, Path::new("/db/a"), &[1u8; 800]);
    let b = new_file(&sim, Path::new("/db/b"), &[2u8; 200]);
    assert!(matches!(b.write_at(b"x", 200), Err(IoError::NoSpace { .. })));
    assert!(matches!(a.set_len(801), Err(IoError::NoSpace { .. })));
    assert!(matches!(a.allocate(0, 801), Err(IoError::NoSpace { .. })));
    // Overwrites within the file need no space; removing a file frees it.
    a.write_at(b"y", 0).unwrap();
    sim.remove_file(Path::new("/db/a")).unwrap();
    b.write_at(&[3u8; 500], 200).unwrap();
}

#[test]
fn punched_ranges_give_capacity_back_until_written_again() {
    let sim = SimStorage::new(8);
    sim.set_capacity(1000);
    let root = Path::new("/");
    let a = new_file(&sim, Path::new("/db/a"), &[1u8; 1000]);
    assert_eq!(sim.available_bytes(root).unwrap(), 0);
    a.punch_hole(100, 300).unwrap();
    assert_eq!(sim.available_bytes(root).unwrap(), 300);
    // The hole's space can go to another file, and then writing the hole
    // again finds none.
    let b = new_file(&sim, Path::new("/db/b"), &[2u8; 200]);
    assert!(matches!(a.write_at(&[5u8; 200], 100), Err(IoError::NoSpace { .. })));
    a.write_at(&[5u8; 100], 100).unwrap();
    assert_eq!(sim.available_bytes(root).unwrap(), 0);
    drop(b);
    sim.remove_file(Path::new("/db/b")).unwrap();
    assert_eq!(sim.available_bytes(root).unwrap(), 200);
}

#[test]
fn corrupt_flips_bits_in_live_and_durable_images() {
    let sim = SimStorage::new(9);
    let path = Path::new("/db/f");
    let file = new_file(&sim, path, &[0u8; 16]);
    file.sync_data().unwrap();
    sim.corrupt(path, 5, 0x81).unwrap();
    let mut buf = [0u8; 16];
    read_exact_at(&*file, &mut buf, 0).unwrap();
    assert_eq!(buf[5], 0x81);
    assert_eq!(sim.read_durable(path).unwrap()[5], 0x81);
    assert!(sim.corrupt(path, 16, 1).is_err());
}
