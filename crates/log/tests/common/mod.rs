//! Helpers shared by the log's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use larder_io::{SimStorage, StorageRef};
use larder_log::{Log, LogError, Lsn, Options};

/// Where every test keeps its log.
pub const DIR: &str = "/data/log";

/// Small segments (header + 3 blocks), no background flusher, so the
/// sequence of writes and syncs depends only on the test.
pub fn small_options() -> Options {
    Options {
        segment_bytes: 16 << 10,
        max_segments: 4,
        buffered_sync_interval: None,
        full_wait: Duration::from_secs(10),
        ..Options::default()
    }
}

/// The path of segment `id`.
pub fn segment_path(id: u64) -> PathBuf {
    Path::new(DIR).join(format!("{id:016x}.seg"))
}

/// A payload that names its LSN, of a size derived from it.
pub fn payload(lsn: Lsn) -> Vec<u8> {
    let len = 8 + (lsn as usize * 131) % 1500;
    let mut p = lsn.to_le_bytes().to_vec();
    p.extend((0..len - 8).map(|i| (lsn as usize + i) as u8));
    p
}

/// Records as replayed: (LSN, payload).
pub type Replayed = Vec<(Lsn, Vec<u8>)>;

/// Opens the log on `sim`, collecting the replayed records.
pub fn open(sim: &SimStorage, options: Options, covered: Lsn) -> Result<(Log, Replayed), LogError> {
    let storage: StorageRef = Arc::new(sim.clone());
    let mut replayed = Vec::new();
    let log = Log::open(storage, Path::new(DIR), options, covered, |lsn, p: &[u8]| {
        replayed.push((lsn, p.to_vec()));
        Ok::<(), std::io::Error>(())
    })?;
    Ok((log, replayed))
}

/// Asserts that `replayed` is exactly `covered+1 ..= covered+len` with the
/// payloads [`payload`] gives, and returns the last LSN.
pub fn check_prefix(replayed: &[(Lsn, Vec<u8>)], covered: Lsn) -> Lsn {
    for (i, (lsn, p)) in replayed.iter().enumerate() {
        assert_eq!(*lsn, covered + 1 + i as u64, "replayed LSNs are not a gap-free run after {covered}");
        assert_eq!(p, &payload(*lsn), "wrong payload for LSN {lsn}");
    }
    covered + replayed.len() as u64
}
