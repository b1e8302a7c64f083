//! Admission of path entries while the metadata cache churns through
//! them: while inserts evict path entries (at least one per eight misses
//! lately, counting the evictions avoided by first reads kept out), a
//! path read for the first time does not evict one read before; it
//! enters on its second read, which a doorkeeper of recent first reads
//! (one fingerprint a slot) recognises. Otherwise (room, or the evicted
//! entries are onodes and dentries a commit wrote through and nobody
//! read) every path enters on its first read, as before. Counting the
//! first reads kept out keeps the cache churning while they go on: else
//! keeping them out would end the evictions that showed the churn, and
//! the next look would let every first read in again.
//!
//! Why: with far more keys than the cache holds (YCSB's reads over a
//! million keys, a cache of tens of thousands of paths), most gets read a
//! key once, and inserting each (a path entry holding a 1 KiB onode)
//! evicted another: the insert and the eviction cost more than the two
//! index lookups a later get of the key would have saved (a get's p50
//! 5.8 µs with them, 3.7 µs without, paired). Keys read again soon (a
//! zipfian head) enter on their second read and are then answered from
//! the cache.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use quick_cache::Lifecycle;

use super::{CacheKey, Slot};

/// Misses between two looks at the path evictions.
const CHECK_EVERY: u64 = 1024;

/// Path evictions in [`CHECK_EVERY`] misses from which the cache churns.
const CHURNING: u64 = CHECK_EVERY / 8;

/// See the module doc.
pub(super) struct Admission {
    /// Fingerprints of paths read once lately, one per slot (0: none).
    seen: Box<[AtomicU32]>,
    /// Whether path entries were evicted often at the last look.
    churning: AtomicBool,
    /// Path entries evicted (counted by the cache's [`PathEvictions`])
    /// and first reads kept out.
    evicted: Arc<AtomicU64>,
    /// `evicted` at the last look.
    looked: AtomicU64,
    /// Paths derived anew (cache misses of a path).
    misses: AtomicU64,
}

impl Admission {
    /// A doorkeeper for a cache expected to hold `entries` entries, and
    /// the lifecycle that counts the cache's path evictions for it.
    pub(super) fn new(entries: usize) -> (Admission, PathEvictions) {
        let slots = Self::slots(entries);
        let evicted = Arc::new(AtomicU64::new(0));
        let admission = Admission {
            seen: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            churning: AtomicBool::new(false),
            evicted: evicted.clone(),
            looked: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        };
        (admission, PathEvictions(evicted))
    }

    /// Bytes the doorkeeper of a cache of `entries` entries takes (the
    /// cache's budget sets them aside).
    pub(super) fn bytes(entries: usize) -> usize {
        Self::slots(entries) * std::mem::size_of::<AtomicU32>()
    }

    /// A quarter as many slots as entries: the paths read once since the
    /// last few thousand misses, which is where a second read of a key
    /// read again soon falls.
    fn slots(entries: usize) -> usize {
        (entries / 4).next_power_of_two().max(1024)
    }

    /// After a path missed the cache: every [`CHECK_EVERY`] misses (from
    /// the first), looks at how many path entries were evicted since.
    pub(super) fn after_miss(&self) {
        if self.misses.fetch_add(1, Ordering::Relaxed).is_multiple_of(CHECK_EVERY) {
            self.look();
        }
    }

    /// Whether path entries were evicted (or kept out) often since the
    /// last look.
    pub(super) fn look(&self) {
        let evicted = self.evicted.load(Ordering::Relaxed);
        let before = self.looked.swap(evicted, Ordering::Relaxed);
        self.churning.store(evicted.wrapping_sub(before) >= CHURNING, Ordering::Relaxed);
    }

    /// Whether a path read anew (its cache key `key`) enters the cache:
    /// always unless path entries churn, else only if it was read once
    /// lately (and then its slot keeps it, for a third read after an
    /// eviction).
    #[cfg(test)]
    pub(super) fn admits(&self, key: &[u8]) -> bool {
        self.admits_hashed(self.ask(key))
    }

    /// While paths churn, hashes the cache key `key` of a path read anew
    /// for [`Admission::admits_hashed`] and starts loading its doorkeeper
    /// slot: the caller reads the path's dentry and onode from the index
    /// before it asks, and the slot's line, in a table larger than what
    /// stays cached through those reads, missed when asked for cold (three
    /// fifths of `reach`'s own time on a C profile). Otherwise 0: nothing
    /// to look up.
    pub(super) fn ask(&self, key: &[u8]) -> u64 {
        if !self.churning.load(Ordering::Relaxed) {
            return 0;
        }
        let hash = hash(key);
        prefetch(self.slot(hash));
        hash
    }

    /// [`Admission::admits`] of the path whose key [`Admission::ask`]
    /// hashed to `hash`; one asked while paths did not churn (0) enters,
    /// as it would have then.
    pub(super) fn admits_hashed(&self, hash: u64) -> bool {
        if hash == 0 || !self.churning.load(Ordering::Relaxed) {
            return true;
        }
        // The high half fingerprints the path, the low half picks a slot.
        let fingerprint = ((hash >> 32) as u32).max(1);
        let admitted = self.slot(hash).swap(fingerprint, Ordering::Relaxed) == fingerprint;
        if !admitted {
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
        admitted
    }
}

impl Admission {
    /// The doorkeeper slot of a path whose key hashed to `hash`.
    fn slot(&self, hash: u64) -> &AtomicU32 {
        &self.seen[(hash as usize) & (self.seen.len() - 1)]
    }
}

/// Starts loading the cache line that holds `at`.
#[cfg(target_arch = "x86_64")]
fn prefetch<T>(at: &T) {
    // SAFETY: a prefetch is a hint that reads nothing the program sees and
    // never faults, whatever the address (SSE, part of x86_64's baseline).
    #[allow(unsafe_code)]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((at as *const T).cast());
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn prefetch<T>(_at: &T) {}

/// The cache's lifecycle: counts evicted path entries for [`Admission`],
/// and keeps up to two evicted entries of a request to drop them outside
/// the cache's locks (as quick_cache's default lifecycle does).
#[derive(Clone)]
pub(super) struct PathEvictions(Arc<AtomicU64>);

impl Lifecycle<CacheKey, Slot> for PathEvictions {
    type RequestState = [Option<(CacheKey, Slot)>; 2];

    fn on_evict(&self, state: &mut Self::RequestState, key: CacheKey, slot: Slot) {
        if matches!(slot, Slot::Path(_)) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(free) = state.iter_mut().find(|s| s.is_none()) {
            *free = Some((key, slot));
        }
    }
}

/// FNV-1a of `key` through splitmix64's finaliser: FNV's low bits, which
/// pick the slot, depend weakly on the last bytes (keys differing there
/// shared slots a quarter of the time), the finaliser's on every bit.
fn hash(key: &[u8]) -> u64 {
    let h = key.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evict(evictions: &PathEvictions, paths: u64) {
        evictions.0.fetch_add(paths, Ordering::Relaxed);
    }

    #[test]
    fn unless_paths_churn_every_path_enters() {
        let (a, evictions) = Admission::new(4096);
        assert!((0..100u32).all(|i| a.admits(&i.to_le_bytes())));
        evict(&evictions, CHURNING - 1);
        a.look();
        assert!((0..100u32).all(|i| a.admits(&i.to_le_bytes())), "few evictions: no churn");
    }

    #[test]
    fn while_paths_churn_a_path_enters_on_its_second_read_and_after() {
        let (a, evictions) = Admission::new(4096);
        evict(&evictions, CHURNING);
        a.look();
        let paths: Vec<[u8; 4]> = (0..200u32).map(u32::to_le_bytes).collect();
        assert!(paths.iter().all(|p| !a.admits(p)), "a first read does not enter");
        // 200 paths in 1,024 slots: about 19 pairs share a slot, and
        // both of a pair are forgotten (each overwrites the other); the
        // rest enter.
        let second = paths.iter().filter(|p| a.admits(&p[..])).count();
        assert!((140..=200).contains(&second), "{second} of 200 entered on their second read");
        let third = paths.iter().filter(|p| a.admits(&p[..])).count();
        assert_eq!(third, second, "a path remembered stays remembered");
        // The 200 first reads kept out count as evictions: still churning.
        a.look();
        assert!(!a.admits(b"never read"), "kept-out reads keep it churning");
        // Then neither evictions nor first reads kept out: they enter again.
        a.look();
        assert!(a.admits(b"read after a quiet while"));
    }

    #[test]
    fn the_evictions_are_looked_at_every_so_many_misses() {
        let (a, evictions) = Admission::new(4096);
        a.after_miss();
        evict(&evictions, 10 * CHURNING);
        for _ in 1..CHECK_EVERY {
            a.after_miss();
        }
        assert!(a.admits(b"x"), "not looked at since the first miss");
        a.after_miss();
        assert!(!a.admits(b"y"), "looked: churning");
        for _ in 0..CHECK_EVERY {
            a.after_miss();
        }
        assert!(a.admits(b"z"), "looked: no evictions since");
    }

    #[test]
    fn the_lifecycle_counts_path_evictions_only() {
        let (a, evictions) = Admission::new(16);
        let mut state = <PathEvictions as Lifecycle<CacheKey, Slot>>::RequestState::default();
        evictions.on_evict(&mut state, CacheKey::new(b"onode"), Slot::Meta(None));
        assert_eq!(a.evicted.load(Ordering::Relaxed), 0);
        assert!(state[0].is_some(), "kept to drop outside the locks");
    }

    #[test]
    fn the_doorkeeper_is_sized_from_the_entries() {
        assert_eq!(Admission::bytes(0), 1024 * 4);
        assert_eq!(Admission::bytes(174_762), 65_536 * 4);
        assert_eq!(Admission::new(174_762).0.seen.len(), 65_536);
    }
}
