//! Threads racing `add_name`, `get_by_name` and `free` on one name, on one
//! heap: exactly one `add_name` wins each round, and a reader sees the
//! winner's whole object (never a half-made one, never another's bytes) or
//! `NotFound`.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Barrier;

use larder_heap::HeapError;

use common::{heap, real_heap, sim_heap};

const WRITERS: usize = 4;
const READERS: usize = 2;
const ROUNDS: usize = 40;
const SIZE: usize = 512;

fn race(h: &larder_heap::Heap) {
    let barrier = Barrier::new(WRITERS + 1);
    let done = AtomicBool::new(false);
    let seen = AtomicUsize::new(0);
    let winners = AtomicUsize::new(0);
    let winner_id = parking_lot::Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..READERS {
            scope.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    match h.get_by_name("contended") {
                        Ok(object) => {
                            let mut buf = vec![0u8; SIZE];
                            match h.read_at(object, 0, &mut buf) {
                                Ok(()) => {
                                    let tag = buf[0];
                                    assert!(tag != 0, "a named object is whole: its bytes were written first");
                                    assert!(buf.iter().all(|b| *b == tag), "torn object: {buf:?}");
                                    seen.fetch_add(1, Ordering::Relaxed);
                                }
                                // Freed between the lookup and the read.
                                Err(HeapError::NotFound { .. }) => {}
                                Err(e) => panic!("read: {e}"),
                            }
                        }
                        Err(HeapError::NotFound { .. }) => {}
                        Err(e) => panic!("get_by_name: {e}"),
                    }
                }
            });
        }
        for w in 0..WRITERS {
            let (barrier, winners, winner_id) = (&barrier, &winners, &winner_id);
            scope.spawn(move || {
                for round in 0..ROUNDS {
                    let object = h.alloc(SIZE as u64).unwrap();
                    let tag = (1 + w + WRITERS * (round % 50)) as u8;
                    h.write_at(object, 0, &vec![tag; SIZE]).unwrap();
                    barrier.wait();
                    match h.add_name(object, "contended") {
                        Ok(()) => {
                            winners.fetch_add(1, Ordering::AcqRel);
                            *winner_id.lock() = Some(object);
                        }
                        Err(HeapError::AlreadyExists { .. }) => h.free(object).unwrap(),
                        Err(e) => panic!("add_name: {e}"),
                    }
                    barrier.wait();
                }
            });
        }
        for round in 0..ROUNDS {
            barrier.wait();
            barrier.wait();
            assert_eq!(winners.swap(0, Ordering::AcqRel), 1, "exactly one add_name wins");
            let object = winner_id.lock().take().unwrap();
            assert_eq!(h.get_by_name("contended").unwrap(), object);
            if round == 0 {
                // The readers race the frees of later rounds; here they
                // get to see one named object, however busy the machine.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while seen.load(Ordering::Relaxed) == 0 {
                    assert!(std::time::Instant::now() < deadline, "no reader saw the named object within 30 s");
                    std::thread::yield_now();
                }
            }
            // Freed while the readers look it up.
            h.free(object).unwrap();
            assert!(matches!(h.get_by_name("contended"), Err(HeapError::NotFound { .. })));
        }
        done.store(true, Ordering::Release);
    });
    assert!(seen.load(Ordering::Relaxed) > 0, "the readers saw named objects");
}

#[test]
fn one_winner_nothing_torn_on_the_simulation() {
    let (_sim, store, h) = sim_heap(1);
    race(&h);
    // Spares (freed objects' files kept for reuse) go at close.
    h.close().unwrap();
    assert_eq!(store.list_heap_files().unwrap().0.len(), 0, "every object was freed and its file removed");
}

#[test]
fn one_winner_nothing_torn_on_real_mappings() {
    let (_dir, store, h) = real_heap();
    race(&h);
    h.close().unwrap();
    assert_eq!(store.list_heap_files().unwrap().0.len(), 0);
}

/// Threads allocating and freeing blocks in one object: no block is handed
/// to two threads (each thread's blocks keep its bytes), and the allocator
/// state persisted by `sync` loads back with every live block.
fn blocks_race(h: &larder_heap::Heap) -> (larder_heap::ObjectId, Vec<larder_heap::PPtr<u8>>) {
    let object = h.alloc(64).unwrap();
    let live = parking_lot::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for t in 0..4u8 {
            let live = &live;
            scope.spawn(move || {
                let mut mine: Vec<(larder_heap::PPtr<u8>, u64)> = Vec::new();
                for i in 0..400u64 {
                    let size = 8 + (i * 37 + u64::from(t) * 11) % 3000;
                    let p = h.alloc_in(object, size, 8).unwrap();
                    h.write_at(object, p.offset, &vec![t + 1; size as usize]).unwrap();
                    mine.push((p, size));
                    if i % 3 == 0 {
                        let (p, _) = mine.swap_remove((i as usize * 7) % mine.len());
                        h.free_in(p).unwrap();
                    }
                }
                for (p, size) in &mine {
                    let mut buf = vec![0u8; *size as usize];
                    h.read_at(object, p.offset, &mut buf).unwrap();
                    assert!(buf.iter().all(|b| *b == t + 1), "thread {t}'s block at {} was overwritten", p.offset);
                }
                live.lock().extend(mine.into_iter().map(|(p, _)| p));
            });
        }
    });
    (object, live.into_inner())
}

#[test]
fn alloc_in_from_many_threads_on_the_simulation() {
    let (sim, store, h) = sim_heap(2);
    let (object, live) = blocks_race(&h);
    h.sync().unwrap();
    drop(h);
    drop(store);
    let store = common::reopen_sim(&sim.crash_with(larder_io::sim::CrashMode::DropAllPending));
    let h = heap(&store);
    for p in &live {
        h.deref(*p).unwrap();
    }
    assert!(h.size(object).unwrap() > 64);
}

#[test]
fn alloc_in_from_many_threads_on_real_mappings() {
    let (_dir, _store, h) = real_heap();
    let (_, live) = blocks_race(&h);
    for p in &live {
        h.deref(*p).unwrap();
    }
}
