//! Regression for P6 (review of crates/log): a new log directory more than
//! one level below an existing one was not durable (only its immediate
//! parent was synced), so a crash lost the directory and every acknowledged
//! record in it. Checks that every directory open creates is durable.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{payload, small_options};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_log::Log;

#[test]
fn new_nested_log_dir_keeps_acknowledged_records() {
    let sim = SimStorage::new(10);
    let dir = Path::new("/data/x/y/log");
    let log =
        Log::open(Arc::new(sim.clone()), dir, small_options(), 0, |_, _: &[u8]| Ok::<(), std::io::Error>(())).unwrap();
    assert_eq!(log.append(payload(1)).unwrap(), 1);
    drop(log);
    let image = sim.crash_with(CrashMode::DropAllPending);
    let mut n = 0;
    let log = Log::open(Arc::new(image), dir, small_options(), 0, |_, _: &[u8]| {
        n += 1;
        Ok::<(), std::io::Error>(())
    })
    .unwrap();
    assert_eq!(n, 1, "acknowledged record 1 lost; log now at {}", log.last_lsn());
}
