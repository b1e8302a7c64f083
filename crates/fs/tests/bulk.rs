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

/// A chunk's names are checked against the directory one by one only when
/// it holds a name between the chunk's first and last: names taken at a
/// chunk's first and last place, and inside, are all found, and chunks
/// with none taken in their span create every name.
#[test]
fn names_taken_at_a_chunks_ends_are_found() {
    let (_d, fs) = fresh();
    let r = root();
    let d = fs.mkdir(&r, fs.root(), b"d", 0o755).unwrap();
    let chunk = larder_fs::BULK_CHUNK;
    let taken = [chunk, 3 * chunk - 1, 3 * chunk + 5, 5 * chunk - 1];
    for &i in &taken {
        fs.mknod(&r, d.ino, format!("n{i:05}").as_bytes(), 0o644, 0).unwrap();
    }
    let n = 5 * chunk;
    let owned: Vec<Vec<u8>> = (0..n).rev().map(|i| format!("n{i:05}").into_bytes()).collect();
    let names: Vec<&[u8]> = owned.iter().map(|v| v.as_slice()).collect();
    let done = fs.create_batch(&r, d.ino, &names, 0o644, Durability::Durable).unwrap();
    let want: Vec<Vec<u8>> = taken.iter().map(|i| format!("n{i:05}").into_bytes()).collect();
    assert_eq!(done.duplicates, want);
    assert_eq!(done.created.len(), n - taken.len());
    let report = larder_fsck::check(fs.store(), &mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{report}");
    assert_eq!(report.counts.dentries, 1 + n as u64);
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

/// Makes a file system on `sim` with directory `d` and bulk-creates
/// `names` in it (committed as an index run); returns whether the create
/// was acknowledged.
fn bulk_on(sim: &larder_io::SimStorage, names: &[Vec<u8>]) -> bool {
    let storage: larder_io::StorageRef = std::sync::Arc::new(sim.clone());
    let dir = std::path::Path::new("/fs/store");
    let Ok(fs) = larder_fs::Fs::create_with(storage, dir, common::sim_options()) else { return false };
    let r = root();
    let Ok(d) = fs.mkdir(&r, fs.root(), b"d", 0o755) else { return false };
    if fs.sync().is_err() {
        return false;
    }
    let refs: Vec<&[u8]> = names.iter().map(|v| v.as_slice()).collect();
    fs.create_batch(&r, d.ino, &refs, 0o644, Durability::Durable).is_ok()
}

#[test]
fn a_crash_during_a_bulk_create_keeps_all_of_it_or_none_and_fsck_is_clean() {
    let n = larder_fs::BULK_RUN_MIN + 100;
    let names: Vec<Vec<u8>> = (0..n).map(|i| format!("c{i:06}").into_bytes()).collect();
    let probe = larder_io::SimStorage::new(5);
    assert!(bulk_on(&probe, &names));
    let writes = probe.counters().writes;
    // A bulk create writes its run in large writes: every write is a
    // crash point (and one past the last, where only syncs remain).
    let (mut saw_all, mut saw_none) = (false, false);
    for k in 0..=writes + 1 {
        for mode in [larder_io::sim::CrashMode::Random, larder_io::sim::CrashMode::KeepAllPending] {
            let sim = larder_io::SimStorage::new(k + 1);
            sim.set_unordered_dir_ops(true);
            sim.crash_after_writes(k);
            let acked = bulk_on(&sim, &names);
            let image = sim.crash_with(mode);
            let storage: larder_io::StorageRef = std::sync::Arc::new(image);
            let dir = std::path::Path::new("/fs/store");
            let fs = match larder_fs::Fs::open_with(storage, dir, common::sim_options()) {
                Ok(fs) => fs,
                // The crash came before the store's creation was durable.
                Err(_) if !acked => continue,
                Err(e) => panic!("crash after write {k} ({mode:?}): reopen failed: {e}"),
            };
            let what = format!("crash after write {k} ({mode:?})");
            let report = larder_fsck::check(fs.store(), &mut |_| {}).unwrap();
            assert!(report.problems.is_empty(), "{what}: {report}");
            let r = root();
            let Ok(d) = fs.lookup(&r, fs.root(), b"d") else {
                assert!(!acked, "{what}: the directory is gone");
                continue;
            };
            let first = fs.lookup(&r, d.ino, &names[0]).is_ok();
            let last = fs.lookup(&r, d.ino, &names[n - 1]).is_ok();
            assert_eq!(first, last, "{what}: half a bulk create survived");
            assert!(first || !acked, "{what}: an acknowledged bulk create was lost");
            let entries = report.counts.dentries;
            assert!(entries == 1 || entries == 1 + n as u64, "{what}: {entries} entries");
            saw_all |= first;
            saw_none |= !first;
        }
    }
    assert!(saw_all && saw_none, "the crash points missed the commit: all {saw_all}, none {saw_none}");
}
