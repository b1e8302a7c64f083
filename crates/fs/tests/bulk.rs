//! Bulk creation: duplicates within the batch and against the directory
//! are returned and get no object; large batches span several
//! transactions; bad names fail the call before anything is written.
#![allow(clippy::unwrap_used)]

mod common;

use common::{errno, fresh, root, user};
use larder_fs::{Durability, Kind};

#[test]
fn a_batch_creates_every_new_name_once_and_returns_the_duplicates() {
    let (_d, fs) = fresh();
    let r = root();
    let d = fs.mkdir(&r, fs.root(), b"d", 0o755).unwrap();
    let old = fs.mknod(&r, d.ino, b"n0001", 0o644, 0).unwrap();
    let owned: Vec<Vec<u8>> = (0..3000).rev().map(|i| format!("n{i:04}").into_bytes()).collect();
    let mut names: Vec<&[u8]> = owned.iter().map(|n| n.as_slice()).collect();
    names.push(b"n0002");
    names.push(b"n0002");
    let done = fs.create_batch(&r, d.ino, &names, 0o640, Durability::Durable).unwrap();
    assert_eq!(done.duplicates, vec![b"n0001".to_vec(), b"n0002".to_vec(), b"n0002".to_vec()]);
    assert_eq!(done.created.len(), 2999);
    assert!(done.created.windows(2).all(|w| w[0].0 < w[1].0), "in name order");
    for (name, ino) in done.created.iter().step_by(97) {
        let a = fs.lookup(&r, d.ino, name).unwrap();
        assert_eq!((a.ino, a.kind, a.mode, a.size, a.nlink), (*ino, Kind::File, 0o100_640, 0, 1));
    }
    assert_eq!(fs.lookup(&r, d.ino, b"n0001").unwrap().ino, old.ino, "the existing name is untouched");
    // Every object has exactly its one name: nothing left behind.
    let report = larder_fsck::check(fs.store(), &mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{report}");
    assert_eq!(report.counts.dentries, 1 + 3000, "d, and 3000 names in it");
}

#[test]
fn bad_names_and_permissions_fail_before_anything_is_written() {
    let (_d, fs) = fresh();
    let r = root();
    let d = fs.mkdir(&r, fs.root(), b"d", 0o755).unwrap();
    let long = vec![b'x'; 256];
    assert_eq!(errno(fs.create_batch(&r, d.ino, &[b"ok", &long], 0o644, Durability::Buffered)), libc::ENAMETOOLONG);
    assert_eq!(errno(fs.create_batch(&r, d.ino, &[b"ok", b"a/b"], 0o644, Durability::Buffered)), libc::EINVAL);
    assert_eq!(errno(fs.lookup(&r, d.ino, b"ok")), libc::ENOENT);
    let alice = user(1000, 1000, &[]);
    assert_eq!(errno(fs.create_batch(&alice, d.ino, &[b"x"], 0o644, Durability::Buffered)), libc::EACCES);
    let f = fs.mknod(&r, d.ino, b"f", 0o644, 0).unwrap();
    assert_eq!(errno(fs.create_batch(&r, f.ino, &[b"x"], 0o644, Durability::Buffered)), libc::ENOTDIR);
}
