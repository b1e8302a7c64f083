//! A bulk load on the simulated storage: two small flushed runs, then
//! runs ingested one after another, each far larger. The small runs do
//! not fill level 0 (the merge policy waits for four large runs), so the
//! merge comes after the fourth ingest and takes all six runs; the fourth
//! ingest and that merge are crashed at every write, sync and namespace
//! operation they make, in every crash mode, and the reopened index must
//! show exactly the model at its durable sequence number, never below what
//! was acknowledged durable.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{tiny_options, Model};
use larder_index::{Index, Options, WriteBatch};
use larder_io::sim::CrashMode;
use larder_io::{SimStorage, Storage, StorageRef};

const DIR: &str = "/db/index";
/// Keys per ingested batch (each a run about a hundred times the small run).
const KEYS_PER_INGEST: usize = 300;

fn options() -> Options {
    Options {
        memtable_size_bytes: 1 << 20,
        merge_fanout: 4,
        l0_slowdown_runs: 8,
        l0_stop_runs: 12,
        ..tiny_options(false)
    }
}

fn open(sim: &SimStorage) -> larder_index::Result<Index> {
    let storage: StorageRef = Arc::new(sim.clone());
    Index::open(storage, Path::new(DIR), options())
}

fn run_files(sim: &SimStorage) -> usize {
    sim.list_dir(Path::new(DIR)).unwrap().iter().filter(|n| n.ends_with(".run")).count()
}

/// `history[s]` is the model after sequence number `s`.
struct Load {
    history: Vec<Model>,
}

impl Load {
    /// Ingests chunk `chunk`: keys of its own (disjoint from every other
    /// chunk's, as a directory's names in sorted chunks are) and one key
    /// every chunk rewrites (as each rewrites its directory's onode).
    fn ingest(&mut self, index: &Index, chunk: u8) -> larder_index::Result<()> {
        let mut model = self.history.last().cloned().unwrap_or_default();
        let mut b = WriteBatch::new();
        for i in 0..KEYS_PER_INGEST {
            let k = format!("name-{chunk}-{i:04}").into_bytes();
            let v = vec![chunk; 40];
            model.put(&k, &v);
            b.put(k, v);
        }
        model.put(b"dir", &[chunk]);
        b.put(b"dir", vec![chunk]);
        // In the history before the try: a crash may leave it durable
        // even when the call failed.
        let seq = self.history.len() as u64;
        self.history.push(model);
        let run = index.prepare_ingest(seq, &b)?;
        index.install_ingest(run)
    }
}

/// Two small flushed runs, then three ingests: five runs on level 0 and
/// no merge.
fn prepare(sim: &SimStorage) -> (Index, Load) {
    let index = open(sim).unwrap();
    let mut load = Load { history: vec![Model::default()] };
    // Two small flushed runs, as a store's creation and a mkdir leave.
    let mut model = Model::default();
    for (seq, key) in [(1u64, &b"root"[..]), (2, b"dir")] {
        model.put(key, &[0]);
        index.write(seq, WriteBatch::new().put(key, vec![0])).unwrap();
        load.history.push(model.clone());
        index.flush().unwrap();
    }
    for chunk in 1..=3 {
        load.ingest(&index, chunk).unwrap();
    }
    (index, load)
}

/// The operation under test: the fourth ingest, then the pending work the
/// next flush runs inline (the merge of all six runs).
fn fourth_ingest_and_merge(index: &Index, load: &mut Load) -> larder_index::Result<()> {
    load.ingest(index, 4)?;
    index.flush()
}

fn check_recovered(image: &SimStorage, load: &Load, acknowledged: u64, what: &str) {
    let index = open(image).unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let d = index.durable_seq();
    assert!(d >= acknowledged, "{what}: durable seq went back from {acknowledged} to {d}");
    assert!((d as usize) < load.history.len(), "{what}: durable seq {d} beyond what was written");
    let got: Vec<_> = index.iter(true).unwrap().map(|r| r.unwrap()).collect();
    let want = load.history[d as usize].range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded, true);
    assert_eq!(got, want, "{what}: state differs from the model at durable seq {d}");
    assert_eq!(index.get(b"dir").unwrap(), want.iter().find(|(k, _)| k == b"dir").map(|(_, v)| v.clone()));
}

#[test]
fn the_small_runs_wait_and_ride_along_in_the_merge_after_the_fourth_ingest() {
    let sim = SimStorage::new(3);
    let (index, mut load) = prepare(&sim);
    assert_eq!(run_files(&sim), 5, "two small runs and three ingested ones");
    assert_eq!(index.stats().compactions, 0, "no merge before the fourth ingest");
    fourth_ingest_and_merge(&index, &mut load).unwrap();
    assert_eq!(index.stats().compactions, 1);
    assert_eq!(run_files(&sim), 1, "one merge took all six runs");
    assert_eq!(index.get(b"dir").unwrap(), Some(vec![4]));
    drop(index);
    check_recovered(&sim, &load, 6, "clean reopen");
}

#[derive(Clone, Copy, Debug)]
enum Point {
    Write,
    Sync,
    NamespaceOp,
}

#[test]
fn crash_at_every_write_and_sync_of_the_fourth_ingest_and_its_merge() {
    let seed = 7;
    let probe = SimStorage::new(seed);
    let (index, mut load) = prepare(&probe);
    let before = probe.counters();
    fourth_ingest_and_merge(&index, &mut load).unwrap();
    let after = probe.counters();
    drop(index);
    let writes = after.writes - before.writes;
    let syncs = (after.syncs + after.dir_syncs) - (before.syncs + before.dir_syncs);
    let names = after.namespace_ops - before.namespace_ops;
    assert!(writes >= 4 && syncs >= 4, "probe saw {writes} writes and {syncs} syncs");

    let mut points = Vec::new();
    points.extend((0..=writes).map(|k| (Point::Write, k)));
    points.extend((0..=syncs).map(|k| (Point::Sync, k)));
    points.extend((1..=names).map(|k| (Point::NamespaceOp, k)));
    for (point, k) in points {
        for (mi, mode) in
            [CrashMode::DropAllPending, CrashMode::KeepAllPending, CrashMode::Random].into_iter().enumerate()
        {
            let sim = SimStorage::new(seed + mi as u64);
            sim.set_unordered_dir_ops(true);
            let (index, mut load) = prepare(&sim);
            let mut acknowledged = index.durable_seq();
            match point {
                Point::Write => sim.crash_after_writes(k),
                Point::Sync => sim.crash_after_syncs(k),
                Point::NamespaceOp => sim.crash_after_namespace_ops(k),
            }
            let ingested = load.ingest(&index, 4);
            if ingested.is_ok() {
                acknowledged = index.durable_seq();
                if index.flush().is_ok() {
                    acknowledged = index.durable_seq();
                }
            }
            drop(index);
            let image = sim.crash_with(mode);
            check_recovered(&image, &load, acknowledged, &format!("crash after {k} {point:?}s ({mode:?})"));
        }
    }
}
