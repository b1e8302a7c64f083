//! A run's hot metadata on transparent huge pages.
//!
//! A point get reads a line of every candidate run's filter and a few
//! lines of the block index of the run holding the key: random lines of
//! megabytes of heap, each on a 4 KiB page of its own, so each costs a TLB
//! miss and a page walk (which under a hypervisor walks two page tables).
//! On 2 MiB pages a run's filter and block index are a few TLB entries.
//!
//! An open run with at least [`MIN_REGION_BYTES`] of such arrays builds
//! them in one [`Region`]: an anonymous mapping of its own, aligned to
//! 2 MiB, rounded up to whole 2 MiB pages and advised `MADV_HUGEPAGE`
//! before its first touch. The arrays are [`HugeSlice`]s, built in place
//! there (a copy from the heap left the heap's freed pages resident: 16 MB
//! more anonymous memory on the C32 load), or on the heap if the run is
//! small, the region is full or the kernel refuses the mapping.

use std::ptr::NonNull;
use std::sync::Arc;

/// The huge page size of x86-64 (and of aarch64 with 4 KiB base pages).
pub(crate) const HUGE_BYTES: usize = 2 << 20;

/// A run's hot arrays are moved to a region when they take at least this
/// much: the rounding up to whole huge pages then at most quadruples them
/// (a region of 2 MiB for 512 KiB), and for a large run adds under 2 MiB.
pub(crate) const MIN_REGION_BYTES: usize = 512 << 10;

/// An anonymous mapping on huge pages that [`HugeSlice`]s (a run's arrays)
/// or a memtable's entries (`memtable::arena::SharedBytes`) live in;
/// unmapped when the last of them drops.
#[derive(Debug)]
pub(crate) struct Region {
    base: NonNull<u8>,
    bytes: usize,
}

// SAFETY: a Region is a span of memory split among the HugeSlices or
// SharedBytes that hold it, each span owned by one of them and reached
// only through it (see their Send and Sync); the Region itself only
// unmaps it, once the last holder drops.
#[allow(unsafe_code)]
unsafe impl Send for Region {}
// SAFETY: as for Send: shared, a Region is only held (nothing reads or
// writes through it).
#[allow(unsafe_code)]
unsafe impl Sync for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `base`..+`bytes` is the mapping `Region::map` made; the
        // last HugeSlice or SharedBytes in it has dropped (each holds an
        // Arc).
        #[allow(unsafe_code)]
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.bytes);
        }
    }
}

impl Region {
    /// A region for `bytes` of arrays (rounded up to whole huge pages),
    /// None if the kernel refuses the mapping.
    pub(crate) fn map(bytes: usize) -> Option<Region> {
        let map_bytes = bytes.max(1).next_multiple_of(HUGE_BYTES);
        // Reserve a huge page more than needed, then unmap the ends that
        // are not aligned: the kernel aligns anonymous mappings to 4 KiB.
        let reserve = map_bytes.checked_add(HUGE_BYTES)?;
        // SAFETY: a fresh anonymous mapping at an address the kernel picks
        // touches no existing memory.
        #[allow(unsafe_code)]
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserve,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let at = base as usize;
        let start = at.next_multiple_of(HUGE_BYTES);
        let (head, tail) = (start - at, reserve - (start - at) - map_bytes);
        // SAFETY: the head and tail unmapped lie inside the reservation
        // just made, outside [start, start + map_bytes), and nothing uses
        // them. MADV_HUGEPAGE changes only how the kept range is backed (a
        // failure leaves it on 4 KiB pages, which is still correct).
        #[allow(unsafe_code)]
        unsafe {
            if head > 0 {
                libc::munmap(base, head);
            }
            if tail > 0 {
                libc::munmap((start + map_bytes) as *mut libc::c_void, tail);
            }
            libc::madvise(start as *mut libc::c_void, map_bytes, libc::MADV_HUGEPAGE);
        }
        Some(Region { base: NonNull::new(start as *mut u8)?, bytes: map_bytes })
    }

    /// Faults every page of the region in (a huge page if the kernel has
    /// one, else each 4 KiB page), so that the first write of whoever fills
    /// it does not wait while the kernel zeroes 2 MiB.
    pub(crate) fn prefault(&self) {
        for at in (0..self.bytes).step_by(4096) {
            // SAFETY: `at` is inside the mapping, which nothing else uses
            // yet (the region was just mapped and is not shared); writing
            // a zero over fresh anonymous memory changes no byte.
            #[allow(unsafe_code)]
            unsafe {
                self.base.as_ptr().add(at).write_volatile(0);
            }
        }
    }

    /// Where the region starts.
    #[cfg(test)]
    pub(crate) fn base(&self) -> usize {
        self.base.as_ptr() as usize
    }
}

/// A region being filled: arrays are placed one after another.
pub(crate) struct RegionFill {
    region: Arc<Region>,
    used: usize,
}

impl RegionFill {
    /// A region for arrays of `bytes` in all (each placed at its own
    /// alignment, at most 64 bytes: a caller counts that padding in), if
    /// they are worth one ([`MIN_REGION_BYTES`]) and the kernel maps it.
    pub(crate) fn new(bytes: usize) -> Option<RegionFill> {
        if bytes < MIN_REGION_BYTES {
            return None;
        }
        Some(RegionFill::in_region(Region::map(bytes)?))
    }

    /// Fills `region` from its start.
    pub(crate) fn in_region(region: Region) -> RegionFill {
        RegionFill { region: Arc::new(region), used: 0 }
    }

    /// Bytes placed so far (with their alignment padding).
    pub(crate) fn used(&self) -> usize {
        self.used
    }

    /// Bytes of the region no array uses: counted in a run's memory.
    pub(crate) fn slack(&self) -> usize {
        self.region.bytes - self.used
    }

    /// Reserves `len` elements of `T` after those placed so far, if they
    /// fit: where they start, and the region to hold on to.
    pub(crate) fn place<T>(&mut self, len: usize) -> Option<(NonNull<T>, Arc<Region>)> {
        let (bytes, align) = (len.checked_mul(std::mem::size_of::<T>())?, std::mem::align_of::<T>());
        let base = self.region.base.as_ptr() as usize;
        let at = (base + self.used).next_multiple_of(align);
        let end = at - base + bytes;
        if bytes == 0 || end > self.region.bytes {
            return None;
        }
        self.used = end;
        Some((NonNull::new(at as *mut T)?, self.region.clone()))
    }
}

/// A fixed-size array of `T` on the heap or in a [`Region`].
pub(crate) struct HugeSlice<T: Copy> {
    place: Place<T>,
}

enum Place<T> {
    Heap(Box<[T]>),
    /// `len` elements at `ptr`, inside `region`.
    Region {
        ptr: NonNull<T>,
        len: usize,
        _region: Arc<Region>,
    },
}

// SAFETY: a HugeSlice owns its elements as a Box<[T]> does (its span of
// the region is its alone): read through `&self`, written through
// `&mut self`.
#[allow(unsafe_code)]
unsafe impl<T: Copy + Send> Send for HugeSlice<T> {}
// SAFETY: as for Send: shared access only reads.
#[allow(unsafe_code)]
unsafe impl<T: Copy + Sync> Sync for HugeSlice<T> {}

impl<T: Copy> HugeSlice<T> {
    /// The elements of `items` on the heap (no copy: a vector whose
    /// capacity is its length becomes the slice as it is).
    pub(crate) fn from_vec(items: Vec<T>) -> HugeSlice<T> {
        HugeSlice { place: Place::Heap(items.into_boxed_slice()) }
    }

    /// `len` copies of `value`, in `fill`'s region if given and there is
    /// room, else on the heap; the caller then writes the elements.
    pub(crate) fn filled(fill: Option<&mut RegionFill>, len: usize, value: T) -> HugeSlice<T> {
        let placed = fill.and_then(|fill| fill.place::<T>(len));
        let Some((ptr, region)) = placed else { return HugeSlice::from_vec(vec![value; len]) };
        for i in 0..len {
            // SAFETY: `place` reserved `len` elements at `ptr`, aligned,
            // inside the region and used by nothing else.
            #[allow(unsafe_code)]
            unsafe {
                ptr.as_ptr().add(i).write(value);
            }
        }
        HugeSlice { place: Place::Region { ptr, len, _region: region } }
    }

    /// Bytes the elements take.
    pub(crate) fn size_bytes(&self) -> usize {
        std::mem::size_of_val(&**self)
    }

    /// Whether the elements live in a region.
    #[cfg(test)]
    pub(crate) fn in_region(&self) -> bool {
        matches!(self.place, Place::Region { .. })
    }
}

/// Bytes a region needs for `len` elements of `T`: their bytes and the
/// padding that aligns them.
pub(crate) fn region_bytes_of<T>(len: usize) -> usize {
    len * std::mem::size_of::<T>() + std::mem::align_of::<T>() - 1
}

impl<T: Copy> Default for HugeSlice<T> {
    fn default() -> Self {
        HugeSlice { place: Place::Heap(Box::default()) }
    }
}

impl<T: Copy> std::ops::Deref for HugeSlice<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.place {
            Place::Heap(b) => b,
            // SAFETY: `ptr` holds `len` elements written by `filled`, in
            // a region that lives as long as this slice holds its Arc.
            #[allow(unsafe_code)]
            Place::Region { ptr, len, .. } => unsafe { std::slice::from_raw_parts(ptr.as_ptr(), *len) },
        }
    }
}

impl<T: Copy> std::ops::DerefMut for HugeSlice<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.place {
            Place::Heap(b) => b,
            // SAFETY: as for Deref; `&mut self` is the only access (the
            // region's span for this slice is its alone).
            #[allow(unsafe_code)]
            Place::Region { ptr, len, .. } => unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), *len) },
        }
    }
}

impl<T: Copy> std::fmt::Debug for HugeSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let in_region = matches!(self.place, Place::Region { .. });
        f.debug_struct("HugeSlice").field("len", &self.len()).field("in_region", &in_region).finish()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn arrays_are_built_in_a_region_aligned_while_they_fit() {
        let mut fill = RegionFill::new(MIN_REGION_BYTES).unwrap();
        assert_eq!(fill.slack(), HUGE_BYTES);
        let mut a = HugeSlice::filled(Some(&mut fill), 40_000, 0u64);
        let mut b = HugeSlice::filled(Some(&mut fill), 100_001, 0u8);
        let mut c = HugeSlice::filled(Some(&mut fill), 30_000, 5u128);
        assert!(a.in_region() && b.in_region() && c.in_region());
        assert_eq!(a.as_ptr() as usize % HUGE_BYTES, 0);
        assert_eq!(c.as_ptr() as usize % 16, 0);
        assert_eq!(fill.slack(), HUGE_BYTES - (320_000 + 100_001 + 15 + 480_000));
        for (i, x) in a.iter_mut().enumerate() {
            *x = i as u64 * 7;
        }
        b[100_000] = 3;
        c[0] = 1 << 100;
        // One that does not fit is built on the heap.
        let big = HugeSlice::filled(Some(&mut fill), HUGE_BYTES / 8, 9u64);
        assert!(!big.in_region() && big.iter().all(|&x| x == 9));
        drop(fill);
        // The region lives as long as its arrays do; they keep their own.
        assert!(a.iter().enumerate().all(|(i, &x)| x == i as u64 * 7));
        assert!(b[..100_000].iter().all(|&x| x == 0) && b[100_000] == 3);
        drop((a, b));
        assert_eq!((c[0], c[29_999]), (1 << 100, 5));
    }

    /// Pages of `bytes` at `base` that are resident.
    pub(crate) fn resident_pages(base: usize, bytes: usize) -> usize {
        let mut vec = vec![0u8; bytes.div_ceil(4096)];
        // SAFETY: `base`..+`bytes` is a live mapping of the caller's, and
        // `vec` has a byte for each of its 4 KiB pages.
        #[allow(unsafe_code)]
        let r = unsafe { libc::mincore(base as *mut libc::c_void, bytes, vec.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore");
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }

    #[test]
    fn a_prefaulted_region_is_resident_and_fills_from_its_start() {
        let region = Region::map(HUGE_BYTES).unwrap();
        let base = region.base();
        assert_eq!(resident_pages(base, HUGE_BYTES), 0, "a fresh mapping has no page yet");
        region.prefault();
        assert_eq!(resident_pages(base, HUGE_BYTES), HUGE_BYTES / 4096);
        let mut fill = RegionFill::in_region(region);
        let s = HugeSlice::filled(Some(&mut fill), 1000, 3u64);
        assert!(s.in_region() && s.iter().all(|&x| x == 3));
        assert_eq!(s.as_ptr() as usize, base);
        assert_eq!(fill.used(), 8000);
    }

    #[test]
    fn small_runs_get_no_region_and_empty_arrays_stay_on_the_heap() {
        assert!(RegionFill::new(MIN_REGION_BYTES - 1).is_none());
        let mut fill = RegionFill::new(MIN_REGION_BYTES).unwrap();
        let e: HugeSlice<u32> = HugeSlice::filled(Some(&mut fill), 0, 0);
        assert!(e.is_empty() && !e.in_region());
        let h = HugeSlice::filled(None, 3, 1u16);
        assert!(!h.in_region() && *h == [1, 1, 1]);
        assert_eq!(region_bytes_of::<u128>(2), 47);
    }
}
