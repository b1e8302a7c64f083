//! Prefetches: start loading cache lines a search reads next, so their
//! misses overlap. Unlike a load, a prefetch does not hold up the
//! instructions behind it until its line arrives, and it never faults.

/// Starts loading the cache line that holds `at`.
pub(crate) fn prefetch<T>(at: &T) {
    prefetch_address((at as *const T).cast());
}

/// Starts loading every cache line of `raw` and its last byte.
pub(crate) fn prefetch_lines(raw: &[u8]) {
    let last = raw.len().saturating_sub(1);
    for at in (0..raw.len()).step_by(64).chain(std::iter::once(last)) {
        prefetch_address(raw.as_ptr().wrapping_add(at));
    }
}

#[cfg(target_arch = "x86_64")]
fn prefetch_address(at: *const u8) {
    // SAFETY: a prefetch is a hint that reads nothing the program sees and
    // never faults, whatever the address (SSE, part of x86_64's baseline).
    #[allow(unsafe_code)]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast());
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn prefetch_address(_at: *const u8) {}
