//! Size classes of small blocks and the spans that hold them.
//!
//! Classes are 16 bytes apart up to 256, then eight per doubling (steps
//! of 32, 64, 128, 256), so a class is at most 12.5% above the next
//! smaller one and a block wastes under 12.5% of itself (about 3% on
//! average for sizes spread evenly over 16 B - 4 KiB). Every class is a
//! multiple of 16, so every block is 16-byte aligned; a larger alignment
//! takes the first class at or above the size that is a multiple of it.

/// Bytes of a page: claimed ranges, spans and large blocks are made of whole pages.
pub const PAGE_BYTES: u64 = 4096;

/// Bytes of a small span: every span, whatever its class, is 16 pages.
pub const SPAN_BYTES: u64 = 64 << 10;

/// Pages of a small span.
pub const SPAN_PAGES: u64 = SPAN_BYTES / PAGE_BYTES;

/// Largest block served from a small span; larger blocks are page runs.
pub const MAX_SMALL_BYTES: u64 = 4096;

/// Number of size classes.
pub const CLASS_COUNT: usize = 48;

/// Bytes of each class, ascending.
pub const CLASS_BYTES: [u32; CLASS_COUNT] = class_bytes();

const fn class_bytes() -> [u32; CLASS_COUNT] {
    let mut out = [0u32; CLASS_COUNT];
    let mut i = 0;
    while i < 16 {
        out[i] = 16 * (i as u32 + 1);
        i += 1;
    }
    let mut base = 256u32;
    while base < MAX_SMALL_BYTES as u32 {
        let step = base / 8;
        let mut k = 1;
        while k <= 8 {
            out[i] = base + k * step;
            i += 1;
            k += 1;
        }
        base *= 2;
    }
    out
}

/// The smallest class of at least `16 * g` bytes, for `g` in `0..=256`.
const CLASS_BY_GRANULE: [u8; 257] = class_by_granule();

const fn class_by_granule() -> [u8; 257] {
    let mut out = [0u8; 257];
    let mut granule = 0;
    let mut class = 0;
    while granule <= 256 {
        while CLASS_BYTES[class] < granule as u32 * 16 {
            class += 1;
        }
        out[granule] = class as u8;
        granule += 1;
    }
    out
}

/// The class for a block of `size` bytes aligned to `align` (a power of
/// two up to 4096), or `None` when the block is a large one.
#[inline]
pub fn class_for(size: u64, align: u64) -> Option<usize> {
    if size == 0 || size > MAX_SMALL_BYTES {
        return None;
    }
    let class = usize::from(CLASS_BY_GRANULE[size.div_ceil(16) as usize]);
    if align <= 16 {
        return Some(class);
    }
    // Class 4096 is a multiple of every alignment up to 4096, so this finds one.
    CLASS_BYTES[class..].iter().position(|&bytes| u64::from(bytes).is_multiple_of(align)).map(|i| class + i)
}

/// Slots of a span of `class`.
#[inline]
pub fn slots(class: usize) -> u32 {
    (SPAN_BYTES / u64::from(CLASS_BYTES[class])) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_ascend_at_most_one_eighth_apart_above_128() {
        assert_eq!(CLASS_BYTES[0], 16);
        assert_eq!(CLASS_BYTES[CLASS_COUNT - 1], 4096);
        for pair in CLASS_BYTES.windows(2) {
            assert!(pair[0] < pair[1] && pair[1] % 16 == 0);
            if pair[0] >= 128 {
                assert!(u64::from(pair[1]) * 8 <= u64::from(pair[0]) * 9, "{pair:?}");
            }
        }
    }

    #[test]
    fn class_for_is_the_smallest_fitting_aligned_class() {
        for size in 1..=MAX_SMALL_BYTES {
            for shift in 0..=12 {
                let align = 1u64 << shift;
                let class = class_for(size, align).unwrap_or(usize::MAX);
                let expected = CLASS_BYTES
                    .iter()
                    .position(|&b| u64::from(b) >= size && u64::from(b).is_multiple_of(align.max(16)))
                    .unwrap_or(usize::MAX);
                assert_eq!(class, expected, "size {size} align {align}");
            }
        }
        assert_eq!(class_for(0, 1), None);
        assert_eq!(class_for(4097, 1), None);
    }
}
