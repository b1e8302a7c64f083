//! Files from a newer format version or with an unknown incompatible
//! feature are refused with a message naming the file; runs holding
//! operands of an unregistered merge operator are refused naming it.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::tiny_options;
use larder_index::{CounterOperator, Index, IndexError, Options, WriteBatch};
use larder_io::sim::CrashMode;
use larder_io::{write_all_at, OpenOptions, SimStorage, Storage, StorageRef};

const DIR: &str = "/db/index";

fn build() -> SimStorage {
    let sim = SimStorage::new(1);
    let storage: StorageRef = Arc::new(sim.clone());
    let index = Index::open(storage, Path::new(DIR), tiny_options(false)).unwrap();
    let mut b = WriteBatch::new();
    b.put(b"a", b"1").merge(CounterOperator::NAME, b"c", CounterOperator::operand(2));
    index.write(1, &b).unwrap();
    index.close().unwrap();
    sim
}

fn file(sim: &SimStorage, suffix: &str) -> PathBuf {
    sim.file_names().into_iter().find(|p| p.to_string_lossy().contains(suffix)).unwrap()
}

fn open(sim: &SimStorage, options: Options) -> Result<Index, IndexError> {
    let storage: StorageRef = Arc::new(sim.clone());
    Index::open(storage, Path::new(DIR), options)
}

/// Overwrites bytes and fixes nothing else (so checksums fail when they
/// cover the bytes).
fn patch(sim: &SimStorage, path: &Path, offset: u64, bytes: &[u8]) {
    let f = sim.open(path, OpenOptions::WRITE).unwrap();
    write_all_at(&*f, bytes, offset).unwrap();
    f.sync_data().unwrap();
}

#[test]
fn newer_manifest_version_is_refused_by_name() {
    let sim = build().crash_with(CrashMode::KeepAllPending);
    let m = file(&sim, "MANIFEST-");
    let mut b = sim.read_durable(&m).unwrap();
    b[8..12].copy_from_slice(&2u32.to_le_bytes());
    let n = b.len();
    let c = crc32c::crc32c(&b[..n - 4]);
    b[n - 4..].copy_from_slice(&c.to_le_bytes());
    patch(&sim, &m, 0, &b);
    let e = open(&sim, tiny_options(false)).unwrap_err();
    assert!(matches!(e, IndexError::NewerVersion { found: 2, supported: 1, .. }), "{e}");
    assert!(e.to_string().contains(&*m.to_string_lossy()));
}

/// The checksum is checked before the version: a damaged version field is
/// corruption naming the file, not a claim of a newer format.
#[test]
fn a_damaged_version_field_is_corruption_not_a_newer_version() {
    let built = build();
    let m = file(&built, "MANIFEST-");
    let run = file(&built, ".run");
    let run_len = built.durable_len(&run).unwrap();
    let current = std::path::Path::new(DIR).join("CURRENT");
    for (path, offset) in [(&m, 8), (&current, 8), (&run, run_len - 44 + 12)] {
        let sim = built.crash_with(CrashMode::KeepAllPending);
        patch(&sim, path, offset, &7u32.to_le_bytes());
        let e = open(&sim, tiny_options(false)).unwrap_err();
        assert!(matches!(e, IndexError::Corrupt { .. }), "{}: {e}", path.display());
        assert!(e.to_string().contains(&*path.to_string_lossy()), "{e}");
    }
}

/// Rewrites bytes of a run's 44-byte footer and its checksum (bytes 32..36
/// cover 0..32), so only the field under test is wrong.
fn patch_run_footer(sim: &SimStorage, run: &Path, at: usize, bytes: &[u8]) {
    let len = sim.durable_len(run).unwrap();
    let f = sim.open(run, OpenOptions::WRITE).unwrap();
    let mut footer = vec![0u8; 44];
    larder_io::read_exact_at(&*f, &mut footer, len - 44).unwrap();
    footer[at..at + bytes.len()].copy_from_slice(bytes);
    let c = crc32c::crc32c(&footer[..32]);
    footer[32..36].copy_from_slice(&c.to_le_bytes());
    patch(sim, run, len - 44, &footer);
}

#[test]
fn newer_run_version_is_refused_by_name() {
    let sim = build().crash_with(CrashMode::KeepAllPending);
    let run = file(&sim, ".run");
    // The footer's version is the u32 at byte 12.
    patch_run_footer(&sim, &run, 12, &7u32.to_le_bytes());
    let e = open(&sim, tiny_options(false)).unwrap_err();
    assert!(matches!(e, IndexError::NewerVersion { found: 7, .. }), "{e}");
    assert!(e.to_string().contains(&*run.to_string_lossy()));
}

#[test]
fn unknown_incompatible_run_feature_is_refused() {
    let sim = build().crash_with(CrashMode::KeepAllPending);
    let run = file(&sim, ".run");
    // The footer's incompatible feature flags are the u64 at byte 24.
    patch_run_footer(&sim, &run, 24, &(1u64 << 40).to_le_bytes());
    let e = open(&sim, tiny_options(false)).unwrap_err();
    assert!(matches!(e, IndexError::UnknownFeature { .. }), "{e}");
    assert!(e.to_string().contains(&*run.to_string_lossy()));
}

#[test]
fn unknown_incompatible_manifest_feature_is_refused() {
    let sim = build().crash_with(CrashMode::KeepAllPending);
    let m = file(&sim, "MANIFEST-");
    let bytes = sim.read_durable(&m).unwrap();
    let mut b = bytes.clone();
    b[24..32].copy_from_slice(&1u64.to_le_bytes());
    let n = b.len();
    let c = crc32c::crc32c(&b[..n - 4]);
    b[n - 4..].copy_from_slice(&c.to_le_bytes());
    patch(&sim, &m, 0, &b);
    let e = open(&sim, tiny_options(false)).unwrap_err();
    assert!(matches!(e, IndexError::UnknownFeature { flags: 1, .. }), "{e}");
}

#[test]
fn unregistered_merge_operator_is_refused_by_name() {
    let sim = build().crash_with(CrashMode::KeepAllPending);
    let e = open(&sim, Options { merge_operators: vec![], ..tiny_options(false) }).unwrap_err();
    assert!(matches!(&e, IndexError::UnknownMergeOperator { name, .. } if name == CounterOperator::NAME), "{e}");
    // With the operator registered it opens and the merged value is there.
    let index = open(&sim, tiny_options(false)).unwrap();
    assert_eq!(index.get(b"c").unwrap().and_then(|v| CounterOperator::decode(&v)), Some(2));
    let _ = Arc::new(CounterOperator);
}
