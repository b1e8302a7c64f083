//! What a caller reads of a directory's attributes is never older than
//! the last change that returned, while other threads create, rename and
//! unlink names in it (entry-count merge operands and whole-onode puts on
//! the same key) and the index flushes and merges under a small memtable:
//! the metadata cache and a dentry's remembered child onode must never
//! hand out a mode or owner a finished chmod or chown replaced. A stale
//! mode is what the kernel's permission check and the file system's own
//! check would both refuse a rename on.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use larder_fs::{Cred, Fs, RenameFlags, SetAttr};

/// The mode of the `i`th chmod: permission bits that differ from the
/// previous 63 chmods' (the owner keeps rwx so root's work is unaffected).
fn mode_of(i: u64) -> u32 {
    0o700 | (i % 64) as u32
}

/// The owner of the `i`th chown (a different one each time, cycling).
fn owner_of(i: u64) -> u32 {
    1000 + (i % 64) as u32
}

#[test]
fn attributes_read_after_a_chmod_or_chown_returned_are_never_older() {
    let mut options = common::options();
    options.creation.log_segment_bytes = 64 << 10;
    options.store.index.memtable_size_bytes = 64 << 10;
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(Fs::create(&dir.path().join("store"), options).unwrap());
    let root = Cred::root();
    let a = fs.mkdir(&root, fs.root(), b"a", 0o777).unwrap().ino;
    let b = fs.mkdir(&root, fs.root(), b"b", 0o777).unwrap().ino;
    // Changes published: the number of the last chmod (and chown) that
    // returned.
    let published = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let rounds: u64 = std::env::var("LARDER_COHERENCE_ROUNDS").map_or(3000, |v| v.parse().unwrap());
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 1..=rounds {
                let set = SetAttr { mode: Some(mode_of(i)), uid: Some(owner_of(i)), ..SetAttr::default() };
                fs.setattr(&root, a, &set, None).unwrap();
                published.store(i, Ordering::Release);
            }
            stop.store(true, Ordering::Release);
        });
        for t in 0..2u64 {
            let (fs, stop) = (&fs, &stop);
            s.spawn(move || {
                let root = Cred::root();
                let mut i = 0u64;
                while !stop.load(Ordering::Acquire) {
                    i += 1;
                    let name = format!("t{t}-{}", i % 16);
                    let _ = fs.mknod(&root, a, name.as_bytes(), 0o644, 0);
                    let _ = fs.rename(&root, a, name.as_bytes(), b, name.as_bytes(), RenameFlags::default());
                    let _ = fs.rename(&root, b, name.as_bytes(), a, format!("r{t}").as_bytes(), RenameFlags::default());
                    if i.is_multiple_of(3) {
                        let _ = fs.unlink(&root, a, format!("r{t}").as_bytes());
                    }
                }
            });
        }
        for reader in 0..2 {
            let (fs, stop, published) = (&fs, &stop, &published);
            s.spawn(move || {
                let root = Cred::root();
                let mut checked = 0u64;
                while !stop.load(Ordering::Acquire) {
                    let before = published.load(Ordering::Acquire);
                    let attr = if reader == 0 { fs.getattr(a).unwrap() } else { fs.lookup(&root, fs.root(), b"a").unwrap() };
                    let after = published.load(Ordering::Acquire);
                    // The chmod in flight (after + 1) may already show.
                    let fresh = (before..=after + 1).any(|i| attr.mode & 0o777 == mode_of(i) && attr.uid == owner_of(i))
                        || (before == 0 && attr.mode & 0o777 == 0o777 && attr.uid == 0);
                    assert!(
                        fresh,
                        "reader {reader}: mode {:o} uid {} after chmod {before} returned (expected {:o} uid {} or later)",
                        attr.mode & 0o777,
                        attr.uid,
                        mode_of(before),
                        owner_of(before)
                    );
                    checked += 1;
                }
                assert!(checked > 0);
            });
        }
    });
}
