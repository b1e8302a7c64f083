//! One flush per sync (docs/heap.md, "One flush per sync"): a sync that
//! changes no file's length commits images of the changed pages with its
//! records instead of writing the mapping back and flushing first. Recovery
//! writes the images into the files; an image is kept current (re-imaged at
//! each sync, even when the kernel wrote its page back meanwhile) until a
//! sync that flushes twice deletes it. Simulated crashes at every write of
//! a workload that takes both kinds of sync, with the kernel's write-back of
//! mapped pages simulated between them.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use larder_heap::{Heap, HeapError, ObjectId, PPtr};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_object::Store;

use common::{crash_run_sim, heap_images as images, reopen_sim, sim_store, try_heap as open};

const USER: u8 = 0x55;
const X2: u8 = 0x22;
const X3: u8 = 0x33;
const X4: u8 = 0x44;
const BLOCK: usize = 100;
/// q's size: another size class than p's, so q's page is one no sync
/// imaged before (its image is there because q is a fresh block).
const Q_BLOCK: usize = 300;

fn bytes(h: &Heap, id: ObjectId, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    h.read_at(id, offset, &mut buf).unwrap();
    buf
}

fn pointer_at(h: &Heap, id: ObjectId, offset: u64) -> PPtr<u8> {
    let mut raw = [0u8; 24];
    h.read_at(id, offset, &mut raw).unwrap();
    PPtr::from_bytes(&raw)
}

/// What each stage left, for the checks.
#[derive(Default)]
struct Seen {
    /// Stages whose sync returned.
    stage: usize,
    /// Syncs (of stages 2-4) that committed page images.
    imaged: usize,
}

/// Stage 1: an object with user bytes and a block (imaged whole, then its
/// file synced: two syncs).
/// Stage 2: a block p holding X2, its pointer in the user bytes (one
/// flush). Stage 3: p overwritten with X3 and the object written back by
/// the "kernel" before the sync (one flush: the clean page is re-imaged).
/// Stage 4: p freed, q holding X4, its pointer beside p's (one flush).
/// Stage 5: blocks past the object's end (growth: two flushes, the images
/// deleted).
fn workload(store: &Arc<Store>, seen: &mut Seen) {
    let _ = (|| -> larder_heap::Result<()> {
        let h = open(store)?;
        let a = h.alloc(4096)?;
        h.add_name(a, "a")?;
        h.write_at(a, 48, &[USER; 100])?;
        h.alloc_in(a, BLOCK as u64, 8)?;
        h.alloc_in(a, Q_BLOCK as u64, 8)?;
        // A new object: its first sync images it whole (one flush), the
        // next syncs its file (two flushes).
        h.sync()?;
        h.sync()?;
        seen.stage = 1;
        let p = h.alloc_in(a, BLOCK as u64, 8)?;
        h.write_at(a, p.offset, &[X2; BLOCK])?;
        h.write_at(a, 0, &p.to_bytes())?;
        h.sync()?;
        seen.stage = 2;
        seen.imaged += usize::from(images(store, a) > 0);
        h.write_at(a, p.offset, &[X3; BLOCK])?;
        h.write_back_at_will(a)?;
        h.sync()?;
        seen.stage = 3;
        seen.imaged += usize::from(images(store, a) > 0);
        h.free_in(p)?;
        let q = h.alloc_in(a, Q_BLOCK as u64, 8)?;
        h.write_at(a, q.offset, &[X4; Q_BLOCK])?;
        h.write_at(a, 24, &q.to_bytes())?;
        h.write_back_at_will(a)?;
        h.sync()?;
        seen.stage = 4;
        seen.imaged += usize::from(images(store, a) > 0);
        for _ in 0..8 {
            let r = h.alloc_in(a, 4096, 8)?;
            h.write_at(a, r.offset, &[0xEE; 4096])?;
        }
        h.sync()?;
        seen.stage = 5;
        Ok(())
    })();
}

/// Everything of the last stage whose sync returned is there; the block
/// pointers name live blocks holding their bytes, or are stale.
fn check(h: &Heap, stage: usize, what: &str) {
    if stage == 0 {
        return;
    }
    let a = h.get_by_name("a").unwrap_or_else(|e| panic!("{what}: a: {e}"));
    assert_eq!(bytes(h, a, 48, 100), vec![USER; 100], "{what}: user bytes");
    if stage < 2 {
        return;
    }
    let p = pointer_at(h, a, 0);
    assert_eq!(p.object, a.0, "{what}: p's pointer");
    match h.deref(p) {
        Ok(_) => {
            let held = bytes(h, a, p.offset, BLOCK);
            // Stage 3's sync may have committed without returning.
            let allowed: &[u8] = match stage {
                2 => &[X2, X3],
                3 => &[X3],
                _ => panic!("{what}: p was freed in stage 4 but is live"),
            };
            assert!(allowed.iter().any(|&x| held == vec![x; BLOCK]), "{what}: p holds {:?}", &held[..8]);
        }
        Err(HeapError::Stale { .. }) => assert!(stage >= 3, "{what}: p stale before stage 4"),
        Err(e) => panic!("{what}: p: {e}"),
    }
    // q's pointer may be on disk before stage 4's sync returned (the
    // kernel wrote its page back); whenever it names a live block, that
    // block holds what was stored there before the sync, never older bytes.
    let q = pointer_at(h, a, 24);
    match h.deref(q) {
        Ok(_) => assert_eq!(bytes(h, a, q.offset, Q_BLOCK), vec![X4; Q_BLOCK], "{what}: q's bytes"),
        Err(e) => assert!(stage < 4, "{what}: q: {e}"),
    }
}

/// Runs the workload on a new machine armed by `arm`, crashes it in
/// `mode`, recovers and checks; returns what the run saw.
fn crash_run(seed: u64, mode: CrashMode, arm: impl FnOnce(&SimStorage), what: &str) -> Seen {
    let (store, seen) = crash_run_sim(seed, mode, arm, |store| {
        let mut seen = Seen::default();
        workload(store, &mut seen);
        seen
    });
    let h = open(&store).unwrap();
    let what = format!("{what} ({mode:?}), stage {}", seen.stage);
    check(&h, seen.stage, &what);
    // Recovery wrote every image into its file and deleted it.
    if let Ok(a) = h.get_by_name("a") {
        assert_eq!(images(&store, a), 0, "{what}: images left after recovery");
    }
    seen
}

/// How many writes the workload makes, and that its stages 2-4 took one
/// flush each.
fn probe() -> u64 {
    let sim = SimStorage::new(0);
    let store = sim_store(&sim);
    let before = sim.counters();
    let mut seen = Seen::default();
    workload(&store, &mut seen);
    assert_eq!(seen.stage, 5, "the workload runs through");
    assert_eq!(seen.imaged, 3, "stages 2-4 commit page images");
    let a = open(&store).unwrap().get_by_name("a").unwrap();
    assert_eq!(images(&store, a), 0, "stage 5's two-flush sync deleted the images");
    let writes = sim.counters().writes - before.writes;
    println!("the workload writes {writes} times");
    writes
}

#[test]
fn crash_at_every_write_of_one_flush_syncs() {
    let writes = probe();
    assert!(writes > 10, "the workload writes ({writes})");
    let modes = [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending];
    for k in 0..=writes {
        for (m, mode) in modes.iter().chain([CrashMode::Random; 3].iter()).enumerate() {
            let seed = 50_000 + 10 * k + m as u64;
            crash_run(seed, *mode, |sim| sim.crash_after_writes(k), &format!("crash after write {k} of {writes}"));
        }
    }
}

#[test]
fn crash_at_every_sync_of_one_flush_syncs() {
    for k in 0..=40 {
        for (m, mode) in [CrashMode::Random, CrashMode::DropAllPending].iter().enumerate() {
            let seed = 60_000 + 10 * k + m as u64;
            crash_run(seed, *mode, |sim| sim.crash_after_syncs(k), &format!("crash after sync {k}"));
        }
    }
}

/// Stops the workload after `stages` stages, then crashes dropping every
/// write not synced: what survives of the object is what the syncs made
/// durable, images included.
fn after_stages(stages: usize) -> (SimStorage, ObjectId, PPtr<u8>) {
    let (sim, store, h, a, p) = imaged(7);
    if stages >= 3 {
        h.write_at(a, p.offset, &[X3; BLOCK]).unwrap();
        h.write_back_at_will(a).unwrap();
        h.sync().unwrap();
    }
    drop(h);
    drop(store);
    (sim.crash_with(CrashMode::DropAllPending), a, p)
}

#[test]
fn recovery_writes_the_images_into_the_file() {
    let (image, a, p) = after_stages(2);
    // The sync never wrote the mapping back: the file on disk lacks the
    // block's bytes, which only the image holds.
    let path = format!("{}/heap/{}", common::DIR, a.0);
    let durable = image.read_durable(&path).unwrap();
    let at = p.offset as usize;
    assert_ne!(durable.get(at..at + BLOCK), Some(&[X2; BLOCK][..]), "the file already holds the bytes");
    let store = reopen_sim(&image);
    let h = open(&store).unwrap();
    h.deref(p).unwrap();
    assert_eq!(bytes(&h, a, p.offset, BLOCK), vec![X2; BLOCK]);
    assert_eq!(images(&store, a), 0);
}

#[test]
fn an_image_is_kept_current_when_its_page_was_written_back() {
    // Stage 3's page is clean at its sync (written back, then made durable
    // by the log's flush); an image of stage 2 left in the index would be
    // written over it at recovery.
    let (image, a, p) = after_stages(3);
    let store = reopen_sim(&image);
    let h = open(&store).unwrap();
    assert_eq!(bytes(&h, a, p.offset, BLOCK), vec![X3; BLOCK]);
}

/// A heap on a new simulated machine of `seed` whose object "a" holds a
/// block p of X2 made durable by a one-flush sync (its page imaged).
fn imaged(seed: u64) -> (SimStorage, Arc<Store>, Heap, ObjectId, PPtr<u8>) {
    let sim = SimStorage::new(seed);
    let store = sim_store(&sim);
    let h = open(&store).unwrap();
    let a = h.alloc(4096).unwrap();
    h.add_name(a, "a").unwrap();
    h.alloc_in(a, BLOCK as u64, 8).unwrap();
    h.sync().unwrap();
    h.sync().unwrap();
    assert_eq!(images(&store, a), 0, "the second sync of a new object synced its file");
    let p = h.alloc_in(a, BLOCK as u64, 8).unwrap();
    h.write_at(a, p.offset, &[X2; BLOCK]).unwrap();
    h.sync().unwrap();
    assert!(images(&store, a) > 0, "the sync took one flush");
    (sim, store, h, a, p)
}

#[test]
fn close_leaves_no_image() {
    let (_sim, store, h, a, _p) = imaged(3);
    h.close().unwrap();
    assert_eq!(images(&store, a), 0, "close flushes twice and deletes the images");
}

#[test]
fn freeing_an_object_deletes_its_images() {
    let (_sim, store, h, a, _p) = imaged(4);
    h.free(a).unwrap();
    assert_eq!(images(&store, a), 0);
}

#[test]
fn a_crash_during_the_replay_leaves_it_to_the_next_open() {
    for k in 1..=6 {
        let (image, a, p) = after_stages(2);
        image.crash_after_writes(k);
        // May fail at the crash: what it left is recovered below.
        drop(Store::open(common::storage(&image), std::path::Path::new(common::DIR), common::deterministic()));
        let image = image.crash_with(CrashMode::Random);
        let store = reopen_sim(&image);
        let h = open(&store).unwrap();
        h.deref(p).unwrap();
        assert_eq!(bytes(&h, a, p.offset, BLOCK), vec![X2; BLOCK], "crash after write {k} of the recovery");
        assert_eq!(images(&store, a), 0);
    }
}

/// A grow commits the allocator's records outside `sync`, and any later
/// log sync (another commit's, the flusher's) makes them durable: a block
/// handed out since the last sync then holds its new bytes after a crash,
/// never the bytes of the block freed before it, even when a one-flush
/// sync imaged the freed block's page (the grow deletes the images its
/// flush made stale). `syncs_first` syncs come before the block: none, and
/// its page is imaged by the new object's whole sync; two, and by an
/// ordinary one-flush sync after the object's file was synced.
fn grow_after_an_imaged_block(seed: u64, syncs_first: usize) {
    let sim = SimStorage::new(seed);
    let store = sim_store(&sim);
    let h = open(&store).unwrap();
    let a = h.alloc(4096).unwrap();
    h.add_name(a, "a").unwrap();
    if syncs_first > 0 {
        h.alloc_in(a, BLOCK as u64, 8).unwrap();
    }
    for _ in 0..syncs_first {
        h.sync().unwrap();
    }
    let p = h.alloc_in(a, BLOCK as u64, 8).unwrap();
    h.write_at(a, p.offset, &[X2; BLOCK]).unwrap();
    h.sync().unwrap();
    assert!(images(&store, a) > 0, "the sync took one flush");
    h.free_in(p).unwrap();
    let q = h.alloc_in(a, BLOCK as u64, 8).unwrap();
    assert_eq!(q.offset, p.offset, "the freed block is handed out again");
    h.write_at(a, q.offset, &[X4; BLOCK]).unwrap();
    h.grow(a, 1 << 20).unwrap();
    assert_eq!(images(&store, a), 0, "the grow deleted the images");
    // Made durable by a log sync that is not the heap's.
    store.sync_to(u64::MAX).unwrap();
    drop(h);
    drop(store);
    let store = reopen_sim(&sim.crash_with(CrashMode::DropAllPending));
    let h = open(&store).unwrap();
    assert!(h.deref(p).is_err(), "the freed block's pointer is live");
    h.deref(q).unwrap();
    assert_eq!(bytes(&h, a, q.offset, BLOCK), vec![X4; BLOCK], "the reused block holds older bytes");
}

#[test]
fn a_grow_makes_the_bytes_of_new_blocks_durable_before_their_records() {
    grow_after_an_imaged_block(11, 0);
}

#[test]
fn a_grow_deletes_the_images_its_flush_made_stale() {
    grow_after_an_imaged_block(24, 2);
}

/// A handle dropped without `close` leaves its last one-flush sync's images
/// in the index, and a heap opened again in the process knows nothing of
/// them: its first two-flush sync of the object deletes whatever images it
/// has, so a crash never replays them over the bytes synced since.
#[test]
fn images_a_dropped_handle_left_are_deleted_by_the_next_handles_sync() {
    let (sim, store, h, a, p) = imaged(5);
    drop(h);
    let h = open(&store).unwrap();
    let a = h.get(a).unwrap();
    h.write_at(a, p.offset, &[X3; BLOCK]).unwrap();
    h.sync().unwrap();
    assert_eq!(images(&store, a), 0, "the sync deleted the images it did not put");
    drop(h);
    drop(store);
    let store = reopen_sim(&sim.crash_with(CrashMode::DropAllPending));
    let h = open(&store).unwrap();
    h.deref(p).unwrap();
    assert_eq!(bytes(&h, a, p.offset, BLOCK), vec![X3; BLOCK], "the bytes of the last sync");
}

/// A sync that changes no record (a store into the object's own bytes, on
/// a page no image covers) writes no log record: the log's flush alone
/// makes the page's write-back durable, and it survives a crash.
#[test]
fn a_sync_with_nothing_to_record_flushes_without_a_record() {
    let sim = SimStorage::new(12);
    let store = sim_store(&sim);
    let h = open(&store).unwrap();
    let a = h.alloc(8192).unwrap();
    h.add_name(a, "a").unwrap();
    h.sync().unwrap();
    h.sync().unwrap();
    h.write_at(a, 100, &[0x5A; 50]).unwrap();
    let groups = store.log_stats().groups;
    h.sync().unwrap();
    assert_eq!(store.log_stats().groups, groups, "the sync wrote a record");
    drop(h);
    drop(store);
    let store = reopen_sim(&sim.crash_with(CrashMode::DropAllPending));
    let h = open(&store).unwrap();
    let a = h.get_by_name("a").unwrap();
    assert_eq!(bytes(&h, a, 100, 50), vec![0x5A; 50]);
}
