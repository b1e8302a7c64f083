//! Simulated crashes at every write, every sync and every namespace
//! operation of a workload of alloc, write, add_name, type, clone, copy, grow
//! and free with syncs between its stages. After each crash the store is
//! reopened (recovering) and the heap must hold everything of the last
//! stage whose `sync` returned, nothing half-there (a clone whole or
//! absent, names and entries in step with records), no stray and no
//! missing file.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use larder_heap::arena::Arena;
use larder_heap::{Credentials, Heap, HeapError, ObjectId, PPtr};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_namespace::list;
use larder_object::meta::{heap_span_prefix, DataLocation, MetaKey, Name};
use larder_object::Store;

use common::{crash_sim, reopen_sim, sim_store};

const A: u8 = 0xA1;
const A_TAIL: u8 = 0xA2;
const B: u8 = 0xB1;
const S: u8 = 0x51;
const L: u8 = 0x4C;

fn open(store: &Arc<Store>) -> larder_heap::Result<Heap> {
    Heap::open(store, "/heap", Credentials::root())
}

/// The workload; returns how many stages' syncs returned before the first
/// failure (the crash).
fn workload(store: &Arc<Store>) -> usize {
    let mut stage = 0;
    let _ = (|| -> larder_heap::Result<()> {
        let h = open(store)?;
        let a = h.alloc(3000)?;
        h.write_at(a, 0, &[A; 3000])?;
        h.add_name(a, "a")?;
        h.sync()?;
        stage = 1;
        let b = h.alloc(100)?;
        h.write_at(b, 0, &[B; 100])?;
        h.add_name(b, "b")?;
        let t = h.alloc_type(&[0])?;
        let c = h.alloc(48)?;
        h.write_at(c, 0, &PPtr::<()>::new(b.0, 0, 0).to_bytes())?;
        h.attach_type(c, t)?;
        h.add_name(c, "c")?;
        // Blocks inside a, a small and a large one; their pointers kept in
        // the named object "ptrs".
        let small = h.alloc_in(a, 200, 8)?;
        h.write_at(a, small.offset, &[S; 200])?;
        let large = h.alloc_in(a, 9000, 64)?;
        h.write_at(a, large.offset, &[L; 9000])?;
        let ptrs = h.alloc(48)?;
        h.write_at(ptrs, 0, &small.to_bytes())?;
        h.write_at(ptrs, 24, &large.to_bytes())?;
        h.add_name(ptrs, "ptrs")?;
        h.sync()?;
        stage = 2;
        let d = h.clone(c)?;
        h.add_name(d, "d")?;
        let f = h.copy(ptrs)?;
        h.add_name(f, "f")?;
        h.sync()?;
        stage = 3;
        let grown = h.size(a)? + 10_000;
        h.grow(a, grown)?;
        h.write_at(a, grown - 1000, &[A_TAIL; 1000])?;
        h.add_name(a, "a2")?;
        h.free(b)?;
        h.free_in(small)?;
        h.sync()?;
        stage = 4;
        let e = h.alloc(5000)?;
        h.add_name(e, "e")?;
        h.free(d)?;
        for _ in 0..50 {
            let p = h.alloc_in(a, 100, 8)?;
            h.write_at(a, p.offset, &[0xEE; 100])?;
        }
        let g = h.copy(a)?;
        h.add_name(g, "g")?;
        Ok(())
    })();
    stage
}

fn bytes(h: &Heap, id: ObjectId, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    h.read_at(id, offset, &mut buf).unwrap();
    buf
}

fn pointer(h: &Heap, id: ObjectId) -> PPtr<()> {
    let mut raw = [0u8; 24];
    h.read_at(id, 0, &mut raw).unwrap();
    PPtr::from_bytes(&raw)
}

/// Records, files, entries and names agree.
fn check_structure(store: &Arc<Store>, h: &Heap, what: &str) {
    let records: BTreeSet<u64> = h.objects().unwrap().iter().map(|o| o.0).collect();
    let files: BTreeSet<u64> = store.list_heap_files().unwrap().0.into_iter().collect();
    assert_eq!(files, records, "{what}: heap files and object records");
    let entries: BTreeSet<u64> =
        list::list(store, h.objects_dir_id(), None, usize::MAX).unwrap().into_iter().map(|(_, d)| d.child).collect();
    assert_eq!(entries, records, "{what}: objects/ entries and object records");
    let names = list::list(store, h.names_dir_id(), None, usize::MAX).unwrap();
    for (name, dentry) in &names {
        assert!(records.contains(&dentry.child), "{what}: name {name} of a freed object");
        let text = String::from_utf8_lossy(name.as_bytes()).into_owned();
        assert!(h.names(ObjectId(dentry.child)).unwrap().contains(&text), "{what}: name {text} has no record");
    }
    for &id in &records {
        let onode = store.stat(id).unwrap().unwrap();
        assert_eq!(onode.location, DataLocation::OwnFile { file: id }, "{what}");
        let named = h.names(ObjectId(id)).unwrap();
        for n in &named {
            let dentry = list::lookup(store, h.names_dir_id(), &Name::new(n.as_str()).unwrap()).unwrap();
            assert_eq!(dentry.map(|d| d.child), Some(id), "{what}: name record {n} without its entry");
        }
        assert_eq!(onode.nlink as usize, 1 + named.len(), "{what}: links of object {id}");
        assert_eq!(h.size(ObjectId(id)).unwrap(), onode.size, "{what}: object {id} attaches whole");
        // Its allocator's records load, agree with themselves, and claim
        // nothing past the object's size.
        let prefix = heap_span_prefix(id);
        let spans: Vec<(u64, Vec<u8>)> = store
            .index()
            .prefix(&prefix, true)
            .unwrap()
            .map(|kv| {
                let (k, v) = kv.unwrap();
                let MetaKey::HeapSpan { span, .. } = MetaKey::decode(&k).unwrap() else { panic!("not a span key") };
                (span, v)
            })
            .collect();
        if !spans.is_empty() {
            let arena = Arena::load(spans.iter().map(|(k, v)| (*k, v.as_slice()))).unwrap();
            arena.verify().unwrap_or_else(|e| panic!("{what}: object {id}'s allocator: {e}"));
            for &(start, len) in arena.claimed_ranges() {
                assert!(start + len <= onode.size, "{what}: object {id} claims past its size");
            }
        }
        // A copy of c (typed, not c itself) is whole: its target exists.
        if h.type_of(ObjectId(id)).unwrap().is_some() && h.names(ObjectId(id)).unwrap() != ["c"] {
            let target = pointer(h, ObjectId(id));
            assert!(records.contains(&target.object), "{what}: clone of c without its copy of b");
            assert_eq!(bytes(h, ObjectId(target.object), 0, 100), vec![B; 100], "{what}");
        }
    }
}

/// Everything of `stage` is there.
fn check_stage(h: &Heap, stage: usize, what: &str) {
    let named = |n: &str| h.get_by_name(n);
    if stage >= 1 {
        let a = named("a").unwrap_or_else(|e| panic!("{what}: a: {e}"));
        assert_eq!(bytes(h, a, 0, 3000), vec![A; 3000], "{what}: a's bytes");
    }
    // Stage 4's free of b may have survived a crash after stage 3.
    if stage == 2 {
        let b = named("b").unwrap();
        assert_eq!(bytes(h, b, 0, 100), vec![B; 100], "{what}: b's bytes");
        let c = named("c").unwrap();
        assert_eq!(pointer(h, c).object, b.0, "{what}: c points to b");
    }
    if stage >= 3 {
        let d = named("d").unwrap_or_else(|e| panic!("{what}: d: {e}"));
        let c = named("c").unwrap();
        assert_ne!(pointer(h, d).object, pointer(h, c).object, "{what}: d points to b's copy");
        // f, a copy of ptrs synced in stage 3, holds ptrs's bytes.
        let f = named("f").unwrap_or_else(|e| panic!("{what}: f: {e}"));
        let ptrs = named("ptrs").unwrap();
        assert_eq!(bytes(h, f, 0, 48), bytes(h, ptrs, 0, 48), "{what}: f's bytes are ptrs's");
    }
    if stage >= 2 {
        let ptrs = named("ptrs").unwrap();
        let mut raw = [0u8; 24];
        h.read_at(ptrs, 24, &mut raw).unwrap();
        let large = PPtr::<u8>::from_bytes(&raw);
        h.deref(large).unwrap_or_else(|e| panic!("{what}: large block: {e}"));
        assert_eq!(bytes(h, large.object_id(), large.offset, 9000), vec![L; 9000], "{what}: large block's bytes");
        h.read_at(ptrs, 0, &mut raw).unwrap();
        let small = PPtr::<u8>::from_bytes(&raw);
        if stage < 4 {
            // After stage 3, stage 4's free_in may be durable (its sync's
            // commit reached the log before the crash).
            match h.deref(small) {
                Ok(_) => assert_eq!(bytes(h, small.object_id(), small.offset, 200), vec![S; 200], "{what}"),
                Err(HeapError::Stale { .. }) if stage == 3 => {}
                Err(e) => panic!("{what}: small block: {e}"),
            }
        } else {
            assert!(matches!(h.deref(small), Err(HeapError::Stale { .. })), "{what}: small block was freed");
        }
    }
    // e, allocated after stage 3's last sync, may take b's file (freed and
    // durable there): whenever it survived, it holds zeros, never b's bytes.
    if stage >= 3 {
        if let Ok(e) = named("e") {
            assert_eq!(bytes(h, e, 0, 5000), vec![0; 5000], "{what}: e's bytes");
        }
    }
    if stage >= 4 {
        let a = named("a2").unwrap();
        let size = h.size(a).unwrap();
        assert!(size >= 13_000, "{what}: a grew ({size})");
        assert_eq!(bytes(h, a, size - 1000, 1000), vec![A_TAIL; 1000], "{what}: a's tail");
        assert!(matches!(named("b"), Err(HeapError::NotFound { .. })), "{what}: b was freed");
    }
}

/// Runs the workload on a new machine armed by `arm`, crashes it in
/// `mode`, recovers and checks.
fn crash_run(seed: u64, mode: CrashMode, arm: impl FnOnce(&SimStorage), what: &str) {
    crash_twice(seed, mode, arm, None, what)
}

/// As `crash_run`, and with `recovery` = (j, mode) the first recovery
/// crashes too, after its j-th namespace operation or sync.
fn crash_twice(
    seed: u64,
    mode: CrashMode,
    arm: impl FnOnce(&SimStorage),
    recovery: Option<(u64, CrashMode)>,
    what: &str,
) {
    let (mut image, stage) = crash_sim(seed, mode, arm, workload);
    if let Some((j, second)) = recovery {
        image.crash_after_namespace_ops(j);
        // May fail at the crash: what it left is recovered below.
        drop(larder_object::Store::open(
            common::storage(&image),
            std::path::Path::new(common::DIR),
            common::deterministic(),
        ));
        image = image.crash_with(second);
    }
    let store = reopen_sim(&image);
    let h = open(&store).unwrap();
    let what = format!("{what} ({mode:?}), stage {stage}");
    check_structure(&store, &h, &what);
    check_stage(&h, stage, &what);
    // A second recovery finds nothing left to do.
    drop(h);
    let store = Arc::into_inner(store).unwrap();
    store.close().unwrap();
    let store = reopen_sim(&image);
    assert_eq!(store.recover_heap_files().unwrap(), Default::default(), "{what}: recovery is idempotent");
}

/// How many writes, syncs and namespace operations the workload makes.
fn probe() -> (u64, u64, u64) {
    let sim = SimStorage::new(0);
    let store = sim_store(&sim);
    let before = sim.counters();
    assert_eq!(workload(&store), 4);
    let after = sim.counters();
    (after.writes - before.writes, after.syncs - before.syncs, after.namespace_ops - before.namespace_ops)
}

const MODES: [CrashMode; 3] = [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending];

#[test]
fn crash_at_every_write() {
    let (writes, _, _) = probe();
    assert!(writes > 10, "the workload writes ({writes})");
    for k in 0..=writes {
        // Each mode, and random crashes drawn from several seeds.
        for (m, mode) in MODES.iter().chain([CrashMode::Random; 5].iter()).enumerate() {
            let seed = 100 * k + m as u64;
            crash_run(seed, *mode, |sim| sim.crash_after_writes(k), &format!("crash after write {k} of {writes}"));
        }
    }
}

#[test]
fn crash_at_every_sync() {
    let (_, syncs, _) = probe();
    for k in 0..=syncs {
        for (m, mode) in MODES.iter().enumerate() {
            let seed = 10_000 + 3 * k + m as u64;
            crash_run(seed, *mode, |sim| sim.crash_after_syncs(k), &format!("crash after sync {k} of {syncs}"));
        }
    }
}

#[test]
fn crash_at_every_namespace_operation() {
    let (_, _, names) = probe();
    for k in 1..=names {
        let seed = 20_000 + k;
        crash_run(seed, CrashMode::Random, |sim| sim.crash_after_namespace_ops(k), &format!("crash after name op {k}"));
    }
}

#[test]
fn crash_during_recovery() {
    let (writes, _, _) = probe();
    for k in (0..=writes).step_by(3) {
        for j in 1..=4 {
            let seed = 30_000 + 10 * k + j;
            let mode = MODES[(j % 3) as usize];
            crash_twice(
                seed,
                CrashMode::Random,
                |sim| sim.crash_after_writes(k),
                Some((j, mode)),
                &format!("crash after write {k}, then after namespace op {j} of the recovery"),
            );
        }
    }
}
