//! Support shared by Larder's tests, a dev-dependency only.
//!
//! [`CountingAllocator`]: the system allocator, counting the calls each
//! thread makes, for tests that bound what a hot path allocates. A test
//! binary installs it as its global allocator:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: larder_testkit::CountingAllocator = larder_testkit::CountingAllocator;
//! ```
//!
//! then reads [`allocation_calls`] before and after the call it measures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    /// Calls to `alloc` and `realloc` made by this thread.
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting each thread's calls to `alloc` and
/// `realloc` (frees are not counted).
pub struct CountingAllocator;

fn count() {
    // `try_with`: a thread's last frees run after its locals are gone.
    let _ = CALLS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is passed to the system allocator unchanged; the
// counter is a thread-local cell that allocates nothing.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as `GlobalAlloc::realloc` requires, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Calls to `alloc` and `realloc` this thread has made so far, when
/// [`CountingAllocator`] is the global allocator (0 otherwise).
pub fn allocation_calls() -> u64 {
    CALLS.with(|c| c.get())
}

/// The median of `counts` (the upper one of an even number; 0 for none):
/// per-call counts whose outliers (a flush, a growth) say nothing of the
/// path measured.
pub fn median(mut counts: Vec<u64>) -> u64 {
    counts.sort_unstable();
    counts.get(counts.len() / 2).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle_count() {
        assert_eq!(median(vec![]), 0);
        assert_eq!(median(vec![5]), 5);
        assert_eq!(median(vec![9, 1, 5]), 5);
        assert_eq!(median(vec![1, 100, 2, 3]), 3);
    }
}
