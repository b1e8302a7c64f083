//! Recovery reads each segment file once (every byte at most once, counted
//! through a storage wrapper), and a damaged header of a segment recovery
//! does not need (a free one) does not stop the log from opening.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use common::{check_prefix, open, open_on, payload, segment_path, small_options, Hooked, Hooks};
use larder_io::SimStorage;

/// Every read of a segment file: (offset, length).
#[derive(Debug, Default)]
struct Reads(Mutex<BTreeMap<PathBuf, Vec<(u64, usize)>>>);

impl Hooks for Reads {
    fn before_read(&self, path: &Path, offset: u64, len: usize) {
        if path.extension().is_some_and(|e| e == "seg") {
            self.0.lock().unwrap().entry(path.to_path_buf()).or_default().push((offset, len));
        }
    }
}

/// A log of `records` records, closed without a checkpoint of them.
fn written(seed: u64, records: u64) -> SimStorage {
    let sim = SimStorage::new(seed);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    for l in 1..=records {
        log.append(payload(l)).unwrap();
    }
    drop(log);
    sim
}

/// Opens the log on `sim` with `covered`, returning the bytes read of each
/// segment file and how many times the most-read byte of it was read.
fn open_counting(sim: &SimStorage, covered: u64) -> BTreeMap<PathBuf, (u64, usize)> {
    let reads = Arc::new(Reads::default());
    let hooked = Hooked { inner: sim.clone(), hooks: reads.clone() };
    let (log, replayed) = open_on(hooked.storage(), small_options(), covered).unwrap();
    let end = check_prefix(&replayed, covered);
    assert_eq!(log.durable_lsn(), end);
    drop(log);
    let reads = reads.0.lock().unwrap();
    reads
        .iter()
        .map(|(path, list)| {
            let mut per_byte: BTreeMap<u64, usize> = BTreeMap::new();
            for &(offset, len) in list {
                for b in offset..offset + len as u64 {
                    *per_byte.entry(b).or_default() += 1;
                }
            }
            let total = list.iter().map(|&(_, len)| len as u64).sum();
            (path.clone(), (total, per_byte.values().copied().max().unwrap_or(0)))
        })
        .collect()
}

#[test]
fn recovery_reads_every_segment_byte_at_most_once() {
    // Several segments of live log, some records covered, some to replay.
    let sim = written(5, 30);
    let segments = sim.file_names().into_iter().filter(|p| p.extension().is_some_and(|e| e == "seg")).count();
    assert!(segments >= 3, "{segments} segments");
    for covered in [0, 10, 30] {
        let reads = open_counting(&sim, covered);
        assert!(!reads.is_empty());
        for (path, (total, most)) in &reads {
            let len = sim.durable_len(path).unwrap();
            assert_eq!(*most, 1, "covered {covered}: a byte of {} was read {most} times", path.display());
            assert!(*total <= len, "covered {covered}: {} bytes read of {} ({len} bytes)", total, path.display());
        }
    }
}

#[test]
fn a_damaged_header_of_a_free_segment_does_not_stop_open() {
    let sim = written(6, 30);
    // Segment 1 holds the oldest records; with them covered it is free.
    let covered = 12;
    let (log, replayed) = open(&sim, small_options(), covered).unwrap();
    let end = check_prefix(&replayed, covered);
    drop(log);
    let sim = written(6, 30);
    // Every byte of the header and its nonce extension, including magic
    // (0..8), version (8) and epoch (40): the crc is checked first, so
    // each is damage to a segment recovery does not need.
    for offset in 0..92u64 {
        let image = sim.crash_with(larder_io::sim::CrashMode::KeepAllPending);
        image.corrupt(segment_path(1), offset, 0x04).unwrap();
        let (log, replayed) = open(&image, small_options(), covered)
            .unwrap_or_else(|e| panic!("offset {offset}: a damaged free header stopped open: {e}"));
        assert_eq!(check_prefix(&replayed, covered), end, "offset {offset}");
        drop(log);
    }
}

/// A damaged header over records the log needs (not a free segment) fails
/// open naming that segment, not only the log directory.
#[test]
fn a_damaged_header_over_needed_records_is_named() {
    // Segment 1: records 1..3, segment 2: 4..6 (one 3000-byte record per block).
    let sim = SimStorage::new(12);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    for l in 1..=6u64 {
        log.append(vec![l as u8; 3000]).unwrap();
    }
    drop(log);
    for (covered, offset) in [(0, 40u64), (0, 8), (1, 48), (2, 76)] {
        let image = sim.crash_with(larder_io::sim::CrashMode::KeepAllPending);
        image.corrupt(segment_path(1), offset, 0x01).unwrap();
        let err = open(&image, small_options(), covered).unwrap_err();
        assert!(
            err.to_string().contains("0000000000000001.seg"),
            "covered {covered}, offset {offset}: the error does not name the damaged segment: {err}"
        );
    }
}
