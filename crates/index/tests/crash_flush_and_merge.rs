//! Crash consistency of flushes and merges on the simulated storage.
//!
//! How: a probe run counts the writes and syncs a flush (or a merge) makes;
//! the workload is then replayed from scratch once per crash point, with the
//! machine crashing after exactly k of those writes (or syncs), under each
//! crash mode (unsynced writes all lost, all kept, or a seeded random subset
//! with torn sectors, and any subset of the unsynced names). After each crash the index is reopened and must show
//! exactly the model's state at its durable sequence number, which may never
//! be below what was acknowledged durable before the crash. Longer random
//! workloads are crashed at sampled points the same way.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{tiny_options, Model};
use larder_index::{CounterOperator, Index, Options, WriteBatch};
use larder_io::sim::{CrashMode, SimFault, SimOp};
use larder_io::{SimStorage, StorageRef};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DIR: &str = "/db/index";

/// A deterministic workload: `history[s]` is the model after batch `s`.
struct Workload {
    history: Vec<Model>,
    rng: StdRng,
}

impl Workload {
    fn new(seed: u64) -> Self {
        Workload { history: vec![Model::default()], rng: StdRng::seed_from_u64(seed) }
    }

    /// Writes `n` random batches.
    fn write(&mut self, index: &Index, n: usize) -> larder_index::Result<()> {
        for _ in 0..n {
            let mut model = self.history.last().cloned().unwrap_or_default();
            let mut b = WriteBatch::new();
            for _ in 0..self.rng.gen_range(1..4) {
                let k = format!("k{:02}", self.rng.gen_range(0..40)).into_bytes();
                match self.rng.gen_range(0..10) {
                    0..=5 => {
                        let v = vec![self.rng.gen::<u8>(); self.rng.gen_range(0..60)];
                        model.put(&k, &v);
                        b.put(k, v);
                    }
                    6 => {
                        model.delete(&k);
                        b.delete(k);
                    }
                    7 => {
                        let end = format!("k{:02}", self.rng.gen_range(0..40)).into_bytes();
                        model.delete_range(&k, &end);
                        b.delete_range(k, end);
                    }
                    _ => {
                        let ck = format!("m{}", self.rng.gen_range(0..4)).into_bytes();
                        let d = self.rng.gen_range(-2..4);
                        model.merge(&ck, d);
                        b.merge(CounterOperator::NAME, ck, CounterOperator::operand(d));
                    }
                }
            }
            index.write(self.history.len() as u64, &b)?;
            self.history.push(model);
        }
        Ok(())
    }
}

fn open(sim: &SimStorage, options: Options) -> larder_index::Result<Index> {
    let storage: StorageRef = Arc::new(sim.clone());
    Index::open(storage, Path::new(DIR), options)
}

fn options() -> Options {
    Options { memtable_size_bytes: 1 << 20, ..tiny_options(false) }
}

/// Reopens the crashed image and checks it against the model.
fn check_recovered(image: SimStorage, w: &Workload, acknowledged_durable: u64, what: &str) {
    let index = open(&image, options()).unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let d = index.durable_seq();
    assert!(d >= acknowledged_durable, "{what}: durable seq went back from {acknowledged_durable} to {d}");
    assert!((d as usize) < w.history.len(), "{what}: durable seq {d} beyond what was written");
    let got: Vec<_> = index.iter(true).unwrap().map(|r| r.unwrap()).collect();
    let want = w.history[d as usize].range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded, true);
    assert_eq!(got, want, "{what}: state differs from the model at durable seq {d}");
    for (k, v) in &want {
        assert_eq!(index.get(k).unwrap().as_ref(), Some(v), "{what}: get {k:?}");
    }
    // Recovery is stable: a second reopen after writing on top works too.
    index.write(d + 1, WriteBatch::new().put(b"after", b"crash")).unwrap();
    index.flush().unwrap();
    drop(index);
    let again = open(&image, options()).unwrap();
    assert_eq!(again.get(b"after").unwrap().as_deref(), Some(&b"crash"[..]), "{what}: write after recovery lost");
}

/// Builds the state before the operation under test: several flushed runs
/// plus unflushed batches in the memtable.
fn prepare(sim: &SimStorage, seed: u64, options: &Options) -> (Index, Workload) {
    let index = open(sim, options.clone()).unwrap();
    let mut w = Workload::new(seed);
    for _ in 0..3 {
        w.write(&index, 25).unwrap();
        index.flush().unwrap();
    }
    w.write(&index, 25).unwrap();
    (index, w)
}

#[derive(Clone, Copy, Debug)]
enum Point {
    Write,
    Sync,
    /// The k-th directory sync fails, leaving its names unsynced, and the
    /// machine crashes after the operation returns.
    FailedDirSync,
    /// Right after the k-th create, rename or remove.
    NamespaceOp,
}

/// Crashes `op` at every write, sync and namespace operation it makes, and
/// after each of its directory syncs fails, in every mode.
fn crash_everywhere(name: &str, op: impl Fn(&Index) -> larder_index::Result<()>) {
    crash_everywhere_with(name, &options(), op);
}

/// [`crash_everywhere`] from the state `options` leave.
fn crash_everywhere_with(name: &str, options: &Options, op: impl Fn(&Index) -> larder_index::Result<()>) {
    let seed = 11;
    // Probe: how many writes and syncs does the operation make?
    let probe = SimStorage::new(seed);
    let (index, _) = prepare(&probe, seed, options);
    let before = probe.counters();
    op(&index).unwrap();
    let after = probe.counters();
    drop(index);
    let writes = after.writes - before.writes;
    let syncs = (after.syncs + after.dir_syncs) - (before.syncs + before.dir_syncs);
    let dir_syncs = after.dir_syncs - before.dir_syncs;
    let names = after.namespace_ops - before.namespace_ops;
    assert!(writes >= 2 && syncs >= 3, "{name}: probe saw {writes} writes and {syncs} syncs");

    let mut points = Vec::new();
    for k in 0..=writes {
        points.push((Point::Write, k));
    }
    for k in 0..=syncs {
        points.push((Point::Sync, k));
    }
    for k in 1..=dir_syncs {
        points.push((Point::FailedDirSync, k));
    }
    for k in 1..=names {
        points.push((Point::NamespaceOp, k));
    }
    for (point, k) in points {
        for (mi, mode) in [CrashMode::DropAllPending, CrashMode::KeepAllPending, CrashMode::Random, CrashMode::Random]
            .into_iter()
            .enumerate()
        {
            let sim = SimStorage::new(seed + mi as u64);
            sim.set_unordered_dir_ops(true);
            let (index, w) = prepare(&sim, seed, options);
            let acknowledged = index.durable_seq();
            match point {
                Point::Write => sim.crash_after_writes(k),
                Point::Sync => sim.crash_after_syncs(k),
                Point::FailedDirSync => sim.fail_nth(SimOp::SyncDir, k, SimFault::Eio),
                Point::NamespaceOp => sim.crash_after_namespace_ops(k),
            }
            let result = op(&index);
            let acknowledged = if result.is_ok() { index.durable_seq() } else { acknowledged };
            drop(index);
            let image = sim.crash_with(mode);
            check_recovered(image, &w, acknowledged, &format!("{name} crash after {k} {point:?}s ({mode:?})"));
        }
    }
}

#[test]
fn crash_at_every_write_and_sync_of_a_flush() {
    crash_everywhere("flush", |index| index.flush());
}

#[test]
fn crash_at_every_write_and_sync_of_a_merge() {
    crash_everywhere("merge", |index| index.compact_all());
}

#[test]
fn crash_at_every_write_and_sync_of_a_merge_at_rest() {
    // Fanout 4: the three flushed runs stay in level 0 for it to merge.
    let options = Options { merge_fanout: 4, l0_slowdown_runs: 8, l0_stop_runs: 12, ..options() };
    crash_everywhere_with("merge at rest", &options, |index| {
        assert_eq!(index.stats().runs_per_level, [3]);
        index.merge_levels()
    });
}

#[test]
fn crash_at_sampled_points_of_long_runs() {
    let mut rng = StdRng::seed_from_u64(5);
    for case in 0..24u64 {
        let seed = 100 + case;
        // Probe the whole run's write count.
        let run = |sim: &SimStorage, acked: &mut u64| -> (Workload, larder_index::Result<()>) {
            let mut w = Workload::new(seed);
            let index = match open(sim, tiny_options(false)) {
                Ok(i) => i,
                Err(e) => return (w, Err(e)),
            };
            let r = (|| {
                for round in 0..12 {
                    w.write(&index, 20)?;
                    if round % 3 == 2 {
                        index.flush()?;
                    }
                    *acked = index.durable_seq();
                }
                index.compact_all()?;
                *acked = index.durable_seq();
                Ok(())
            })();
            (w, r)
        };
        let probe = SimStorage::new(seed);
        let (_, r) = run(&probe, &mut 0);
        r.unwrap();
        let total = probe.counters().writes;
        let k = rng.gen_range(0..total);
        let sim = SimStorage::new(seed);
        sim.set_unordered_dir_ops(true);
        sim.crash_after_writes(k);
        let mut acked = 0;
        let (w, r) = run(&sim, &mut acked);
        assert!(r.is_err(), "case {case}: crash point {k} of {total} was not reached");
        let image = sim.crash();
        // Small memtables here, as in the run.
        let index = open(&image, tiny_options(false)).unwrap();
        let d = index.durable_seq();
        assert!(d >= acked, "case {case}: durable seq went back from {acked} to {d}");
        let got: Vec<_> = index.iter(true).unwrap().map(|r| r.unwrap()).collect();
        let want = w.history[d as usize].range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded, true);
        assert_eq!(got, want, "case {case}: crash after write {k} of {total}");
    }
}
