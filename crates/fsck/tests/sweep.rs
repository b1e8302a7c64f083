//! A flipped byte anywhere in a closed store: open, reading every object
//! and fsck either succeed with the right data or fail; never a panic,
//! never different bytes than were written, never a clean report for a
//! store whose objects cannot be read.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{build, deterministic, fsck, read_all, storage, DIR};
use larder_fsck::Problem;
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_object::{Store, ROOT_ID};

/// Byte stride of the sweep: prime, so it meets every offset within a
/// block and every field of the small structures at some point.
const STRIDE: u64 = 97;
/// Offsets swept per file. Past it a container holds only free space
/// (the fixture uses its first few blocks), zeros like the rest.
const SWEPT_BYTES: u64 = 128 << 10;

/// What a clean reopen of the fixture holds: every object's bytes (empty
/// for those without).
fn expected(sim: &SimStorage) -> BTreeMap<u64, Vec<u8>> {
    let store = common::reopen(sim);
    assert!(fsck(&store).is_clean());
    let mut out = BTreeMap::new();
    for id in ROOT_ID..20 {
        if let Some(o) = store.stat(id).unwrap() {
            let bytes = if o.dir.is_some() { Vec::new() } else { read_all(&store, id).unwrap() };
            out.insert(id, bytes);
        }
    }
    store.close().unwrap();
    out
}

/// Opens `image` and reads everything; returns whether the damage was
/// seen (an error or a problem), and what was seen, for the tally.
fn open_read_check(image: &SimStorage, want: &BTreeMap<u64, Vec<u8>>, at: &str) -> Seen {
    let store = match Store::open(storage(image), Path::new(DIR), deterministic()) {
        Ok(s) => s,
        Err(_) => return Seen::Open,
    };
    let mut read_failed = false;
    for (&id, bytes) in want {
        match store.stat(id) {
            Ok(None) => panic!("{at}: object {id} vanished without an error"),
            Ok(Some(o)) if o.dir.is_some() => {}
            Ok(Some(_)) => match read_all(&store, id) {
                Ok(got) => assert_eq!(&got, bytes, "{at}: object {id} reads other bytes than were written"),
                Err(_) => read_failed = true,
            },
            Err(_) => read_failed = true,
        }
    }
    match larder_fsck::check(&store, &mut |_| {}) {
        Err(_) => Seen::Fsck,
        Ok(r) if !r.is_clean() => {
            if r.problems.iter().any(|p| matches!(p, Problem::ChecksumMismatch { .. })) {
                Seen::Checksum
            } else {
                Seen::Fsck
            }
        }
        Ok(r) => {
            assert!(!read_failed, "{at}: reads fail but fsck finds nothing: {r}");
            Seen::Nothing
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Seen {
    Open,
    Fsck,
    Checksum,
    Nothing,
}

#[test]
fn a_flipped_byte_anywhere_is_harmless_or_reported() {
    let sim = SimStorage::new(50);
    let f = build(&sim);
    f.store.close().unwrap();
    let want = expected(&sim);
    let mut tally: BTreeMap<(String, Seen), u64> = BTreeMap::new();
    for file in sim.file_names() {
        let len = sim.durable_len(&file).unwrap().min(SWEPT_BYTES);
        let kind = match file.extension().and_then(|e| e.to_str()) {
            Some(ext) => ext.to_string(),
            None => file.file_name().unwrap().to_string_lossy().split('-').next().unwrap().to_string(),
        };
        for offset in (0..len).step_by(STRIDE as usize) {
            let image = sim.crash_with(CrashMode::KeepAllPending);
            image.corrupt(&file, offset, 0x20).unwrap();
            let at = format!("{} offset {offset}", file.display());
            let seen = open_read_check(&image, &want, &at);
            *tally.entry((kind.clone(), seen)).or_default() += 1;
        }
    }
    let count = |kind: &str, seen: Seen| tally.get(&(kind.to_string(), seen)).copied().unwrap_or(0);
    // Damage to data in use is found by its crc; damage to the index's
    // runs, manifest and CURRENT refuses open; damage to one superblock
    // copy never does (the other is used) and fsck names it.
    assert!(count("ctr", Seen::Checksum) > 0, "{tally:?}");
    for kind in ["run", "CURRENT", "MANIFEST"] {
        assert!(count(kind, Seen::Open) > 0, "{kind}: {tally:?}");
    }
    assert_eq!(count("SUPERBLOCK", Seen::Open), 0, "{tally:?}");
    assert_eq!(count("SUPERBLOCK", Seen::Nothing), 0, "{tally:?}");
    assert!(count("SUPERBLOCK", Seen::Fsck) > 0, "{tally:?}");
}
