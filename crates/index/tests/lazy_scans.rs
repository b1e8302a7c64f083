//! Scans over many runs position a run only once they reach its keys:
//! over runs of disjoint key ranges a scan of a few entries reads the
//! blocks of the run it starts in, not of every run past its start
//! (counted by the block cache); and scans in both directions, bounded
//! and not, over runs that are disjoint, overlapping or nested, with
//! deletes, range deletes and counter merges, merged or held back, agree
//! with a model.

#![allow(clippy::unwrap_used)]

mod common;

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use common::{tiny_options, Model};
use larder_index::{CounterOperator, Index, Options, WriteBatch};
use larder_io::{SimStorage, StorageRef};
use proptest::prelude::*;

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// Options holding back merges (`runs` level-0 runs stay), runs read
/// through the block cache so every block a scan loads is counted.
fn held_back(runs: usize) -> Options {
    Options {
        memtable_size_bytes: 1 << 20,
        l0_slowdown_runs: runs + 8,
        l0_stop_runs: runs + 16,
        merge_fanout: runs + 8,
        max_open_runs: runs + 8,
        map_runs: false,
        ..tiny_options(false)
    }
}

fn open(options: Options) -> Index {
    let storage: StorageRef = Arc::new(SimStorage::new(11));
    Index::open(storage, Path::new("/db/index"), options).unwrap()
}

/// Blocks loaded through the block cache so far.
fn blocks_loaded(index: &Index) -> u64 {
    let s = index.stats();
    s.block_cache_hits + s.block_cache_misses
}

#[test]
fn a_short_scan_over_disjoint_runs_reads_only_the_runs_it_reaches() {
    const RUNS: u32 = 12;
    let index = open(held_back(RUNS as usize));
    let value = vec![7u8; 40];
    for run in 0..RUNS {
        let mut batch = WriteBatch::new();
        for i in run * 100..run * 100 + 100 {
            batch.put(key(i), &value);
        }
        index.write(u64::from(run) + 1, &batch).unwrap();
        index.flush().unwrap();
    }
    assert_eq!(index.stats().runs, u64::from(RUNS), "{:?}", index.stats().runs_per_level);

    // Forward from the middle of run 3, unbounded: 5 entries lie in run 3.
    let before = blocks_loaded(&index);
    let got: Vec<_> = index.range(Bound::Included(&key(310)), Bound::Unbounded, true).unwrap().take(5).collect();
    let got: Vec<Vec<u8>> = got.into_iter().map(|r| r.unwrap().0).collect();
    assert_eq!(got, (310..315).map(key).collect::<Vec<_>>());
    let forward = blocks_loaded(&index) - before;

    // Backward from the middle of run 3, unbounded below.
    let before = blocks_loaded(&index);
    let got: Vec<_> = index.range(Bound::Unbounded, Bound::Included(&key(390)), false).unwrap().take(5).collect();
    let got: Vec<Vec<u8>> = got.into_iter().map(|r| r.unwrap().0).collect();
    assert_eq!(got, (386..391).rev().map(key).collect::<Vec<_>>());
    let backward = blocks_loaded(&index) - before;

    // A block holds a few entries of 48 bytes (256-byte blocks): 5 entries
    // span at most 3 blocks of run 3. Positioning every run past the start
    // would load one block in each of 9 (forward) or 4 (backward) runs.
    assert!(forward <= 3, "forward scan loaded {forward} blocks");
    assert!(backward <= 3, "backward scan loaded {backward} blocks");

    // A scan crossing from run 3 into run 4 reaches run 4 and reads it.
    let got: Vec<Vec<u8>> = index
        .range(Bound::Excluded(&key(395)), Bound::Unbounded, true)
        .unwrap()
        .take(10)
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(got, (396..406).map(key).collect::<Vec<_>>());
    let got: Vec<Vec<u8>> = index
        .range(Bound::Unbounded, Bound::Excluded(&key(404)), false)
        .unwrap()
        .take(10)
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(got, (394..404).rev().map(key).collect::<Vec<_>>());
    // The whole index, both ways, from unbounded ends.
    let all: Vec<Vec<u8>> = index.iter(true).unwrap().map(|r| r.unwrap().0).collect();
    assert_eq!(all, (0..RUNS * 100).map(key).collect::<Vec<_>>());
    let all: Vec<Vec<u8>> = index.iter(false).unwrap().map(|r| r.unwrap().0).collect();
    assert_eq!(all, (0..RUNS * 100).rev().map(key).collect::<Vec<_>>());
}

#[derive(Clone, Debug)]
enum Write {
    Put(u32, u8),
    Delete(u32),
    DeleteRange(u32, u32),
    Merge(u32, i64),
}

/// A flush's writes: keys drawn from `[low, low + span)`, so runs may be
/// disjoint, overlap, or lie one inside another.
fn flush_strategy() -> impl Strategy<Value = Vec<Write>> {
    (0u32..600, 1u32..200).prop_flat_map(|(low, span)| {
        let k = move || low..low + span;
        prop::collection::vec(
            prop_oneof![
                6 => (k(), any::<u8>()).prop_map(|(k, v)| Write::Put(k, v)),
                2 => k().prop_map(Write::Delete),
                1 => (k(), 0u32..20).prop_map(|(a, n)| Write::DeleteRange(a, a + n)),
                1 => (k(), -3i64..4).prop_map(|(k, d)| Write::Merge(k, d)),
            ],
            1..60,
        )
    })
}

#[derive(Clone, Debug)]
struct Scan {
    start: Bound<u32>,
    end: Bound<u32>,
    forward: bool,
    take: usize,
}

fn bound() -> impl Strategy<Value = Bound<u32>> {
    prop_oneof![
        1 => Just(Bound::Unbounded),
        2 => (0u32..820).prop_map(Bound::Included),
        2 => (0u32..820).prop_map(Bound::Excluded),
    ]
}

fn scan_strategy() -> impl Strategy<Value = Scan> {
    (bound(), bound(), any::<bool>(), 1usize..150).prop_map(|(start, end, forward, take)| Scan {
        start,
        end,
        forward,
        take,
    })
}

fn key_bound(b: &Bound<u32>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(i) => Bound::Included(key(*i)),
        Bound::Excluded(i) => Bound::Excluded(key(*i)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn as_slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn check_scans(index: &Index, model: &Model, scans: &[Scan]) -> Result<(), TestCaseError> {
    for s in scans {
        let (start, end) = (key_bound(&s.start), key_bound(&s.end));
        let want: Vec<_> = model.range(as_slice(&start), as_slice(&end), s.forward).into_iter().take(s.take).collect();
        let got: Vec<_> = index
            .range(as_slice(&start), as_slice(&end), s.forward)
            .unwrap()
            .take(s.take)
            .collect::<Result<_, _>>()
            .unwrap();
        prop_assert_eq!(got, want, "{:?}", s);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Scans over level-0 runs held back from merging (one per flush), and
    /// over the same after merges, agree with the model.
    #[test]
    fn scans_over_many_runs_agree_with_the_model(
        flushes in prop::collection::vec(flush_strategy(), 1..16),
        scans in prop::collection::vec(scan_strategy(), 1..24),
        merge_after in any::<bool>(),
    ) {
        let index = open(held_back(16));
        let mut model = Model::default();
        for (seq, writes) in flushes.iter().enumerate() {
            let mut batch = WriteBatch::new();
            for w in writes {
                match *w {
                    // Counters live at keys ending in 9, values elsewhere
                    // (a counter's operand cannot apply to any value).
                    Write::Put(k, v) => {
                        let k = if k % 10 == 9 { k - 1 } else { k };
                        let value = vec![v; 1 + usize::from(v % 48)];
                        batch.put(key(k), &value);
                        model.put(&key(k), &value);
                    }
                    Write::Delete(k) => {
                        batch.delete(key(k));
                        model.delete(&key(k));
                    }
                    Write::DeleteRange(a, b) => {
                        batch.delete_range(key(a), key(b));
                        model.delete_range(&key(a), &key(b));
                    }
                    Write::Merge(k, d) => {
                        let k = k - k % 10 + 9;
                        batch.merge(CounterOperator::NAME, key(k), CounterOperator::operand(d));
                        model.merge(&key(k), d);
                    }
                }
            }
            index.write(seq as u64 + 1, &batch).unwrap();
            // The last flush's writes stay in the memtable.
            if seq + 1 < flushes.len() {
                index.flush().unwrap();
            }
        }
        check_scans(&index, &model, &scans)?;
        if merge_after {
            index.compact_all().unwrap();
            check_scans(&index, &model, &scans)?;
        }
    }
}

/// Keys whose first 16 bytes are all 0xff or all 0x00 have the head the
/// merge gives a used-up source in one direction: spread over runs and
/// the memtable, with sources used up before them, scans in both
/// directions still yield every one of them once, in order.
#[test]
fn keys_with_a_used_up_sources_head_are_merged_in_both_directions() {
    let index = open(held_back(4));
    let mut model = std::collections::BTreeMap::new();
    let ends: [Vec<u8>; 2] = [vec![0xff; 16], vec![0x00; 16]];
    let mut seq = 0;
    // Three runs and a memtable; each source's own keys stop (the
    // source is used up) at a different place among the others'.
    for source in 0u8..4 {
        let mut batch = WriteBatch::new();
        for end in &ends {
            for suffix in 0u8..6 {
                if suffix % 4 == source || suffix == source + 2 {
                    let mut k = end.clone();
                    if suffix > 0 {
                        k.push(suffix);
                    }
                    let value = vec![source, suffix];
                    batch.put(&k, &value);
                    model.insert(k, value);
                }
            }
        }
        batch.put([b'm', source], [source]);
        model.insert(vec![b'm', source], vec![source]);
        seq += 1;
        index.write(seq, &batch).unwrap();
        if source < 3 {
            index.flush().unwrap();
        }
    }
    let pairs = |forward: bool| -> Vec<(Vec<u8>, Vec<u8>)> {
        index.range(Bound::Unbounded, Bound::Unbounded, forward).unwrap().map(|r| r.unwrap()).collect()
    };
    let want: Vec<_> = model.clone().into_iter().collect();
    assert_eq!(pairs(true), want);
    assert_eq!(pairs(false), want.iter().rev().cloned().collect::<Vec<_>>());
    for end in &ends {
        let got: Vec<_> = index.prefix(end, true).unwrap().map(|r| r.unwrap()).collect();
        let want: Vec<_> =
            model.iter().filter(|(k, _)| k.starts_with(end)).map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(got, want);
        let got: Vec<_> = index.prefix(end, false).unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(got, want.into_iter().rev().collect::<Vec<_>>());
    }
}
