//! A by-hand throughput check, not a timed test: appends 4 KiB records on
//! the real file system in a temporary directory with 1 and 8 threads and
//! prints records/s, groups and syncs. Run with
//! `cargo test -p larder-log --release --test throughput -- --ignored --nocapture`
//! (set LARDER_LOG_BENCH_DIR to use another file system than /tmp).
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Instant;

use larder_io::{RealStorage, StorageRef};
use larder_log::{Log, Options};

fn run(threads: usize, per_thread: usize) {
    let base = std::env::var_os("LARDER_LOG_BENCH_DIR").map(std::path::PathBuf::from);
    let tmp = match base {
        Some(b) => tempfile::tempdir_in(b).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let storage: StorageRef = Arc::new(RealStorage::new());
    let options = Options { segment_bytes: 64 << 20, max_segments: 8, ..Options::default() };
    let log = Arc::new(Log::open(storage, tmp.path(), options, 0, |_, _: &[u8]| Ok::<(), std::io::Error>(())).unwrap());
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let log = log.clone();
            std::thread::spawn(move || {
                for _ in 0..per_thread {
                    log.append(vec![0x5a; 4096]).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let s = log.stats();
    let n = (threads * per_thread) as f64;
    println!(
        "{threads} thread(s): {n} records in {secs:.2} s = {:.0} records/s, {:.1} MB/s; {} groups ({:.1} records/group), \
         {} syncs, {:.0} us/sync",
        n / secs,
        n * 4096.0 / secs / 1e6,
        s.groups,
        s.average_group_records(),
        s.syncs,
        s.sync_micros as f64 / s.syncs.max(1) as f64
    );
}

#[test]
#[ignore = "measures the real disk; run by hand"]
fn append_throughput_1_and_8_threads() {
    run(1, 2000);
    run(8, 1000);
    run(1, 2000);
}
