//! Transactions and object ids: ids are never reused, even across crashes
//! at any write; transactions on shared objects are isolated (no lost
//! updates, durable or buffered); a transaction sees its own writes; a
//! failing transaction writes nothing; touching an unlocked object is
//! refused.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{creation, storage, DIR};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_object::meta::{decode_onode_key, map_prefix, prefix_end, DataLocation, Kind, Map, Onode, Timestamp};
use larder_object::{Durability, ObjectError, Store, StoreOptions};

fn options(background: bool) -> StoreOptions {
    let mut o = StoreOptions { background_checkpoints: background, ..StoreOptions::default() };
    o.index.background_threads = background;
    o.index.memtable_size_bytes = 16 << 10;
    o.index.merge_fanout = 2;
    o.index.l0_slowdown_runs = 3;
    o.index.l0_stop_runs = 6;
    o.log.max_segments = 4;
    o.log.buffered_sync_interval = if background { Some(std::time::Duration::from_millis(2)) } else { None };
    o
}

fn file(size: u64) -> Onode {
    let t = Timestamp { secs: 1, nanos: 0 };
    Onode {
        kind: Kind::File,
        flags: 0,
        size,
        mode: 0o100_644,
        uid: 0,
        gid: 0,
        nlink: 1,
        generation: 1,
        atime: t,
        mtime: t,
        ctime: t,
        btime: t,
        rdev: 0,
        location: DataLocation::Extents,
        dir: None,
    }
}

fn object_ids(store: &Store) -> Vec<u64> {
    let p = map_prefix(Map::Omap);
    let end = prefix_end(&p).unwrap();
    let it = store.index().range(std::ops::Bound::Included(&p[..]), std::ops::Bound::Excluded(&end[..]), true).unwrap();
    it.map(|kv| decode_onode_key(&kv.unwrap().0).unwrap()).collect()
}

/// Creates objects one durable transaction each; returns the ids
/// acknowledged.
fn create_objects(store: &Store, n: usize) -> Vec<u64> {
    let mut acked = Vec::new();
    for _ in 0..n {
        let Ok(id) = store.allocate_object_id() else { break };
        let r = store.transact(&[id], Durability::Durable, |t| t.put_onode(id, &file(0)));
        if r.is_err() {
            break;
        }
        acked.push(id);
    }
    acked
}

#[test]
fn ids_are_never_reused_after_a_crash_at_any_write() {
    let probe = SimStorage::new(1);
    let store = Store::create(storage(&probe), Path::new(DIR), creation(), options(false)).unwrap();
    assert_eq!(create_objects(&store, 60).len(), 60);
    drop(store);
    let writes = probe.counters().writes;
    assert!(writes > 60, "the probe made only {writes} writes");
    let mut checked = 0;
    for k in (0..writes).step_by(2) {
        for mode in [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending] {
            let sim = SimStorage::new(k);
            sim.set_unordered_dir_ops(true);
            sim.crash_after_writes(k);
            let acked = match Store::create(storage(&sim), Path::new(DIR), creation(), options(false)) {
                Ok(store) => create_objects(&store, 60),
                Err(_) => Vec::new(),
            };
            let image = sim.crash_with(mode);
            let store = match Store::open(storage(&image), Path::new(DIR), options(false)) {
                Ok(s) => s,
                Err(ObjectError::NotAStore { .. }) if acked.is_empty() => continue,
                Err(e) => panic!("crash after write {k} ({mode:?}): {e}"),
            };
            let present = object_ids(&store);
            for id in &acked {
                assert!(present.contains(id), "crash after write {k} ({mode:?}): acknowledged object {id} lost");
            }
            let seen = present.iter().chain(acked.iter()).copied().max().unwrap_or(0);
            let fresh = store.allocate_object_id().unwrap();
            assert!(fresh > seen, "crash after write {k} ({mode:?}): id {fresh} reused (seen up to {seen})");
            checked += usize::from(!acked.is_empty());
        }
    }
    eprintln!("{writes} writes probed, {checked} crash images with acknowledged objects checked");
    assert!(checked > 50);
}

#[test]
fn concurrent_read_modify_write_loses_no_update() {
    let sim = SimStorage::new(2);
    let store = Arc::new(Store::create(storage(&sim), Path::new(DIR), creation(), options(true)).unwrap());
    let objects: Vec<u64> = (0..3).map(|_| store.allocate_object_id().unwrap()).collect();
    for &id in &objects {
        store.transact(&[id], Durability::Durable, |t| t.put_onode(id, &file(0))).unwrap();
    }
    let threads: Vec<_> = (0..6)
        .map(|th| {
            let (store, objects) = (store.clone(), objects.clone());
            std::thread::spawn(move || {
                for i in 0..100usize {
                    // Two objects per transaction, in varying order.
                    let a = objects[(th + i) % objects.len()];
                    let b = objects[(th + 2 * i + 1) % objects.len()];
                    let durability = if i % 3 == 0 { Durability::Durable } else { Durability::Buffered };
                    store
                        .transact(&[b, a], durability, |t| {
                            for id in if a == b { vec![a] } else { vec![a, b] } {
                                let mut o = t.onode(id)?.unwrap();
                                o.size += 1;
                                t.put_onode(id, &o)?;
                            }
                            Ok(())
                        })
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    store.sync().unwrap();
    // Count the increments each object should have received.
    let mut want = vec![0u64; objects.len()];
    for th in 0..6usize {
        for i in 0..100usize {
            let a = (th + i) % objects.len();
            let b = (th + 2 * i + 1) % objects.len();
            want[a] += 1;
            if a != b {
                want[b] += 1;
            }
        }
    }
    let got: Vec<u64> = objects
        .iter()
        .map(|&id| store.transact(&[id], Durability::Buffered, |t| Ok(t.onode(id)?.unwrap().size)).unwrap().0)
        .collect();
    assert_eq!(got, want);
}

#[test]
fn own_writes_are_seen_failures_write_nothing_and_unlocked_objects_are_refused() {
    let sim = SimStorage::new(3);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), options(false)).unwrap();
    let id = store.allocate_object_id().unwrap();
    let other = store.allocate_object_id().unwrap();
    store
        .transact(&[id], Durability::Durable, |t| {
            assert_eq!(t.onode(id)?, None);
            t.put_onode(id, &file(7))?;
            assert_eq!(t.onode(id)?.map(|o| o.size), Some(7), "a transaction sees its own write");
            t.delete_onode(id)?;
            assert_eq!(t.onode(id)?, None);
            t.put_onode(id, &file(9))
        })
        .unwrap();
    let e = store.transact(&[id], Durability::Durable, |t| t.put_onode(other, &file(1))).unwrap_err();
    assert!(matches!(e, ObjectError::NotLocked { object } if object == other), "{e}");
    let e = store
        .transact(&[id], Durability::Durable, |t| {
            t.put_onode(id, &file(100))?;
            Err::<(), _>(ObjectError::InvalidOption { name: "test", reason: "abort".into() })
        })
        .unwrap_err();
    assert!(e.to_string().contains("abort"));
    let size = store.transact(&[id], Durability::Durable, |t| Ok(t.onode(id)?.map(|o| o.size))).unwrap().0;
    assert_eq!(size, Some(9), "the failed transaction wrote nothing");
    assert!(object_ids(&store).contains(&id) && !object_ids(&store).contains(&other));
}

/// Batches enter the index when they are appended: a buffered commit is
/// readable at once without a log sync, and an index flush makes the log
/// durable through what it flushes before declaring it durable, so a
/// crash that keeps only synced bytes still has it.
#[test]
fn buffered_commits_are_visible_at_once_and_a_flush_syncs_the_log_first() {
    let sim = SimStorage::new(41);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), common::deterministic()).unwrap();
    let id = common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
    let (_, lsn) = store.transact(&[id], Durability::Buffered, |t| t.write(id, 0, b"buffered")).unwrap();
    assert!(store.durable_lsn() < lsn, "a buffered commit must not have synced");
    assert_eq!(store.read_to_end(id).unwrap().as_deref(), Some(&b"buffered"[..]));
    assert_eq!(store.stat(id).unwrap().map(|o| o.size), Some(8));
    assert!(store.durable_lsn() < lsn, "reading a buffered commit must not sync the log");

    store.checkpoint().unwrap();
    assert!(store.index().durable_seq() >= lsn);
    assert!(store.durable_lsn() >= store.index().durable_seq(), "the index ran ahead of the log");

    let rebooted = sim.crash_with(CrashMode::DropAllPending);
    drop(store);
    let store = Store::open(storage(&rebooted), Path::new(DIR), common::deterministic()).unwrap();
    assert_eq!(store.read_to_end(id).unwrap().as_deref(), Some(&b"buffered"[..]));
}

#[test]
fn concurrent_commits_enter_the_index_in_lsn_order_each_visible_when_it_returns() {
    let sim = SimStorage::new(43);
    let store = Arc::new(Store::create(storage(&sim), Path::new(DIR), creation(), options(true)).unwrap());
    let threads = 8;
    let per_thread = 300u64;
    std::thread::scope(|s| {
        for t in 0..threads {
            let store = store.clone();
            s.spawn(move || {
                for i in 0..per_thread {
                    let key = format!("k{t}/{i:05}");
                    let mut b = larder_index::WriteBatch::new();
                    b.put(key.as_bytes(), i.to_le_bytes());
                    // Also a key every thread rewrites: the last write in
                    // LSN order must win.
                    b.put(b"shared", format!("{t}/{i}").as_bytes());
                    // Durable ones are combined (another thread may append,
                    // apply and sync them), buffered ones are not.
                    let durable = (t + i as usize).is_multiple_of(3);
                    let durability = if durable { Durability::Durable } else { Durability::Buffered };
                    let lsn = store.commit(&b, durability).unwrap();
                    // Visible when the commit returns, whoever applied it.
                    assert_eq!(store.index().get(key.as_bytes()).unwrap(), Some(i.to_le_bytes().to_vec()));
                    assert!(store.index().last_seq() >= lsn);
                    assert!(!durable || store.durable_lsn() >= lsn, "a durable commit returned before its sync");
                }
            });
        }
    });
    for t in 0..threads {
        for i in 0..per_thread {
            let key = format!("k{t}/{i:05}");
            assert_eq!(store.index().get(key.as_bytes()).unwrap(), Some(i.to_le_bytes().to_vec()), "{key}");
        }
    }
    // Every LSN the log handed out went into the index.
    store.sync().unwrap();
    assert_eq!(store.index().last_seq(), store.durable_lsn());
    let shared = store.index().get(b"shared").unwrap().unwrap();
    assert!(shared.ends_with(format!("/{}", per_thread - 1).as_bytes()), "a thread's last write wins");
}

/// Durable commits from many threads are combined: whichever thread
/// appends, applies and syncs them, each is durable when it returns (a
/// crash taken while the others go on keeps it), and one that fails (a
/// record too large for a log segment) fails alone.
#[test]
fn combined_durable_commits_survive_a_crash_and_fail_one_by_one() {
    let sim = SimStorage::new(44);
    let mut o = options(true);
    o.log.segment_bytes = 256 << 10;
    let store = Arc::new(Store::create(storage(&sim), Path::new(DIR), creation(), o).unwrap());
    let threads = 8u64;
    let commit = |t: u64, i: u64, value: &[u8]| {
        let mut b = larder_index::WriteBatch::new();
        let key = format!("k{t}/{i:05}");
        b.put(key.as_bytes(), value);
        let result = store.commit(&b, Durability::Durable);
        if let Ok(lsn) = result {
            assert!(store.durable_lsn() >= lsn, "{key}: returned before its sync");
        }
        (key, result)
    };
    // First, no crash: only thread 0's three oversized records fail.
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for i in 0..60u64 {
                    let too_large = t == 0 && i % 20 == 7;
                    let value = if too_large { vec![7u8; 300 << 10] } else { i.to_le_bytes().to_vec() };
                    match commit(t, i, &value) {
                        (key, Ok(_)) => assert!(!too_large, "{key}: a record larger than a segment was committed"),
                        (key, Err(e)) => {
                            assert!(too_large, "{key}: {e}");
                            assert!(matches!(e, ObjectError::Log(larder_log::LogError::TooLarge { .. })), "{e}");
                        }
                    }
                }
            });
        }
    });
    // Then a crash while every thread commits. The image is taken under
    // the lock of the list of keys whose commit returned, so every key
    // listed then was acknowledged before it; after the crash the store
    // refuses writes.
    let acked = parking_lot::Mutex::new(Vec::<String>::new());
    let (image, acked_at_crash) = std::thread::scope(|s| {
        for t in 0..threads {
            let acked = &acked;
            s.spawn(move || {
                for i in 60..400u64 {
                    match commit(t, i, &i.to_le_bytes()) {
                        (key, Ok(_)) => acked.lock().push(key),
                        (_, Err(_)) => return,
                    }
                }
            });
        }
        while acked.lock().len() < 500 {
            std::thread::yield_now();
        }
        let list = acked.lock();
        (sim.crash_with(CrashMode::DropAllPending), list.clone())
    });
    drop(store);
    let store = Store::open(storage(&image), Path::new(DIR), common::deterministic()).unwrap();
    for t in 0..threads {
        for i in 0..60u64 {
            let held = store.index().get(format!("k{t}/{i:05}").as_bytes()).unwrap();
            assert_eq!(held.is_some(), !(t == 0 && i % 20 == 7), "k{t}/{i:05}");
        }
    }
    for key in &acked_at_crash {
        assert!(store.index().get(key.as_bytes()).unwrap().is_some(), "{key} was acknowledged durable but is lost");
    }
}

/// The change observer is told of every commit, buffered or durable,
/// except those made on a thread marked by `unobserved_thread` (a FUSE
/// mount's request threads); other threads stay observed.
#[test]
fn the_observer_hears_every_commit_but_those_of_unobserved_threads() {
    use larder_object::MetaChange;
    let sim = SimStorage::new(5);
    let store = Arc::new(Store::create(storage(&sim), Path::new(DIR), creation(), options(false)).unwrap());
    let heard: Arc<parking_lot::Mutex<Vec<MetaChange>>> = Arc::default();
    let into = heard.clone();
    store.set_change_observer(Some(Arc::new(move |changes: &[MetaChange]| into.lock().extend_from_slice(changes))));
    let commit = |store: &Store, durability| {
        let id = store.allocate_object_id().unwrap();
        store.transact(&[id], durability, |t| t.put_onode(id, &file(1))).unwrap();
        id
    };
    let seen = commit(&store, Durability::Buffered);
    let also_seen = commit(&store, Durability::Durable);
    let unseen = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                larder_object::unobserved_thread();
                [commit(&store, Durability::Buffered), commit(&store, Durability::Durable)]
            })
            .join()
            .unwrap()
    });
    let seen_after = commit(&store, Durability::Buffered);
    let objects: Vec<u64> = heard
        .lock()
        .iter()
        .filter_map(|c| match c {
            MetaChange::Object(id) => Some(*id),
            MetaChange::Entry { .. } => None,
        })
        .collect();
    assert_eq!(objects, vec![seen, also_seen, seen_after], "unobserved commits: {unseen:?}");
}
