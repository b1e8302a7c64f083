//! A put of a value too large to be inline writes it to container space
//! from the caller's slice: the put's transaction must not also set aside
//! room for it in its batch (memory it never uses, as large as the value;
//! for a value of a few GiB, an allocation that may fail and abort).
//! How: a counting allocator records the most bytes held beyond those held
//! when the put starts.
// A counting global allocator needs unsafe: it forwards to the system one.
#![allow(clippy::unwrap_used, unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use larder_io::RealStorage;
use larder_kv::{Durability, Kv, KvOptions};

struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes to the system allocator with the caller's
// arguments; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let held = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(held, Ordering::Relaxed);
        // SAFETY: as the caller's contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const VALUE_BYTES: usize = 32 << 20;

#[test]
fn a_large_put_holds_no_second_copy_of_its_value() {
    let tmp = tempfile::tempdir().unwrap();
    let kv = Kv::create_with(Arc::new(RealStorage::new()), &tmp.path().join("kv"), KvOptions::default()).unwrap();
    kv.create_bucket("b").unwrap();
    let value = vec![7u8; VALUE_BYTES];
    // The store's own buffers settle with a first large put.
    kv.put("b", "first", &value, Durability::Durable).unwrap();
    let before = HELD.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    kv.put("b", "second", &value, Durability::Durable).unwrap();
    let extra = PEAK.load(Ordering::Relaxed) - before;
    assert!(extra < VALUE_BYTES / 2, "a put of {VALUE_BYTES} bytes held {extra} more at its peak");
    assert_eq!(kv.get("b", "second").unwrap().map(|v| v.len()), Some(VALUE_BYTES));
}
