//! Crash consistency through the KV API under seeded random workloads.
//!
//! Each seed draws a plan of operations: puts of every size class (empty,
//! inline, around the inline limit, container extents), deletes, batches
//! mixing puts and deletes, streamed values, checkpoints (which free and
//! punch space) and syncs, each durable or buffered, on keys one to three
//! levels deep. The plan runs once to count its storage writes, then again
//! crashing at random writes and syncs in random crash modes, and
//! sometimes crashing a second time while recovering from the first, and
//! with one I/O failure injected at a random call of a random kind (short
//! write, no space, EIO on a sync, write-back, open, rename, punch,
//! directory sync or read) before a crash: the run stops at the first
//! operation that fails, after one more put, which a store whose index
//! has stopped must refuse before logging it.
//!
//! After a reopen the bucket holds exactly the state after some prefix of
//! the plan, no shorter than the last acknowledged operation (a durable
//! one that returned, or a sync that returned: a durable commit makes
//! every earlier one durable), fsck finds nothing wrong, and the store
//! keeps a new durable value across a clean reopen.
//!
//! CI runs a few seeds; `LARDER_CRASH_SEEDS=N` (and
//! `LARDER_CRASH_SEED_BASE=B`) runs N seeds from B, for a longer campaign.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use larder_io::sim::{campaign_seeds, crash_runs, CampaignShape};
use larder_io::SimStorage;
use larder_kv::{Durability, Kv, KvBatch, KvError, KvOptions};
use larder_object::ObjectError;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type State = BTreeMap<Vec<u8>, Vec<u8>>;

/// Keys never used as directory levels, so no operation conflicts.
const KEYS: [&str; 8] = ["k0", "k1", "d0/k0", "d0/k1", "d0/e/k0", "d0/e/k2", "d1/k3", "d1/f/g/k4"];

/// One planned operation; `durable` picks its durability.
#[derive(Clone, Debug)]
enum Op {
    Put {
        key: usize,
        len: usize,
        durable: bool,
    },
    Delete {
        key: usize,
        durable: bool,
    },
    /// Puts (`Some(len)`) and deletes (`None`), all or nothing.
    Batch {
        items: Vec<(usize, Option<usize>)>,
        durable: bool,
    },
    /// A value written through a stream in chunks of these sizes.
    Stream {
        key: usize,
        chunks: Vec<usize>,
        durable: bool,
    },
    Sync,
    Checkpoint,
}

/// A value length from every size class the store treats differently.
fn draw_len(rng: &mut StdRng) -> usize {
    match rng.gen_range(0..10) {
        0 => 0,
        1..=4 => rng.gen_range(1..600),
        5 | 6 => rng.gen_range(1900..2200),
        _ => rng.gen_range(4000..40_000),
    }
}

fn plan(seed: u64) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = rng.gen_range(40..90);
    (0..n)
        .map(|_| {
            let durable = rng.gen_bool(0.6);
            let key = rng.gen_range(0..KEYS.len());
            match rng.gen_range(0..20) {
                0..=8 => Op::Put { key, len: draw_len(&mut rng), durable },
                9..=11 => Op::Delete { key, durable },
                12..=14 => {
                    let items = (0..rng.gen_range(1..5))
                        .map(|_| {
                            let k = rng.gen_range(0..KEYS.len());
                            (k, rng.gen_bool(0.75).then(|| draw_len(&mut rng)))
                        })
                        .collect();
                    Op::Batch { items, durable }
                }
                15 | 16 => {
                    let chunks = (0..rng.gen_range(1..5)).map(|_| rng.gen_range(1..20_000)).collect();
                    Op::Stream { key, chunks, durable }
                }
                17 | 18 => Op::Sync,
                _ => Op::Checkpoint,
            }
        })
        .collect()
}

/// The value operation `i` writes to key `key`: unique to both, so a
/// value in the wrong place or from the wrong operation is seen.
fn value(i: usize, key: usize, len: usize) -> Vec<u8> {
    let tag = (i as u64) << 8 | key as u64;
    (0..len).map(|j| (tag.wrapping_mul(0x9E37_79B9).wrapping_add(j as u64 / 7) >> (j % 8)) as u8).collect()
}

fn durability(durable: bool) -> Durability {
    if durable {
        Durability::Durable
    } else {
        Durability::Buffered
    }
}

/// Runs operation `i`; `model` takes its effect first (an operation that
/// failed may still survive a crash). Returns whether it acknowledges
/// everything up to it as durable.
fn apply(kv: &Kv, i: usize, op: &Op, model: &mut State) -> Result<bool, Box<dyn std::error::Error>> {
    let key = |k: usize| KEYS[k].as_bytes().to_vec();
    match op {
        Op::Put { key: k, len, durable } => {
            let v = value(i, *k, *len);
            model.insert(key(*k), v.clone());
            kv.put("b", key(*k), &v, durability(*durable))?;
            Ok(*durable)
        }
        Op::Delete { key: k, durable } => {
            model.remove(&key(*k));
            kv.delete("b", key(*k), durability(*durable))?;
            Ok(*durable)
        }
        Op::Batch { items, durable } => {
            let mut batch = KvBatch::new();
            for (k, len) in items {
                match len {
                    Some(len) => {
                        let v = value(i, *k, *len);
                        model.insert(key(*k), v.clone());
                        batch.put(key(*k), v);
                    }
                    None => {
                        model.remove(&key(*k));
                        batch.delete(key(*k));
                    }
                }
            }
            kv.write_batch("b", &batch, durability(*durable))?;
            Ok(*durable)
        }
        Op::Stream { key: k, chunks, durable } => {
            let total: usize = chunks.iter().sum();
            let v = value(i, *k, total);
            model.insert(key(*k), v.clone());
            let mut w = kv.writer("b", key(*k), durability(*durable))?;
            let mut at = 0;
            for c in chunks {
                std::io::Write::write_all(&mut w, &v[at..at + c])?;
                at += c;
            }
            w.finish()?;
            Ok(*durable)
        }
        Op::Sync => {
            kv.sync()?;
            Ok(true)
        }
        Op::Checkpoint => {
            kv.store().checkpoint()?;
            Ok(false)
        }
    }
}

/// How far a run of the plan got.
struct Run {
    /// Operations acknowledged as durable.
    acked: usize,
    /// Operations that returned success.
    done: usize,
}

/// Runs `ops` on a new store; `history[i]` is the state after `i`
/// operations.
fn workload(sim: &SimStorage, o: &KvOptions, ops: &[Op], history: &mut Vec<State>) -> Run {
    let mut model = State::new();
    history.push(model.clone());
    let mut run = Run { acked: 0, done: 0 };
    let Ok(kv) = Kv::create_with(Arc::new(sim.clone()), Path::new(common::DIR), o.clone()) else {
        return run;
    };
    if kv.create_bucket("b").is_err() {
        return run;
    }
    for (i, op) in ops.iter().enumerate() {
        let result = apply(&kv, i, op, &mut model);
        history.push(model.clone());
        match result {
            Ok(durable) => {
                run.done = i + 1;
                if durable {
                    run.acked = i + 1;
                }
            }
            Err(_) => {
                // A failed call leaves the store working, or refusing
                // writes with a reason; it never panics either way. One
                // more durable put says which: the failed operation may
                // or may not survive, so the put's state is allowed with
                // it and without it.
                let after = |state: &State| {
                    let mut s = state.clone();
                    s.insert(b"after/failure".to_vec(), b"x".to_vec());
                    s
                };
                // With the failed operation or without it.
                let (without, with) = (after(&history[history.len() - 2]), after(&model));
                // An index that stopped (a flush failed) is known before
                // the put: it must be refused before anything is logged.
                let stopped = kv.store().index().poisoned().is_some();
                match kv.put("b", "after/failure", b"x", Durability::Durable) {
                    Ok(()) => {
                        history.push(without);
                        run.acked = history.len() - 1;
                        history.push(with);
                    }
                    // Logged, then the index failed under it: it may
                    // survive. Any other refusal came before the log.
                    Err(KvError::Object(ObjectError::ApplyFailed { .. })) if !stopped => {
                        history.push(without);
                        history.push(with);
                    }
                    Err(e) => assert!(
                        !stopped || !matches!(e, KvError::Object(ObjectError::ApplyFailed { .. })),
                        "op {i}: a store whose index stopped logged a put before refusing it: {e}"
                    ),
                }
                break;
            }
        }
    }
    run
}

fn fsck_clean(kv: &Kv, what: &str) {
    let report = larder_fsck::check(kv.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{what}: fsck: {report}");
}

/// Reopens `image` and checks it against the plan's `history`.
fn check(image: &SimStorage, o: &KvOptions, history: &[State], acked: usize, what: &str) {
    let kv = match Kv::open_with(Arc::new(image.clone()), Path::new(common::DIR), o.clone()) {
        Ok(kv) => kv,
        Err(KvError::Object(ObjectError::NotAStore { .. })) if acked == 0 => {
            // The creation never finished: it can run again.
            let kv = Kv::create_with(Arc::new(image.clone()), Path::new(common::DIR), o.clone());
            let kv = kv.unwrap_or_else(|e| panic!("{what}: creating the store again failed: {e}"));
            fsck_clean(&kv, what);
            return;
        }
        Err(e) => panic!("{what}: reopen failed: {e}"),
    };
    if kv.buckets().unwrap().is_empty() {
        assert_eq!(acked, 0, "{what}: the bucket is lost");
        return;
    }
    let got = common::bucket_state(&kv, "b");
    let Some(m) = (0..history.len()).rev().find(|&i| history[i] == got) else {
        let keys: Vec<_> = got.iter().map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.len())).collect();
        panic!("{what}: the state is no prefix of the plan: {keys:?}");
    };
    assert!(m >= acked, "{what}: {m} operations survive, {acked} were acknowledged");
    fsck_clean(&kv, what);
    // The store goes on: a new value outlives a clean reopen.
    let fresh = value(usize::MAX >> 8, 0, 9000);
    kv.put("b", "after/crash", &fresh, Durability::Durable).unwrap();
    drop(kv);
    let kv = Kv::open_with(Arc::new(image.clone()), Path::new(common::DIR), o.clone()).unwrap();
    assert_eq!(kv.get("b", "after/crash").unwrap().as_deref(), Some(&fresh[..]), "{what}");
    fsck_clean(&kv, what);
}

/// The runs of a seed: crashes after random writes and syncs, second
/// crashes during recovery, I/O failures then a crash.
const SHAPE: CampaignShape = CampaignShape { at_writes: 8, at_syncs: 3, in_recovery: 3, faults: 4, at_names: 2 };

fn run_seed(seed: u64, o: &KvOptions) {
    let ops = plan(seed);
    let probe = SimStorage::new(seed);
    let done = workload(&probe, o, &ops, &mut Vec::new()).done;
    assert_eq!(done, ops.len(), "seed {seed}: operation {done} failed without a crash: {:?}", ops.get(done));
    for run in crash_runs(seed, &probe.counters(), SHAPE) {
        let mut history = Vec::new();
        let acked = workload(&run.sim, o, &ops, &mut history).acked;
        let (image, what) = run.image(|image| {
            let _ = Kv::open_with(Arc::new(image.clone()), Path::new(common::DIR), o.clone());
        });
        check(&image, o, &history, acked, &what);
    }
}

#[test]
fn random_workloads_survive_random_crashes() {
    for seed in campaign_seeds(6) {
        run_seed(seed, &common::options());
    }
}

/// As a store runs: flushes, merges and checkpoints on their own threads,
/// and buffered commits synced on a timer, so a crash can also land in
/// their writes. Thread timing makes a run's writes vary: a failure names
/// its seed and crash point but may need several runs to repeat.
#[test]
fn random_workloads_survive_random_crashes_with_background_work() {
    let mut o = common::options();
    o.store.background_checkpoints = true;
    o.store.index.background_threads = true;
    o.store.log.buffered_sync_interval = Some(std::time::Duration::from_millis(1));
    for seed in campaign_seeds(6) {
        run_seed(seed, &o);
    }
}

#[test]
fn plans_reach_every_kind_of_operation() {
    // The seeds CI runs must exercise every branch of `apply`.
    let ops: Vec<Op> = campaign_seeds(6).flat_map(plan).collect();
    let kinds = [
        ops.iter().any(|o| matches!(o, Op::Put { len, .. } if *len > 4000)),
        ops.iter().any(|o| matches!(o, Op::Put { len, .. } if *len < 600)),
        ops.iter().any(|o| matches!(o, Op::Delete { .. })),
        ops.iter().any(|o| matches!(o, Op::Batch { items, .. } if items.iter().any(|i| i.1.is_none()))),
        ops.iter().any(|o| matches!(o, Op::Stream { chunks, .. } if chunks.len() > 1)),
        ops.iter().any(|o| matches!(o, Op::Sync)),
        ops.iter().any(|o| matches!(o, Op::Checkpoint)),
        ops.iter().any(|o| matches!(o, Op::Put { durable: false, .. })),
    ];
    assert!(kinds.iter().all(|k| *k), "{kinds:?}");
}
