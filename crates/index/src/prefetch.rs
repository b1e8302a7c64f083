//! Prefetches: start loading cache lines a search reads next, so their
//! misses overlap. Unlike a load, a prefetch does not hold up the
//! instructions behind it until its line arrives, and it never faults.

/// Starts loading the cache line that holds `at`.
pub(crate) fn prefetch<T>(at: &T) {
    prefetch_address((at as *const T).cast());
}

/// Bytes at the end of `raw` that [`prefetch_lines`] starts loading first.
const END_FIRST_BYTES: usize = 192;

/// Starts loading every cache line of `raw`, those of its last
/// [`END_FIRST_BYTES`] first: a data block keeps its entry count and offset
/// table at its end, and a search reads them before any entry. Requested
/// last, they waited behind the block's other lines (a get's block search
/// took 7% more CPU on the C32 load, paired runs).
pub(crate) fn prefetch_lines(raw: &[u8]) {
    for at in line_offsets(raw.len()) {
        prefetch_address(raw.as_ptr().wrapping_add(at));
    }
}

/// Offsets into `len` bytes, 64 apart or less, touching every cache line
/// the bytes span wherever they start: those of the last
/// [`END_FIRST_BYTES`] first, then the rest from the start.
fn line_offsets(len: usize) -> impl Iterator<Item = usize> {
    let end_from = len.saturating_sub(END_FIRST_BYTES);
    let end = (end_from..len).step_by(64).chain(std::iter::once(len.saturating_sub(1)));
    end.chain((0..end_from).step_by(64))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line of bytes of any length starting anywhere in a line is
    /// touched, the last line first.
    #[test]
    fn line_offsets_touch_every_line_the_end_first() {
        for len in [1usize, 2, 63, 64, 65, 191, 192, 193, 255, 256, 1000, 4096, 4133] {
            for start in [0usize, 1, 31, 63] {
                let line = |at: usize| (start + at) / 64;
                let touched: std::collections::BTreeSet<usize> = line_offsets(len).map(line).collect();
                let spanned: std::collections::BTreeSet<usize> = (0..len).map(line).collect();
                assert_eq!(touched, spanned, "len {len} from {start}");
                let first = line_offsets(len).next().map(line);
                assert_eq!(first, Some(line(len.saturating_sub(END_FIRST_BYTES))), "len {len}");
                assert!(line_offsets(len).take(4).any(|at| line(at) == line(len - 1)), "len {len}: last line late");
            }
        }
    }
}
