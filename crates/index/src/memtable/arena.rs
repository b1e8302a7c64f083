//! Where a memtable's large entries keep their bytes: 2 MiB regions on
//! transparent huge pages ([`crate::huge`]), filled one entry after
//! another, instead of one heap allocation per entry.
//!
//! A durable 4 KiB put leaves its entry's 4 KiB live until the memtable
//! is flushed, so on the heap every such entry was new memory: glibc grows
//! a thread arena's heap by exactly what is missing (an `mprotect` per
//! put) and the entry's first write faults its page in (a page fault per
//! put, several microseconds each under a hypervisor). In a region the
//! whole 2 MiB comes with one fault, about 500 such entries' worth.
//!
//! Only memtables of at least [`MIN_ARENA_BUDGET`] get an arena (a region
//! is then at most an eighth more than their budget), and only entries of
//! [`MIN_ARENA_ENTRY`] to [`MAX_ARENA_ENTRY`] bytes go there: smaller ones
//! are inline in the skip list or in a sealing's shared chunk, larger
//! ones would waste much of a region's tail. A region is freed when the
//! last entry, array or reader holding part of it is dropped.
//!
//! The next region is mapped and faulted in on a thread of its own once
//! the one being filled is half full ([`PREPARE_AT`]). Otherwise the entry
//! that opens a region pays its fault: 2 MiB zeroed under the store's
//! apply turn, which every writer waits for. A memtable that is frozen
//! hands its prepared region to the next one ([`EntryArena::hand_over`]),
//! so the spare is one region per index, not per memtable, and the next
//! memtable's first large entry finds its region faulted in (when the
//! frozen one had filled half a region). If no thread can be
//! started, the region is mapped when it is needed, and no thread is
//! asked for again until then. A spare still being prepared when its
//! arena is dropped is unmapped by its thread when the thread ends.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::huge::{Region, RegionFill, HUGE_BYTES};

/// The next region is prepared once the one being filled holds this many
/// bytes: half a region of 4 KiB entries is about 250 puts, time enough
/// for a thread to fault 2 MiB in.
pub(crate) const PREPARE_AT: usize = HUGE_BYTES / 2;

/// Memtables with at least this budget place their large entries in
/// regions.
pub(crate) const MIN_ARENA_BUDGET: usize = 16 << 20;

/// Entries (key and payload) of at least this many bytes go to the arena:
/// the size at which a sealing keeps an entry's bytes as a chunk of their
/// own rather than copying them.
pub(crate) const MIN_ARENA_ENTRY: usize = super::sorted::OWN_CHUNK_BYTES;

/// Entries above this go to the heap: at most an eighth of a region is
/// left unused when one does not fit the current region's tail.
pub(crate) const MAX_ARENA_ENTRY: usize = HUGE_BYTES / 8;

/// Immutable bytes shared by reference count: an `Arc<[u8]>` of their own
/// or a span of a region. Read through one pointer and length whichever
/// holds them.
#[derive(Clone)]
pub(crate) struct SharedBytes {
    ptr: NonNull<u8>,
    len: usize,
    _owner: Owner,
}

/// What keeps a [`SharedBytes`]' memory alive.
#[derive(Clone)]
enum Owner {
    Heap { _bytes: Arc<[u8]> },
    Region { _region: Arc<Region> },
}

// SAFETY: the bytes are never written after construction (see `Deref`),
// and their owner (an Arc of bytes or of a region, both Send and Sync) is
// held for as long as the pointer is.
#[allow(unsafe_code)]
unsafe impl Send for SharedBytes {}
// SAFETY: as for Send: shared access only reads.
#[allow(unsafe_code)]
unsafe impl Sync for SharedBytes {}

impl From<Arc<[u8]>> for SharedBytes {
    fn from(data: Arc<[u8]>) -> SharedBytes {
        let ptr = NonNull::from(&*data).cast::<u8>();
        SharedBytes { ptr, len: data.len(), _owner: Owner::Heap { _bytes: data } }
    }
}

impl std::ops::Deref for SharedBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` and `len` are the bytes of the Arc held in
        // `_owner` (which never move or change while it lives), or a span
        // of the region held there that `EntryArena::place` reserved for
        // these bytes alone and wrote before making this value.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts(self.ptr.as_ptr(), self.len)
        }
    }
}

impl std::fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let in_region = matches!(self._owner, Owner::Region { .. });
        f.debug_struct("SharedBytes").field("len", &self.len).field("in_region", &in_region).finish()
    }
}

impl SharedBytes {
    /// Whether the bytes lie in a region (and are charged with it).
    pub(crate) fn in_region(&self) -> bool {
        matches!(self._owner, Owner::Region { .. })
    }
}

/// A memtable's regions for large entries: the one being filled (older
/// ones live as long as their entries do) and the next one.
#[derive(Default)]
pub(crate) struct EntryArena {
    fill: parking_lot::Mutex<Filling>,
    /// Bytes of every region opened: the memtable charges a region whole
    /// when it opens (its pages are resident from the first entry, and an
    /// entry that does not fit a region's tail leaves that tail unused).
    region_bytes: AtomicUsize,
    /// Set when the kernel refused a region: the memtable's later large
    /// entries go to the heap without asking again.
    refused: AtomicBool,
}

/// The region being filled and the one prepared to follow it.
#[derive(Default)]
struct Filling {
    fill: Option<RegionFill>,
    spare: Option<Spare>,
}

/// The next region: being mapped and faulted in on its thread, ready
/// (waited for already: only a test looks at a spare before its use), or
/// not to be asked for again before the region being filled is full (no
/// thread could be started).
enum Spare {
    Preparing(std::thread::JoinHandle<Option<Region>>),
    #[cfg_attr(not(test), expect(dead_code))]
    Ready(Region),
    Unavailable,
}

impl Spare {
    /// Maps and faults in a region on a thread of its own;
    /// [`Spare::Unavailable`] if no thread could be started (the region is
    /// then mapped when needed).
    fn prepare() -> Option<Spare> {
        let thread = std::thread::Builder::new().name("larder-region".into()).stack_size(64 << 10).spawn(|| {
            let region = Region::map(HUGE_BYTES)?;
            region.prefault();
            Some(region)
        });
        Some(thread.map_or(Spare::Unavailable, Spare::Preparing))
    }

    /// The region, once ready; None if the kernel refused it (or its
    /// thread panicked, or none was asked for).
    fn wait(self) -> Option<Region> {
        match self {
            Spare::Preparing(thread) => thread.join().ok().flatten(),
            Spare::Ready(region) => Some(region),
            Spare::Unavailable => None,
        }
    }
}

impl EntryArena {
    /// `key` then `payload`, copied into the region being filled (a new
    /// one when they do not fit its tail); None if they are outside the
    /// arena's sizes or the kernel refuses a region (the caller puts them
    /// on the heap).
    pub(crate) fn place(&self, key: &[u8], payload: &[u8]) -> Option<SharedBytes> {
        let len = key.len() + payload.len();
        if !(MIN_ARENA_ENTRY..=MAX_ARENA_ENTRY).contains(&len) {
            return None;
        }
        if self.refused.load(Ordering::Relaxed) {
            return None;
        }
        let mut filling = self.fill.lock();
        let st = &mut *filling;
        if st.fill.as_ref().is_none_or(|f| f.slack() < len) {
            let prepared = st.spare.take().and_then(Spare::wait).map(RegionFill::in_region);
            let Some(region) = prepared.or_else(|| RegionFill::new(HUGE_BYTES)) else {
                self.refused.store(true, Ordering::Relaxed);
                return None;
            };
            st.fill = Some(region);
            self.region_bytes.fetch_add(HUGE_BYTES, Ordering::Relaxed);
        }
        let fill = st.fill.as_mut()?;
        let (ptr, region) = fill.place::<u8>(len)?;
        if st.spare.is_none() && fill.used() >= PREPARE_AT {
            st.spare = Spare::prepare();
        }
        // SAFETY: `place` reserved `len` bytes at `ptr` inside the region,
        // used by nothing else; they are written here, before any
        // SharedBytes reads them.
        #[allow(unsafe_code)]
        unsafe {
            std::ptr::copy_nonoverlapping(key.as_ptr(), ptr.as_ptr(), key.len());
            std::ptr::copy_nonoverlapping(payload.as_ptr(), ptr.as_ptr().add(key.len()), payload.len());
        }
        Some(SharedBytes { ptr, len, _owner: Owner::Region { _region: region } })
    }

    /// Gives this (frozen) arena's prepared region, if any, to `next`, the
    /// arena of the memtable that replaces it, unless `next` has one.
    pub(crate) fn hand_over(&self, next: &EntryArena) {
        let Some(spare) = self.fill.lock().spare.take() else { return };
        let mut to = next.fill.lock();
        if to.spare.is_none() {
            to.spare = match spare {
                // Not joined here: the caller holds the index's write lock.
                Spare::Unavailable => None,
                other => Some(other),
            };
        }
    }

    /// Bytes of every region this arena has opened.
    pub(crate) fn region_bytes(&self) -> usize {
        self.region_bytes.load(Ordering::Relaxed)
    }

    /// Where the prepared next region starts, once its thread is done.
    #[cfg(test)]
    fn spare_base(&self) -> Option<usize> {
        let mut st = self.fill.lock();
        let region = st.spare.take()?.wait()?;
        let base = region.base();
        st.spare = Some(Spare::Ready(region));
        Some(base)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn large_entries_fill_a_region_and_the_rest_go_to_the_heap() {
        let arena = EntryArena::default();
        let value = vec![5u8; 4096];
        let placed: Vec<SharedBytes> = (0..600u32).map(|i| arena.place(&i.to_be_bytes(), &value).unwrap()).collect();
        // 600 entries of 4,100 bytes take two regions; every one keeps its bytes.
        for (i, b) in placed.iter().enumerate() {
            assert!(b.in_region());
            assert_eq!(&b[..4], &(i as u32).to_be_bytes());
            assert!(b[4..].iter().all(|&x| x == 5) && b.len() == 4100);
        }
        let regions: std::collections::HashSet<usize> =
            placed.iter().map(|b| b.as_ptr() as usize / HUGE_BYTES).collect();
        assert_eq!(regions.len(), 2);
        assert_eq!(arena.region_bytes(), 2 * HUGE_BYTES, "each region is counted whole, once");
        assert!(arena.place(b"k", &[1u8; 100]).is_none(), "small entries are not placed");
        assert!(arena.place(b"k", &vec![1u8; MAX_ARENA_ENTRY]).is_none(), "nor very large ones");
        // Bytes outlive the arena and the other entries of their region.
        let kept = placed[7].clone();
        drop(placed);
        drop(arena);
        assert_eq!(&kept[..4], &7u32.to_be_bytes());
    }

    #[test]
    fn a_frozen_arena_hands_its_prepared_region_to_the_next_which_fills_it_first() {
        let frozen = EntryArena::default();
        let value = vec![6u8; 4096];
        let kept: Vec<SharedBytes> = (0..256u32).map(|i| frozen.place(&i.to_be_bytes(), &value).unwrap()).collect();
        let spare = frozen.spare_base().expect("half full: the next region is prepared");
        let next = EntryArena::default();
        frozen.hand_over(&next);
        assert_eq!(frozen.spare_base(), None, "the frozen arena keeps no spare");
        let first = next.place(b"k", &value).unwrap();
        assert_eq!(first.as_ptr() as usize, spare, "the next arena's first entry is in the handed-over region");
        assert_eq!(next.region_bytes(), HUGE_BYTES);
        assert!(kept.iter().all(|b| b[4..] == value[..]));
    }

    #[test]
    fn the_next_region_is_faulted_in_once_one_is_half_full_and_then_filled() {
        let arena = EntryArena::default();
        let value = vec![5u8; 4096];
        let place = |i: u32| arena.place(&i.to_be_bytes(), &value).unwrap();
        // 4,100-byte entries: 255 are under half a region, 256 reach it.
        let mut placed: Vec<SharedBytes> = (0..255).map(place).collect();
        assert_eq!(arena.spare_base(), None, "under half full: nothing prepared");
        placed.push(place(255));
        let spare = arena.spare_base().expect("half full: the next region is prepared");
        assert_eq!(crate::huge::tests::resident_pages(spare, HUGE_BYTES), HUGE_BYTES / 4096);
        assert_eq!(arena.region_bytes(), HUGE_BYTES, "a spare is charged once it is filled");
        // 511 fit the first region; the 512th opens the prepared one.
        placed.extend((256..512).map(place));
        let first = placed[0].as_ptr() as usize;
        assert!(placed[..511].iter().all(|b| (b.as_ptr() as usize) / HUGE_BYTES == first / HUGE_BYTES));
        assert_eq!(placed[511].as_ptr() as usize, spare);
        assert_eq!(arena.region_bytes(), 2 * HUGE_BYTES);
        assert!(placed.iter().enumerate().all(|(i, b)| b[..4] == (i as u32).to_be_bytes() && b[4..] == value[..]));
    }

    #[test]
    fn heap_bytes_read_as_their_arc() {
        let b = SharedBytes::from(Arc::<[u8]>::from(&b"abc"[..]));
        assert_eq!(&*b, b"abc");
        assert!(!b.in_region());
        assert_eq!(&*b.clone(), b"abc");
    }
}
