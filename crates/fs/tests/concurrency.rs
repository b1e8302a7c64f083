//! Threads racing on one small tree through the file system library:
//! directory renames across parents (two of them can try to put each
//! directory inside the other), mkdir, rmdir, creates, unlinks, links and
//! file renames over each other. Calls may fail as POSIX says (ENOENT,
//! EEXIST, ENOTEMPTY, EINVAL for a move below itself, ...), never with
//! another error. Afterwards the tree is a tree: every directory and file
//! is reachable from the root exactly as its link count says, fsck is
//! clean, and the same holds after a reopen, and after a crash that cuts
//! the racing threads off mid-run.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use larder_fs::{Cred, Fs, Kind, RenameFlags};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const THREADS: u64 = 4;
const OPS: usize = 1500;
const NAMES: [&[u8]; 4] = [b"a", b"b", b"c", b"d"];

fn options() -> larder_fs::FsOptions {
    let mut o = common::options();
    o.creation.container_bytes = 1 << 20;
    o.creation.log_segment_bytes = 64 << 10;
    o.store.index.memtable_size_bytes = 64 << 10;
    o.store.log.buffered_sync_interval = Some(std::time::Duration::from_millis(2));
    o
}

/// Every directory reachable from the root, found by walking it.
fn directories(fs: &Fs) -> Vec<u64> {
    let r = Cred::root();
    let (mut out, mut stack) = (Vec::new(), vec![fs.root()]);
    while let Some(dir) = stack.pop() {
        out.push(dir);
        for e in common::entries(fs, dir).unwrap() {
            if e.1 == Kind::Directory {
                stack.push(fs.lookup(&r, dir, &e.0).unwrap().ino);
            }
        }
    }
    out
}

/// Some directories of a tree others are changing: what a walk finds
/// (a directory removed or moved under it is skipped).
fn some_directories(fs: &Fs) -> Vec<u64> {
    let r = Cred::root();
    let (mut out, mut stack) = (Vec::new(), vec![fs.root()]);
    while let Some(dir) = stack.pop() {
        out.push(dir);
        let Ok(found) = common::entries(fs, dir) else { continue };
        for e in found.into_iter().filter(|e| e.1 == Kind::Directory) {
            if let Ok(a) = fs.lookup(&r, dir, &e.0) {
                stack.push(a.ino);
            }
        }
        if out.len() > 200 {
            break;
        }
    }
    out
}

/// One thread's random operations on the tree.
fn work(fs: &Fs, sim: &SimStorage, seed: u64) -> usize {
    let r = Cred::root();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut refused = 0;
    for _ in 0..OPS {
        // A directory to act in: walked afresh, as others change the tree.
        let dirs = some_directories(fs);
        let dir = dirs[rng.gen_range(0..dirs.len())];
        let other = dirs[rng.gen_range(0..dirs.len())];
        let (n1, n2) = (NAMES[rng.gen_range(0..4)], NAMES[rng.gen_range(0..4)]);
        let result = match rng.gen_range(0..10) {
            0 | 1 => fs.mkdir(&r, dir, n1, 0o755).map(drop),
            2 => fs.rmdir(&r, dir, n1),
            3 | 4 => fs.rename(&r, dir, n1, other, n2, RenameFlags::default()),
            // Without the rename lock this makes cycles cut off from the
            // root within a few runs (fsck's DirectoryUnreachable).
            5 => fs.rename(&r, dir, n1, other, n2, RenameFlags { exchange: true, ..RenameFlags::default() }),
            6 => fs.create_file(&r, dir, n1, 0o644, libc::O_CREAT | libc::O_RDWR).and_then(|(_, fh)| {
                fs.write(&r, fh, 0, &[seed as u8; 5000])?;
                fs.release(fh)
            }),
            7 => fs.unlink(&r, dir, n1),
            8 => fs.lookup(&r, dir, n1).and_then(|a| fs.link(&r, a.ino, other, n2).map(drop)),
            _ => fs.sync(),
        };
        if let Err(e) = result {
            if sim.is_crashed() {
                // The machine died under the run: every call fails now.
                return refused;
            }
            let errno = e.errno();
            let expected =
                [libc::ENOENT, libc::EEXIST, libc::ENOTEMPTY, libc::EINVAL, libc::ENOTDIR, libc::EISDIR, libc::EPERM];
            assert!(expected.contains(&errno), "an unexpected error: {e} (errno {errno})");
            refused += 1;
        }
    }
    refused
}

/// The tree is a tree: each directory reached once, each object's link
/// count what the walk finds, fsck clean.
fn assert_a_tree(fs: &Fs, what: &str) {
    let r = Cred::root();
    let dirs = directories(fs);
    let unique: BTreeSet<u64> = dirs.iter().copied().collect();
    assert_eq!(unique.len(), dirs.len(), "{what}: a directory reached twice");
    let mut names: BTreeMap<u64, u32> = BTreeMap::new();
    let mut subdirs: BTreeMap<u64, u32> = BTreeMap::new();
    for &d in &dirs {
        for (name, kind) in common::entries(fs, d).unwrap() {
            let a = fs.lookup(&r, d, &name).unwrap();
            assert_eq!(a.kind, kind, "{what}");
            *names.entry(a.ino).or_default() += 1;
            if kind == Kind::Directory {
                *subdirs.entry(d).or_default() += 1;
            }
        }
    }
    for (&ino, &n) in &names {
        let a = fs.getattr(ino).unwrap();
        let want = if a.kind == Kind::Directory { n + 1 + subdirs.get(&ino).copied().unwrap_or(0) } else { n };
        assert_eq!(a.nlink, want, "{what}: object {ino}'s link count");
    }
    let report = larder_fsck::check(fs.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{what}: fsck: {report}");
}

#[test]
fn racing_renames_and_namespace_changes_keep_a_tree() {
    let sim = SimStorage::new(3);
    let dir = Path::new("/fs/store");
    let fs = Fs::create_with(Arc::new(sim.clone()), dir, options()).unwrap();
    let refused: usize = std::thread::scope(|s| {
        let fs = &fs;
        let sim = &sim;
        let threads: Vec<_> = (0..THREADS).map(|t| s.spawn(move || work(fs, sim, t + 1))).collect();
        threads.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert!(refused > 0 && refused < THREADS as usize * OPS, "{refused} of the calls were refused");
    assert_a_tree(&fs, "after the run");
    fs.close().unwrap();
    let fs = Fs::open_with(Arc::new(sim), dir, options()).unwrap();
    assert_a_tree(&fs, "after a reopen");
}

#[test]
fn racing_work_cut_by_a_crash_recovers_to_a_tree() {
    let dir = Path::new("/fs/store");
    for (k, mode) in [(150, CrashMode::Random), (400, CrashMode::KeepAllPending), (900, CrashMode::DropAllPending)] {
        let sim = SimStorage::new(k);
        sim.set_unordered_dir_ops(true);
        let fs = Fs::create_with(Arc::new(sim.clone()), dir, options()).unwrap();
        fs.sync().unwrap();
        // The k-th write from here on is the machine's last.
        sim.crash_after_writes(k);
        std::thread::scope(|s| {
            let (fs, sim) = (&fs, &sim);
            for t in 0..THREADS {
                s.spawn(move || work(fs, sim, 10 * k + t));
            }
        });
        assert!(sim.is_crashed(), "write {k}: the run ended before the crash");
        let image = sim.crash_with(mode);
        drop(fs);
        let fs = Fs::open_with(Arc::new(image), dir, options()).unwrap();
        assert_a_tree(&fs, &format!("a crash after write {k} ({mode:?})"));
    }
}
