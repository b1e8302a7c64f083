//! `Log::flush`: with no record to write, it still makes what other files
//! wrote back durable (the device flush a group's sync would give), and
//! every record appended before it; a log with no segment open says so
//! and flushes nothing.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{open, small_options};
use larder_io::sim::CrashMode;
use larder_io::{write_all_at, OpenOptions, SimStorage, Storage};
use larder_log::Options;

const DATA: &str = "/data/file";

/// A durable data file of two written blocks on `sim`.
fn data_file(sim: &SimStorage) -> larder_io::FileRef {
    let file = sim.open(Path::new(DATA), OpenOptions::CREATE_NEW).unwrap();
    write_all_at(&*file, &[0; 8192], 0).unwrap();
    file.sync_data().unwrap();
    sim.sync_dir(Path::new("/data")).unwrap();
    file
}

fn options() -> Options {
    Options { buffered_sync_interval: None, ..small_options() }
}

#[test]
fn a_flush_with_nothing_queued_makes_written_back_data_durable() {
    for flush in [true, false] {
        let sim = SimStorage::new(31);
        let (log, _) = open(&sim, options(), 0).unwrap();
        // A segment to sync: one record written and synced.
        log.append(vec![1; 100]).unwrap();
        let file = data_file(&sim);
        write_all_at(&*file, &[7; 4096], 4096).unwrap();
        file.write_back(4096, 4096).unwrap();
        let before = log.stats();
        if flush {
            assert!(log.flush().unwrap(), "a segment is open");
        }
        assert_eq!(log.stats().groups, before.groups, "no group was written");
        assert_eq!(log.stats().syncs, before.syncs + u64::from(flush), "the flush is counted as a sync");
        drop(log);
        let after = sim.crash_with(CrashMode::DropAllPending);
        let bytes = after.read_durable(DATA).unwrap();
        let expected = if flush { [7; 4096] } else { [0; 4096] };
        assert_eq!(bytes[4096..], expected[..], "flush {flush}");
    }
}

#[test]
fn a_flush_makes_the_records_before_it_durable() {
    let sim = SimStorage::new(32);
    let (log, _) = open(&sim, options(), 0).unwrap();
    log.append(vec![1; 100]).unwrap();
    let lsn = log.append_buffered(vec![2; 100]).unwrap();
    assert!(log.durable_lsn() < lsn);
    assert!(log.flush().unwrap());
    assert!(log.durable_lsn() >= lsn);
}

#[test]
fn a_log_with_no_segment_open_flushes_nothing() {
    let sim = SimStorage::new(33);
    let (log, _) = open(&sim, options(), 0).unwrap();
    let file = data_file(&sim);
    write_all_at(&*file, &[7; 4096], 0).unwrap();
    file.write_back(0, 4096).unwrap();
    // A new log has written no group: it says so, and the data is not
    // durable (the caller syncs a record instead).
    assert!(!log.flush().unwrap());
    let after = sim.crash_with(CrashMode::DropAllPending);
    assert_eq!(after.read_durable(DATA).unwrap()[..4096], [0; 4096][..]);
}
