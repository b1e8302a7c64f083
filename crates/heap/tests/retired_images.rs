//! Retiring page images (docs/heap.md, "Retiring images"): pages imaged by
//! one-flush syncs have their write-back started by a sync once a batch of
//! them waits, waited for by the next sync, and their images deleted by the
//! one after that, so a heap whose syncs hand out blocks on new pages
//! keeps taking one flush instead of running out of images. Simulated
//! crashes at every write and every sync of a run of such syncs, with the
//! kernel's write-back of mapped pages simulated between some of them:
//! every block holds the bytes of the last sync that returned (or of the
//! sync under way), never older ones, and never a block's bytes before it
//! was handed out.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use larder_heap::{Heap, HeapError, PPtr};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_object::Store;

use common::{crash_run_sim, heap_images as images, reopen_sim, sim_store, try_heap as open};

/// A block's size: over half a page, so each block is on pages of its own
/// and each stage's block brings new pages to image.
const BLOCK: usize = 3000;
/// The object's size (its blocks are placed past it): larger than a new
/// object a sync images whole.
const OBJECT: u64 = 1 << 20;
/// One-flush stages (each hands out one block).
const STAGES: usize = 14;
/// Stage `i` (from 1) also overwrites the block of stage `i - OVERWRITE_LAG`,
/// whose image the syncs since have retired.
const OVERWRITE_LAG: usize = 4;
/// The stages before whose sync the "kernel" writes the object's dirty
/// pages back at will: apart from the syncs that start and wait for a
/// batch's write-back, so that some pages reach the file only by those.
const AT_WILL: [usize; 2] = [3, 12];

/// Where stage `i`'s block's pointer is kept: in the object's own bytes
/// (the allocator places blocks past them).
fn pointer_slot(i: usize) -> u64 {
    24 * i as u64
}

/// The bytes stage `i` stores in its new block.
fn first_bytes(i: usize) -> u8 {
    0x10 + i as u8
}

/// The bytes stage `i` stores over the block of stage `i - OVERWRITE_LAG`.
fn later_bytes(i: usize) -> u8 {
    0x80 + i as u8
}

/// What the run saw.
#[derive(Default)]
struct Seen {
    /// Stages whose sync returned (0: the object is not durable yet).
    stage: usize,
    /// Most images the index held after a one-flush stage.
    most_images: usize,
}

/// Stage 0: object "a" (its file synced by the second sync). Stages 1 to
/// `STAGES`: a block of `first_bytes(i)`, its pointer in the object's first
/// bytes, the block of stage `i - OVERWRITE_LAG` overwritten with
/// `later_bytes(i)`, the kernel's write-back at will in the `AT_WILL`
/// stages, sync.
fn workload(store: &Arc<Store>, seen: &mut Seen) {
    let _ = (|| -> larder_heap::Result<()> {
        let h = open(store)?;
        let a = h.alloc(OBJECT)?;
        h.add_name(a, "a")?;
        h.sync()?;
        h.sync()?;
        let mut blocks: Vec<PPtr<u8>> = Vec::new();
        for i in 1..=STAGES {
            let p = h.alloc_in(a, BLOCK as u64, 8)?;
            h.write_at(a, p.offset, &[first_bytes(i); BLOCK])?;
            h.write_at(a, pointer_slot(i), &p.to_bytes())?;
            if i > OVERWRITE_LAG {
                let old = blocks[i - OVERWRITE_LAG - 1];
                h.write_at(a, old.offset, &[later_bytes(i); BLOCK])?;
            }
            blocks.push(p);
            if AT_WILL.contains(&i) {
                h.write_back_at_will(a)?;
            }
            h.sync()?;
            seen.stage = i;
            seen.most_images = seen.most_images.max(images(store, a));
        }
        Ok(())
    })();
}

/// The bytes block `j` may hold after the syncs up to stage `stage`
/// returned: what they stored, and what stage `stage + 1` stored over it.
fn allowed(j: usize, stage: usize) -> Vec<u8> {
    let overwrite = j + OVERWRITE_LAG;
    match stage {
        s if s >= overwrite => vec![later_bytes(overwrite)],
        s if s + 1 == overwrite => vec![first_bytes(j), later_bytes(overwrite)],
        _ => vec![first_bytes(j)],
    }
}

/// Every block of a stage whose sync returned is live with its bytes; a
/// later block whose pointer reached the disk is stale, or live with the
/// bytes stored before its sync.
fn check(h: &Heap, stage: usize, what: &str) {
    if stage == 0 {
        return;
    }
    let a = h.get_by_name("a").unwrap_or_else(|e| panic!("{what}: a: {e}"));
    for j in 1..=STAGES {
        let mut raw = [0u8; 24];
        h.read_at(a, pointer_slot(j), &mut raw).unwrap();
        let p: PPtr<u8> = PPtr::from_bytes(&raw);
        if p.object != a.0 {
            assert!(j > stage, "{what}: block {j}'s pointer is gone");
            continue;
        }
        match h.deref(p) {
            Ok(_) => {
                let mut held = vec![0u8; BLOCK];
                h.read_at(a, p.offset, &mut held).unwrap();
                // The sync under way may have made some of its stores
                // durable and not others: each byte is one of the allowed.
                let ok = allowed(j, stage);
                let wrong = held.iter().position(|b| !ok.contains(b));
                assert!(wrong.is_none(), "{what}: block {j} holds {held:x?} where {ok:x?} was synced");
            }
            Err(HeapError::Stale { .. }) => assert!(j > stage, "{what}: block {j} is stale"),
            Err(e) => panic!("{what}: block {j}: {e}"),
        }
    }
}

/// Runs the workload on a new machine armed by `arm`, crashes it in
/// `mode`, recovers and checks.
fn crash_run(seed: u64, mode: CrashMode, arm: impl FnOnce(&SimStorage), what: &str) {
    let (store, seen) = crash_run_sim(seed, mode, arm, |store| {
        let mut seen = Seen::default();
        workload(store, &mut seen);
        seen
    });
    let h = open(&store).unwrap();
    let what = format!("{what} ({mode:?}), stage {}", seen.stage);
    check(&h, seen.stage, &what);
    if let Ok(a) = h.get_by_name("a") {
        assert_eq!(images(&store, a), 0, "{what}: images left after recovery");
    }
}

/// How many writes the workload makes; checks that its syncs retired
/// images rather than keeping one per page imaged.
fn probe() -> u64 {
    let sim = SimStorage::new(0);
    let store = sim_store(&sim);
    let before = sim.counters();
    let mut seen = Seen::default();
    workload(&store, &mut seen);
    assert_eq!(seen.stage, STAGES, "the workload runs through");
    // Each stage images its block's new page or two: kept to the next
    // two-flush sync, the stages' images would add up to more than 14.
    assert!(seen.most_images > 0, "the stages took one flush");
    assert!(seen.most_images <= 8, "images kept, not retired: {}", seen.most_images);
    sim.counters().writes - before.writes
}

#[test]
fn crash_at_every_write_of_syncs_that_retire_images() {
    let writes = probe();
    assert!(writes > 20, "the workload writes ({writes})");
    let modes = [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending];
    for k in 0..=writes {
        for (m, mode) in modes.iter().chain([CrashMode::Random; 2].iter()).enumerate() {
            let seed = 70_000 + 10 * k + m as u64;
            crash_run(seed, *mode, |sim| sim.crash_after_writes(k), &format!("crash after write {k} of {writes}"));
        }
    }
}

#[test]
fn crash_at_every_sync_of_syncs_that_retire_images() {
    // Random crashes draw which writes a flush under way kept: the log's
    // record without a page's write-back is among them, and a page retired
    // too early shows only there.
    let modes = [CrashMode::DropAllPending, CrashMode::KeepAllPending];
    for k in 0..=60 {
        for (m, mode) in modes.iter().chain([CrashMode::Random; 8].iter()).enumerate() {
            let seed = 80_000 + 10 * k + m as u64;
            crash_run(seed, *mode, |sim| sim.crash_after_syncs(k), &format!("crash after sync {k}"));
        }
    }
}

/// Retired images are gone from the index, and the bytes they held come
/// back from the file after a crash that drops everything not synced.
#[test]
fn retired_pages_come_back_from_the_file() {
    let sim = SimStorage::new(9);
    let store = sim_store(&sim);
    let mut seen = Seen::default();
    workload(&store, &mut seen);
    assert_eq!(seen.stage, STAGES);
    let a = open(&store).unwrap().get_by_name("a").unwrap();
    let left = images(&store, a);
    drop(store);
    let store = reopen_sim(&sim.crash_with(CrashMode::DropAllPending));
    let h = open(&store).unwrap();
    check(&h, STAGES, "after the last stage");
    assert!(left < 2 * STAGES, "{left} images for {STAGES} stages of fresh pages");
}
