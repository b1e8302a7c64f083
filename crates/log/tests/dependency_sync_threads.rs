//! A group's dependency files are synced on threads the log keeps, not on
//! a thread spawned per group: appends one after another use one such
//! thread, concurrent appends never more than the limit, every append's
//! data file is durable when it returns, and dropping the log ends them.
//! How: the threads named `larder-dep-sync` in /proc/self/task are
//! counted (Linux only) around appends that name data files on the
//! simulated storage. One test in this binary, so no other test's log
//! adds threads of that name.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{open, small_options};
use larder_io::{write_all_at, FileRef, OpenOptions, SimStorage, Storage};
use larder_log::{Dependency, Options};

/// Threads of this process named as the log names its dependency-sync threads.
fn dep_sync_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).ok())
        .filter(|name| name.trim_end() == "larder-dep-sync")
        .count()
}

/// [`dep_sync_threads`] once the joined threads have left the process: a
/// join returns when the kernel clears the thread's id, a little before
/// the thread leaves /proc/self/task, so the count is read again until it
/// is 0 or a generous deadline passes.
fn dep_sync_threads_after_drop() -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left = dep_sync_threads();
        if left == 0 || std::time::Instant::now() > deadline {
            return left;
        }
        std::thread::yield_now();
    }
}

fn data_file(sim: &SimStorage, i: usize) -> (PathBuf, FileRef) {
    let path = PathBuf::from(format!("/data/{i}.dat"));
    sim.create_dir_all(Path::new("/data")).unwrap();
    let file = sim.open(&path, OpenOptions::CREATE).unwrap();
    (path, file)
}

#[test]
fn dependency_syncs_run_on_kept_threads_and_end_with_the_log() {
    let sim = SimStorage::new(71);
    let options = Options { segment_bytes: 256 << 10, max_segments: 8, ..small_options() };
    let limit = options.max_groups_in_flight * 8;
    assert_eq!(dep_sync_threads(), 0);

    // One after another: each group's syncs go to the thread the first
    // one started.
    let (log, _) = open(&sim, options.clone(), 0).unwrap();
    let (path, data) = data_file(&sim, 0);
    for round in 0..100u8 {
        write_all_at(&*data, &[round; 4096], 0).unwrap();
        log.append_with(vec![round; 40], vec![Dependency::Sync(data.clone())]).unwrap();
        assert_eq!(sim.read_durable(&path).unwrap(), vec![round; 4096], "round {round}");
    }
    assert_eq!(dep_sync_threads(), 1);
    assert_eq!(log.stats().dependency_syncs, 100);
    drop(log);
    assert_eq!(dep_sync_threads_after_drop(), 0, "the log's threads end when it is dropped");

    // At once, from 6 threads, each naming its own file: never more
    // threads than the limit, and each file durable when its append returns.
    let (log, _) = open(&sim, options, 100).unwrap();
    let log = Arc::new(log);
    let appenders: Vec<_> = (1..=6)
        .map(|i| {
            let (log, sim) = (log.clone(), sim.clone());
            let (path, data) = data_file(&sim, i);
            std::thread::spawn(move || {
                for round in 0..50u8 {
                    write_all_at(&*data, &[round; 4096], 0).unwrap();
                    log.append_with(vec![round; 40], vec![Dependency::Sync(data.clone())]).unwrap();
                    assert_eq!(sim.read_durable(&path).unwrap(), vec![round; 4096], "file {i} round {round}");
                    assert!(dep_sync_threads() <= limit);
                }
            })
        })
        .collect();
    for a in appenders {
        a.join().unwrap();
    }
    let kept = dep_sync_threads();
    assert!((1..=limit).contains(&kept), "{kept} threads");
    drop(Arc::into_inner(log).unwrap());
    assert_eq!(dep_sync_threads_after_drop(), 0);
}
