//! Damaged bytes on disk are reported naming the file, never read as
//! data: in a container block (fsck names the block, reads fail), in an
//! index run (open, a read or fsck names the run), in an acknowledged log
//! record (open refuses naming the segment), in the superblock (one bad
//! copy: the other is used; both: open refuses naming the file).

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{build, creation, deterministic, fmap, fsck, read_all, stat, storage, DIR};
use larder_fsck::Problem;
use larder_io::sim::CrashMode;
use larder_io::{RealStorage, SimStorage, StorageRef};
use larder_object::superblock::{self, SLOT_BYTES, SUPERBLOCK_FILE};
use larder_object::{Durability, ObjectError, Store};

fn files(sim: &SimStorage, suffix: &str) -> Vec<PathBuf> {
    sim.file_names().into_iter().filter(|p| p.to_string_lossy().ends_with(suffix)).collect()
}

/// Builds the fixture and closes it: everything is in index runs.
fn closed_fixture(seed: u64) -> (SimStorage, common::Fixture) {
    let sim = SimStorage::new(seed);
    let f = build(&sim);
    (sim, f)
}

#[test]
fn a_flipped_byte_in_an_index_run_is_reported_naming_the_run() {
    let (sim, f) = closed_fixture(40);
    let ids = f.ids;
    // Enough xattrs for several run blocks that open never reads, so the
    // damage there is fsck's to find.
    common::commit(&f.store, |b| {
        for i in 0..200 {
            let n = larder_object::meta::XattrName::new(format!("user.{i:04}")).unwrap();
            b.put(larder_object::meta::xattr_key(ids.small, &n), [1u8; 100]);
        }
    });
    f.store.close().unwrap();
    let runs = files(&sim, ".run");
    assert!(!runs.is_empty());
    let mut by = [0usize; 3]; // open, read, fsck
    for run in &runs {
        let len = sim.durable_len(run).unwrap();
        for offset in (0..len).step_by(97) {
            let image = sim.crash_with(CrashMode::KeepAllPending);
            image.corrupt(run, offset, 0x10).unwrap();
            let names_run = |text: String| assert!(text.contains(&*run.to_string_lossy()), "offset {offset}: {text}");
            let store = match Store::open(storage(&image), Path::new(DIR), deterministic()) {
                Ok(s) => s,
                Err(e) => {
                    names_run(e.to_string());
                    by[0] += 1;
                    continue;
                }
            };
            let mut failed = false;
            for id in [ids.small, ids.big, ids.link] {
                match store.stat(id).and_then(|_| read_all(&store, id)) {
                    Ok(bytes) => assert_eq!(bytes, f.data[&id], "offset {offset}: object {id}"),
                    Err(e) => {
                        names_run(e.to_string());
                        failed = true;
                    }
                }
            }
            by[1] += usize::from(failed);
            match larder_fsck::check(&store, &mut |_| {}) {
                Err(e) => names_run(e.to_string()),
                Ok(r) => {
                    let unreadable = r.problems.iter().find(|p| matches!(p, Problem::IndexUnreadable { .. }));
                    let Some(p) = unreadable else { panic!("offset {offset}: fsck missed the damage: {r}") };
                    names_run(p.to_string());
                    assert!(!r.skipped.is_empty() && !r.is_clean());
                    by[2] += 1;
                }
            }
        }
    }
    // Open found the damage in the blocks it reads, fsck in the others.
    assert!(by[0] > 0 && by[2] > 0, "{by:?}");
}

/// A log segment's groups: (segment epoch, group offsets) for a segment
/// with a valid-looking header.
fn groups(image: &[u8]) -> Option<(u64, Vec<u64>)> {
    let u =
        |at: usize, n: usize| -> u64 { image[at..at + n].iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)) };
    if &image[..8] != b"LRDRLSEG" {
        return None;
    }
    let epoch = u(40, 8);
    let mut out = Vec::new();
    let mut at = 4096usize;
    while at + 64 <= image.len() && &image[at..at + 8] == b"LRDRLGRP" && u(at + 24, 8) == epoch {
        out.push(at as u64);
        let body = u(at + 48, 4) as usize;
        at += (64 + body).div_ceil(4096) * 4096;
    }
    Some((epoch, out))
}

#[test]
fn a_damaged_acknowledged_log_record_fails_open_naming_the_segment() {
    let (sim, f) = closed_fixture(41);
    // More durable commits after the fixture, not yet in index runs.
    for i in 0..4u8 {
        f.store.write(f.ids.small, 0, &[i; 50], Durability::Durable).unwrap();
    }
    drop(f);
    let image = sim.crash_with(CrashMode::KeepAllPending);
    // The newest segment holding two or more groups: its first group is
    // acknowledged by the next one's header.
    let mut newest: Option<(u64, PathBuf, u64)> = None;
    for seg in files(&image, ".seg") {
        if let Some((epoch, g)) = groups(&image.read_durable(&seg).unwrap()) {
            if g.len() >= 2 && newest.as_ref().is_none_or(|(e, ..)| epoch > *e) {
                newest = Some((epoch, seg, g[0]));
            }
        }
    }
    let (_, seg, group) = newest.unwrap();
    // A byte of the first record's payload (group header 64, record header 16).
    image.corrupt(&seg, group + 64 + 16 + 2, 0x01).unwrap();
    let e = Store::open(storage(&image), Path::new(DIR), deterministic()).unwrap_err();
    assert!(matches!(&e, ObjectError::Log(larder_log::LogError::CorruptRecord { .. })), "{e}");
    assert!(e.to_string().contains(&*seg.to_string_lossy()), "{e}");
}

#[test]
fn the_superblock_survives_one_bad_copy_and_two_are_refused_by_name() {
    let (sim, f) = closed_fixture(42);
    let data = f.data.clone();
    let small = f.ids.small;
    f.store.close().unwrap();
    // Both slots hold the current copy from creation on.
    let path = Path::new(DIR).join(SUPERBLOCK_FILE);
    for slot in [0usize, 1] {
        let image = sim.crash_with(CrashMode::KeepAllPending);
        image.corrupt(&path, slot as u64 * SLOT_BYTES as u64 + 70, 0x04).unwrap();
        let store = Store::open(storage(&image), Path::new(DIR), deterministic()).unwrap();
        assert_eq!(store.superblock().generation, 1);
        assert_eq!(read_all(&store, small).unwrap(), data[&small]);
        let r = fsck(&store);
        assert!(
            matches!(r.problems.as_slice(), [Problem::SuperblockCopy { slot: s, path: p, .. }] if *s == slot && *p == path),
            "{r}"
        );
        assert!(r.to_string().contains(SUPERBLOCK_FILE), "{r}");
        let repaired = larder_fsck::repair(&store).unwrap();
        assert_eq!(repaired.len(), 1, "{repaired:?}");
        assert_eq!(repaired[0].slot, slot);
        assert!(fsck(&store).is_clean());
        assert!(larder_fsck::repair(&store).unwrap().is_empty(), "nothing left to repair");
    }
    // An update cut between its two writes: fsck calls the other copy
    // stale, and repair makes it current.
    let image = sim.crash_with(CrashMode::KeepAllPending);
    let loaded = superblock::load(&image, Path::new(DIR)).unwrap();
    let sb = superblock::Superblock { generation: 2, ..loaded.superblock.clone() };
    let file = larder_io::Storage::open(&image, &path, larder_io::OpenOptions::WRITE).unwrap();
    larder_io::write_all_at(&*file, &sb.encode(), SLOT_BYTES as u64).unwrap();
    drop(file);
    let store = Store::open(storage(&image), Path::new(DIR), deterministic()).unwrap();
    assert_eq!(store.superblock().generation, 2);
    let r = fsck(&store);
    assert!(matches!(r.problems.as_slice(), [Problem::SuperblockCopy { slot: 0, .. }]), "{r}");
    assert!(r.to_string().contains("older generation (1)"), "{r}");
    larder_fsck::repair(&store).unwrap();
    assert!(fsck(&store).is_clean());
    let image = sim.crash_with(CrashMode::KeepAllPending);
    image.corrupt(&path, 20, 0x04).unwrap();
    image.corrupt(&path, SLOT_BYTES as u64 + 20, 0x04).unwrap();
    let e = Store::open(storage(&image), Path::new(DIR), deterministic()).unwrap_err();
    assert!(matches!(e, ObjectError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains(SUPERBLOCK_FILE), "{e}");
}

#[test]
fn a_flipped_byte_in_a_real_container_file_is_named_by_fsck() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let real: StorageRef = Arc::new(RealStorage::new());
    let store = Store::create(real.clone(), &dir, creation(), deterministic()).unwrap();
    let id = store.allocate_object_id().unwrap();
    let lim = common::limits(&store);
    let mut o = common::onode(larder_object::meta::Kind::File, id, 0, None);
    o.size = 0;
    common::commit(&store, |b| {
        common::put_onode(b, &lim, id, &o);
        b.put(larder_object::meta::orphan_key(id), common::orphan_record());
    });
    let bytes = common::pattern(5, 30_000);
    store.write(id, 0, &bytes, Durability::Durable).unwrap();
    let (_, _, entry) = fmap(&store, id)[0].clone();
    assert!(fsck(&store).is_clean());
    let file = dir.join("data").join(larder_space::container_file_name(entry.extent.container));
    let mut contents = std::fs::read(&file).unwrap();
    let at = entry.extent.offset as usize + 4096 * 3 + 17;
    contents[at] ^= 0x80;
    std::fs::write(&file, &contents).unwrap();
    let r = fsck(&store);
    assert_eq!(
        r.problems,
        [Problem::ChecksumMismatch {
            object: id,
            offset: 4096 * 3,
            path: file.clone(),
            container_offset: (at - 17) as u64
        }],
        "{r}"
    );
    assert!(r.to_string().contains(&*file.to_string_lossy()), "{r}");
    let e = read_all(&store, id).unwrap_err();
    assert!(e.to_string().contains(&*file.to_string_lossy()), "{e}");
    assert_eq!(stat(&store, id).size, 30_000);
}

/// Both superblock copies damaged while the store is open: fsck reports
/// both, and repair rewrites them from the copy the store opened with, so
/// the store opens again.
#[test]
fn both_superblock_copies_damaged_while_open_are_repaired_from_the_open_copy() {
    let (sim, f) = closed_fixture(43);
    let (data, small) = (f.data.clone(), f.ids.small);
    f.store.close().unwrap();
    let store = common::reopen(&sim);
    let path = Path::new(DIR).join(SUPERBLOCK_FILE);
    sim.corrupt(&path, 4, 0x01).unwrap();
    sim.corrupt(&path, SLOT_BYTES as u64 + 40, 0x01).unwrap();
    let r = fsck(&store);
    assert!(
        matches!(
            r.problems.as_slice(),
            [Problem::SuperblockCopy { slot: 0, .. }, Problem::SuperblockCopy { slot: 1, .. }]
        ),
        "{r}"
    );
    let repaired = larder_fsck::repair(&store).unwrap();
    assert_eq!(repaired.iter().map(|r| r.slot).collect::<Vec<_>>(), [0, 1]);
    assert!(fsck(&store).is_clean());
    store.close().unwrap();
    let store = common::reopen(&sim);
    assert_eq!(read_all(&store, small).unwrap(), data[&small]);
}
