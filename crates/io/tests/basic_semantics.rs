//! Basic `Storage` / `File` semantics, one test body run on both backends:
//! `RealStorage` in a temporary directory and `SimStorage` in memory, so the
//! simulation is held to what the real file system does.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use larder_io::{read_exact_at, write_all_at, IoError, OpenOptions, RealStorage, SimStorage, Storage};

use common::read_all;

fn check_basic_semantics(storage: &dyn Storage, root: &Path) {
    let dir = root.join("db");
    storage.create_dir_all(&dir.join("sub")).unwrap();
    assert!(storage.exists(&dir).unwrap());
    assert!(storage.exists(&dir.join("sub")).unwrap());

    // Write, read back, length; a write past the end leaves a zero gap.
    let a = dir.join("a");
    let file = storage.open(&a, OpenOptions::CREATE_NEW).unwrap();
    assert_eq!(file.path(), a.as_path());
    assert!(file.is_empty().unwrap());
    write_all_at(&*file, b"hello", 0).unwrap();
    write_all_at(&*file, b"x", 10).unwrap();
    assert_eq!(file.len().unwrap(), 11);
    let mut buf = [0xffu8; 100];
    assert_eq!(file.read_at(&mut buf, 0).unwrap(), 11);
    assert_eq!(&buf[..11], b"hello\0\0\0\0\0x");
    assert_eq!(file.read_at(&mut buf, 11).unwrap(), 0, "read at end of file returns nothing");
    assert_eq!(file.read_at(&mut buf, 9).unwrap(), 2, "read across the end is short");

    // read_exact_at past the end names the file and the missing offset.
    let mut big = [0u8; 20];
    match read_exact_at(&*file, &mut big, 0) {
        Err(IoError::UnexpectedEof { path, offset }) => {
            assert_eq!(path, a);
            assert_eq!(offset, 11);
        }
        other => panic!("expected UnexpectedEof, got {other:?}"),
    }

    // set_len shrinks, then grows with zeros.
    file.set_len(3).unwrap();
    assert_eq!(read_all(storage, &a), b"hel");
    file.set_len(8).unwrap();
    assert_eq!(read_all(storage, &a), b"hel\0\0\0\0\0");

    // allocate extends with zeros and keeps existing bytes.
    file.allocate(0, 4096).unwrap();
    assert_eq!(file.len().unwrap(), 4096);
    let content = read_all(storage, &a);
    assert_eq!(&content[..3], b"hel");
    assert!(content[3..].iter().all(|b| *b == 0));

    // punch_hole zeros the range and keeps the length.
    write_all_at(&*file, &[0xaa; 4096], 0).unwrap();
    file.punch_hole(512, 1024).unwrap();
    assert_eq!(file.len().unwrap(), 4096);
    let content = read_all(storage, &a);
    assert!(content[..512].iter().all(|b| *b == 0xaa));
    assert!(content[512..1536].iter().all(|b| *b == 0));
    assert!(content[1536..].iter().all(|b| *b == 0xaa));
    file.sync_data().unwrap();
    storage.sync_dir(&dir).unwrap();

    // drop_cache is a hint: synced and dirty bytes read back unchanged.
    write_all_at(&*file, &[0xbb; 100], 2048).unwrap();
    file.drop_cache(0, 4096).unwrap();
    file.drop_cache(1024, 0).unwrap();
    let content = read_all(storage, &a);
    assert_eq!(content.len(), 4096);
    assert!(content[..512].iter().all(|b| *b == 0xaa));
    assert!(content[2048..2148].iter().all(|b| *b == 0xbb), "a dirty page survives drop_cache");
    write_all_at(&*file, &[0xaa; 100], 2048).unwrap();
    file.sync_data().unwrap();

    // A file opened for direct writes: whole aligned blocks (from an
    // unaligned buffer too) and a partial write mix, and read back as
    // written, through this handle and another.
    let d = dir.join("direct");
    let direct = storage.open(&d, OpenOptions::CREATE_NEW.direct()).unwrap();
    let blocks: Vec<u8> = (0..3 * 4096 + 1).map(|i| (i % 251) as u8).collect();
    write_all_at(&*direct, &blocks[1..], 4096).unwrap();
    write_all_at(&*direct, b"partial", 4096 + 10).unwrap();
    write_all_at(&*direct, &[9; 4096], 0).unwrap();
    direct.sync_data().unwrap();
    let mut expect = vec![9u8; 4096];
    expect.extend_from_slice(&blocks[1..]);
    expect[4096 + 10..4096 + 17].copy_from_slice(b"partial");
    assert_eq!(read_all(storage, &d), expect);
    let mut back = vec![0u8; expect.len()];
    read_exact_at(&*direct, &mut back, 0).unwrap();
    assert_eq!(back, expect);
    // A direct write over cached bytes replaces them.
    write_all_at(&*direct, &[5; 4096], 4096).unwrap();
    read_exact_at(&*direct, &mut back[..4096], 4096).unwrap();
    assert_eq!(&back[..4096], &[5; 4096][..]);
    storage.remove_file(&d).unwrap();

    // create_new on an existing file, open of a missing one.
    assert!(matches!(storage.open(&a, OpenOptions::CREATE_NEW), Err(IoError::AlreadyExists { .. })));
    let missing = storage.open(&dir.join("missing"), OpenOptions::READ).unwrap_err();
    assert!(missing.is_not_found(), "{missing:?}");
    let no_parent = storage.open(&dir.join("nodir").join("f"), OpenOptions::CREATE).unwrap_err();
    assert!(no_parent.is_not_found(), "{no_parent:?}");
    // CREATE on an existing file opens it without truncating.
    assert_eq!(storage.open(&a, OpenOptions::CREATE).unwrap().len().unwrap(), 4096);

    // A read-only handle refuses writes.
    let ro = storage.open(&a, OpenOptions::READ).unwrap();
    assert!(ro.write_at(b"no", 0).is_err());

    // rename moves the content, replaces an existing target, and must stay
    // in one directory.
    let b = dir.join("b");
    let c = dir.join("c");
    write_all_at(&*storage.open(&c, OpenOptions::CREATE_NEW).unwrap(), b"old c", 0).unwrap();
    storage.rename(&a, &b).unwrap();
    assert!(!storage.exists(&a).unwrap());
    assert!(storage.exists(&b).unwrap());
    assert_eq!(read_all(storage, &b).len(), 4096);
    storage.rename(&b, &c).unwrap();
    assert!(!storage.exists(&b).unwrap());
    assert_eq!(read_all(storage, &c).len(), 4096, "rename replaced the old target");
    let across = storage.rename(&c, &dir.join("sub").join("c")).unwrap_err();
    assert!(matches!(across, IoError::InvalidInput { .. }), "{across:?}");
    assert!(storage.rename(&a, &b).unwrap_err().is_not_found());

    // list_dir is sorted and includes directories.
    write_all_at(&*storage.open(&dir.join("0first"), OpenOptions::CREATE_NEW).unwrap(), b"1", 0).unwrap();
    assert_eq!(storage.list_dir(&dir).unwrap(), vec!["0first", "c", "sub"]);
    assert!(storage.list_dir(&dir.join("sub")).unwrap().is_empty());
    assert!(storage.list_dir(&dir.join("nodir")).unwrap_err().is_not_found());

    // An open handle outlives its name.
    let held = storage.open(&c, OpenOptions::WRITE).unwrap();
    storage.remove_file(&c).unwrap();
    assert!(!storage.exists(&c).unwrap());
    assert!(storage.remove_file(&c).unwrap_err().is_not_found());
    write_all_at(&*held, b"still here", 0).unwrap();
    let mut back = [0u8; 10];
    read_exact_at(&*held, &mut back, 0).unwrap();
    assert_eq!(&back, b"still here");
    assert_eq!(storage.list_dir(&dir).unwrap(), vec!["0first", "sub"]);

    // Locks conflict while held and are released on drop.
    let lock_path = dir.join("LOCK");
    let guard = storage.lock(&lock_path).unwrap();
    assert!(matches!(storage.lock(&lock_path), Err(IoError::Locked { .. })));
    drop(guard);
    let again = storage.lock(&lock_path).unwrap();
    drop(again);
}

#[test]
fn real_storage_basic_semantics() {
    let tmp = tempfile::tempdir().unwrap();
    check_basic_semantics(&RealStorage::new(), tmp.path());
}

/// On tmpfs: kernels before 6.6 refuse O_DIRECT there, and a file opened
/// for direct writes is then written through the page cache (the fallback
/// path); later ones accept it. Either way: the same semantics, no error.
#[test]
fn real_storage_basic_semantics_on_tmpfs() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        return;
    }
    let tmp = tempfile::tempdir_in(shm).unwrap();
    check_basic_semantics(&RealStorage::new(), tmp.path());
}

#[test]
fn sim_storage_basic_semantics() {
    check_basic_semantics(&SimStorage::new(7), Path::new("/sim"));
}

#[test]
fn sim_storage_basic_semantics_relative_root() {
    check_basic_semantics(&SimStorage::new(8), Path::new("store"));
}
