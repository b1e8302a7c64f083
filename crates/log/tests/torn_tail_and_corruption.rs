//! A torn last group is dropped silently, while a damaged record that a
//! later durable group proves was acknowledged fails open with an error
//! naming the segment file, the offset and the LSN. How: append records
//! one group (one 4 KiB block) each on the simulated storage; tear the last
//! group by flipping a byte of its record in a crash image that kept it
//! unsynced, or flip a byte of an early record that later groups'
//! `acked_lsn` covers; then reopen.
#![allow(clippy::unwrap_used)]

mod common;

use common::{check_prefix, open, payload, segment_path, small_options};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_log::{LogError, Options};

/// Segments big enough that the test's records share segment 1:
/// block 0 is its header and record `n` is the only one in block `n`.
fn options() -> Options {
    Options { segment_bytes: 64 << 10, ..small_options() }
}

#[test]
fn torn_last_group_is_dropped_and_never_revived() {
    let sim = SimStorage::new(5);
    let (log, _) = open(&sim, options(), 0).unwrap();
    for lsn in 1..=10 {
        assert_eq!(log.append(payload(lsn)).unwrap(), lsn);
    }
    // The 11th group is written and the machine stops before its sync.
    sim.crash_after_writes(1);
    assert!(log.append(payload(11)).is_err());
    drop(log);
    let image = sim.crash_with(CrashMode::KeepAllPending);
    // Tear it: a sector of its records never reached the disk.
    image.corrupt(segment_path(1), 11 * 4096 + 64 + 30, 0xff).unwrap();
    let (log, replayed) = open(&image, options(), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 10);
    let tail = log.recovery_report().tail.clone().unwrap();
    assert!(tail.contains("0000000000000001.seg at offset 45120"), "{tail}");
    // New records continue at 11 in a new segment; the torn bytes stay in
    // segment 1 and must never be read back as records.
    for lsn in 11..=13 {
        assert_eq!(log.append(payload(lsn)).unwrap(), lsn);
    }
    log.close().unwrap();
    let (_, replayed) = open(&image, options(), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 13);
}

#[test]
fn damaged_acknowledged_record_fails_open_naming_file_offset_and_lsn() {
    let sim = SimStorage::new(6);
    let (log, _) = open(&sim, options(), 0).unwrap();
    for lsn in 1..=10 {
        log.append(payload(lsn)).unwrap();
    }
    log.close().unwrap();
    // Record 3 is in block 3; group 4's header says 3 was acknowledged.
    let offset = 3 * 4096 + 64 + 16;
    sim.corrupt(segment_path(3 - 2), offset, 0x01).unwrap();
    let err = open(&sim, options(), 0).unwrap_err();
    let LogError::CorruptRecord { path, offset: at, lsn, acked, .. } = &err else { panic!("{err}") };
    assert_eq!(path, &segment_path(1));
    assert_eq!((*at, *lsn), (3 * 4096 + 64, 3));
    assert!(*acked >= 9, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("0000000000000001.seg") && msg.contains("offset 12352") && msg.contains("record 3"), "{msg}");
}

#[test]
fn damaged_group_header_below_acked_fails_open() {
    let sim = SimStorage::new(7);
    let (log, _) = open(&sim, options(), 0).unwrap();
    for lsn in 1..=6 {
        log.append(payload(lsn)).unwrap();
    }
    log.close().unwrap();
    sim.corrupt(segment_path(1), 2 * 4096 + 33, 0x80).unwrap();
    let err = open(&sim, options(), 0).unwrap_err();
    assert!(matches!(err, LogError::CorruptRecord { lsn: 2, offset: 8192, .. }), "{err}");
}

#[test]
fn damage_in_covered_records_of_a_later_segment_still_counts() {
    // Damage below the covered LSN is corruption too: the chain from the
    // start segment must hold for every record after it.
    let sim = SimStorage::new(8);
    let (log, _) = open(&sim, options(), 0).unwrap();
    for lsn in 1..=8 {
        log.append(payload(lsn)).unwrap();
    }
    log.close().unwrap();
    sim.corrupt(segment_path(1), 4 * 4096 + 64 + 40, 0x04).unwrap();
    let err = open(&sim, options(), 6).unwrap_err();
    assert!(matches!(err, LogError::CorruptRecord { lsn: 4, .. }), "{err}");
}
