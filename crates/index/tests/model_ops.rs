//! Property test: random sequences of puts, deletes, range deletes, counter
//! merges, batches, flushes, merges, reopens (clean and crash-like),
//! snapshots, scans in both directions and multi-gets, checked against a BTreeMap model
//! after every step. Runs on the simulated storage with tiny memtables so
//! flushes and merges happen every few operations, both inline
//! (deterministic) and on background threads.

#![allow(clippy::unwrap_used)]

mod common;

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use common::{tiny_options, Model};
use larder_index::{Index, WriteBatch};
use larder_io::{SimStorage, StorageRef};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Write {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    DeleteRange(Vec<u8>, Vec<u8>),
    Merge(Vec<u8>, i64),
}

#[derive(Clone, Debug)]
enum Step {
    Write(Write),
    Batch(Vec<Write>),
    /// A batch written as a run of its own (prepare, then install).
    Ingest(Vec<Write>),
    /// A batch prepared as a run, then dropped: nothing changes.
    AbandonIngest(Vec<Write>),
    Get(Vec<u8>),
    /// A multi-get of keys in any order, repeats allowed.
    GetMany(Vec<Vec<u8>>),
    Range(Bound<Vec<u8>>, Bound<Vec<u8>>, bool),
    Prefix(Vec<u8>, bool),
    Snapshot,
    CheckSnapshot(usize),
    Flush,
    CompactAll,
    Reopen,
    DropAndReopen,
}

fn plain_key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(vec![b'a', b'b', b'c', 0xff]), 1..4)
}

fn counter_key() -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(vec![b"m1".to_vec(), b"m2".to_vec(), b"m3".to_vec()])
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        6 => (plain_key(), prop::collection::vec(any::<u8>(), 0..40)).prop_map(|(k, v)| Write::Put(k, v)),
        2 => (counter_key(), any::<i8>()).prop_map(|(k, v)| Write::Put(k, i64::from(v).to_le_bytes().to_vec())),
        3 => plain_key().prop_map(Write::Delete),
        1 => counter_key().prop_map(Write::Delete),
        1 => (plain_key(), plain_key()).prop_map(|(a, b)| Write::DeleteRange(a, b)),
        3 => (counter_key(), -3i64..4).prop_map(|(k, d)| Write::Merge(k, d)),
    ]
}

fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![plain_key().prop_map(Bound::Included), plain_key().prop_map(Bound::Excluded), Just(Bound::Unbounded),]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        30 => write().prop_map(Step::Write),
        5 => prop::collection::vec(write(), 0..6).prop_map(Step::Batch),
        3 => prop::collection::vec(write(), 0..8).prop_map(Step::Ingest),
        1 => prop::collection::vec(write(), 1..4).prop_map(Step::AbandonIngest),
        8 => prop_oneof![plain_key(), counter_key()].prop_map(Step::Get),
        4 => prop::collection::vec(prop_oneof![plain_key(), counter_key()], 0..12).prop_map(Step::GetMany),
        4 => (bound(), bound(), any::<bool>()).prop_map(|(a, b, f)| Step::Range(a, b, f)),
        2 => (prop::collection::vec(prop::sample::select(vec![b'a', b'b', b'm']), 0..2), any::<bool>()).prop_map(|(p, f)| Step::Prefix(p, f)),
        2 => Just(Step::Snapshot),
        3 => (0usize..8).prop_map(Step::CheckSnapshot),
        2 => Just(Step::Flush),
        1 => Just(Step::CompactAll),
        1 => Just(Step::Reopen),
        1 => Just(Step::DropAndReopen),
    ]
}

fn apply_model(m: &mut Model, w: &Write) {
    match w {
        Write::Put(k, v) => m.put(k, v),
        Write::Delete(k) => m.delete(k),
        Write::DeleteRange(a, b) => m.delete_range(a, b),
        Write::Merge(k, d) => m.merge(k, *d),
    }
}

fn add_to_batch(b: &mut WriteBatch, w: &Write) {
    match w {
        Write::Put(k, v) => b.put(k.clone(), v.clone()),
        Write::Delete(k) => b.delete(k.clone()),
        Write::DeleteRange(a, c) => b.delete_range(a.clone(), c.clone()),
        Write::Merge(k, d) => {
            b.merge(larder_index::CounterOperator::NAME, k.clone(), larder_index::CounterOperator::operand(*d))
        }
    };
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(|v| v.as_slice())
}

fn collect(it: larder_index::Iter) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|r| r.unwrap()).collect()
}

/// The same through `Iter::next_into`, into buffers kept across entries
/// (each holding the previous entry's bytes when the next is read).
fn collect_into(mut it: larder_index::Iter) -> Vec<(Vec<u8>, Vec<u8>)> {
    let (mut key, mut value) = (b"stale key".to_vec(), b"stale value".to_vec());
    let mut out = Vec::new();
    while it.next_into(&mut key, &mut value).unwrap() {
        out.push((key.clone(), value.clone()));
    }
    assert!(!it.next_into(&mut key, &mut value).unwrap(), "a used-up iterator stays used up");
    out
}

/// What a get into a buffer holding other bytes returns as a value:
/// the buffer's bytes when it says found, None when it says absent (the
/// buffer then unchanged).
fn get_into(get: impl Fn(&[u8], &mut Vec<u8>) -> larder_index::Result<bool>, key: &[u8]) -> Option<Vec<u8>> {
    let junk = b"left over from an earlier read".to_vec();
    let mut out = junk.clone();
    if get(key, &mut out).unwrap() {
        Some(out)
    } else {
        assert_eq!(out, junk, "a get that finds nothing leaves the buffer");
        None
    }
}

fn run(steps: Vec<Step>, background: bool) {
    let sim = SimStorage::new(7);
    let storage: StorageRef = Arc::new(sim.clone());
    let dir = Path::new("/db/index");
    let open = || Index::open(storage.clone(), dir, tiny_options(background)).unwrap();
    let mut index = Some(open());
    let mut model = Model::default();
    // The model after each sequence number, to know the state a crash keeps.
    let mut history: Vec<Model> = vec![Model::default()];
    let mut snapshots: Vec<(larder_index::Snapshot, Model)> = Vec::new();
    for step in steps {
        let idx = index.as_ref().unwrap();
        match step {
            Step::Write(w) => {
                let mut b = WriteBatch::new();
                add_to_batch(&mut b, &w);
                idx.write(history.len() as u64, &b).unwrap();
                apply_model(&mut model, &w);
                history.push(model.clone());
            }
            Step::Batch(ws) => {
                let mut b = WriteBatch::new();
                for w in &ws {
                    add_to_batch(&mut b, w);
                    apply_model(&mut model, w);
                }
                idx.write(history.len() as u64, &b).unwrap();
                history.push(model.clone());
            }
            Step::Ingest(ws) => {
                let mut b = WriteBatch::new();
                for w in &ws {
                    add_to_batch(&mut b, w);
                    apply_model(&mut model, w);
                }
                let seq = history.len() as u64;
                let run = idx.prepare_ingest(seq, &b).unwrap();
                // Held: no write may slip in before the run is installed.
                assert!(idx.write(seq + 1, &WriteBatch::new()).is_err());
                idx.install_ingest(run).unwrap();
                history.push(model.clone());
                // Durable at once, with everything before it.
                assert_eq!(idx.durable_seq(), seq);
            }
            Step::AbandonIngest(ws) => {
                let mut b = WriteBatch::new();
                for w in &ws {
                    add_to_batch(&mut b, w);
                }
                drop(idx.prepare_ingest(history.len() as u64, &b).unwrap());
            }
            Step::Get(k) => {
                let want = model.map.get(&k).cloned();
                assert_eq!(idx.get(&k).unwrap(), want, "get {k:?}");
                assert_eq!(get_into(|k, out| idx.get_into(k, out), &k), want, "get_into {k:?}");
            }
            Step::GetMany(keys) => {
                let expected: Vec<_> = keys.iter().map(|k| model.map.get(k).cloned()).collect();
                assert_eq!(idx.get_many(&keys).unwrap(), expected, "get_many {keys:?}");
                let mut sorted = keys.clone();
                sorted.sort();
                sorted.dedup();
                let expected: Vec<_> = sorted.iter().map(|k| model.map.get(k).cloned()).collect();
                assert_eq!(idx.get_many(&sorted).unwrap(), expected, "get_many sorted {sorted:?}");
            }
            Step::Range(a, b, fwd) => {
                let got = collect(idx.range(as_ref(&a), as_ref(&b), fwd).unwrap());
                assert_eq!(got, model.range(as_ref(&a), as_ref(&b), fwd), "range {a:?}..{b:?} fwd={fwd}");
                let got = collect_into(idx.range(as_ref(&a), as_ref(&b), fwd).unwrap());
                assert_eq!(got, model.range(as_ref(&a), as_ref(&b), fwd), "next_into {a:?}..{b:?} fwd={fwd}");
            }
            Step::Prefix(p, fwd) => {
                assert_eq!(collect(idx.prefix(&p, fwd).unwrap()), model.prefix(&p, fwd), "prefix {p:?}")
            }
            Step::Snapshot => {
                snapshots.push((idx.snapshot(), model.clone()));
                if snapshots.len() > 4 {
                    snapshots.remove(0);
                }
            }
            Step::CheckSnapshot(i) => {
                if let Some((s, m)) = snapshots.get(i % snapshots.len().max(1)) {
                    assert_eq!(collect(s.iter(true).unwrap()), m.range(Bound::Unbounded, Bound::Unbounded, true));
                    assert_eq!(collect(s.iter(false).unwrap()), m.range(Bound::Unbounded, Bound::Unbounded, false));
                    for k in m.map.keys().chain(model.map.keys()) {
                        assert_eq!(s.get(k).unwrap(), m.map.get(k).cloned());
                        assert_eq!(get_into(|k, out| s.get_into(k, out), k), m.map.get(k).cloned(), "{k:?}");
                    }
                    // Every key the snapshot holds and every key since, at once.
                    let mut keys: Vec<Vec<u8>> = m.map.keys().chain(model.map.keys()).cloned().collect();
                    keys.sort();
                    keys.dedup();
                    let expected: Vec<_> = keys.iter().map(|k| m.map.get(k).cloned()).collect();
                    assert_eq!(s.get_many(&keys).unwrap(), expected, "snapshot get_many");
                }
            }
            Step::Flush => {
                idx.flush().unwrap();
                assert_eq!(idx.durable_seq(), history.len() as u64 - 1);
            }
            Step::CompactAll => {
                idx.compact_all().unwrap();
                let s = idx.stats();
                assert!(s.runs <= 1, "{} runs after compact_all", s.runs);
            }
            Step::Reopen => {
                snapshots.clear();
                index.take().unwrap().close().unwrap();
                index = Some(open());
                assert_eq!(index.as_ref().unwrap().last_seq(), history.len() as u64 - 1);
            }
            Step::DropAndReopen => {
                snapshots.clear();
                let idx = index.take().unwrap();
                // Stop the workers first so the durable point cannot move.
                drop(idx);
                let reopened = open();
                let d = reopened.durable_seq();
                assert!(d < history.len() as u64);
                // Everything after the durable point is lost, as in a crash.
                history.truncate(d as usize + 1);
                model = history[d as usize].clone();
                index = Some(reopened);
            }
        }
        // Full check after every step: both directions.
        let idx = index.as_ref().unwrap();
        let all = collect(idx.iter(true).unwrap());
        assert_eq!(all, model.range(Bound::Unbounded, Bound::Unbounded, true));
    }
    let idx = index.take().unwrap();
    let back = collect(idx.iter(false).unwrap());
    assert_eq!(back, model.range(Bound::Unbounded, Bound::Unbounded, false));
    idx.close().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn inline_flushes_and_merges_match_the_model(steps in prop::collection::vec(step(), 1..160)) {
        run(steps, false);
    }

    #[test]
    fn background_flushes_and_merges_match_the_model(steps in prop::collection::vec(step(), 1..160)) {
        run(steps, true);
    }
}
