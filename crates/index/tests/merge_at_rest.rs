//! Merges at rest: once writes stop, each level's runs are merged into one
//! run of that level (`Options::merge_at_rest`, `Index::merge_levels`),
//! and the index still shows every entry, deletion and range deletion.

#![allow(clippy::unwrap_used)]

mod common;

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{tiny_options, Model};
use larder_index::{Index, Options, WriteBatch};
use larder_io::{SimStorage, StorageRef};

/// Fanout 4, so flushes leave several runs in two levels.
fn options(background: bool) -> Options {
    Options { merge_fanout: 4, l0_slowdown_runs: 8, l0_stop_runs: 12, ..tiny_options(background) }
}

/// Batches of puts, deletions and range deletions over 300 keys, with the
/// model they leave.
fn write(index: &Index, batches: u64) -> Model {
    let mut model = Model::default();
    for seq in 1..=batches {
        let mut b = WriteBatch::new();
        for j in 0..8 {
            let k = format!("k{:03}", (seq * 37 + j * 101) % 300).into_bytes();
            if (seq + j) % 11 == 0 {
                model.delete(&k);
                b.delete(k);
            } else {
                let v = vec![(seq + j) as u8; 40];
                model.put(&k, &v);
                b.put(k, v);
            }
        }
        if seq % 50 == 0 {
            let (a, z) = (format!("k{:03}", seq % 300).into_bytes(), format!("k{:03}", seq % 300 + 9).into_bytes());
            model.delete_range(&a, &z);
            b.delete_range(a, z);
        }
        index.write(seq, &b).unwrap();
    }
    index.flush().unwrap();
    model
}

fn check(index: &Index, model: &Model) {
    let got: Vec<_> = index.iter(true).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(got, model.range(Bound::Unbounded, Bound::Unbounded, true));
    for i in 0..300 {
        let k = format!("k{i:03}").into_bytes();
        assert_eq!(index.get(&k).unwrap(), model.map.get(&k).cloned(), "key {i}");
    }
}

fn open(sim: &SimStorage, background: bool) -> Index {
    let storage: StorageRef = Arc::new(sim.clone());
    Index::open(storage, Path::new("/db/index"), options(background)).unwrap()
}

#[test]
fn merge_levels_leaves_one_run_per_level_and_every_entry() {
    let sim = SimStorage::new(3);
    let index = open(&sim, false);
    let model = write(&index, 600);
    let before = index.stats().runs_per_level;
    assert!(before.iter().any(|&n| n >= 2), "no level to merge: {before:?}");
    assert!(before.iter().filter(|&&n| n > 0).count() >= 2, "one level only: {before:?}");
    index.merge_levels().unwrap();
    let after = index.stats().runs_per_level;
    assert!(after.iter().all(|&n| n <= 1), "{after:?}");
    assert_eq!(after.iter().filter(|&&n| n > 0).count(), before.iter().filter(|&&n| n > 0).count());
    check(&index, &model);
    drop(index);
    check(&open(&sim, false), &model);
}

#[test]
fn the_mergers_merge_each_level_once_writes_stop() {
    let sim = SimStorage::new(4);
    let index = open(&sim, true);
    let model = write(&index, 600);
    // Polls the mergers' outcome; the deadline only bounds a failure.
    let deadline = Instant::now() + Duration::from_secs(60);
    while index.stats().runs_per_level.iter().any(|&n| n > 1) {
        assert!(Instant::now() < deadline, "levels not merged at rest: {:?}", index.stats().runs_per_level);
        std::thread::sleep(Duration::from_millis(5));
    }
    check(&index, &model);
    drop(index);
    check(&open(&sim, false), &model);
}

/// Holds merges at rest (their thread is named `larder-rest-merge`) in a
/// merge operator: at their first application until `go` is set (the
/// test then knows one is under way), and at their 4,096th and later
/// applications until `done` is set, standing in for a merge at rest
/// that the machine leaves little CPU (it runs at nice 19).
#[derive(Default)]
struct HoldRestMerges {
    state: std::sync::Mutex<Hold>,
    changed: std::sync::Condvar,
}

#[derive(Default)]
struct Hold {
    applied: u64,
    entered: bool,
    go: bool,
    done: bool,
}

impl HoldRestMerges {
    fn set(&self, f: impl FnOnce(&mut Hold)) {
        f(&mut self.state.lock().unwrap());
        self.changed.notify_all();
    }

    /// Waits until `ready` holds; false if `limit` passed first (the
    /// limit only bounds a failure).
    fn wait(&self, limit: Duration, ready: impl Fn(&Hold) -> bool) -> bool {
        let state = self.state.lock().unwrap();
        let (state, _) = self.changed.wait_timeout_while(state, limit, |s| !ready(s)).unwrap();
        ready(&state)
    }
}

impl larder_index::MergeOperator for HoldRestMerges {
    fn name(&self) -> &str {
        "append"
    }

    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Result<Option<Vec<u8>>, String> {
        if std::thread::current().name() == Some("larder-rest-merge") {
            let mut state = self.state.lock().unwrap();
            state.applied += 1;
            if state.applied == 1 {
                state.entered = true;
                self.changed.notify_all();
                drop(self.changed.wait_while(state, |s| !s.go).unwrap());
            } else if state.applied >= 4096 {
                drop(self.changed.wait_while(state, |s| !s.done).unwrap());
            }
        }
        let mut value = existing.unwrap_or_default().to_vec();
        for o in operands {
            value.extend_from_slice(o);
        }
        Ok(Some(value))
    }
}

/// A merge at rest of level 0 holds every run of that level. Writes that
/// resume meanwhile fill level 0 (no merge can take its oldest runs) up
/// to `l0_stop_runs`, where writers wait; they must not wait for the merge
/// at rest, which runs at the lowest priority and may take long on a busy
/// machine: it gives way, and a merge at normal priority makes room.
#[test]
fn writers_stopped_by_level_0_do_not_wait_for_a_merge_at_rest_of_it() {
    let hold = Arc::new(HoldRestMerges::default());
    let storage: StorageRef = Arc::new(SimStorage::new(5));
    let options = Options {
        memtable_size_bytes: 16 << 20,
        merge_fanout: 4,
        l0_slowdown_runs: 4,
        l0_stop_runs: 5,
        merge_at_rest: true,
        merge_operators: vec![hold.clone()],
        ..tiny_options(true)
    };
    let index = Arc::new(Index::open(storage, Path::new("/db/index"), options).unwrap());
    let key = |i: u32| format!("k{i:05}").into_bytes();
    let mut seq = 0;
    let mut next = || {
        seq += 1;
        seq
    };
    // Two runs in level 0, every key of the older merged by the newer: a
    // merge at rest of level 0 applies the operator at each key.
    for round in 0..2 {
        for chunk in (0..5_000).collect::<Vec<u32>>().chunks(500) {
            let mut b = WriteBatch::new();
            for &i in chunk {
                if round == 0 {
                    b.put(key(i), b"base");
                } else {
                    b.merge("append", key(i), b"+");
                }
            }
            index.write(next(), &b).unwrap();
        }
        index.flush().unwrap();
    }
    assert!(hold.wait(Duration::from_secs(60), |s| s.entered), "no merge at rest of level 0 began");
    // Writes resume: level 0 reaches l0_stop_runs under the merge at rest.
    for i in 0..3u32 {
        index.write(next(), WriteBatch::new().put(format!("new{i}"), b"v")).unwrap();
        index.flush().unwrap();
    }
    assert_eq!(index.stats().runs_per_level.first(), Some(&5));
    hold.set(|s| s.go = true);
    let (wrote, written) = std::sync::mpsc::channel();
    let writer = {
        let (index, seq) = (index.clone(), next());
        std::thread::spawn(move || {
            let r = index.write(seq, WriteBatch::new().put(b"last", b"v"));
            let _ = wrote.send(());
            r
        })
    };
    let outcome = written.recv_timeout(Duration::from_secs(30));
    // Lets the held merge at rest go on, so the index can close.
    hold.set(|s| s.done = true);
    writer.join().unwrap().unwrap();
    assert!(outcome.is_ok(), "the writer waited for the merge at rest ({:?})", index.stats().runs_per_level);
    for i in (0..5_000).step_by(997) {
        assert_eq!(index.get(&key(i)).unwrap().as_deref(), Some(&b"base+"[..]), "key {i}");
    }
    assert_eq!(index.get(b"last").unwrap().as_deref(), Some(&b"v"[..]));
}
