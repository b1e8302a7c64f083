//! The metadata cache: recent point reads of onode and dentry keys, so a
//! lookup by path and the read of a small (inline) object touch no index
//! run, bloom filter or memtable (DESIGN.md's onode and dentry caches; an
//! inline object's bytes are in its onode, so this is its data cache too).
//!
//! Coherence: entries are dropped where the index changes, in the log's
//! apply hook (and in replay), for every key a batch writes; once a small
//! batch is in the index, the values it put (or the absence it deleted)
//! are written into the cache, under the gate, before readers may insert
//! again, so the next read of what a transaction just wrote (a create
//! reads its directory's onode, which the previous create rewrote) is a
//! hit rather than a memtable search. A directory's entry-count operand is
//! written through too when the onode it applies to was cached: the cache
//! applies it to that value, as a read of the index would (otherwise the
//! next create in the directory folded the operands from the memtable). Batches enter
//! the index one at a time, and the epoch works like a seqlock: odd while a
//! batch is going in (from just before its keys are dropped until it is in
//! the index), bumped under a gate that readers hold while they check and
//! insert. A reader inserts what it loaded only if the epoch was even when
//! it began and is unchanged when it inserts, so a value read before or
//! during a change is never cached after it.
//!
//! The same cache holds path entries (module [`paths`]): for a path a
//! caller resolved from several dentry reads (the KV API's bucket and
//! key), the dentry it leads to and the value of the key it leads to (the
//! object's onode), checked against the stripe epochs of the dentry keys
//! it was derived from (a path found through more than three against the
//! namespace epoch, a second seqlock counter bumped only by batches that
//! write dentry keys) and the target key's stripe epoch; so a read-mostly
//! get is one cache search, a create elsewhere leaves it current, and a
//! key costs one entry under the one budget. While inserts evict path
//! entries often, a path read anew enters only on its second read lately
//! (module [`admission`]), so keys read once do not evict keys read again.
//!
//! A cached value can likewise remember (weakly) the value of one key read
//! through it ([`MetaCache::attributes_linked`]): a dentry remembers its
//! child's onode, so a lookup in a directory whose entries are cached is
//! one cache search rather than two while no batch goes in (each search
//! is a few cache misses over a table of a million names: the second was
//! a third of a warm lookup).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use larder_index::{BatchOp, WriteBatch};
use quick_cache::sync::Cache;
use quick_cache::Weighter;

use std::sync::OnceLock;

mod admission;
mod paths;
pub use paths::DerivedPath;
pub(crate) use paths::{PathEntry, Reached};

use crate::meta::{map_prefix, DataLocation, DirEntriesOperator, Map, MetaLimits, Onode};
use larder_index::MergeOperator;

/// A cached value: `None` caches that the key is absent.
pub(crate) type Cached = Option<Arc<MetaValue>>;

/// A slot of the cache: an index key's value, or a path's entry.
#[derive(Clone, Debug)]
pub(crate) enum Slot {
    /// The value of an onode or dentry key.
    Meta(Cached),
    /// A path's entry (its key starts with a byte no index key does).
    Path(Arc<PathEntry>),
}

/// A value of the metadata cache: the bytes the index holds, and its
/// decoded form as an onode, kept once first decoded (a lookup, an open
/// and a read each want the onode of a file; decoding it each time was a
/// sixth of the web-server mix). Tied to these exact bytes, so the cache's
/// coherence covers it. An inline object's bytes are not kept twice: the
/// decoded form holds an empty inline location, and the bytes are the
/// value's tail (the location is an onode's last field).
#[derive(Debug)]
pub struct MetaValue {
    /// Inside the value when short (every dentry): decoding it costs no
    /// further cache miss.
    bytes: CacheKey,
    /// Apart: a dentry's value (half the entries) never holds one, and
    /// an empty slot then costs a pointer, not the decoded onode's bytes.
    /// Shared, so a link can lead to it straight (see [`Link`]).
    onode: OnceLock<Arc<Decoded>>,
    /// The value of one key last read through this one (see
    /// [`MetaCache::attributes_linked`]).
    link: parking_lot::Mutex<Option<Link>>,
}

/// What a value remembers of a key read through it: the cache epoch it
/// was read at, the key, and its value's decoded onode, held weakly so
/// that a value the cache evicted is not kept alive (the decoded onode
/// lives as long as its value). The decoded onode rather than the value:
/// one pointer less to follow (a cache miss in a table of a million
/// names).
#[derive(Debug)]
struct Link {
    at: u64,
    key: LinkKey,
    value: std::sync::Weak<Decoded>,
}

/// Longest key a link remembers (an onode key is 9 bytes); longer keys
/// are not remembered.
const LINK_KEY: usize = 16;

/// A remembered key's bytes.
#[derive(Debug, PartialEq, Eq)]
struct LinkKey {
    len: u8,
    bytes: [u8; LINK_KEY],
}

impl LinkKey {
    fn new(key: &[u8]) -> Option<LinkKey> {
        let len = u8::try_from(key.len()).ok().filter(|_| key.len() <= LINK_KEY)?;
        let mut bytes = [0u8; LINK_KEY];
        bytes[..key.len()].copy_from_slice(key);
        Some(LinkKey { len, bytes })
    }

    fn is(&self, key: &[u8]) -> bool {
        &self.bytes[..usize::from(self.len)] == key
    }
}

/// An onode decoded from a [`MetaValue`].
#[derive(Debug)]
struct Decoded {
    /// With `DataLocation::Inline` emptied when `inline` is set.
    onode: Onode,
    /// The inline bytes are the value's last `n` bytes.
    inline: Option<usize>,
}

impl MetaValue {
    fn new(bytes: Vec<u8>) -> MetaValue {
        let bytes = if bytes.len() <= INLINE_KEY { CacheKey::new(&bytes) } else { CacheKey::Heap(bytes.into()) };
        MetaValue { bytes, onode: OnceLock::new(), link: parking_lot::Mutex::new(None) }
    }

    /// [`MetaValue::new`] of a copy of `bytes`, made in place when short
    /// (every dentry and most onodes): a create writes three values
    /// through, and copying each into a `Vec` first was an allocation
    /// apiece.
    fn copied(bytes: &[u8]) -> MetaValue {
        MetaValue { bytes: CacheKey::new(bytes), onode: OnceLock::new(), link: parking_lot::Mutex::new(None) }
    }

    fn bytes(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// The decoded onode, shared so a link can lead to it (see [`Link`]).
    fn decoded(&self, limits: &MetaLimits) -> crate::Result<&Arc<Decoded>> {
        if let Some(d) = self.onode.get() {
            return Ok(d);
        }
        let (onode, inline) = Onode::decode_attributes(self.bytes(), limits)?;
        Ok(self.onode.get_or_init(|| Arc::new(Decoded { onode, inline })))
    }

    /// The value decoded as an onode (`limits` must be the store's).
    pub(crate) fn onode(&self, limits: &MetaLimits) -> crate::Result<Onode> {
        let d = self.decoded(limits)?;
        let mut onode = d.onode.clone();
        if let Some(n) = d.inline {
            onode.location = DataLocation::Inline(self.bytes()[self.bytes.len() - n..].to_vec());
        }
        Ok(onode)
    }

    /// The onode's attributes, borrowed (no copy): the decoded onode with
    /// an inline location's bytes left out (see [`MetaValue::inline_bytes`]).
    pub(crate) fn attributes(&self, limits: &MetaLimits) -> crate::Result<&Onode> {
        Ok(&self.decoded(limits)?.onode)
    }

    /// How many of the value's last bytes are an inline object's bytes
    /// (`None` if the onode keeps its data elsewhere), checking the whole
    /// onode as [`MetaValue::onode`] does but keeping no decoded form
    /// unless one was kept already: for a value held where the decoded
    /// form would not be counted (a path entry's target).
    pub(crate) fn inline_len(&self, limits: &MetaLimits) -> crate::Result<Option<usize>> {
        if let Some(d) = self.onode.get() {
            return Ok(d.inline);
        }
        Ok(Onode::decode_attributes(self.bytes(), limits)?.1)
    }

    /// An inline object's bytes, borrowed (no copy), or `None` if the
    /// onode keeps its data elsewhere.
    pub(crate) fn inline_bytes(&self, limits: &MetaLimits) -> crate::Result<Option<&[u8]>> {
        let d = self.decoded(limits)?;
        Ok(d.inline.map(|n| &self.bytes()[self.bytes.len() - n..]))
    }
}

impl std::ops::Deref for MetaValue {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

/// Longest key kept inside a cache entry; longer ones live on the heap.
const INLINE_KEY: usize = 38;

/// A cache key, its bytes inside the entry when short (every onode key,
/// and the dentry and path keys of ordinary names): a lookup then compares
/// the bytes it already loaded with the entry instead of following a
/// pointer to them (a cache miss per probe: a fifth of a cached 4 KiB get).
#[derive(Clone, Debug)]
pub(crate) enum CacheKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl CacheKey {
    fn new(key: &[u8]) -> CacheKey {
        match u8::try_from(key.len()) {
            Ok(len) if key.len() <= INLINE_KEY => {
                let mut bytes = [0u8; INLINE_KEY];
                bytes[..key.len()].copy_from_slice(key);
                CacheKey::Inline { len, bytes }
            }
            _ => CacheKey::Heap(key.into()),
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            CacheKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            CacheKey::Heap(b) => b,
        }
    }

    fn len(&self) -> usize {
        self.as_slice().len()
    }
}

impl std::borrow::Borrow<[u8]> for CacheKey {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for CacheKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for CacheKey {}

impl std::hash::Hash for CacheKey {
    /// As the bytes hash, so a lookup by `&[u8]` finds the entry.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

#[derive(Clone)]
struct EntryWeighter;

impl Weighter<CacheKey, Slot> for EntryWeighter {
    fn weight(&self, key: &CacheKey, slot: &Slot) -> u64 {
        let value_bytes = match slot {
            // A value's allocation with its reference counts (its short
            // bytes, the decoded onode's slot and a link), for a long
            // value its bytes apart, and for an onode the decoded onode
            // it will hold.
            Slot::Meta(value) => {
                let decoded = if key.as_slice().first() == Some(&map_prefix(Map::Omap)[0]) {
                    std::mem::size_of::<Decoded>() + 16
                } else {
                    0
                };
                value.as_ref().map_or(0, |v| {
                    std::mem::size_of::<MetaValue>() + 16 + decoded + if v.len() > INLINE_KEY { v.len() } else { 0 }
                })
            }
            Slot::Path(entry) => entry.weight(),
        };
        let key_bytes = match key {
            CacheKey::Heap(b) => b.len(),
            CacheKey::Inline { .. } => 0,
        };
        (key_bytes + value_bytes + paths::SLOT_OVERHEAD) as u64
    }
}

/// Batches of at most this many operations write their values through
/// (see the module doc); larger ones (bulk loads, ingests) would only
/// churn the cache.
const WRITE_THROUGH_OPS: usize = 64;

/// Values longer than a page (onodes holding an inline object of 4 KiB or
/// so) are not written through: a value written through is a copy in new
/// memory on the committing thread, for a read that may never come, and
/// one of a page or more costs a page fault and a heap growth of its own
/// while the cache fills (for a durable 4 KiB put, one of its 2.4 page
/// faults and 1.9 `mprotect` calls, and a cache insert). The object's
/// first read loads it from the memtable instead, as any read of an
/// uncached key does. Shorter values (dentries, onodes, inline objects up
/// to a few KiB, such as YCSB's 1 KiB records) are what the next
/// transaction or read wants, share pages, and still go through.
const WRITE_THROUGH_MAX_VALUE_BYTES: usize = 4096;

/// Bytes an entry is expected to weigh: a dentry about 250, an onode
/// 450-600 (with its decoded form), a KV key's path entry about 500. The
/// cache keeps slots for up to half as many keys recently evicted as it
/// expects entries (its ghosts, for choosing what to keep), which hold no
/// value and are not weighed.
const ENTRY_BYTES_ESTIMATE: usize = 384;

/// Bytes a ghost slot costs (a slab entry and a table slot): the budget
/// sets aside room for as many as the cache may keep.
const GHOST_BYTES: usize = 88;

/// The cache's map: quick_cache with the lifecycle that counts path
/// evictions (module [`admission`]).
type MetaCacheMap = Cache<CacheKey, Slot, EntryWeighter, quick_cache::DefaultHashBuilder, admission::PathEvictions>;

/// See the module doc.
pub(crate) struct MetaCache {
    cache: Option<MetaCacheMap>,
    /// Whether a path read anew enters the cache (module [`admission`]).
    admission: admission::Admission,
    epoch: AtomicU64,
    /// Stripe epochs of the keys path entries lead to (module [`paths`]):
    /// odd while a batch writing one of the stripe's keys goes in.
    stripes: Box<[AtomicU64]>,
    /// The stripes the batch going in made odd.
    touched: parking_lot::Mutex<Vec<usize>>,
    /// The namespace epoch: odd while a batch writing dentries goes in.
    ns_epoch: AtomicU64,
    /// Whether the batch going in bumped `ns_epoch` (batches enter one at
    /// a time, so one flag suffices).
    ns_changing: std::sync::atomic::AtomicBool,
    gate: parking_lot::RwLock<()>,
    /// Cached values of the keys the batch going in merges into, taken
    /// when `invalidate` dropped them: `settle` applies the operands to
    /// them (a create adds an entry-count operand to its directory's
    /// onode, which the next create in the directory reads).
    merge_bases: parking_lot::Mutex<Vec<(Vec<u8>, Cached)>>,
    /// The operator those operands are for.
    dir_entries: Option<DirEntriesOperator>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// Whether the cache keeps `key`: onode and dentry keys.
fn cacheable(key: &[u8]) -> bool {
    key.first().is_some_and(|&b| b == map_prefix(Map::Omap)[0] || b == map_prefix(Map::Dmap)[0])
}

impl MetaCache {
    /// A cache of `capacity_bytes` (0: no cache), for values and paths
    /// alike, its ghosts' room included; `dir_entries` applies entry-count
    /// operands written through.
    pub(crate) fn new(capacity_bytes: usize, dir_entries: Option<DirEntriesOperator>) -> Self {
        let entries = (capacity_bytes / ENTRY_BYTES_ESTIMATE).max(16);
        let set_aside = entries / 2 * GHOST_BYTES + admission::Admission::bytes(entries);
        let weight = capacity_bytes.saturating_sub(set_aside).max(capacity_bytes / 2) as u64;
        let (admission, evictions) = admission::Admission::new(if capacity_bytes > 0 { entries } else { 0 });
        let cache = (capacity_bytes > 0).then(|| {
            Cache::with(entries, weight, EntryWeighter, quick_cache::DefaultHashBuilder::default(), evictions)
        });
        MetaCache {
            cache,
            admission,
            epoch: AtomicU64::new(0),
            stripes: paths::new_stripes(),
            touched: parking_lot::Mutex::new(Vec::new()),
            ns_epoch: AtomicU64::new(0),
            ns_changing: std::sync::atomic::AtomicBool::new(false),
            gate: parking_lot::RwLock::new(()),
            merge_bases: parking_lot::Mutex::new(Vec::new()),
            dir_entries,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The value of `key`, from the cache or from `load`.
    pub(crate) fn get_or_load<E>(
        &self,
        key: &[u8],
        load: impl FnOnce() -> Result<Option<Vec<u8>>, E>,
    ) -> Result<Cached, E> {
        let Some(cache) = self.cache.as_ref().filter(|_| cacheable(key)) else {
            return Ok(load()?.map(|b| Arc::new(MetaValue::new(b))));
        };
        if let Some(Slot::Meta(v)) = cache.get(key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(v);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let before = self.epoch.load(Ordering::Acquire);
        let value: Cached = load()?.map(|b| Arc::new(MetaValue::new(b)));
        if before.is_multiple_of(2) {
            let _gate = self.gate.read();
            if self.epoch.load(Ordering::Acquire) == before {
                cache.insert(CacheKey::new(key), Slot::Meta(value.clone()));
            }
        }
        Ok(value)
    }

    /// The values of `keys`, in their order: from the cache where it holds
    /// them (marked as used), the rest from one call of `load` (given them
    /// in the order of `keys`, it returns their values in that order),
    /// which are not kept. For a scan's values: each is read once, and
    /// inserting them (1 KiB onodes, 50 a scan in YCSB E) evicted as many
    /// entries a scan and cost more than the reads they could save.
    pub(crate) fn get_many_unkept<E>(
        &self,
        keys: &[&[u8]],
        load: impl FnOnce(&[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, E>,
    ) -> Result<Vec<Cached>, E> {
        let mut values: Vec<Cached> = Vec::with_capacity(keys.len());
        // The keys the cache does not answer, and where they go.
        let mut missed: Vec<&[u8]> = Vec::new();
        let mut missed_at: Vec<usize> = Vec::new();
        for (i, &key) in keys.iter().enumerate() {
            match self.cache.as_ref().filter(|_| cacheable(key)).and_then(|c| c.get(key)) {
                Some(Slot::Meta(v)) => {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    values.push(v);
                }
                _ => {
                    missed.push(key);
                    missed_at.push(i);
                    values.push(None);
                }
            }
        }
        if missed.is_empty() {
            return Ok(values);
        }
        self.misses.fetch_add(missed.len() as u64, Ordering::Relaxed);
        for (&at, value) in missed_at.iter().zip(load(&missed)?) {
            values[at] = value.map(|b| Arc::new(MetaValue::new(b)));
        }
        Ok(values)
    }

    /// The value of `key` from the cache (not marked as used) or from
    /// `load`, which is then not kept.
    pub(crate) fn get_unkept<E>(
        &self,
        key: &[u8],
        load: impl FnOnce() -> Result<Option<Vec<u8>>, E>,
    ) -> Result<Cached, E> {
        if let Some(Slot::Meta(v)) = self.cache.as_ref().filter(|_| cacheable(key)).and_then(|c| c.peek(key)) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(v);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        Ok(load()?.map(|b| Arc::new(MetaValue::new(b))))
    }

    /// `f` of the onode (its attributes, as [`MetaValue::attributes`]
    /// gives them) that key `key` holds, read through the value `from` (a
    /// dentry's, for its child's onode); `None` if the key is absent. The
    /// onode `from` remembers for `key` if no batch went in since it was
    /// read, else a lookup as [`MetaCache::get_or_load`] does, whose
    /// result `from` then remembers (one key at a time), but only if it
    /// was read wholly inside one even epoch: then it was the committed
    /// value then, and stays so while the epoch holds.
    pub(crate) fn attributes_linked<T>(
        &self,
        from: &MetaValue,
        key: &[u8],
        limits: &MetaLimits,
        load: impl FnOnce() -> crate::Result<Option<Vec<u8>>>,
        f: impl FnOnce(&Onode) -> T,
    ) -> crate::Result<Option<T>> {
        let Some(link_key) = LinkKey::new(key).filter(|_| self.cache.is_some() && cacheable(key)) else {
            let Some(v) = self.get_or_load(key, load)? else { return Ok(None) };
            return Ok(Some(f(v.attributes(limits)?)));
        };
        let before = self.epoch.load(Ordering::Acquire);
        if before.is_multiple_of(2) {
            let recalled =
                from.link.lock().as_ref().filter(|l| l.at == before && l.key.is(key)).and_then(|l| l.value.upgrade());
            if let Some(d) = recalled {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(Some(f(&d.onode)));
            }
        }
        let Some(value) = self.get_or_load(key, load)? else { return Ok(None) };
        let decoded = value.decoded(limits)?;
        if before.is_multiple_of(2) && self.epoch.load(Ordering::Acquire) == before {
            *from.link.lock() = Some(Link { at: before, key: link_key, value: Arc::downgrade(decoded) });
        }
        Ok(Some(f(&decoded.onode)))
    }

    /// The cache's epoch now, if it is even (no batch going in) and the
    /// cache is on (only then do batches move the epoch): every value read
    /// from here on is the committed one while
    /// [`MetaCache::unchanged_since`] of it holds.
    pub(crate) fn stamp(&self) -> Option<u64> {
        self.cache.as_ref()?;
        Some(self.epoch.load(Ordering::Acquire)).filter(|e| e.is_multiple_of(2))
    }

    /// Whether no batch went in, nor is going in, since `stamp` was taken.
    pub(crate) fn unchanged_since(&self, stamp: u64) -> bool {
        self.epoch.load(Ordering::Acquire) == stamp
    }

    /// Drops every key `batch` writes; called before the batch enters the
    /// index, and followed by [`MetaCache::settle`] once it is in.
    pub(crate) fn invalidate(&self, batch: &WriteBatch) {
        let Some(cache) = self.cache.as_ref() else { return };
        // A batch of more keys than the cache holds entries empties it: one
        // clear rather than a search per key and three passes over the
        // batch (a bulk create's chunk of 1M files: 2M keys, 8% of its
        // time). Such a batch is never written through (see `settle`).
        let wholesale = batch.len() > WRITE_THROUGH_OPS && batch.len() >= cache.len();
        if wholesale {
            {
                let _gate = self.gate.write();
                self.epoch.fetch_add(1, Ordering::AcqRel);
                self.ns_epoch.fetch_add(1, Ordering::AcqRel);
                self.ns_changing.store(true, Ordering::Relaxed);
                self.touch_all_stripes();
            }
            self.merge_bases.lock().clear();
            cache.clear();
            return;
        }
        let dmap = map_prefix(Map::Dmap)[0];
        let names = batch.may_change_first_byte(dmap);
        {
            let _gate = self.gate.write();
            self.epoch.fetch_add(1, Ordering::AcqRel);
            if names {
                self.ns_epoch.fetch_add(1, Ordering::AcqRel);
                self.ns_changing.store(true, Ordering::Relaxed);
            }
            self.touch_stripes(batch);
        }
        let mut bases = self.merge_bases.lock();
        bases.clear();
        for op in batch.iter() {
            match op {
                BatchOp::Put { key, .. } | BatchOp::Delete { key } => {
                    if cacheable(key) {
                        cache.remove(key);
                    }
                }
                BatchOp::Merge { key, .. } => {
                    if cacheable(key) {
                        if let Some((_, Slot::Meta(base))) = cache.remove(key) {
                            bases.push((key.to_vec(), base));
                        }
                    }
                }
                BatchOp::DeleteRange { .. } => cache.clear(),
            }
        }
    }

    /// Ends the change [`MetaCache::invalidate`] began, once the batch is
    /// in the index; `written` is the batch if it went in, whose values a
    /// small batch then writes through.
    pub(crate) fn settle(&self, written: Option<&WriteBatch>) {
        if let Some(cache) = self.cache.as_ref() {
            let _gate = self.gate.write();
            let bases = std::mem::take(&mut *self.merge_bases.lock());
            if let Some(batch) = written {
                write_through(cache, batch, &bases, self.dir_entries.as_ref());
            }
            self.epoch.fetch_add(1, Ordering::AcqRel);
            if self.ns_changing.swap(false, Ordering::Relaxed) {
                self.ns_epoch.fetch_add(1, Ordering::AcqRel);
            }
            for stripe in self.touched.lock().drain(..) {
                self.stripes[stripe].fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    /// Makes odd the stripe epoch of every key `batch` writes (every
    /// stripe for a range delete), remembering which, so that no path
    /// entry answers for them until [`MetaCache::settle`] makes them even.
    /// Called under the gate.
    fn touch_stripes(&self, batch: &WriteBatch) {
        let mut touched = self.touched.lock();
        let mut touch = |stripe: usize| {
            if self.stripes[stripe].fetch_or(1, Ordering::AcqRel).is_multiple_of(2) {
                touched.push(stripe);
            }
        };
        for op in batch.iter() {
            match op {
                BatchOp::Put { key, .. } | BatchOp::Delete { key } | BatchOp::Merge { key, .. } => {
                    if cacheable(key) {
                        touch(paths::stripe_of(key));
                    }
                }
                BatchOp::DeleteRange { .. } => (0..paths::STRIPES).for_each(&mut touch),
            }
        }
    }

    /// As [`MetaCache::touch_stripes`] for a batch that may write any key.
    fn touch_all_stripes(&self) {
        let mut touched = self.touched.lock();
        for (stripe, epoch) in self.stripes.iter().enumerate() {
            if epoch.fetch_or(1, Ordering::AcqRel).is_multiple_of(2) {
                touched.push(stripe);
            }
        }
    }

    /// Bytes the cache may weigh (its budget less its ghosts' room).
    pub(crate) fn capacity(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.capacity())
    }

    /// (hits, misses, bytes cached).
    pub(crate) fn stats(&self) -> (u64, u64, u64) {
        let bytes = self.cache.as_ref().map_or(0, |c| c.weight());
        (self.hits.load(Ordering::Relaxed), self.misses.load(Ordering::Relaxed), bytes)
    }
}

/// Writes what a small batch leaves in the index for cacheable keys: the
/// last operation on a key decides. A merge operand for `dir_entries` is
/// applied to the key's value if it is known (put earlier in the batch, or
/// cached before it, in `bases`); any other operand, or one on an unknown
/// value, leaves the key uncached (its value needs a read). A range delete
/// leaves everything uncached (`invalidate` cleared the cache).
fn write_through(
    cache: &MetaCacheMap,
    batch: &WriteBatch,
    bases: &[(Vec<u8>, Cached)],
    dir_entries: Option<&DirEntriesOperator>,
) {
    if batch.len() > WRITE_THROUGH_OPS {
        return;
    }
    // Per key: Some(value) when known after the batch, None when not.
    let mut last: Vec<(&[u8], Option<Cached>)> = Vec::with_capacity(batch.len());
    for op in batch.iter() {
        let (key, value) = match op {
            // Not copied for a key the cache does not keep (file data).
            BatchOp::Put { key, .. } if !cacheable(key) => continue,
            // Unknown, for a long value: left uncached (a later operand
            // on it in the batch leaves it so too).
            BatchOp::Put { key, value } if value.len() > WRITE_THROUGH_MAX_VALUE_BYTES => (key, None),
            BatchOp::Put { key, value } => (key, Some(Some(Arc::new(MetaValue::copied(value))))),
            BatchOp::Delete { key } => (key, Some(None)),
            BatchOp::Merge { operator, key, operand } => {
                let before = match last.iter().find(|(k, _)| *k == key) {
                    Some((_, known)) => known.clone(),
                    None => bases.iter().find(|(k, _)| k.as_slice() == key).map(|(_, v)| v.clone()),
                };
                let merged = match (before, dir_entries) {
                    (Some(base), Some(op)) if operator == op.name() => op
                        .full_merge(key, base.as_deref().map(|v| &**v), &[operand])
                        .ok()
                        .map(|v| v.map(|v| Arc::new(MetaValue::new(v)))),
                    _ => None,
                };
                (key, merged)
            }
            BatchOp::DeleteRange { .. } => return,
        };
        if !cacheable(key) {
            continue;
        }
        match last.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => last.push((key, value)),
        }
    }
    for (key, value) in last {
        if let Some(v) = value {
            cache.insert(CacheKey::new(key), Slot::Meta(v));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    type Loaded = Result<Option<Vec<u8>>, ()>;

    fn no_load() -> Loaded {
        panic!("the path's entry (or the value's link) should have answered")
    }

    /// An encoded onode told apart by its owner, `uid`.
    fn onode_of(uid: u32) -> Vec<u8> {
        crate::meta::Onode::new(crate::meta::Kind::File, 0o644, uid, 0, 7).encode(&MetaLimits::default()).unwrap()
    }

    /// The owner of the onode `c` holds for `key`, read through the value
    /// `from`.
    fn linked(c: &MetaCache, from: &MetaValue, key: &[u8], load: impl FnOnce() -> Loaded) -> Option<u32> {
        let load = || load().map_err(|()| crate::ObjectError::BadRecord { record: "test", what: String::new() });
        c.attributes_linked(from, key, &MetaLimits::default(), load, |o| o.uid).unwrap()
    }

    /// Runs `batch` through the cache as the log's apply hook does.
    fn apply(c: &MetaCache, batch: &WriteBatch) {
        c.invalidate(batch);
        c.settle(Some(batch));
    }

    #[test]
    fn a_value_remembers_the_key_read_through_it_only_until_the_next_batch() {
        let c = MetaCache::new(1 << 20, None);
        let dentry = crate::meta::dentry_key(1, &crate::meta::Name::new(b"a".to_vec()).unwrap());
        let onode = crate::meta::onode_key(7);
        let from = c.get_or_load(&dentry, || Ok::<_, ()>(Some(b"dentry".to_vec()))).unwrap().unwrap();
        // Held, as a reader still using it would.
        let held = c.get_or_load(&onode, || Ok::<_, ()>(Some(onode_of(1)))).unwrap();
        assert_eq!(linked(&c, &from, &onode, no_load), Some(1), "read from the cache and remembered");
        // Evicted from the cache: only the link can answer now.
        c.cache.as_ref().unwrap().remove(&onode[..]);
        assert_eq!(linked(&c, &from, &onode, no_load), Some(1), "the link answers while the epoch holds");
        // Another key through the same value is looked up, not the link's.
        let other = crate::meta::onode_key(8);
        assert_eq!(linked(&c, &from, &other, || Ok(Some(onode_of(8)))), Some(8));
        assert_eq!(linked(&c, &from, &other, no_load), Some(8), "the link now names key 8");
        // A batch that writes the first key: the link (to key 8, read
        // before it) is not trusted, and key 7 reads its new value even
        // though `held` keeps the old one alive.
        assert_eq!(linked(&c, &from, &onode, || Ok(Some(onode_of(1)))), Some(1));
        let mut batch = WriteBatch::new();
        batch.put(onode, onode_of(2));
        apply(&c, &batch);
        assert_eq!(linked(&c, &from, &onode, || Ok(Some(onode_of(99)))), Some(2));
        // A batch of another key only: the link is read anew, from the
        // cache (written through) or the loader.
        let mut unrelated = WriteBatch::new();
        unrelated.delete(crate::meta::onode_key(9));
        apply(&c, &unrelated);
        c.cache.as_ref().unwrap().remove(&onode[..]);
        assert_eq!(linked(&c, &from, &onode, || Ok(Some(onode_of(3)))), Some(3));
        drop(held);
    }

    #[test]
    fn a_link_never_keeps_its_value_alive_and_is_not_kept_while_a_batch_goes_in() {
        let c = MetaCache::new(1 << 20, None);
        let onode = crate::meta::onode_key(7);
        let from = MetaValue::new(b"dentry".to_vec());
        assert_eq!(linked(&c, &from, &onode, || Ok(Some(onode_of(1)))), Some(1));
        c.cache.as_ref().unwrap().remove(&onode[..]);
        assert_eq!(linked(&c, &from, &onode, || Ok(Some(onode_of(11)))), Some(11), "the evicted value was not kept");
        // Read while a batch is going in (odd epoch): neither cached nor
        // remembered, so the value the batch leaves is read after it.
        c.cache.as_ref().unwrap().remove(&onode[..]);
        let mut batch = WriteBatch::new();
        batch.delete(onode);
        c.invalidate(&batch);
        assert_eq!(linked(&c, &from, &onode, || Ok(Some(onode_of(5)))), Some(5));
        c.settle(None);
        assert_eq!(linked(&c, &from, &onode, || Ok(None)), None, "the read during the batch is not remembered");
    }

    /// A batch of more keys than the cache holds entries (and too many to
    /// write through) empties the cache; a smaller one drops only its own
    /// keys. Either way no key it writes answers with its old value.
    #[test]
    fn a_batch_larger_than_the_cache_empties_it_and_a_smaller_one_drops_its_keys() {
        for cached in [3u64, 200] {
            let c = MetaCache::new(1 << 20, None);
            let keys: Vec<_> = (0..cached).map(crate::meta::onode_key).collect();
            for k in &keys {
                c.get_or_load(k, || Ok::<_, ()>(Some(b"old".to_vec()))).unwrap();
            }
            let mut batch = WriteBatch::new();
            batch.put(keys[0], b"new");
            for i in 1000..1100 {
                batch.put(crate::meta::onode_key(i), b"x");
            }
            apply(&c, &batch);
            let read = |key: &[u8], value: &[u8], loaded: &mut bool| {
                c.get_or_load(key, || {
                    *loaded = true;
                    Ok::<_, ()>(Some(value.to_vec()))
                })
                .unwrap()
                .map(|v| v.to_vec())
            };
            let mut loaded = false;
            assert_eq!(read(&keys[0], b"new", &mut loaded), Some(b"new".to_vec()), "{cached} cached");
            assert!(loaded, "the written key is read from the index ({cached} cached)");
            let mut loaded = false;
            assert_eq!(read(&keys[1], b"old", &mut loaded), Some(b"old".to_vec()));
            assert_eq!(loaded, cached < 101, "an unwritten key is dropped only by a batch larger than the cache");
        }
    }

    /// A batch writes a short value through and leaves a long one for
    /// its first read to load, which then finds the new bytes, never the
    /// value cached before the batch.
    #[test]
    fn a_long_value_is_not_written_through_and_its_first_read_loads_the_new_one() {
        let c = MetaCache::new(1 << 20, None);
        let (short, long) = (crate::meta::onode_key(7), crate::meta::onode_key(8));
        for k in [&short, &long] {
            c.get_or_load(k, || Ok::<_, ()>(Some(b"old".to_vec()))).unwrap();
        }
        let long_value = vec![5u8; WRITE_THROUGH_MAX_VALUE_BYTES + 1];
        let short_value = vec![6u8; WRITE_THROUGH_MAX_VALUE_BYTES];
        let mut batch = WriteBatch::new();
        batch.put(short, &short_value);
        batch.put(long, &long_value);
        apply(&c, &batch);
        let mut loaded = false;
        let got = c
            .get_or_load(&short, || {
                loaded = true;
                Ok::<_, ()>(None)
            })
            .unwrap()
            .unwrap();
        assert!(!loaded, "the short value was written through");
        assert_eq!(&**got, &short_value[..]);
        let got = c
            .get_or_load(&long, || {
                loaded = true;
                Ok::<_, ()>(Some(long_value.clone()))
            })
            .unwrap()
            .unwrap();
        assert!(loaded, "the long value was left for its read to load");
        assert_eq!(&**got, &long_value[..]);
    }

    #[test]
    fn short_and_long_values_keep_their_bytes() {
        for len in [0, 1, INLINE_KEY, INLINE_KEY + 1, 4096] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            assert_eq!(&*MetaValue::new(bytes.clone()), &bytes[..], "length {len}");
        }
    }

    #[test]
    fn cache_keys_compare_and_hash_as_their_bytes() {
        let hasher = std::hash::RandomState::new();
        for len in [0, 1, INLINE_KEY - 1, INLINE_KEY, INLINE_KEY + 1, 300] {
            let a: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let key = CacheKey::new(&a);
            assert_eq!(key.as_slice(), &a[..]);
            assert_eq!(matches!(key, CacheKey::Inline { .. }), len <= INLINE_KEY, "length {len}");
            assert_eq!(hasher.hash_one(&key), hasher.hash_one(&a[..]), "a lookup by slice must find length {len}");
            assert_eq!(key, CacheKey::new(&a));
            if len > 0 {
                let mut b = a.clone();
                b[len - 1] ^= 1;
                assert_ne!(key, CacheKey::new(&b), "keys of length {len} differing in the last byte");
            }
        }
    }
}
