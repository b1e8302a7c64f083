//! A heap that has not loaded an object's allocator answers its first
//! generation checks from the committed records alone (the header and the
//! one record that can hold the offset). Its verdicts must be the loaded
//! allocator's, for live, freed, interior, overrunning, wrong-generation
//! and user-byte pointers into small spans and large blocks.
#![allow(clippy::unwrap_used)]

mod common;

use larder_heap::{Heap, HeapError, ObjectId, PPtr};

use common::{heap, reopen_sim, sim_heap};

/// The verdict of one deref, comparable across heaps.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Live,
    Stale,
    Other(String),
}

fn deref_verdict(h: &Heap, p: PPtr<[u8; 8]>) -> Verdict {
    match h.deref(p) {
        Ok(_) => Verdict::Live,
        Err(HeapError::Stale { .. }) => Verdict::Stale,
        Err(e) => Verdict::Other(format!("{e:?}").chars().take(24).collect()),
    }
}

/// Pointers to ask about: each block, an interior pointer, one running
/// past the block's end, a wrong generation and generation 0.
fn probes(blocks: &[(PPtr<u8>, u64)]) -> Vec<PPtr<[u8; 8]>> {
    let mut out = Vec::new();
    for &(p, size) in blocks {
        let p = p.cast::<[u8; 8]>();
        out.push(p);
        out.push(PPtr::new(p.object, p.offset + 8, p.generation));
        out.push(PPtr::new(p.object, p.offset + size.next_multiple_of(8), p.generation));
        out.push(p.with_generation(p.generation + 1));
        out.push(p.with_generation(0));
    }
    out
}

#[test]
fn checks_from_the_index_agree_with_the_loaded_allocator() {
    let (sim, store, h) = sim_heap(31);
    let a: ObjectId = h.alloc(64).unwrap();
    let mut blocks = Vec::new();
    for i in 0..40u64 {
        // Small blocks of several classes, and large ones (whole pages).
        let size = if i % 9 == 4 { 20_000 + i * 100 } else { 16 + (i % 5) * 200 };
        blocks.push((h.alloc_in(a, size, 8).unwrap(), size));
    }
    for (p, _) in blocks.iter().skip(3).step_by(4) {
        h.free_in(*p).unwrap();
    }
    h.sync().unwrap();
    drop(h);
    let store = {
        let s = std::sync::Arc::try_unwrap(store).unwrap();
        s.close().unwrap();
        reopen_sim(&sim)
    };
    let all = probes(&blocks);
    assert!(all.len() < 250, "the lazy budget must cover every probe");
    // A fresh heap: no allocator loaded, every check from the index.
    let lazy: Vec<Verdict> = {
        let h = heap(&store);
        let v = all.iter().map(|p| deref_verdict(&h, *p)).collect();
        // User bytes before the claimed spans stay user bytes.
        assert_eq!(deref_verdict(&h, PPtr::new(a.0, 0, 0)), Verdict::Live);
        v
    };
    // The same store and heap with the allocator loaded (an allocation
    // loads it) must say the same of every pointer.
    let h = heap(&store);
    let extra = h.alloc_in(a, 16, 8).unwrap();
    let loaded: Vec<Verdict> = all.iter().map(|p| deref_verdict(&h, *p)).collect();
    for (i, (l, f)) in lazy.iter().zip(&loaded).enumerate() {
        assert_eq!(l, f, "probe {i}: {:?}", all[i]);
    }
    // And they are right: live blocks live, freed ones stale.
    for (i, (p, _)) in blocks.iter().enumerate() {
        let expect = if i >= 3 && (i - 3) % 4 == 0 { Verdict::Stale } else { Verdict::Live };
        assert_eq!(lazy[i * 5], expect, "block {i} at {}", p.offset);
        assert_eq!(lazy[i * 5 + 3], Verdict::Stale, "block {i}: wrong generation");
        assert_ne!(lazy[i * 5 + 4], Verdict::Live, "block {i}: generation 0 inside a span");
    }
    assert!(lazy.contains(&Verdict::Stale) && lazy.contains(&Verdict::Live));
    h.check(extra, 16).unwrap();
}

#[test]
fn an_object_without_allocator_records_has_only_user_bytes() {
    let (_sim, store, h) = sim_heap(32);
    let a = h.alloc(4096).unwrap();
    h.sync().unwrap();
    drop(h);
    let h = heap(&store);
    assert_eq!(deref_verdict(&h, PPtr::new(a.0, 64, 0)), Verdict::Live);
    assert_eq!(deref_verdict(&h, PPtr::new(a.0, 64, 5)), Verdict::Stale);
}
