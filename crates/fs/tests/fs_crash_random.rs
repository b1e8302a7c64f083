//! Crash consistency of the file system library under seeded random
//! workloads on the simulated storage.
//!
//! Each seed runs a random sequence of POSIX operations chosen to be valid
//! against a model (creates, writes of every size class at any offset,
//! truncates, unlinks of open and closed files, hard links, symlinks,
//! mkdir, rmdir, renames of files and directories over existing targets,
//! closes, fsyncs and syncs), all buffered as the file system makes them.
//! It runs once to count its storage writes, then again crashing at random
//! writes and syncs in random crash modes, sometimes a second time while
//! recovering from the first, and with one I/O failure of a random kind at
//! a random call (the run stops at the first operation that fails) before
//! a crash.
//!
//! After a reopen the tree (every name, kind, symlink target, file bytes,
//! link count and which names share a file) is exactly the model's after
//! some prefix of the operations no shorter than the last fsync or sync
//! that returned (an fsync makes every earlier change durable), fsck finds
//! nothing wrong (files unlinked while open are freed), and the file system
//! keeps a new fsynced file across a clean reopen.
//!
//! CI runs a few seeds; `LARDER_CRASH_SEEDS=N` (and
//! `LARDER_CRASH_SEED_BASE=B`) runs N seeds from B.
#![allow(clippy::unwrap_used)]

mod common;
mod fs_model;

use std::path::Path;
use std::sync::Arc;

use fs_model::{tree_of, Model, Node, Tree};
use larder_fs::{Cred, Fs, FsOptions, RenameFlags, SetAttr};
use larder_io::sim::{campaign_seeds, crash_runs, CampaignShape};
use larder_io::SimStorage;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DIR: &str = "/fs/store";
const NAMES: [&str; 4] = ["a", "b", "c", "d"];
const OPS: usize = 100;
/// Blocks of the file written apart: more extent-map entries than one
/// step of freeing an orphan removes (256).
const SCATTERED_BLOCKS: u64 = 300;

/// A store on the simulated storage, deterministic (no background
/// threads, no timed syncs).
fn options() -> FsOptions {
    let mut o = common::sim_options();
    o.creation.container_bytes = 1 << 20;
    o.creation.log_segment_bytes = 64 << 10;
    o.store.index.memtable_size_bytes = 32 << 10;
    o.store.log.max_segments = 4;
    o
}

/// Bytes of a write: every size class the store treats differently.
fn data(rng: &mut StdRng, tag: usize) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0 => 0,
        1..=5 => rng.gen_range(1..1500),
        6 | 7 => rng.gen_range(3000..9000),
        _ => rng.gen_range(9000..70_000),
    };
    (0..len).map(|j| (tag as u64 * 0x9E37_79B9 + j as u64 / 5) as u8).collect()
}

fn pick<T: Copy>(rng: &mut StdRng, v: &[T]) -> Option<T> {
    (!v.is_empty()).then(|| v[rng.gen_range(0..v.len())])
}

/// Runs operation `i`, valid against `m`. Before each call that changes
/// the tree, the model takes its effect and `h` gets the model's tree (a
/// call that fails may still survive a crash, and an operation of two
/// calls may survive half done). Returns whether the operation makes
/// everything before it durable; `Ok(None)` if the draw found nothing to do.
fn step(fs: &Fs, m: &mut Model, h: &mut Vec<Tree>, rng: &mut StdRng, i: usize) -> larder_fs::Result<Option<bool>> {
    let kind = rng.gen_range(0..32);
    let named = m.names.iter().map(|((d, n), c)| (*d, n.clone(), *c)).collect();
    let s = Step { fs, m, h, rng, i, named };
    let done = if kind >= 22 { more(s, kind) } else { common_step(s, kind) };
    if let Ok(Some(_)) = done {
        RAN.fetch_or(1 << kind, std::sync::atomic::Ordering::Relaxed);
    }
    done
}

/// What an operation of [`step`] works with: the file system, the model,
/// the history, the draw, the operation's number and the model's names
/// (directory, name, node) as the operation began.
struct Step<'a> {
    fs: &'a Fs,
    m: &'a mut Model,
    h: &'a mut Vec<Tree>,
    rng: &'a mut StdRng,
    i: usize,
    named: Vec<(u64, String, u64)>,
}

/// Kinds of operation (bits of `step`'s draw) that ran to completion.
static RAN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The common operations of [`step`].
fn common_step(s: Step<'_>, kind: u32) -> larder_fs::Result<Option<bool>> {
    let Step { fs, m, h, rng, i, named } = s;
    let r = Cred::root();
    let dirs = m.dirs();
    let free_name = |m: &Model, rng: &mut StdRng| -> Option<(u64, String)> {
        let dir = pick(rng, &dirs)?;
        let name = NAMES[rng.gen_range(0..NAMES.len())].to_string();
        (!m.names.contains_key(&(dir, name.clone()))).then_some((dir, name))
    };
    let ino = |m: &Model, node: u64| m.ino[&node];
    match kind {
        // Create a file with some bytes; keep it open now and then.
        0..=3 => {
            let Some((dir, name)) = free_name(m, rng) else { return Ok(None) };
            let bytes = data(rng, i);
            let node = m.add(dir, &name, Node::File(Vec::new()));
            h.push(m.tree());
            let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR;
            let (attr, fh) = fs.create_file(&r, ino(m, dir), name.as_bytes(), 0o644, flags)?;
            m.ino.insert(node, attr.ino);
            m.open.push((node, fh));
            m.nodes.insert(node, Node::File(bytes.clone()));
            h.push(m.tree());
            fs.write(&r, fh, 0, &bytes)?;
            if rng.gen_bool(0.8) {
                m.open.pop();
                fs.release(fh)?;
            }
        }
        // Write at any offset of a file, named or only open.
        4..=6 => {
            let files: Vec<u64> =
                m.nodes.iter().filter(|(_, n)| matches!(n, Node::File(_))).map(|(id, _)| *id).collect();
            let Some(node) = pick(rng, &files) else { return Ok(None) };
            let Node::File(old) = &m.nodes[&node] else { unreachable!() };
            let offset = rng.gen_range(0..old.len() + 10_000);
            let bytes = data(rng, i);
            let mut new = old.clone();
            // A write of nothing changes nothing, even past the end.
            if !bytes.is_empty() {
                new.resize(new.len().max(offset + bytes.len()), 0);
                new[offset..offset + bytes.len()].copy_from_slice(&bytes);
            }
            m.nodes.insert(node, Node::File(new));
            h.push(m.tree());
            let held = m.open.iter().find(|(n, _)| *n == node).map(|(_, fh)| *fh);
            let fh = match held {
                Some(fh) => fh,
                None => fs.open_file(&r, ino(m, node), libc::O_RDWR)?,
            };
            fs.write(&r, fh, offset as u64, &bytes)?;
            if held.is_none() {
                fs.release(fh)?;
            }
        }
        // Truncate a named file (shorter or longer).
        7 => {
            let files: Vec<u64> =
                named.iter().filter(|(_, _, c)| matches!(m.nodes[c], Node::File(_))).map(|(_, _, c)| *c).collect();
            let Some(node) = pick(rng, &files) else { return Ok(None) };
            let size = rng.gen_range(0..40_000);
            if let Some(Node::File(d)) = m.nodes.get_mut(&node) {
                d.resize(size, 0);
            }
            h.push(m.tree());
            let set = SetAttr { size: Some(size as u64), ..SetAttr::default() };
            fs.setattr(&r, ino(m, node), &set, None)?;
        }
        // Unlink a file or symlink (an open file lives on unnamed).
        8 | 9 => {
            let leaves: Vec<usize> = (0..named.len()).filter(|&k| m.nodes[&named[k].2] != Node::Dir).collect();
            let Some(k) = pick(rng, &leaves) else { return Ok(None) };
            let (dir, name, _) = named[k].clone();
            m.unname(dir, &name);
            h.push(m.tree());
            fs.unlink(&r, ino(m, dir), name.as_bytes())?;
        }
        10 => {
            let Some((dir, name)) = free_name(m, rng) else { return Ok(None) };
            if m.names.len() > 40 {
                return Ok(None);
            }
            let node = m.add(dir, &name, Node::Dir);
            h.push(m.tree());
            let attr = fs.mkdir(&r, ino(m, dir), name.as_bytes(), 0o755)?;
            m.ino.insert(node, attr.ino);
        }
        11 => {
            let empty: Vec<usize> = (0..named.len())
                .filter(|&k| {
                    let c = named[k].2;
                    m.nodes[&c] == Node::Dir && !m.names.keys().any(|(d, _)| *d == c)
                })
                .collect();
            let Some(k) = pick(rng, &empty) else { return Ok(None) };
            let (dir, name, _) = named[k].clone();
            m.unname(dir, &name);
            h.push(m.tree());
            fs.rmdir(&r, ino(m, dir), name.as_bytes())?;
        }
        // Rename anything, over a target where POSIX allows it.
        12..=14 => {
            let Some(k) = pick(rng, &(0..named.len()).collect::<Vec<_>>()) else { return Ok(None) };
            let (dir, name, node) = named[k].clone();
            let Some(to_dir) = pick(rng, &dirs) else { return Ok(None) };
            let to_name = NAMES[rng.gen_range(0..NAMES.len())].to_string();
            let is_dir = m.nodes[&node] == Node::Dir;
            if (to_dir, &to_name) == (dir, &name) || (is_dir && m.within(to_dir, node)) {
                return Ok(None);
            }
            let replaced = m.names.get(&(to_dir, to_name.clone())).copied();
            if let Some(t) = replaced {
                let t_dir = m.nodes[&t] == Node::Dir;
                let t_empty = !m.names.keys().any(|(d, _)| *d == t);
                if t == node || is_dir != t_dir || (t_dir && !t_empty) {
                    return Ok(None);
                }
            }
            m.names.remove(&(dir, name.clone()));
            m.names.insert((to_dir, to_name.clone()), node);
            let (from, to) = (ino(m, dir), ino(m, to_dir));
            if let Some(t) = replaced {
                m.forget_if_unused(t);
            }
            h.push(m.tree());
            fs.rename(&r, from, name.as_bytes(), to, to_name.as_bytes(), RenameFlags::default())?;
        }
        15 => {
            let files: Vec<u64> =
                named.iter().filter(|(_, _, c)| matches!(m.nodes[c], Node::File(_))).map(|(_, _, c)| *c).collect();
            let Some(node) = pick(rng, &files) else { return Ok(None) };
            let Some((dir, name)) = free_name(m, rng) else { return Ok(None) };
            m.names.insert((dir, name.clone()), node);
            h.push(m.tree());
            fs.link(&r, ino(m, node), ino(m, dir), name.as_bytes())?;
        }
        16 => {
            let Some((dir, name)) = free_name(m, rng) else { return Ok(None) };
            let target = format!("../t{i}/{}", "x".repeat(rng.gen_range(0..200))).into_bytes();
            let node = m.add(dir, &name, Node::Symlink(target.clone()));
            h.push(m.tree());
            let attr = fs.symlink(&r, ino(m, dir), name.as_bytes(), &target)?;
            m.ino.insert(node, attr.ino);
        }
        17 | 18 => {
            if m.open.is_empty() {
                return Ok(None);
            }
            let (node, fh) = m.open.remove(rng.gen_range(0..m.open.len()));
            m.forget_if_unused(node);
            fs.release(fh)?;
        }
        // fsync of an open file, or of a named one opened for it.
        19 | 20 => {
            if let Some(&(_, fh)) = m.open.first().filter(|_| rng.gen_bool(0.5)) {
                fs.fsync(fh)?;
                return Ok(Some(true));
            }
            let files: Vec<u64> =
                named.iter().filter(|(_, _, c)| matches!(m.nodes[c], Node::File(_))).map(|(_, _, c)| *c).collect();
            let Some(node) = pick(rng, &files) else { return Ok(None) };
            let fh = fs.open_file(&r, ino(m, node), libc::O_RDONLY)?;
            fs.fsync(fh)?;
            fs.release(fh)?;
            return Ok(Some(true));
        }
        _ => {
            fs.sync()?;
            return Ok(Some(true));
        }
    }
    Ok(Some(false))
}

/// The rarer operations of [`step`]: xattrs, chmod, rename exchange, bulk
/// create, O_TRUNC, fallocate, and a file unlinked while open, written in
/// hundreds of separate blocks and freed in several steps when closed.
fn more(s: Step<'_>, kind: u32) -> larder_fs::Result<Option<bool>> {
    let Step { fs, m, h, rng, i, named } = s;
    let r = Cred::root();
    let with_meta: Vec<u64> = named.iter().map(|e| e.2).filter(|c| m.meta.contains_key(c)).collect();
    let files: Vec<u64> = named.iter().map(|e| e.2).filter(|c| matches!(m.nodes[c], Node::File(_))).collect();
    let ino = |m: &Model, node: u64| m.ino[&node];
    match kind {
        22 | 23 => {
            let Some(node) = pick(rng, &with_meta) else { return Ok(None) };
            let name = [&b"user.a"[..], b"user.b", b"trusted.c"][rng.gen_range(0..3)].to_vec();
            let value: Vec<u8> = (0..rng.gen_range(0..1000)).map(|j| (i + j) as u8).collect();
            m.meta.get_mut(&node).unwrap().xattrs.insert(name.clone(), value.clone());
            h.push(m.tree());
            fs.setxattr(&r, ino(m, node), &name, &value, larder_fs::XattrFlags::default())?;
        }
        24 => {
            let Some(node) = pick(rng, &with_meta) else { return Ok(None) };
            let names: Vec<Vec<u8>> = m.meta[&node].xattrs.keys().cloned().collect();
            let Some(name) = pick(rng, &(0..names.len()).collect::<Vec<_>>()).map(|k| names[k].clone()) else {
                return Ok(None);
            };
            m.meta.get_mut(&node).unwrap().xattrs.remove(&name);
            h.push(m.tree());
            fs.removexattr(&r, ino(m, node), &name)?;
        }
        25 => {
            let Some(node) = pick(rng, &with_meta) else { return Ok(None) };
            let mode = [0o600, 0o644, 0o700, 0o755, 0o640][rng.gen_range(0..5)];
            m.meta.get_mut(&node).unwrap().mode = mode;
            h.push(m.tree());
            fs.setattr(&r, ino(m, node), &SetAttr { mode: Some(mode), ..SetAttr::default() }, None)?;
        }
        // Swap two entries (RENAME_EXCHANGE).
        26 => {
            let all: Vec<usize> = (0..named.len()).collect();
            let (Some(a), Some(b)) = (pick(rng, &all), pick(rng, &all)) else { return Ok(None) };
            let ((da, na, ca), (db, nb, cb)) = (named[a].clone(), named[b].clone());
            let is_dir = |c: u64| m.nodes[&c] == Node::Dir;
            if a == b || ca == cb || (is_dir(ca) && m.within(db, ca)) || (is_dir(cb) && m.within(da, cb)) {
                return Ok(None);
            }
            m.names.insert((da, na.clone()), cb);
            m.names.insert((db, nb.clone()), ca);
            h.push(m.tree());
            let flags = RenameFlags { exchange: true, ..RenameFlags::default() };
            fs.rename(&r, ino(m, da), na.as_bytes(), ino(m, db), nb.as_bytes(), flags)?;
        }
        // Bulk create, duplicates and all: one transaction.
        27 => {
            let Some(dir) = pick(rng, &m.dirs()) else { return Ok(None) };
            let batch: Vec<&str> = (0..rng.gen_range(1..6)).map(|_| NAMES[rng.gen_range(0..NAMES.len())]).collect();
            let mut fresh = Vec::new();
            for name in &batch {
                if !m.names.contains_key(&(dir, name.to_string())) {
                    fresh.push((name.to_string(), m.add(dir, name, Node::File(Vec::new()))));
                }
            }
            h.push(m.tree());
            let refs: Vec<&[u8]> = batch.iter().map(|n| n.as_bytes()).collect();
            let done = fs.create_batch(&r, ino(m, dir), &refs, 0o644, larder_fs::Durability::Buffered)?;
            for (name, node) in fresh {
                let made = done.created.iter().find(|(n, _)| *n == name.as_bytes());
                let (_, id) = made.unwrap_or_else(|| panic!("bulk create did not make {name}: {done:?}"));
                m.ino.insert(node, *id);
            }
            assert_eq!(done.created.len() + done.duplicates.len(), batch.len(), "{done:?}");
        }
        28 => {
            let Some(node) = pick(rng, &files) else { return Ok(None) };
            m.nodes.insert(node, Node::File(Vec::new()));
            h.push(m.tree());
            let fh = fs.open_file(&r, ino(m, node), libc::O_RDWR | libc::O_TRUNC)?;
            fs.release(fh)?;
        }
        29 => {
            let Some(node) = pick(rng, &files) else { return Ok(None) };
            let (offset, len) = (rng.gen_range(0..60_000u64), rng.gen_range(1..30_000u64));
            let keep = rng.gen_bool(0.5);
            if let Some(Node::File(d)) = m.nodes.get_mut(&node) {
                if !keep && d.len() < (offset + len) as usize {
                    d.resize((offset + len) as usize, 0);
                }
            }
            h.push(m.tree());
            let fh = fs.open_file(&r, ino(m, node), libc::O_RDWR)?;
            fs.fallocate(&r, fh, offset, len, if keep { libc::FALLOC_FL_KEEP_SIZE } else { 0 })?;
            fs.release(fh)?;
        }
        // Unlink an open file and write it in hundreds of separate blocks:
        // its close (or the open after a crash) frees it in several steps.
        _ => {
            // Its bytes are nobody's to see: the model keeps no copy.
            let fh = match m.open.iter().find(|(n, _)| m.links(*n) == 0) {
                Some(&(_, fh)) => fh,
                None => {
                    let Some(k) = (0..named.len()).find(|&k| files.contains(&named[k].2) && m.links(named[k].2) == 1)
                    else {
                        return Ok(None);
                    };
                    let (dir, name, node) = named[k].clone();
                    let fh = fs.open_file(&r, ino(m, node), libc::O_RDWR)?;
                    m.open.push((node, fh));
                    m.unname(dir, &name);
                    h.push(m.tree());
                    fs.unlink(&r, ino(m, dir), name.as_bytes())?;
                    fh
                }
            };
            for b in 0..SCATTERED_BLOCKS {
                fs.write(&r, fh, b * 8192 + (b % 7) * 100, &[b as u8 | 1; 300])?;
            }
        }
    }
    Ok(Some(false))
}

/// Runs a seed's operations on a new file system on `sim`; `history` gets
/// the tree before and after each change. Returns the last history index
/// acknowledged as durable, and how many operations returned success.
fn workload(sim: &SimStorage, o: &FsOptions, seed: u64, history: &mut Vec<Tree>, verify: bool) -> (usize, usize) {
    let mut m = Model::new();
    history.push(m.tree());
    let Ok(fs) = Fs::create_with(Arc::new(sim.clone()), Path::new(DIR), o.clone()) else { return (0, 0) };
    m.ino.insert(0, fs.root());
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut acked, mut done) = (0, 0);
    while done < OPS {
        match step(&fs, &mut m, history, &mut rng, done) {
            Ok(None) => {}
            Ok(Some(durable)) => {
                done += 1;
                if durable {
                    acked = history.len() - 1;
                }
            }
            Err(e) => {
                if e.errno() == libc::ENOSPC {
                    // A full store stays consistent: nothing half done.
                    fsck_clean(&fs, &format!("seed {seed}: after ENOSPC at operation {done}: {e}"));
                }
                break;
            }
        }
    }
    if verify {
        // A run without crash or fault: the live tree is the model's, and
        // fsck agrees.
        assert_eq!(tree_of(&fs), m.tree(), "seed {seed}: the tree after the run");
        fsck_clean(&fs, &format!("seed {seed}: after the run"));
    }
    (acked, done)
}

fn fsck_clean(fs: &Fs, what: &str) {
    let report = larder_fsck::check(fs.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{what}: fsck: {report}");
}

fn check(image: &SimStorage, o: &FsOptions, history: &[Tree], acked: usize, what: &str) {
    let fs = match Fs::open_with(Arc::new(image.clone()), Path::new(DIR), o.clone()) {
        Ok(fs) => fs,
        Err(e) if acked == 0 => {
            // Only a creation that never finished may fail to open, and it
            // can run again.
            assert!(
                matches!(e, larder_fs::FsError::Store(larder_object::ObjectError::NotAStore { .. })),
                "{what}: reopen failed: {e}"
            );
            let fs = Fs::create_with(Arc::new(image.clone()), Path::new(DIR), o.clone());
            fsck_clean(&fs.unwrap_or_else(|e| panic!("{what}: creating again: {e}")), what);
            return;
        }
        Err(e) => panic!("{what}: reopen failed: {e}"),
    };
    let got = tree_of(&fs);
    let Some(k) = (0..history.len()).rev().find(|&k| history[k] == got) else {
        panic!("{what}: the tree is no prefix of the changes: {:?}", got.keys().collect::<Vec<_>>());
    };
    assert!(k >= acked, "{what}: the tree after change {k} survives, {acked} were acknowledged");
    fsck_clean(&fs, what);
    // The file system goes on: a new fsynced file outlives a clean reopen.
    let r = Cred::root();
    let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR;
    let (attr, fh) = fs.create_file(&r, fs.root(), b"after", 0o600, flags).unwrap();
    fs.write(&r, fh, 0, &[7u8; 12_345]).unwrap();
    fs.fsync(fh).unwrap();
    fs.release(fh).unwrap();
    drop(fs);
    let fs = Fs::open_with(Arc::new(image.clone()), Path::new(DIR), o.clone()).unwrap();
    let fh = fs.open_file(&r, attr.ino, libc::O_RDONLY).unwrap();
    assert_eq!(fs.read(fh, 0, 20_000).unwrap(), vec![7u8; 12_345], "{what}");
    fs.release(fh).unwrap();
    fsck_clean(&fs, what);
}

/// The runs of a seed: crashes after random writes and syncs, second
/// crashes during recovery, I/O failures then a crash.
const SHAPE: CampaignShape = CampaignShape { at_writes: 6, at_syncs: 3, in_recovery: 3, faults: 3, at_names: 2 };

fn run_seed(seed: u64, o: &FsOptions) {
    let probe = SimStorage::new(seed);
    let (_, done) = workload(&probe, o, seed, &mut Vec::new(), true);
    assert_eq!(done, OPS, "seed {seed}: operation {done} failed without a crash");
    for run in crash_runs(seed, &probe.counters(), SHAPE) {
        let mut history = Vec::new();
        let (acked, _) = workload(&run.sim, o, seed, &mut history, false);
        let (image, what) = run.image(|image| {
            let _ = Fs::open_with(Arc::new(image.clone()), Path::new(DIR), o.clone());
        });
        check(&image, o, &history, acked, &what);
    }
}

#[test]
fn the_workloads_reach_every_kind_of_operation() {
    // Every arm of `step` and `more` (each arm's first draw marks it).
    const ARMS: [u32; 24] = [0, 4, 7, 8, 10, 11, 12, 15, 16, 17, 19, 21, 22, 24, 25, 26, 27, 28, 29, 30, 31, 1, 5, 13];
    for seed in campaign_seeds(4) {
        workload(&SimStorage::new(seed), &options(), seed, &mut Vec::new(), true);
    }
    let ran = RAN.load(std::sync::atomic::Ordering::Relaxed);
    let arm_of = |k: u32| match k {
        0..=3 => 0,
        4..=6 => 4,
        8 | 9 => 8,
        12..=14 => 12,
        17 | 18 => 17,
        19 | 20 => 19,
        22 | 23 => 22,
        30 | 31 => 30,
        k => k,
    };
    let arms_ran: std::collections::BTreeSet<u32> = (0..32).filter(|k| ran & (1 << k) != 0).map(arm_of).collect();
    let arms: std::collections::BTreeSet<u32> = ARMS.iter().map(|&k| arm_of(k)).collect();
    assert_eq!(arms_ran, arms, "arms that ran");
}

#[test]
fn random_file_system_work_survives_random_crashes() {
    for seed in campaign_seeds(4) {
        run_seed(seed, &options());
    }
}

/// As a mount runs: flushes, merges and checkpoints on their own threads,
/// and unsynced changes synced on a timer. Thread timing makes a run's
/// writes vary: a failure names its seed and crash point but may need
/// several runs to repeat.
#[test]
fn random_file_system_work_survives_random_crashes_with_background_work() {
    let mut o = options();
    o.store.background_checkpoints = true;
    o.store.index.background_threads = true;
    o.store.log.buffered_sync_interval = Some(std::time::Duration::from_millis(1));
    for seed in campaign_seeds(4) {
        run_seed(seed, &o);
    }
}
