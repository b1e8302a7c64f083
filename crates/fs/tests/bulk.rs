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

#[test]
fn a_large_batch_is_written_as_index_runs_and_survives_a_reopen() {
    let (dir, fs) = fresh();
    let r = root();
    let d = fs.mkdir(&r, fs.root(), b"d", 0o755).unwrap();
    let n = 2 * larder_fs::BULK_RUN_MIN + 1000;
    let owned: Vec<Vec<u8>> = (0..n).map(|i| format!("f{i:06}").into_bytes()).collect();
    let names: Vec<&[u8]> = owned.iter().map(|v| v.as_slice()).collect();
    let before = fs.store().index().stats().ingests;
    // Half now (into an empty directory: no lookups at all)...
    let first = fs.create_batch(&r, d.ino, &names[..n / 2], 0o600, Durability::Buffered).unwrap();
    assert_eq!(first.created.len(), n / 2);
    // ...then all of them: the first half are duplicates of the directory.
    let all = fs.create_batch(&r, d.ino, &names, 0o600, Durability::Buffered).unwrap();
    assert_eq!(all.duplicates.len(), n / 2);
    assert_eq!(all.created.len(), n - n / 2);
    assert_eq!(all.created[0].0, owned[n / 2], "the second half, in name order");
    assert!(fs.store().index().stats().ingests > before, "a batch this large goes in as runs");
    let mut ids: Vec<u64> = first.created.iter().chain(&all.created).map(|c| c.1).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "every file its own object");
    let report = larder_fsck::check(fs.store(), &mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{report}");
    fs.close().unwrap();
    let fs = larder_fs::Fs::open(&dir.path().join("store"), common::options()).unwrap();
    for (name, ino) in all.created.iter().step_by(977) {
        let a = fs.lookup(&r, d.ino, name).unwrap();
        assert_eq!((a.ino, a.mode, a.nlink, a.uid), (*ino, 0o100_600, 1, 0));
    }
    let report = larder_fsck::check(fs.store(), &mut |_| {}).unwrap();
    assert_eq!(report.counts.dentries, 1 + n as u64, "d, and its files");
}
