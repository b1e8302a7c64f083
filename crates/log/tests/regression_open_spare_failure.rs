//! Regression for P4 (review of crates/log): open created the spare segment
//! (and spawned the flusher) after replaying every record, so a full disk
//! failed an open that had already replayed, against the documented rule
//! that a failed open replayed nothing. Checks that open succeeds on a disk
//! with no room for a spare, replays once, and a segment needed later is
//! created when the disk has room again.
#![allow(clippy::unwrap_used)]

mod common;

use common::{check_prefix, open, payload, small_options};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_log::Options;

#[test]
fn open_succeeds_when_the_spare_cannot_be_created() {
    let options = Options { segment_bytes: 64 << 10, ..small_options() };
    let sim = SimStorage::new(8);
    let (log, _) = open(&sim, options.clone(), 0).unwrap();
    for l in 1..=3 {
        log.append(payload(l)).unwrap();
    }
    log.close().unwrap();
    let sim = sim.crash_with(CrashMode::KeepAllPending);
    sim.set_capacity(64 << 10);
    let (log, replayed) = open(&sim, options.clone(), 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 3);
    // New records need a new segment (the old one is never written again
    // in its current use): it is created once there is room.
    sim.set_capacity(1 << 30);
    assert_eq!(log.append(payload(4)).unwrap(), 4);
    log.close().unwrap();
    let (_, replayed) = open(&sim, options, 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 4);
}
