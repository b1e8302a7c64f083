//! The metadata cache weighs what it holds honestly: the bytes a pass of
//! gets leaves allocated (the cache's new entries, counted by this
//! binary's allocator) are never more than the weight the cache adds for
//! them, nor much less; and a small key costs few enough bytes that the
//! default cache holds 100,000 of them (the Python benchmark's keys).
#![allow(clippy::unwrap_used)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

use larder_io::SimStorage;
use larder_kv::Durability;

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is passed to the system allocator unchanged; the
// counter only adds the sizes asked for.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as `GlobalAlloc::realloc` requires, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const KEYS: usize = 10_000;

fn key(i: usize) -> String {
    format!("{:016x}", (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

#[test]
fn a_pass_of_gets_weighs_what_it_leaves_allocated() {
    let sim = SimStorage::new(3);
    let mut options = common::options();
    // A small block cache, filled by the first pass: the measured pass
    // then only replaces its blocks.
    options.store.index.block_cache_bytes = 64 << 10;
    let kv =
        larder_kv::Kv::create_with(std::sync::Arc::new(sim.clone()), common::DIR.as_ref(), options.clone()).unwrap();
    kv.create_bucket("b").unwrap();
    for i in 0..KEYS {
        kv.put("b", key(i), &[i as u8; 100], Durability::Buffered).unwrap();
    }
    kv.close().unwrap();
    // Reopened: the cache starts empty, so every entry the passes leave is
    // one a get made.
    let kv = larder_kv::Kv::open_with(std::sync::Arc::new(sim.clone()), common::DIR.as_ref(), options).unwrap();
    let mut out = Vec::with_capacity(256);
    for i in KEYS / 2..KEYS {
        assert!(kv.get_into("b", key(i), &mut out).unwrap());
    }
    let (live, weight) = (LIVE.load(Ordering::Relaxed), kv.store().meta_cache_stats().2);
    for i in 0..KEYS / 2 {
        assert!(kv.get_into("b", key(i), &mut out).unwrap());
        assert_eq!(out, [i as u8; 100]);
    }
    let allocated = LIVE.load(Ordering::Relaxed) - live;
    let weighed = (kv.store().meta_cache_stats().2 - weight) as i64;
    let keys = (KEYS / 2) as i64;
    eprintln!("a key: {} bytes weighed, {} allocated", weighed / keys, allocated / keys);
    assert!(allocated > 0, "the pass cached nothing");
    assert!(
        weighed >= allocated,
        "{weighed} bytes weighed for {allocated} allocated ({} and {} a key)",
        weighed / keys,
        allocated / keys
    );
    assert!(weighed <= allocated * 5 / 4, "{weighed} bytes weighed for {allocated} allocated: over-weighed");
    // The default cache holds 100,000 such keys.
    let tmp = tempfile::tempdir().unwrap();
    let default = larder_kv::Kv::create(tmp.path(), larder_kv::KvOptions::default()).unwrap();
    assert_eq!(larder_object::StoreOptions::default().meta_cache_bytes, 64 << 20);
    let capacity = default.store().meta_cache_capacity() as i64;
    assert!(weighed / keys * 100_000 <= capacity, "{} bytes a key, {capacity} in the cache", weighed / keys);
    // Answered from the cache alone now.
    let mut cached = Vec::new();
    assert_eq!(kv.get_cached_into("b", key(0), &mut cached).unwrap(), Some(true));
    assert_eq!(cached, [0u8; 100]);
}
