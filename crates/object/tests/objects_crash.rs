//! Crash consistency of object data on the simulated storage.
//!
//! A deterministic workload of durable small (inline) and large (extent)
//! writes, each filling its range with a pattern unique to the write, runs
//! crashing after the k-th storage write (every k early on, then a sample)
//! in every crash mode. After reopening, every object must read exactly as
//! after some prefix of the writes that contains every acknowledged one
//! (so nothing unacknowledged is half-visible), the space manager must
//! agree with the extent map, and the store must accept and keep new
//! writes. Freed space is punched every few writes and the store has one
//! container, so large writes land both on written blocks (their data
//! written back, made durable by the log's flush) and in holes (their
//! container synced); making a write into a hole durable by write-back
//! alone fails this test (an acknowledged record's data is lost).
//! Also: a record whose data never reached the disk (its
//! container's sync failed) is not replayed, and a failed data sync of a
//! buffered write poisons the store.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{creation, storage, DIR};
use larder_io::sim::{CrashMode, SimFault, SimOp};
use larder_io::SimStorage;
use larder_object::meta::Kind;
use larder_object::{Durability, ObjectError, Store, StoreOptions};

const OBJECTS: usize = 3;
const WRITES: u64 = 60;

/// Object contents after each step; `None` for an object not yet created.
type State = Vec<Option<Vec<u8>>>;

fn options() -> StoreOptions {
    let mut o = common::deterministic();
    o.index.memtable_size_bytes = 16 << 10;
    o.log.max_segments = 4;
    // Freed space is punched as soon as the workload asks, so later large
    // writes land in holes (their container must be synced) as well as on
    // written blocks (written back, made durable by the log's flush).
    o.space.punch_free_threshold = 0.0;
    o.space.punch_min_bytes = 4096;
    o.space.punch_bytes_per_sec = 1 << 30;
    // One container, so the allocator must come back to punched space.
    o.space.max_containers = 1;
    o.space.spare_containers = 0;
    o
}

/// Every this many writes the workload checkpoints and punches the space
/// the index then covers.
const PUNCH_EVERY: u64 = 8;

/// Write `w`: (object, offset, data); every byte names the write.
fn write(w: u64) -> (usize, u64, Vec<u8>) {
    let obj = (w % OBJECTS as u64) as usize;
    let large = !w.is_multiple_of(3);
    let (offset, len) =
        if large { ((w * 7919) % 30_000, 3000 + (w * 104_729) % 60_000) } else { (w * 37 % 1500, 1 + w * 13 % 500) };
    let data = (0..len).map(|i| (w as u8).wrapping_mul(31).wrapping_add((i % 7) as u8)).collect();
    (obj, offset, data)
}

/// Runs the workload; `history[i]` is the state after step i. Returns the
/// steps acknowledged.
fn workload(sim: &SimStorage, history: &mut Vec<State>) -> usize {
    let mut state: State = vec![None; OBJECTS];
    history.push(state.clone());
    let Ok(store) = Store::create(storage(sim), Path::new(DIR), creation(), options()) else { return 0 };
    let mut ids = Vec::new();
    for obj in 0..OBJECTS {
        state[obj] = Some(Vec::new());
        history.push(state.clone());
        match common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable) {
            Ok(id) => ids.push(id),
            Err(_) => return history.len() - 2,
        }
    }
    for w in 0..WRITES {
        let (obj, offset, data) = write(w);
        let m = state[obj].as_mut().unwrap();
        let end = offset as usize + data.len();
        if m.len() < end {
            m.resize(end, 0);
        }
        m[offset as usize..end].copy_from_slice(&data);
        history.push(state.clone());
        if store.write(ids[obj], offset, &data, Durability::Durable).is_err() {
            return history.len() - 2;
        }
        if w % PUNCH_EVERY == PUNCH_EVERY - 1 {
            let later = std::time::Instant::now() + std::time::Duration::from_secs(3600);
            if store.checkpoint().is_err() || store.space().punch_some(later).is_err() {
                return history.len() - 1;
            }
        }
    }
    if sim.counters().writes > 0 && !sim.is_crashed() {
        // The run that was not cut short exercised both ways to make data
        // durable, and wrote into punched space.
        let (log, space) = (store.log_stats(), store.space().stats());
        assert!(log.dependency_syncs > 0 && log.dependency_write_backs > 0, "{log:?}");
        assert!(space.bytes_punched > 0, "{space:?}");
    }
    history.len() - 1
}

/// The state of the store: objects 2, 3, 4 are the workload's.
fn state(store: &Store) -> State {
    (0..OBJECTS as u64)
        .map(|i| {
            let onode = store.stat(2 + i).unwrap()?;
            let mut buf = vec![0u8; onode.size as usize];
            assert_eq!(store.read(2 + i, 0, &mut buf).unwrap(), buf.len());
            Some(buf)
        })
        .collect()
}

fn assert_clean(store: &Store, what: &str) {
    let report = store.space().verify(store.used_extents().unwrap()).unwrap();
    assert!(report.is_clean(), "{what}: {report:?}");
}

fn check(image: &SimStorage, history: &[State], acked: usize, what: &str) {
    let store = match Store::open(storage(image), Path::new(DIR), options()) {
        Ok(s) => s,
        Err(ObjectError::NotAStore { .. }) if acked == 0 => return,
        Err(e) => panic!("{what}: reopen failed: {e}"),
    };
    let got = state(&store);
    let m = (0..history.len()).rev().find(|&i| history[i] == got);
    let m = m.unwrap_or_else(|| panic!("{what}: the objects show no prefix of the writes"));
    assert!(m >= acked, "{what}: only {m} steps survive, {acked} were acknowledged");
    assert_clean(&store, what);
    // The store goes on: a new large write survives a clean reopen.
    let id = common::create_named(&store, Kind::File, 0o600, 0, 0, Durability::Durable).unwrap();
    store.write(id, 100, &[0x5Au8; 9000], Durability::Durable).unwrap();
    drop(store);
    let again = Store::open(storage(image), Path::new(DIR), options()).unwrap();
    let mut buf = vec![0u8; 9100];
    assert_eq!(again.read(id, 0, &mut buf).unwrap(), 9100, "{what}");
    assert!(buf[100..].iter().all(|&b| b == 0x5A) && buf[..100].iter().all(|&b| b == 0), "{what}");
    assert_clean(&again, what);
}

#[test]
fn a_crash_at_any_write_keeps_every_acknowledged_object_write() {
    let probe = SimStorage::new(1);
    let mut history = Vec::new();
    let acked = workload(&probe, &mut history);
    assert_eq!(acked, history.len() - 1);
    let writes = probe.counters().writes;
    assert!(writes > 80, "probe made only {writes} writes");
    // Every write for the first part, then a sample (the suite stays fast).
    let points: Vec<u64> = (0..writes).filter(|k| *k < 120 || k % 5 == 0).collect();
    for k in points {
        for mode in [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending] {
            let sim = SimStorage::new(k);
            sim.set_unordered_dir_ops(true);
            sim.crash_after_writes(k);
            let mut history = Vec::new();
            let acked = workload(&sim, &mut history);
            let image = sim.crash_with(mode);
            check(&image, &history, acked, &format!("crash after write {k} ({mode:?})"));
        }
    }
}

/// A store with one object holding 20,000 bytes of 1s in extents.
fn one_large_object(sim: &SimStorage) -> (Store, u64) {
    let store = Store::create(storage(sim), Path::new(DIR), creation(), options()).unwrap();
    let id = common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
    store.write(id, 0, &[1u8; 20_000], Durability::Durable).unwrap();
    // Fresh container space is written zeros: the data was written back,
    // made durable by the log's sync.
    let stats = store.log_stats();
    assert_eq!((stats.dependency_write_backs, stats.dependency_syncs), (1, 0));
    (store, id)
}

/// The next sync and the next write-back of each container fail (a large
/// write's data takes one or the other).
fn fail_next_container_syncs(sim: &SimStorage, store: &Store) {
    for c in store.space().container_ids() {
        let path = store.space().dir().join(larder_space::container_file_name(c));
        sim.fail_path(&path, SimOp::SyncData, SimFault::Eio);
        sim.fail_path(&path, SimOp::WriteBack, SimFault::Eio);
    }
}

#[test]
fn a_record_whose_data_never_reached_the_disk_is_not_replayed() {
    for mode in [CrashMode::KeepAllPending, CrashMode::DropAllPending, CrashMode::Random] {
        let sim = SimStorage::new(11);
        sim.set_unordered_dir_ops(true);
        let (store, id) = one_large_object(&sim);
        // The container's sync fails (dropping its pending writes for
        // good) while the log's sync of the record may succeed.
        fail_next_container_syncs(&sim, &store);
        let r = store.write(id, 4096, &[2u8; 8192], Durability::Durable);
        assert!(r.is_err(), "{mode:?}: the write must fail");
        assert!(store.write(id, 0, b"x", Durability::Durable).is_err(), "{mode:?}: the store is poisoned");
        let image = sim.crash_with(mode);
        drop(store);
        let store = Store::open(storage(&image), Path::new(DIR), options()).unwrap();
        let mut buf = vec![0u8; 20_000];
        assert_eq!(store.read(id, 0, &mut buf).unwrap(), 20_000, "{mode:?}");
        assert!(buf.iter().all(|&b| b == 1), "{mode:?}: the old content survives whole");
        assert_clean(&store, &format!("{mode:?}"));
        // New records continue after the cut.
        store.write(id, 4096, &[3u8; 8192], Durability::Durable).unwrap();
        drop(store);
        let store = Store::open(storage(&image), Path::new(DIR), options()).unwrap();
        store.read(id, 0, &mut buf).unwrap();
        assert!(buf[4096..12_288].iter().all(|&b| b == 3) && buf[..4096].iter().all(|&b| b == 1), "{mode:?}");
        assert_clean(&store, &format!("{mode:?} after a new write"));
    }
}

#[test]
fn a_failed_data_sync_of_a_buffered_write_poisons_the_store() {
    let sim = SimStorage::new(12);
    let (store, id) = one_large_object(&sim);
    fail_next_container_syncs(&sim, &store);
    // Buffered: nothing is synced yet, so the write itself succeeds; the
    // group that carries it fails on the container's sync.
    store.write(id, 0, &[2u8; 8192], Durability::Buffered).unwrap();
    assert!(store.sync().is_err(), "the sync of the write's data failed");
    match store.write(id, 0, b"y", Durability::Buffered) {
        Err(ObjectError::Poisoned { cause }) => assert!(cause.contains(".ctr"), "{cause}"),
        other => panic!("expected a poisoned store, got {other:?}"),
    }
    let image = sim.crash_with(CrashMode::KeepAllPending);
    drop(store);
    let store = Store::open(storage(&image), Path::new(DIR), options()).unwrap();
    let mut buf = vec![0u8; 20_000];
    store.read(id, 0, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 1), "the record whose data was lost is not replayed");
    assert_clean(&store, "after reopen");
}
