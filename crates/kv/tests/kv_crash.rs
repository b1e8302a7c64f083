//! Crash consistency through the KV API on the simulated storage: a
//! workload of durable puts (inline and in container extents), deletes
//! (whose space is then reused) and batches, crashed at every write of a
//! bounded run (and at sampled points further on) in every crash mode.
//! After reopen: the state is exactly the state after some prefix of the
//! operations that includes every acknowledged one (so no acknowledged
//! write is lost, and no batch is half there), and deleting everything
//! leaves no space referenced. Also: a failed sync poisons the store.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::recorded::{self, State};
use larder_io::sim::{CrashMode, SimFault, SimOp};
use larder_io::SimStorage;
use larder_kv::{Durability, Kv, KvBatch, KvError};

/// Operation `i` of the workload: deterministic, mixing sizes so both write
/// paths run, and deleting so freed extents are reused. `model` gets the
/// operation's effect first (an unacknowledged operation may survive).
fn apply(kv: &Kv, i: u64, model: &mut State) -> Result<(), KvError> {
    let key = |n: u64| format!("d{}/k{}", n % 3, n % 7).into_bytes();
    let value = |n: u64| {
        let len = if n.is_multiple_of(3) { 9_000 + (n as usize % 5) * 1000 } else { 100 + n as usize };
        vec![n as u8; len]
    };
    match i % 5 {
        0..=2 => {
            model.insert(key(i), value(i));
            kv.put("b", key(i), &value(i), Durability::Durable)?;
        }
        3 => {
            model.remove(&key(i + 1));
            kv.delete("b", key(i + 1), Durability::Durable)?;
        }
        _ => {
            // A batch whose three values carry one tag: all or none.
            let mut b = KvBatch::new();
            for j in 0..3 {
                let k = format!("batch/{j}").into_bytes();
                b.put(&k, value(i));
                model.insert(k, value(i));
            }
            kv.write_batch("b", &b, Durability::Durable)?;
        }
    }
    Ok(())
}

const OPS: usize = 100;

/// Runs the workload; `history[i]` is the state after `i` operations.
/// Returns how many were acknowledged.
fn workload(sim: &SimStorage, history: &mut Vec<State>) -> usize {
    recorded::run(sim, OPS, history, |kv, i, model| apply(kv, i as u64, model))
}

fn check(image: &SimStorage, history: &[State], acked: usize, what: &str) {
    let Some((kv, got)) = recorded::reopen_as_prefix(image, history, acked, what) else { return };
    // The store works on, and deleting everything frees all space.
    kv.put("b", "after", b"x", Durability::Durable).unwrap();
    for k in got.keys().chain([&b"after".to_vec()]) {
        assert!(kv.delete("b", k, Durability::Durable).unwrap(), "{what}: delete {k:?}");
    }
    assert!(kv.store().used_extents().unwrap().is_empty(), "{what}: space still referenced");
}

#[test]
fn a_crash_at_any_write_keeps_every_acknowledged_operation() {
    let probe = SimStorage::new(1);
    let acked = workload(&probe, &mut Vec::new());
    assert_eq!(acked, OPS);
    let writes = probe.counters().writes;
    assert!(writes > 50, "the probe made only {writes} writes");
    recorded::crash_after_each_write((0..writes).filter(|k| *k < 120 || k % 11 == 0), workload, check);
}

#[test]
fn a_crash_at_any_sync_keeps_every_acknowledged_operation() {
    let probe = SimStorage::new(2);
    assert_eq!(workload(&probe, &mut Vec::new()), OPS);
    let syncs = probe.counters().syncs;
    for k in 0..syncs {
        let sim = SimStorage::new(100 + k);
        sim.set_unordered_dir_ops(true);
        sim.crash_after_syncs(k);
        let mut history = Vec::new();
        let acked = workload(&sim, &mut history);
        check(&sim.crash_with(CrashMode::Random), &history, acked, &format!("crash after sync {k}"));
    }
}

#[test]
fn a_failed_sync_poisons_the_store_and_a_reopen_recovers() {
    let probe = SimStorage::new(3);
    assert_eq!(workload(&probe, &mut Vec::new()), OPS);
    let syncs = probe.counters().syncs;
    for n in (syncs / 4..syncs).step_by((syncs / 8).max(1) as usize) {
        let sim = SimStorage::new(3);
        sim.fail_nth(SimOp::SyncData, n, SimFault::Eio);
        let mut history = Vec::new();
        let acked = workload(&sim, &mut history);
        assert!(acked < OPS, "sync {n} failed but every operation was acknowledged");
        // The open store refuses writes and says why; the image recovers.
        check(&sim.crash_with(CrashMode::DropAllPending), &history, acked, &format!("EIO at sync {n}"));
    }
}

#[test]
fn after_a_failed_sync_writes_are_refused_with_the_reason() {
    let sim = SimStorage::new(4);
    let kv = Kv::create_with(Arc::new(sim.clone()), Path::new(common::DIR), common::options()).unwrap();
    kv.create_bucket("b").unwrap();
    kv.put("b", "k", b"v", Durability::Durable).unwrap();
    sim.fail_nth(SimOp::SyncData, 1, SimFault::Eio);
    assert!(kv.put("b", "k2", b"v", Durability::Durable).is_err());
    let again = kv.put("b", "k3", b"v", Durability::Durable).unwrap_err().to_string();
    assert!(again.contains("poison") || again.contains("failed sync"), "refusal does not say why: {again}");
    // Reads of what was durable still work; a reopen recovers.
    assert_eq!(kv.get("b", "k").unwrap().as_deref(), Some(&b"v"[..]));
    drop(kv);
    let kv =
        Kv::open_with(Arc::new(sim.crash_with(CrashMode::DropAllPending)), Path::new(common::DIR), common::options())
            .unwrap();
    assert_eq!(kv.get("b", "k").unwrap().as_deref(), Some(&b"v"[..]));
    kv.put("b", "k4", b"v", Durability::Durable).unwrap();
}

#[test]
fn the_workload_wraps_the_log_several_times() {
    let sim = SimStorage::new(5);
    let mut history = Vec::new();
    assert_eq!(workload(&sim, &mut history), OPS);
    let segments = sim.file_names().into_iter().filter(|p| p.to_string_lossy().ends_with(".seg")).count();
    let written = sim.counters().bytes_written;
    // Four segments of 64 KiB at most, and several times that written.
    assert!(segments <= 4, "{segments} segments");
    assert!(written > 3 * 4 * (64 << 10), "only {written} bytes written");
}
