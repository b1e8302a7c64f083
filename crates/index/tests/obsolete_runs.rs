//! The files of runs merged away are removed once no reader holds them,
//! with background workers (where the flusher removes them) as without:
//! a snapshot taken before the merge keeps reading them, and once it is
//! dropped and the index closed only the merged run's file is left.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use larder_index::{Index, Options, WriteBatch};
use larder_io::RealStorage;

fn run_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "run"))
        .count()
}

/// Small options whose merges wait for `compact_all`.
fn options(background: bool) -> Options {
    Options { merge_fanout: 16, l0_slowdown_runs: 16, l0_stop_runs: 20, ..common::tiny_options(background) }
}

fn merged_away_runs_are_removed_once_let_go(background: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("index");
    let index = Index::open(Arc::new(RealStorage::new()), &dir, options(background)).unwrap();
    for seq in 1..=4u64 {
        let mut batch = WriteBatch::new();
        for i in 0..20u64 {
            batch.put(format!("key-{i:03}"), format!("value {seq}"));
        }
        index.write(seq, &batch).unwrap();
        index.flush().unwrap();
    }
    assert_eq!(index.stats().runs, 4);
    let before = index.snapshot();
    index.compact_all().unwrap();
    assert_eq!(index.stats().runs, 1);
    // The snapshot reads the runs merged away: their files are still there.
    assert!(run_files(&dir) > 1, "{} run files under a snapshot", run_files(&dir));
    assert_eq!(before.get(b"key-007").unwrap(), Some(b"value 4".to_vec()));
    drop(before);
    index.close().unwrap();
    assert_eq!(run_files(&dir), 1, "only the merged run's file is left");
    let index = Index::open(Arc::new(RealStorage::new()), &dir, options(background)).unwrap();
    assert_eq!(index.get(b"key-019").unwrap(), Some(b"value 4".to_vec()));
}

#[test]
fn merged_away_runs_are_removed_with_background_workers() {
    merged_away_runs_are_removed_once_let_go(true);
}

#[test]
fn merged_away_runs_are_removed_inline_without_workers() {
    merged_away_runs_are_removed_once_let_go(false);
}
