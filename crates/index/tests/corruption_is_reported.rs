//! Corrupt, truncated or foreign bytes in a run or a manifest give a clear
//! error naming the file (at open or at read), never a panic and never wrong
//! data. How: build an index on the simulated storage, flip bits or cut
//! files at many offsets, reopen and read everything.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::tiny_options;
use larder_index::{Index, IndexError, Options, WriteBatch};
use larder_io::{OpenOptions, SimStorage, Storage, StorageRef};

const DIR: &str = "/db/index";

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

fn options() -> Options {
    // Large caches would hide lazily read blocks; keep everything small.
    tiny_options(false)
}

fn build() -> (SimStorage, Pairs) {
    let sim = SimStorage::new(3);
    let storage: StorageRef = Arc::new(sim.clone());
    let index = Index::open(storage, Path::new(DIR), Options { memtable_size_bytes: 1 << 20, ..options() }).unwrap();
    let mut seq = 0;
    for i in 0..200u32 {
        seq += 1;
        index.write(seq, WriteBatch::new().put(format!("key{i:05}").into_bytes(), vec![i as u8; 20])).unwrap();
    }
    index.flush().unwrap();
    let all = index.iter(true).unwrap().map(|r| r.unwrap()).collect();
    index.close().unwrap();
    (sim, all)
}

fn files(sim: &SimStorage, suffix: &str) -> Vec<PathBuf> {
    sim.file_names().into_iter().filter(|p| p.to_string_lossy().contains(suffix)).collect()
}

/// Opens and reads everything; returns the first error, checking that any
/// data returned is right.
fn open_and_read(sim: &SimStorage, expected: &[(Vec<u8>, Vec<u8>)]) -> Result<(), IndexError> {
    let storage: StorageRef = Arc::new(sim.clone());
    let index = Index::open(storage, Path::new(DIR), options())?;
    for r in index.iter(true)? {
        let (k, v) = r?;
        let want = expected.iter().find(|(ek, _)| *ek == k);
        assert_eq!(want.map(|(_, v)| v), Some(&v), "wrong data for {k:?}");
    }
    for (k, v) in expected {
        if let Some(got) = index.get(k)? {
            assert_eq!(&got, v, "wrong data for {k:?}");
        }
    }
    Ok(())
}

fn names_file(e: &IndexError, path: &Path) -> bool {
    e.to_string().contains(&*path.to_string_lossy())
}

#[test]
fn flipped_bits_in_a_run_are_reported_naming_it() {
    let (sim, expected) = build();
    let run = files(&sim, ".run").pop().unwrap();
    let len = sim.durable_len(&run).unwrap();
    let mut detected = 0;
    for offset in (0..len).step_by(7) {
        let (sim, expected) = (sim.crash_with(larder_io::sim::CrashMode::KeepAllPending), &expected);
        sim.corrupt(&run, offset, 0x10).unwrap();
        match open_and_read(&sim, expected) {
            Err(e) => {
                assert!(names_file(&e, &run), "error at offset {offset} does not name {}: {e}", run.display());
                detected += 1;
            }
            Ok(()) => panic!("a flip at offset {offset} of {len} went unnoticed"),
        }
    }
    assert!(detected > 0);
}

#[test]
fn truncated_run_is_reported() {
    let (sim, expected) = build();
    let run = files(&sim, ".run").pop().unwrap();
    let len = sim.durable_len(&run).unwrap();
    for cut in [0, 1, len / 2, len - 45, len - 1] {
        let sim = sim.crash_with(larder_io::sim::CrashMode::KeepAllPending);
        let f = sim.open(&run, OpenOptions::WRITE).unwrap();
        f.set_len(cut).unwrap();
        f.sync_data().unwrap();
        let e = open_and_read(&sim, &expected).unwrap_err();
        assert!(matches!(e, IndexError::Corrupt { .. }) && names_file(&e, &run), "cut at {cut}: {e}");
    }
}

#[test]
fn corrupt_manifest_without_an_older_one_is_reported() {
    let (sim, expected) = build();
    let manifest = files(&sim, "MANIFEST-").pop().unwrap();
    let len = sim.durable_len(&manifest).unwrap();
    for offset in 0..len {
        let sim = sim.crash_with(larder_io::sim::CrashMode::KeepAllPending);
        sim.corrupt(&manifest, offset, 0x01).unwrap();
        let e = open_and_read(&sim, &expected).unwrap_err();
        assert!(names_file(&e, &manifest), "offset {offset}: {e}");
    }
}

#[test]
fn a_missing_run_is_reported_by_name() {
    let (sim, expected) = build();
    let run = files(&sim, ".run").pop().unwrap();
    sim.remove_file(&run).unwrap();
    let e = open_and_read(&sim, &expected).unwrap_err();
    assert!(names_file(&e, &run) && e.to_string().contains("missing"), "{e}");
}

#[test]
fn bit_flips_on_read_are_caught_by_checksums() {
    let (sim, expected) = build();
    // Every read of the reopened index may be the flipped one.
    for n in 1..40 {
        let sim = sim.crash_with(larder_io::sim::CrashMode::KeepAllPending);
        sim.fail_nth(larder_io::sim::SimOp::Read, n, larder_io::sim::SimFault::BitFlip);
        match open_and_read(&sim, &expected) {
            Ok(()) => {}
            Err(e) => assert!(matches!(e, IndexError::Corrupt { .. }), "read {n}: unexpected error {e}"),
        }
    }
}

#[test]
fn corrupt_current_is_reported_by_name() {
    let (sim, expected) = build();
    let current = Path::new(DIR).join("CURRENT");
    for offset in 0..sim.durable_len(&current).unwrap() {
        let sim = sim.crash_with(larder_io::sim::CrashMode::KeepAllPending);
        sim.corrupt(&current, offset, 0x04).unwrap();
        let e = open_and_read(&sim, &expected).unwrap_err();
        assert!(names_file(&e, &current), "offset {offset}: {e}");
    }
}

#[test]
fn runs_without_current_are_refused_not_wiped() {
    let (sim, expected) = build();
    let current = Path::new(DIR).join("CURRENT");
    sim.remove_file(&current).unwrap();
    let e = open_and_read(&sim, &expected).unwrap_err();
    assert!(names_file(&e, &current) && e.to_string().contains("missing"), "{e}");
    // Nothing was removed: the runs are still there.
    assert!(!files(&sim, ".run").is_empty());
}
