//! Regression for P5 (review of crates/log): a bit flip in a segment header
//! made recovery treat the segment as free (a torn restart), silently
//! dropping the acknowledged records in it when nothing later proved them,
//! and otherwise blaming the previous segment. Checks that a damaged header
//! over groups of an epoch newer than every valid header (so it had been
//! durable: groups are written only after their header's sync) fails open
//! with `Corrupt` naming that file.
#![allow(clippy::unwrap_used)]

mod common;

use common::{open, segment_path, small_options};
use larder_io::SimStorage;
use larder_log::LogError;

/// Segments of header + 3 blocks; one 3000-byte record per group and block.
fn setup(n: u64) -> SimStorage {
    let sim = SimStorage::new(11);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    for l in 1..=n {
        log.append(vec![l as u8; 3000]).unwrap();
    }
    log.close().unwrap();
    sim
}

fn assert_names_segment_2(err: &LogError) {
    assert!(matches!(err, LogError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("0000000000000002.seg"), "{err}");
}

#[test]
fn rotted_header_over_one_acknowledged_group_fails_open() {
    let sim = setup(4); // segment 1: 1..3, segment 2: 4
    sim.corrupt(segment_path(2), 40, 0x01).unwrap(); // its epoch
    let err = open(&sim, small_options(), 0).unwrap_err();
    assert_names_segment_2(&err);
}

#[test]
fn rotted_header_over_several_groups_names_its_own_file() {
    let sim = setup(6); // segment 1: 1..3, segment 2: 4..6
    sim.corrupt(segment_path(2), 40, 0x01).unwrap();
    let err = open(&sim, small_options(), 0).unwrap_err();
    assert_names_segment_2(&err);
}
