//! Open files: data, O_APPEND, O_TRUNC, sparse files, truncate, unlinked
//! open files and their freeing (at last close, or at the next open after
//! a crash), renames, listings from a snapshot, xattrs, statfs.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use common::{errno, fresh, root, user};
use larder_fs::{Fs, RenameFlags, SetAttr, XattrFlags};

#[test]
fn reads_writes_appends_truncates_and_holes() {
    let (_d, fs) = fresh();
    let r = root();
    let (a, fh) = fs.create_file(&r, fs.root(), b"a", 0o644, libc::O_RDWR).unwrap();
    assert_eq!(fs.write(&r, fh, 0, b"hello").unwrap(), 5);
    assert_eq!(fs.read(fh, 0, 100).unwrap(), b"hello");
    assert_eq!(fs.read(fh, 3, 100).unwrap(), b"lo");
    assert!(fs.read(fh, 10, 100).unwrap().is_empty());
    // Sparse: a write far past the end leaves a hole of zeros.
    fs.write(&r, fh, 1 << 20, b"tail").unwrap();
    let attr = fs.getattr(a.ino).unwrap();
    assert_eq!(attr.size, (1 << 20) + 4);
    let mid = fs.read(fh, 4096, 8192).unwrap();
    assert!(mid.len() == 8192 && mid.iter().all(|&b| b == 0));
    assert_eq!(fs.read(fh, 1 << 20, 10).unwrap(), b"tail");
    // Into the caller's buffer: holes as zeros over whatever it held, and
    // what is past the end untouched.
    let mut buf = [0xEEu8; 12];
    assert_eq!(fs.read_into(fh, (1 << 20) - 8, &mut buf).unwrap(), 12);
    assert_eq!(buf, *b"\0\0\0\0\0\0\0\0tail");
    let mut buf = [0xEEu8; 6];
    assert_eq!(fs.read_into(fh, (1 << 20) + 2, &mut buf).unwrap(), 2);
    assert_eq!(buf, *b"il\xEE\xEE\xEE\xEE");
    fs.release(fh).unwrap();

    let ap = fs.open_file(&r, a.ino, libc::O_WRONLY | libc::O_APPEND).unwrap();
    fs.write(&r, ap, 0, b"++").unwrap();
    assert_eq!(fs.getattr(a.ino).unwrap().size, (1 << 20) + 6);
    assert_eq!(errno(fs.read(ap, 0, 1)), libc::EBADF, "write-only handle");
    assert_eq!(errno(fs.read_into(ap, 0, &mut [0u8; 1])), libc::EBADF, "write-only handle");
    fs.release(ap).unwrap();

    let tr = fs.open_file(&r, a.ino, libc::O_RDWR | libc::O_TRUNC).unwrap();
    assert_eq!(fs.getattr(a.ino).unwrap().size, 0);
    fs.write(&r, tr, 0, b"0123456789").unwrap();
    fs.setattr(&r, a.ino, &SetAttr { size: Some(4), ..Default::default() }, Some(tr)).unwrap();
    assert_eq!(fs.read(tr, 0, 100).unwrap(), b"0123");
    fs.setattr(&r, a.ino, &SetAttr { size: Some(8), ..Default::default() }, None).unwrap();
    assert_eq!(fs.read(tr, 0, 100).unwrap(), b"0123\0\0\0\0");
    fs.fsync(tr).unwrap();
    fs.release(tr).unwrap();
    assert_eq!(errno(fs.release(tr)), libc::EBADF);
    assert_eq!(errno(fs.read(tr, 0, 1)), libc::EBADF);
    let d = fs.mkdir(&r, fs.root(), b"d", 0o755).unwrap();
    assert_eq!(errno(fs.open_file(&r, d.ino, libc::O_RDWR)), libc::EISDIR);
    let ro = fs.open_file(&r, a.ino, libc::O_RDONLY).unwrap();
    assert_eq!(errno(fs.write(&r, ro, 0, b"x")), libc::EBADF);
}

#[test]
fn an_unlinked_open_file_lives_until_its_last_close() {
    let (_d, fs) = fresh();
    let r = root();
    let (a, fh) = fs.create_file(&r, fs.root(), b"a", 0o644, libc::O_RDWR).unwrap();
    let data = vec![7u8; 200_000];
    fs.write(&r, fh, 0, &data).unwrap();
    let second = fs.open_file(&r, a.ino, libc::O_RDONLY).unwrap();
    fs.unlink(&r, fs.root(), b"a").unwrap();
    assert_eq!(errno(fs.lookup(&r, fs.root(), b"a")), libc::ENOENT);
    assert_eq!(fs.getattr(a.ino).unwrap().nlink, 0);
    assert_eq!(fs.read(second, 0, 300_000).unwrap(), data);
    fs.write(&r, fh, 0, b"still writable").unwrap();
    // While a handle is open, the object can be opened again by its id.
    let third = fs.open_file(&r, a.ino, libc::O_RDONLY).unwrap();
    fs.release(third).unwrap();
    fs.release(fh).unwrap();
    assert!(fs.getattr(a.ino).is_ok(), "one handle left");
    fs.release(second).unwrap();
    assert_eq!(errno(fs.getattr(a.ino)), libc::ENOENT);
}

#[test]
fn an_open_file_renamed_over_or_unlinked_by_each_name_lives_until_its_last_close() {
    let (_d, fs) = fresh();
    let r = root();
    let top = fs.root();
    // Replaced by a rename while open: freed at the last close only.
    let (victim, vfh) = fs.create_file(&r, top, b"victim", 0o644, libc::O_RDWR).unwrap();
    fs.write(&r, vfh, 0, b"old").unwrap();
    fs.mknod(&r, top, b"new", 0o644, 0).unwrap();
    fs.rename(&r, top, b"new", top, b"victim", RenameFlags::default()).unwrap();
    assert_eq!(fs.getattr(victim.ino).unwrap().nlink, 0);
    assert_eq!(fs.read(vfh, 0, 10).unwrap(), b"old");
    fs.release(vfh).unwrap();
    assert_eq!(errno(fs.getattr(victim.ino)), libc::ENOENT);
    // Two names: the first unlink leaves a name, so the last close of the
    // handles opened before it frees nothing; the second unlink, with a
    // handle open again, leaves it to that handle's close.
    let (linked, fh) = fs.create_file(&r, top, b"one", 0o644, libc::O_RDWR).unwrap();
    fs.link(&r, linked.ino, top, b"two").unwrap();
    fs.unlink(&r, top, b"one").unwrap();
    fs.release(fh).unwrap();
    assert_eq!(fs.getattr(linked.ino).unwrap().nlink, 1);
    let fh = fs.open_file(&r, linked.ino, libc::O_RDONLY).unwrap();
    fs.unlink(&r, top, b"two").unwrap();
    assert_eq!(fs.getattr(linked.ino).unwrap().nlink, 0);
    fs.release(fh).unwrap();
    assert_eq!(errno(fs.getattr(linked.ino)), libc::ENOENT);
    assert!(fs.store().used_extents().unwrap().is_empty(), "every freed object's space is free again");
}

#[test]
fn an_object_a_kernel_still_references_outlives_its_removal_until_the_last_forget() {
    let (_d, fs) = fresh();
    let r = root();
    let top = fs.root();
    // A directory the kernel knows (a process's working directory), with
    // two references and no handle, removed by another process.
    let d = fs.mkdir(&r, top, b"d", 0o755).unwrap();
    fs.retain(d.ino).unwrap();
    fs.retain(d.ino).unwrap();
    fs.rmdir(&r, top, b"d").unwrap();
    assert_eq!(errno(fs.lookup(&r, top, b"d")), libc::ENOENT);
    assert_eq!(fs.getattr(d.ino).unwrap().nlink, 0, "stat(\".\") still works");
    assert_eq!(errno(fs.mknod(&r, d.ino, b"f", 0o644, 0)), libc::ENOENT);
    assert_eq!(errno(fs.mkdir(&r, d.ino, b"sub", 0o755)), libc::ENOENT);
    let dh = fs.opendir(&r, d.ino).unwrap();
    assert!(fs.readdir(dh, 0, 10).unwrap().is_empty());
    fs.releasedir(dh).unwrap();
    assert!(fs.getattr(d.ino).is_ok(), "a reference is left after the last handle");
    fs.forget(d.ino, 1).unwrap();
    assert!(fs.getattr(d.ino).is_ok(), "one reference left");
    fs.forget(d.ino, 1).unwrap();
    assert_eq!(errno(fs.getattr(d.ino)), libc::ENOENT);
    // A file: its data lasts until the kernel forgets it, and then its
    // space is free again; a reference forgotten while it has a name
    // frees nothing.
    let (f, fh) = fs.create_file(&r, top, b"f", 0o644, libc::O_RDWR).unwrap();
    fs.write(&r, fh, 0, &[3u8; 50_000]).unwrap();
    fs.retain(f.ino).unwrap();
    fs.release(fh).unwrap();
    fs.unlink(&r, top, b"f").unwrap();
    let again = fs.open_file(&r, f.ino, libc::O_RDONLY).unwrap();
    assert_eq!(fs.read(again, 0, 10).unwrap(), [3u8; 10]);
    fs.release(again).unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().nlink, 0);
    fs.forget(f.ino, 1).unwrap();
    assert_eq!(errno(fs.getattr(f.ino)), libc::ENOENT);
    let kept = fs.mknod(&r, top, b"kept", 0o644, 0).unwrap();
    fs.retain(kept.ino).unwrap();
    fs.forget(kept.ino, 1).unwrap();
    assert_eq!(fs.getattr(kept.ino).unwrap().nlink, 1);
    assert!(fs.store().used_extents().unwrap().is_empty(), "every freed object's space is free again");
}

/// A lookup's answer can lose its last name before the mount counts the
/// kernel's reference (a KV or server delete beside the mount): the count
/// is refused, so no handle can open an object being freed.
#[test]
fn a_reference_to_an_object_removed_since_its_lookup_is_refused() {
    let (_d, fs) = fresh();
    let r = root();
    let top = fs.root();
    let (f, fh) = fs.create_file(&r, top, b"f", 0o644, libc::O_RDWR).unwrap();
    fs.write(&r, fh, 0, &[5u8; 20_000]).unwrap();
    fs.release(fh).unwrap();
    let looked_up = fs.lookup(&r, top, b"f").unwrap();
    assert_eq!(looked_up.ino, f.ino);
    fs.unlink(&r, top, b"f").unwrap();
    assert_eq!(errno(fs.retain(looked_up.ino)), libc::ENOENT);
    assert_eq!(errno(fs.open_file(&r, looked_up.ino, libc::O_RDONLY)), libc::ENOENT);
    // A removed object still held open is counted: it has a holder.
    let (g, gh) = fs.create_file(&r, top, b"g", 0o644, libc::O_RDWR).unwrap();
    fs.unlink(&r, top, b"g").unwrap();
    fs.retain(g.ino).unwrap();
    fs.release(gh).unwrap();
    assert_eq!(fs.getattr(g.ino).unwrap().nlink, 0);
    fs.forget(g.ino, 1).unwrap();
    assert_eq!(errno(fs.getattr(g.ino)), libc::ENOENT);
    assert!(fs.store().used_extents().unwrap().is_empty(), "every freed object's space is free again");
}

#[test]
fn an_unlinked_open_file_is_freed_at_the_next_open_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let fs = Fs::create(&path, common::options()).unwrap();
    let r = root();
    let (a, fh) = fs.create_file(&r, fs.root(), b"a", 0o644, libc::O_RDWR).unwrap();
    fs.write(&r, fh, 0, &[1u8; 50_000]).unwrap();
    fs.unlink(&r, fs.root(), b"a").unwrap();
    fs.sync().unwrap();
    // The process "dies" with the handle open: nothing is released.
    drop(fs);
    let fs = Fs::open(&path, common::options()).unwrap();
    assert_eq!(errno(fs.getattr(a.ino)), libc::ENOENT);
    assert!(fs.store().used_extents().unwrap().is_empty(), "its space is free again");
}

#[test]
fn renames_replace_move_and_refuse_cycles() {
    let (_d, fs) = fresh();
    let r = root();
    let top = fs.root();
    let none = RenameFlags::default();
    let a = fs.mknod(&r, top, b"a", 0o644, 0).unwrap();
    let b = fs.mknod(&r, top, b"b", 0o644, 0).unwrap();
    fs.rename(&r, top, b"a", top, b"b", none).unwrap();
    assert_eq!(fs.lookup(&r, top, b"b").unwrap().ino, a.ino);
    assert_eq!(errno(fs.lookup(&r, top, b"a")), libc::ENOENT);
    assert_eq!(errno(fs.getattr(b.ino)), libc::ENOENT, "the replaced object had no other name");

    let d1 = fs.mkdir(&r, top, b"d1", 0o755).unwrap();
    let d2 = fs.mkdir(&r, d1.ino, b"d2", 0o755).unwrap();
    assert_eq!(errno(fs.rename(&r, top, b"d1", d2.ino, b"x", none)), libc::EINVAL);
    assert_eq!(errno(fs.rename(&r, top, b"d1", d1.ino, b"x", none)), libc::EINVAL);
    fs.rename(&r, d1.ino, b"d2", top, b"d2", none).unwrap();
    assert_eq!(fs.lookup(&r, d2.ino, b"..").unwrap().ino, top, "a moved directory's parent follows");
    assert_eq!(errno(fs.rename(&r, top, b"b", top, b"d1", none)), libc::EISDIR);
    assert_eq!(errno(fs.rename(&r, top, b"d1", top, b"b", none)), libc::ENOTDIR);
    fs.mknod(&r, d1.ino, b"inside", 0o644, 0).unwrap();
    assert_eq!(errno(fs.rename(&r, top, b"d2", top, b"d1", none)), libc::ENOTEMPTY);
    fs.unlink(&r, d1.ino, b"inside").unwrap();
    fs.rename(&r, top, b"d2", top, b"d1", none).unwrap();
    assert_eq!(errno(fs.getattr(d1.ino)), libc::ENOENT);

    let c = fs.mknod(&r, top, b"c", 0o644, 0).unwrap();
    let noreplace = RenameFlags { noreplace: true, ..Default::default() };
    assert_eq!(errno(fs.rename(&r, top, b"b", top, b"c", noreplace)), libc::EEXIST);
    let exchange = RenameFlags { exchange: true, ..Default::default() };
    fs.rename(&r, top, b"b", top, b"d1", exchange).unwrap();
    assert_eq!(fs.lookup(&r, top, b"b").unwrap().ino, d2.ino);
    assert_eq!(fs.lookup(&r, top, b"d1").unwrap().ino, a.ino);
    assert_eq!(errno(fs.rename(&r, top, b"c", top, b"nothing", exchange)), libc::ENOENT);
    // Two names of one object: nothing happens.
    fs.link(&r, c.ino, top, b"c2").unwrap();
    fs.rename(&r, top, b"c", top, b"c2", none).unwrap();
    assert_eq!(fs.lookup(&r, top, b"c").unwrap().ino, c.ino);
    assert_eq!(errno(fs.rename(&r, top, b".", top, b"x", none)), libc::EINVAL);
}

#[test]
fn a_listing_returns_each_entry_present_throughout_exactly_once() {
    let (_d, fs) = fresh();
    let r = root();
    let d = fs.mkdir(&r, fs.root(), b"d", 0o755).unwrap();
    for i in 0..100 {
        fs.mknod(&r, d.ino, format!("keep{i:03}").as_bytes(), 0o644, 0).unwrap();
        fs.mknod(&r, d.ino, format!("gone{i:03}").as_bytes(), 0o644, 0).unwrap();
    }
    let dh = fs.opendir(&r, d.ino).unwrap();
    let mut seen: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    let mut offset = 0;
    let mut round = 0;
    loop {
        let chunk = fs.readdir(dh, offset, 7).unwrap();
        let Some(last) = chunk.last() else { break };
        offset = last.next;
        for e in &chunk {
            *seen.entry(e.name.clone()).or_default() += 1;
        }
        // Meanwhile others come and go.
        fs.mknod(&r, d.ino, format!("new{round:03}").as_bytes(), 0o644, 0).unwrap();
        fs.unlink(&r, d.ino, format!("gone{round:03}").as_bytes()).unwrap();
        round += 1;
    }
    for i in 0..100 {
        assert_eq!(seen.get(format!("keep{i:03}").as_bytes()), Some(&1), "keep{i:03}");
    }
    assert_eq!(seen.get(&b"."[..]), Some(&1));
    assert_eq!(seen.get(&b".."[..]), Some(&1));
    assert!(seen.values().all(|&n| n == 1));
    // A seek back repeats from that position of the same snapshot.
    let again = fs.readdir(dh, 2, 1).unwrap();
    assert_eq!(again[0].name, b"gone000");
    // A rewind sees the directory as it is now.
    let fresh_listing = fs.readdir(dh, 0, 1000).unwrap();
    assert!(fresh_listing.iter().any(|e| e.name == b"new000"));
    assert!(!fresh_listing.iter().any(|e| e.name == b"gone000"));
    fs.releasedir(dh).unwrap();
    assert_eq!(errno(fs.readdir(dh, 0, 1)), libc::EBADF);
}

#[test]
fn xattrs_follow_the_namespace_rules() {
    let (_d, fs) = fresh();
    let r = root();
    let alice = user(1000, 1000, &[]);
    let home = fs.mkdir(&r, fs.root(), b"home", 0o777).unwrap();
    let f = fs.mknod(&alice, home.ino, b"f", 0o644, 0).unwrap();
    let create = XattrFlags { create: true, ..Default::default() };
    let replace = XattrFlags { replace: true, ..Default::default() };
    fs.setxattr(&alice, f.ino, b"user.k", b"v1", create).unwrap();
    assert_eq!(errno(fs.setxattr(&alice, f.ino, b"user.k", b"v2", create)), libc::EEXIST);
    fs.setxattr(&alice, f.ino, b"user.k", b"v2", replace).unwrap();
    assert_eq!(errno(fs.setxattr(&alice, f.ino, b"user.other", b"v", replace)), libc::ENODATA);
    assert_eq!(fs.getxattr(&alice, f.ino, b"user.k").unwrap(), b"v2");
    assert_eq!(errno(fs.getxattr(&alice, f.ino, b"user.none")), libc::ENODATA);
    assert_eq!(errno(fs.setxattr(&alice, f.ino, b"trusted.k", b"v", Default::default())), libc::EPERM);
    fs.setxattr(&r, f.ino, b"trusted.k", b"t", Default::default()).unwrap();
    assert_eq!(fs.listxattr(&alice, f.ino).unwrap(), vec![b"user.k".to_vec()]);
    assert_eq!(fs.listxattr(&r, f.ino).unwrap().len(), 2);
    assert_eq!(
        errno(fs.setxattr(&alice, f.ino, b"system.posix_acl_access", b"", Default::default())),
        libc::EOPNOTSUPP
    );
    let bob = user(1001, 1001, &[]);
    assert_eq!(errno(fs.setxattr(&bob, f.ino, b"user.k", b"x", Default::default())), libc::EACCES);
    fs.removexattr(&alice, f.ino, b"user.k").unwrap();
    assert_eq!(errno(fs.removexattr(&alice, f.ino, b"user.k")), libc::ENODATA);
    assert_eq!(errno(fs.setxattr(&r, f.ino, b"user.big", &vec![0; (64 << 10) + 1], Default::default())), libc::E2BIG);
}

#[test]
fn statfs_reports_space_that_shrinks_as_data_is_written() {
    let (_d, fs) = fresh();
    let r = root();
    let before = fs.statfs().unwrap();
    assert!(before.blocks >= before.blocks_free && before.blocks_free > 0);
    assert_eq!(before.name_max, 255);
    let (_, fh) = fs.create_file(&r, fs.root(), b"big", 0o644, libc::O_RDWR).unwrap();
    fs.write(&r, fh, 0, &vec![1u8; 8 << 20]).unwrap();
    let after = fs.statfs().unwrap();
    // Used blocks (total minus free) count container space only: the
    // host's free space, which others change, cancels out.
    let used = |s: &larder_fs::StatFs| s.blocks - s.blocks_free;
    assert!(used(&after) >= used(&before) + 2048, "{before:?} -> {after:?}");
}

#[test]
fn a_full_store_says_enospc_and_stays_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = common::options();
    options.store.space.max_containers = 1;
    let fs = Fs::create(&dir.path().join("store"), options).unwrap();
    let r = root();
    let (a, fh) = fs.create_file(&r, fs.root(), b"a", 0o644, libc::O_RDWR).unwrap();
    let chunk = vec![5u8; 1 << 20];
    let mut written = 0u64;
    let err = loop {
        match fs.write(&r, fh, written, &chunk) {
            Ok(n) => written += n as u64,
            Err(e) => break e,
        }
        assert!(written <= 8 << 20, "a 4 MiB container cannot hold {written} bytes");
    };
    assert_eq!(err.errno(), libc::ENOSPC, "{err}");
    assert_eq!(fs.getattr(a.ino).unwrap().size, written, "the failed write changed nothing");
    assert_eq!(fs.read(fh, 0, 16).unwrap(), vec![5u8; 16]);
    fs.release(fh).unwrap();
    // Freeing space makes room again (at the latest once a checkpoint
    // covers the unlink: reopening makes one).
    fs.unlink(&r, fs.root(), b"a").unwrap();
    let path = fs.store().dir().to_path_buf();
    fs.close().unwrap();
    let mut options = common::options();
    options.store.space.max_containers = 1;
    let fs = Fs::open(&path, options).unwrap();
    let (_, fh) = fs.create_file(&r, fs.root(), b"b", 0o644, libc::O_RDWR).unwrap();
    fs.write(&r, fh, 0, &chunk).unwrap();
    fs.release(fh).unwrap();
    let report = larder_fsck::check(fs.store(), &mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{report}");
}

#[test]
fn fallocate_extends_or_keeps_the_size_and_refuses_what_it_cannot_do() {
    let (_d, fs) = fresh();
    let r = root();
    let (a, fh) = fs.create_file(&r, fs.root(), b"f", 0o644, libc::O_RDWR).unwrap();
    fs.write(&r, fh, 0, b"head").unwrap();
    fs.fallocate(&r, fh, 10_000, 2_000, 0).unwrap();
    assert_eq!(fs.getattr(a.ino).unwrap().size, 12_000, "mode 0 extends the size");
    let data = fs.read(fh, 0, 20_000).unwrap();
    assert_eq!(&data[..4], b"head");
    assert!(data[4..].iter().all(|&b| b == 0) && data.len() == 12_000, "the rest reads as zeros");
    fs.fallocate(&r, fh, 0, 100, 0).unwrap();
    assert_eq!(fs.getattr(a.ino).unwrap().size, 12_000, "a range inside the file changes nothing");
    fs.fallocate(&r, fh, 50_000, 10, libc::FALLOC_FL_KEEP_SIZE).unwrap();
    assert_eq!(fs.getattr(a.ino).unwrap().size, 12_000, "KEEP_SIZE keeps it");
    assert_eq!(errno(fs.fallocate(&r, fh, 0, 0, 0)), libc::EINVAL);
    let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    assert_eq!(errno(fs.fallocate(&r, fh, 0, 4096, punch)), libc::EOPNOTSUPP);
    assert_eq!(errno(fs.fallocate(&r, fh, 0, 1 << 62, 0)), libc::ENOSPC);
    assert_eq!(errno(fs.fallocate(&r, fh, u64::MAX - 1, 10, 0)), libc::EFBIG);
    assert_eq!(fs.getattr(a.ino).unwrap().size, 12_000, "refused calls change nothing");
    let ro = fs.open_file(&r, a.ino, libc::O_RDONLY).unwrap();
    assert_eq!(errno(fs.fallocate(&r, ro, 0, 10, 0)), libc::EBADF);
    fs.release(ro).unwrap();
    fs.release(fh).unwrap();
}

#[test]
fn a_file_past_the_largest_size_is_efbig_not_eio() {
    let (_d, fs) = fresh();
    let r = root();
    let (a, fh) = fs.create_file(&r, fs.root(), b"f", 0o644, libc::O_RDWR).unwrap();
    let last = (1u64 << 63) - 1;
    assert_eq!(errno(fs.write(&r, fh, last - 1, b"xy")), libc::EFBIG);
    let grow = SetAttr { size: Some(last + 1), ..SetAttr::default() };
    assert_eq!(errno(fs.setattr(&r, a.ino, &grow, Some(fh))), libc::EFBIG);
    assert_eq!(fs.getattr(a.ino).unwrap().size, 0, "refused calls change nothing");
    fs.release(fh).unwrap();
}

/// What `fallocate` promises: once it returned, writes inside its range
/// succeed even when the store has no free space left, after a reopen
/// too (the space is set aside durably, as unwritten extents).
#[test]
fn writes_inside_a_fallocated_range_succeed_on_a_full_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let full_options = || {
        let mut o = common::options();
        o.store.space.max_containers = 1;
        o
    };
    let fs = Fs::create(&path, full_options()).unwrap();
    let r = root();
    let (a, fh) = fs.create_file(&r, fs.root(), b"db", 0o644, libc::O_RDWR).unwrap();
    fs.fallocate(&r, fh, 0, 1 << 20, 0).unwrap();
    assert_eq!(fs.getattr(a.ino).unwrap().size, 1 << 20);
    let (b, kh) = fs.create_file(&r, fs.root(), b"log", 0o644, libc::O_RDWR).unwrap();
    fs.fallocate(&r, kh, 0, 64 << 10, 0).unwrap();
    fs.fallocate(&r, kh, 0, 256 << 10, libc::FALLOC_FL_KEEP_SIZE).unwrap();
    assert_eq!(fs.getattr(b.ino).unwrap().size, 64 << 10, "KEEP_SIZE keeps it");
    fs.release(kh).unwrap();
    fs.release(fh).unwrap();
    fs.close().unwrap();

    let fs = Fs::open(&path, full_options()).unwrap();
    let fh = fs.open_file(&r, a.ino, libc::O_RDWR).unwrap();
    let (_, filler) = fs.create_file(&r, fs.root(), b"filler", 0o644, libc::O_RDWR).unwrap();
    let chunk = vec![1u8; 64 << 10];
    let mut at = 0u64;
    let err = loop {
        match fs.write(&r, filler, at, &chunk) {
            Ok(n) => at += n as u64,
            Err(e) => break e,
        }
        assert!(at <= 8 << 20, "a 4 MiB container cannot hold {at} bytes");
    };
    assert_eq!(err.errno(), libc::ENOSPC, "{err}");
    assert_eq!(errno(fs.write(&r, fh, 1 << 20, &chunk)), libc::ENOSPC, "past the range: no space");
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i % 253) as u8).collect();
    for piece in 0..16u64 {
        let range = (piece << 16) as usize..((piece + 1) << 16) as usize;
        assert_eq!(fs.write(&r, fh, piece << 16, &data[range]).unwrap(), 1 << 16);
    }
    assert_eq!(fs.read(fh, 0, 1 << 20).unwrap(), data);
    let kh = fs.open_file(&r, b.ino, libc::O_RDWR).unwrap();
    fs.write(&r, kh, 0, &chunk).unwrap();
    fs.release(kh).unwrap();
    fs.release(fh).unwrap();
    fs.release(filler).unwrap();
    let report = larder_fsck::check(fs.store(), &mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{report}");
}

/// `open_file_found` checks the attributes a resolution found while
/// nothing was committed since its stamp, and looks the object up again
/// otherwise: after a commit (a chmod, an unlink) the open sees the change.
#[test]
fn an_open_of_found_attributes_reuses_them_only_while_nothing_was_committed() {
    let dir = tempfile::tempdir().unwrap();
    let options = common::sim_options();
    let fs = Fs::create(&dir.path().join("store"), options).unwrap();
    let r = root();
    let u = user(1000, 1000, &[]);
    let top = fs.root();
    fs.setattr(&r, top, &SetAttr { mode: Some(0o777), ..SetAttr::default() }, None).unwrap();
    let (_, fh) = fs.create_file(&u, top, b"f", 0o644, libc::O_RDWR).unwrap();
    fs.release(fh).unwrap();

    let stamp = fs.meta_stamp();
    assert!(stamp.is_some(), "no batch is going in");
    let found = fs.resolve(&u, b"/f", true).unwrap().attr.unwrap();
    // Nothing committed: the found attributes are what the open checks
    // (altered here to show it; a resolution gives the object's own).
    let refused = larder_fs::Attr { mode: 0o000, ..found.clone() };
    assert_eq!(errno(fs.open_file_found(&u, &refused, stamp, libc::O_RDONLY)), libc::EACCES);
    let h = fs.open_file_found(&u, &found, stamp, libc::O_RDONLY).unwrap();
    fs.release(h).unwrap();
    // Without a stamp, the object is looked up.
    let h = fs.open_file_found(&u, &refused, None, libc::O_RDONLY).unwrap();
    fs.release(h).unwrap();

    // A commit after the stamp: looked up again, the change seen.
    fs.setattr(&r, found.ino, &SetAttr { mode: Some(0o000), ..SetAttr::default() }, None).unwrap();
    assert_eq!(errno(fs.open_file_found(&u, &found, stamp, libc::O_RDONLY)), libc::EACCES);
    fs.setattr(&r, found.ino, &SetAttr { mode: Some(0o644), ..SetAttr::default() }, None).unwrap();

    // An unlink after the stamp freed the object: nothing is opened.
    let stamp = fs.meta_stamp();
    let found = fs.resolve(&u, b"/f", true).unwrap().attr.unwrap();
    fs.unlink(&u, top, b"f").unwrap();
    assert_eq!(errno(fs.open_file_found(&u, &found, stamp, libc::O_RDONLY)), libc::ENOENT);

    // A directory's attributes are never reused (a caller's cache of
    // directories may have read them before the stamp).
    fs.mkdir(&u, top, b"d", 0o755).unwrap();
    let stamp = fs.meta_stamp();
    let d = fs.resolve(&u, b"/d", true).unwrap().attr.unwrap();
    let refused = larder_fs::Attr { mode: 0o000, ..d };
    let h = fs.open_file_found(&u, &refused, stamp, libc::O_RDONLY).unwrap();
    fs.release(h).unwrap();
}
