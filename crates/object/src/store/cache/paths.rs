//! Path entries of the metadata cache: for a path a caller resolved (the
//! KV API's bucket and key), one entry holding what a read of it needs,
//! in the same cache and under the same budget as the onode and dentry
//! entries, so that a key costs one entry rather than three (a path, the
//! leaf's dentry, the object's onode) and a read-mostly get is one cache
//! search.
//!
//! An entry holds the value derived from dentries (the dentry the path
//! leads to), good while none of the dentry keys it was derived from was
//! written since (their stripe epochs, below, have not moved: a create
//! elsewhere in the bucket leaves it current), and the value of the key
//! it leads to (the
//! object's onode) with, for an inline object, the length of its bytes at
//! the value's end: a get copies them out without decoding the onode.
//! That target is good while its key's stripe epoch has not moved: each
//! cached key hashes to one of [`STRIPES`] counters, and a batch makes the
//! counters of the keys it writes odd before they enter the index and
//! even again once the cache is settled (a seqlock per stripe), so a put
//! to one key leaves the targets of nearly every other key current.
//!
//! Entries are immutable: a target read anew replaces the whole entry, so
//! its weight (which counts the target's value, held strongly) is always
//! the weight of what it holds. A target's value may also sit in the
//! metadata cache under its own key; it is then counted twice, never
//! less than once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{CacheKey, Cached, Decoded, LinkKey, MetaCache, MetaValue, Slot, INLINE_KEY};

/// First byte of a path entry's key in the cache: no map of the index
/// uses it, so a path never shares a key with an index key.
const PATH_PREFIX: u8 = 0xFF;

/// Number of stripe epochs targets are checked against.
pub(super) const STRIPES: usize = 4096;

/// Bytes a cache slot costs beside what its key and value allocate: the
/// cache's slab entry (about 80 bytes: the key, inline when short, the
/// value's pointer, the eviction state and list links), its hash table
/// slot, and the slab's spare room (it grows by doubling, and keeps
/// entries for keys recently evicted). Measured: a pass of gets over
/// 5,000 small keys left 57 bytes a key more allocated than a weight of
/// 48 and the key's length counted (kv_cache_weight).
pub(super) const SLOT_OVERHEAD: usize = 128;

/// A path entry (see the module doc).
#[derive(Debug)]
pub(crate) struct PathEntry {
    /// What retires it: the dentries it was derived from.
    names: NameCheck,
    value: Option<CacheKey>,
    target: Option<Target>,
}

/// Most dentries a path entry checks by their stripes; a path derived
/// from more (a key three levels deep or more) checks the namespace epoch,
/// which every dentry batch moves.
const CHECKED_NAMES: usize = 3;

/// The dentries a path was derived from, checked in 16 bytes (most cache
/// entries are small keys' paths, and the default cache must hold 100,000
/// of them): the stripes of up to [`CHECKED_NAMES`] dentry keys and the
/// sum of their epochs when derived. Stripe epochs only grow, so the sum
/// is unchanged exactly when none of them moved. With `count` 0, `sum` is
/// the namespace epoch instead.
#[derive(Clone, Copy, Debug)]
struct NameCheck {
    count: u8,
    stripes: [u16; CHECKED_NAMES],
    sum: u64,
}

/// The value of the key a path leads to, read at stripe epoch `at`.
#[derive(Debug)]
struct Target {
    at: u64,
    key: LinkKey,
    value: Cached,
    /// An inline object's bytes are the value's last `n` bytes.
    inline: Option<usize>,
}

impl PathEntry {
    /// Bytes the entry keeps alive beside its key: itself, a long derived
    /// value, and its target's value (a value whose object is not inline
    /// is decoded by the read that uses it, so that counts too).
    pub(super) fn weight(&self) -> usize {
        let value = match &self.value {
            Some(CacheKey::Heap(b)) => b.len(),
            _ => 0,
        };
        let target = match &self.target {
            Some(Target { value: Some(v), inline, .. }) => {
                let long = if v.len() > INLINE_KEY { v.len() } else { 0 };
                let decoded = if inline.is_none() { std::mem::size_of::<Decoded>() } else { 0 };
                std::mem::size_of::<MetaValue>() + 16 + long + decoded
            }
            _ => 0,
        };
        std::mem::size_of::<PathEntry>() + 16 + value + target
    }
}

/// A path's value from the metadata cache's path lookup, with the entry
/// that holds what it leads to (if the entry was in, or went into, the
/// cache).
#[derive(Debug)]
pub struct DerivedPath {
    entry: Arc<PathEntry>,
    key: CacheKey,
    /// The entry may go into the cache with its target: it is there
    /// already, or it was derived while no dentry batch was going in and
    /// its insert was deferred until the target is read.
    keep: bool,
    /// Not in the cache yet: its insert was deferred, and its key hashed
    /// for the admission (`Admission::ask`).
    deferred: Option<u64>,
}

impl DerivedPath {
    /// The value derived for the path (`None`: it leads nowhere).
    pub fn value(&self) -> Option<&[u8]> {
        self.entry.value.as_ref().map(CacheKey::as_slice)
    }
}

/// What a path leads to: the key's value and, for an inline object, the
/// length of its bytes at the value's end.
pub(crate) type Reached = (Cached, Option<usize>);

/// The cache key of path `key`.
fn path_key(key: &[u8]) -> CacheKey {
    match u8::try_from(key.len() + 1) {
        Ok(len) if key.len() < INLINE_KEY => {
            let mut bytes = [0u8; INLINE_KEY];
            bytes[0] = PATH_PREFIX;
            bytes[1..=key.len()].copy_from_slice(key);
            CacheKey::Inline { len, bytes }
        }
        _ => CacheKey::Heap([&[PATH_PREFIX][..], key].concat().into()),
    }
}

impl NameCheck {
    /// A check that never passes (the namespace epoch is never odd when
    /// compared, and this one is).
    const NEVER: NameCheck = NameCheck { count: 0, stripes: [0; CHECKED_NAMES], sum: u64::MAX };
}

/// The stripe of `key`.
pub(super) fn stripe_of(key: &[u8]) -> usize {
    // FNV-1a: keys are short, and object ids (the keys that matter) differ
    // in their low bytes.
    let hash = key.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    (hash % STRIPES as u64) as usize
}

/// The stripe epochs, all even at first.
pub(super) fn new_stripes() -> Box<[AtomicU64]> {
    (0..STRIPES).map(|_| AtomicU64::new(0)).collect()
}

impl MetaCache {
    /// The value a caller derives for `key` (a path) from dentry reads:
    /// cached while none of the dentries it read changed since, else from
    /// `derive`, which must read only dentries (through this cache or the
    /// index) and push the key of every dentry it read, present or absent,
    /// onto the vector it is given: those keys, and only those, retire
    /// the entry when a batch writes one of them.
    ///
    /// With `defer`, a path that leads somewhere is not inserted now: the
    /// caller reads its target next ([`MetaCache::reach`]), which inserts
    /// the entry once, with the target, if the namespace is still as it
    /// was derived (inserting it twice cost a second insert, its eviction
    /// and the first entry's drop, a fifth of a first get of a key). A
    /// path leading nowhere is inserted at once either way.
    pub(crate) fn get_or_derive<E>(
        &self,
        key: &[u8],
        defer: bool,
        derive: impl FnOnce(&mut Vec<Vec<u8>>) -> Result<Option<Vec<u8>>, E>,
    ) -> Result<DerivedPath, E> {
        let key = path_key(key);
        let mut reads = Vec::new();
        let Some(cache) = self.cache.as_ref() else {
            let value = derive(&mut reads)?.as_deref().map(CacheKey::new);
            let entry = Arc::new(PathEntry { names: NameCheck::NEVER, value, target: None });
            return Ok(DerivedPath { entry, key, keep: false, deferred: None });
        };
        if let Some(path) = self.derived_at(&key) {
            return Ok(path);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        self.admission.after_miss();
        // Asked now, so the doorkeeper's line loads while the index is read.
        let asked = defer.then(|| self.admission.ask(key.as_slice()));
        // Read before the derivation: unchanged after it, no dentry batch
        // went in meanwhile, so the stripes read then are those of the
        // dentries the derivation saw.
        let before = self.ns_epoch.load(Ordering::Acquire);
        let value = derive(&mut reads)?.as_deref().map(CacheKey::new);
        let recorded = if before.is_multiple_of(2) {
            let _gate = self.gate.read();
            if self.ns_epoch.load(Ordering::Acquire) == before {
                self.record(&reads, before)
            } else {
                None
            }
        } else {
            None
        };
        let Some(names) = recorded else {
            let entry = Arc::new(PathEntry { names: NameCheck::NEVER, value, target: None });
            return Ok(DerivedPath { entry, key, keep: false, deferred: None });
        };
        let entry = Arc::new(PathEntry { names, value, target: None });
        if defer && entry.value.is_some() {
            // Checked again against its stripes when `reach` inserts it.
            return Ok(DerivedPath { entry, key, keep: true, deferred: asked });
        }
        let _gate = self.gate.read();
        if self.current(&entry) {
            cache.insert(key.clone(), Slot::Path(entry.clone()));
            return Ok(DerivedPath { entry, key, keep: true, deferred: None });
        }
        Ok(DerivedPath { entry, key, keep: false, deferred: None })
    }

    /// The check of a path derived from the dentry keys `reads` while
    /// the namespace epoch was `epoch` (even, and unchanged since: called
    /// under the gate), or `None` if a batch writing one of their stripes
    /// is going in (or the derivation named no key: nothing could retire
    /// the entry).
    fn record(&self, reads: &[Vec<u8>], epoch: u64) -> Option<NameCheck> {
        if reads.is_empty() {
            return None;
        }
        if reads.len() > CHECKED_NAMES {
            return Some(NameCheck { count: 0, stripes: [0; CHECKED_NAMES], sum: epoch });
        }
        let mut check = NameCheck { count: 0, stripes: [0; CHECKED_NAMES], sum: 0 };
        for key in reads {
            let stripe = stripe_of(key);
            let at = self.stripes[stripe].load(Ordering::Acquire);
            if !at.is_multiple_of(2) {
                return None;
            }
            check.stripes[usize::from(check.count)] = u16::try_from(stripe).ok()?;
            check.count += 1;
            check.sum = check.sum.wrapping_add(at);
        }
        Some(check)
    }

    /// Whether no batch wrote (or is writing) a dentry `entry` was
    /// derived from since it was.
    fn current(&self, entry: &PathEntry) -> bool {
        let check = &entry.names;
        if check.count == 0 {
            return check.sum != NameCheck::NEVER.sum && self.ns_epoch.load(Ordering::Acquire) == check.sum;
        }
        let stripes = &check.stripes[..usize::from(check.count)];
        let sum = stripes
            .iter()
            .fold(0u64, |sum, &stripe| sum.wrapping_add(self.stripes[usize::from(stripe)].load(Ordering::Acquire)));
        sum == check.sum
    }

    /// The cached value of `key` (a path), if it is cached and none of
    /// the dentries it was derived from changed since; nothing is derived
    /// or loaded.
    pub(crate) fn derived_cached(&self, key: &[u8]) -> Option<DerivedPath> {
        self.derived_at(&path_key(key))
    }

    /// The path entry under `key` if it is current.
    fn derived_at(&self, key: &CacheKey) -> Option<DerivedPath> {
        let Some(Slot::Path(entry)) = self.cache.as_ref()?.get(key) else { return None };
        if !self.current(&entry) {
            return None;
        }
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(DerivedPath { entry, key: key.clone(), keep: true, deferred: None })
    }

    /// What `path` leads to if its entry holds the current value of `key`
    /// (no batch wrote `key` since it was read); nothing is loaded, so
    /// nothing waits on the disk.
    pub(crate) fn reached_cached(&self, path: &DerivedPath, key: &[u8]) -> Option<Reached> {
        let target = path.entry.target.as_ref().filter(|t| t.key.is(key))?;
        if self.stripes[stripe_of(key)].load(Ordering::Acquire) != target.at {
            return None;
        }
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some((target.value.clone(), target.inline))
    }

    /// What `path` leads to: [`MetaCache::reached_cached`], else the value
    /// of `key` from the metadata cache (not marked as used: the path
    /// entry is the one used) or from `load`, measured by `inline`; the
    /// path's entry is then replaced by (or, deferred, inserted as) one
    /// holding it, if it was read wholly while no batch wrote `key` and
    /// the path is still current (and, read anew, if a full cache admits
    /// it: its second read lately).
    /// A value loaded for a path is not kept under its own key.
    pub(crate) fn reach<E>(
        &self,
        path: &DerivedPath,
        key: &[u8],
        load: impl FnOnce() -> Result<Option<Vec<u8>>, E>,
        inline: impl FnOnce(&MetaValue) -> Result<Option<usize>, E>,
    ) -> Result<Reached, E> {
        if let Some(reached) = self.reached_cached(path, key) {
            return Ok(reached);
        }
        let stripe = &self.stripes[stripe_of(key)];
        let before = stripe.load(Ordering::Acquire);
        let kept = match self.cache.as_ref().filter(|_| super::cacheable(key)).and_then(|c| c.peek(key)) {
            Some(Slot::Meta(value)) => Some(value),
            _ => None,
        };
        let value = match kept {
            Some(value) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                value
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                load()?.map(|b| Arc::new(MetaValue::new(b)))
            }
        };
        let inline = value.as_deref().map(inline).transpose()?.flatten();
        let (Some(cache), Some(link)) = (self.cache.as_ref(), LinkKey::new(key)) else { return Ok((value, inline)) };
        // A path read anew may not enter a full cache (module `admission`).
        if path.keep && before.is_multiple_of(2) && path.deferred.is_none_or(|h| self.admission.admits_hashed(h)) {
            let _gate = self.gate.read();
            if stripe.load(Ordering::Acquire) == before && self.current(&path.entry) {
                let target = Target { at: before, key: link, value: value.clone(), inline };
                let entry =
                    PathEntry { names: path.entry.names, value: path.entry.value.clone(), target: Some(target) };
                cache.insert(path.key.clone(), Slot::Path(Arc::new(entry)));
                if path.deferred.is_some() {
                    // Marked as used once, as the entry inserted at its
                    // derivation and replaced here was: a key read once
                    // is kept like one read twice, not evicted first.
                    let _ = cache.get(&path.key);
                }
            }
        }
        Ok((value, inline))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use larder_index::WriteBatch;

    type Loaded = Result<Option<Vec<u8>>, ()>;

    fn no_load() -> Loaded {
        panic!("the path's entry should have answered")
    }

    /// Inline objects in these tests: the whole value is the object.
    fn whole(v: &MetaValue) -> Result<Option<usize>, ()> {
        Ok(Some(v.len()))
    }

    fn reach(c: &MetaCache, path: &DerivedPath, key: &[u8], load: impl FnOnce() -> Loaded) -> Option<Vec<u8>> {
        c.reach(path, key, load, whole).unwrap().0.map(|v| v.to_vec())
    }

    fn apply(c: &MetaCache, batch: &WriteBatch) {
        c.invalidate(batch);
        c.settle(Some(batch));
    }

    /// The dentry key the test paths are derived from.
    fn name_key(name: &[u8]) -> Vec<u8> {
        crate::meta::dentry_key(1, &crate::meta::Name::new(name.to_vec()).unwrap())
    }

    fn derive(c: &MetaCache, key: &[u8]) -> DerivedPath {
        c.get_or_derive(key, false, |reads| {
            reads.push(name_key(b"n"));
            Ok::<_, ()>(Some(b"dentry".to_vec()))
        })
        .unwrap()
    }

    #[test]
    fn a_path_holds_its_target_until_a_batch_writes_the_target() {
        let c = MetaCache::new(1 << 20, None);
        let onode = crate::meta::onode_key(7);
        let first = derive(&c, b"bucket/key");
        assert_eq!(first.value(), Some(&b"dentry"[..]));
        assert!(c.reached_cached(&first, &onode).is_none(), "nothing reached yet");
        assert_eq!(reach(&c, &first, &onode, || Ok(Some(b"v1".to_vec()))), Some(b"v1".to_vec()));
        // The entry was replaced by one holding the target: a fresh lookup
        // of the path answers without a load.
        let again = c.derived_cached(b"bucket/key").unwrap();
        assert_eq!(reach(&c, &again, &onode, no_load), Some(b"v1".to_vec()));
        let (value, inline) = c.reached_cached(&again, &onode).unwrap();
        assert_eq!((value.unwrap().to_vec(), inline), (b"v1".to_vec(), Some(2)));
        // Not kept under its own key: the path holds it.
        assert!(c.cache.as_ref().unwrap().peek(&onode[..]).is_none());

        // A batch writing another key's onode (most likely another stripe:
        // pick one that is) leaves the target current.
        let other = (8..).map(crate::meta::onode_key).find(|k| stripe_of(k) != stripe_of(&onode)).unwrap();
        let mut unrelated = WriteBatch::new();
        unrelated.put(other, b"x");
        apply(&c, &unrelated);
        assert_eq!(reach(&c, &c.derived_cached(b"bucket/key").unwrap(), &onode, no_load), Some(b"v1".to_vec()));

        // A batch rewriting the onode (no dentry: the path stays): the
        // target is read anew, from the write-through value.
        let mut batch = WriteBatch::new();
        batch.put(onode, b"v2");
        apply(&c, &batch);
        let after = c.derived_cached(b"bucket/key").unwrap();
        assert!(c.reached_cached(&after, &onode).is_none(), "the stripe moved");
        assert_eq!(reach(&c, &after, &onode, || Ok(Some(b"stale".to_vec()))), Some(b"v2".to_vec()));
        assert_eq!(reach(&c, &c.derived_cached(b"bucket/key").unwrap(), &onode, no_load), Some(b"v2".to_vec()));

        // A dentry the path was not derived from leaves it current (most
        // likely another stripe: pick one that is); one it was derived
        // from retires it.
        let mut elsewhere = WriteBatch::new();
        let other = (0..)
            .map(|i: u32| name_key(format!("m{i}").as_bytes()))
            .find(|k| stripe_of(k) != stripe_of(&name_key(b"n")))
            .unwrap();
        elsewhere.put(other, b"another entry");
        apply(&c, &elsewhere);
        assert!(c.derived_cached(b"bucket/key").is_some(), "a create elsewhere kept the path");
        let mut names = WriteBatch::new();
        names.delete(crate::meta::dentry_key(1, &crate::meta::Name::new(b"n".to_vec()).unwrap()));
        apply(&c, &names);
        assert!(c.derived_cached(b"bucket/key").is_none());
    }

    #[test]
    fn a_deferred_path_enters_the_cache_with_its_target_only() {
        let c = MetaCache::new(1 << 20, None);
        let onode = crate::meta::onode_key(7);
        let derive = |c: &MetaCache, key: &[u8], value: Option<&[u8]>| {
            c.get_or_derive(key, true, |reads| {
                reads.push(name_key(b"n"));
                Ok::<_, ()>(value.map(<[u8]>::to_vec))
            })
            .unwrap()
        };
        let path = derive(&c, b"p", Some(b"dentry"));
        assert_eq!(path.value(), Some(&b"dentry"[..]));
        assert!(c.derived_cached(b"p").is_none(), "not inserted before its target is read");
        assert_eq!(reach(&c, &path, &onode, || Ok(Some(b"v1".to_vec()))), Some(b"v1".to_vec()));
        let cached = c.derived_cached(b"p").unwrap();
        assert_eq!(cached.value(), Some(&b"dentry"[..]));
        assert_eq!(reach(&c, &cached, &onode, no_load), Some(b"v1".to_vec()));

        // A path leading nowhere is inserted at once.
        let nowhere = derive(&c, b"q", None);
        assert_eq!(nowhere.value(), None);
        assert_eq!(c.derived_cached(b"q").unwrap().value(), None);

        // A dentry batch between the derivation and the read: the path,
        // derived before it, is not inserted.
        let stale = derive(&c, b"r", Some(b"old dentry"));
        let mut names = WriteBatch::new();
        names.delete(crate::meta::dentry_key(1, &crate::meta::Name::new(b"n".to_vec()).unwrap()));
        apply(&c, &names);
        assert_eq!(reach(&c, &stale, &onode, || Ok(Some(b"v1".to_vec()))), Some(b"v1".to_vec()));
        assert!(c.derived_cached(b"r").is_none(), "derived before a dentry batch: not kept");
    }

    #[test]
    fn a_full_cache_keeps_a_path_read_anew_from_its_second_read() {
        // About 90 path entries of 1 KiB targets fit.
        let c = MetaCache::new(128 << 10, None);
        let read = |c: &MetaCache, key: &[u8]| {
            let path = c
                .get_or_derive(key, true, |reads| {
                    reads.push(name_key(key));
                    Ok::<_, ()>(Some(b"dentry".to_vec()))
                })
                .unwrap();
            reach(c, &path, &crate::meta::onode_key(7), || Ok(Some(vec![1u8; 1000])));
        };
        // With room, a first read keeps the path.
        read(&c, b"first");
        assert!(c.derived_cached(b"first").is_some(), "kept while the cache had room");
        // Fill it past its capacity, and let the admission look at the
        // path entries that evicted.
        // 300 reads (fewer misses than the admission counts between two
        // looks) evict about 210 paths.
        for i in 0..300u32 {
            read(&c, format!("fill{i}").as_bytes());
        }
        c.admission.look();
        read(&c, b"new key");
        assert!(c.derived_cached(b"new key").is_none(), "a first read does not enter a churning cache");
        read(&c, b"new key");
        assert!(c.derived_cached(b"new key").is_some(), "its second read does");
        // No path evicted since the last look: first reads enter again.
        c.admission.look();
        read(&c, b"another");
        assert!(c.derived_cached(b"another").is_some());
    }

    #[test]
    fn a_target_read_while_its_key_is_written_is_not_kept() {
        let c = MetaCache::new(1 << 20, None);
        let onode = crate::meta::onode_key(7);
        let path = derive(&c, b"p");
        let mut batch = WriteBatch::new();
        batch.delete(onode);
        c.invalidate(&batch);
        assert_eq!(reach(&c, &path, &onode, || Ok(Some(b"old".to_vec()))), Some(b"old".to_vec()));
        c.settle(Some(&batch));
        let path = c.derived_cached(b"p").unwrap();
        assert!(c.reached_cached(&path, &onode).is_none(), "the read during the batch was not kept");
        assert_eq!(reach(&c, &path, &onode, || Ok(None)), None);
    }

    #[test]
    fn path_keys_are_the_prefixed_bytes_short_or_long() {
        for len in [0, 1, INLINE_KEY - 2, INLINE_KEY - 1, INLINE_KEY, 300] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let prefixed = [&[PATH_PREFIX][..], &key].concat();
            let built = path_key(&key);
            assert_eq!(built.as_slice(), &prefixed[..], "length {len}");
            assert_eq!(matches!(built, CacheKey::Inline { .. }), len < INLINE_KEY, "length {len}");
        }
    }

    #[test]
    fn a_path_entry_weighs_what_it_holds() {
        let c = MetaCache::new(1 << 20, None);
        let onode = crate::meta::onode_key(7);
        let path = derive(&c, b"p");
        let empty = c.stats().2;
        let value = vec![5u8; 1000];
        reach(&c, &path, &onode, || Ok(Some(value.clone())));
        let held = c.stats().2;
        // The same entry (key and derived value) plus the target's value:
        // its allocation and its 1,000 bytes.
        assert_eq!(held - empty, (std::mem::size_of::<MetaValue>() + 16 + 1000) as u64);
    }
}
