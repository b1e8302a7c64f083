//! Decoded extent maps of recently read objects, so that reading a small
//! extent-mapped object again costs no index range scan.
//!
//! Keyed by object id and tagged with the onode generation the map was
//! read at. Every transaction that changes an object's fmap entries also
//! bumps its onode's generation, in the same record (writes, truncates,
//! the steps freeing an orphan; a deleted object's id is never reused):
//! so an onode of generation G read at any snapshot goes with exactly the
//! map cached for G, and a reader holding that snapshot's space
//! registration may read the cached extents as safely as ones it scanned.
//! No invalidation is needed; a stale tag simply misses.
//!
//! Only maps of at most [`MAX_CACHED_ENTRIES`] entries are kept: a read
//! walks the whole cached map, and large objects are read in ranges.
//!
//! A committing transaction that changes an object's map carries the map
//! forward ([`maps_after`]): the map cached for the generation it started
//! from, with its own fmap writes applied, is cached for the generation
//! it commits. A new file's map is then known from its first write on, so
//! neither its reads nor its delete scan the index for it.

use std::collections::BTreeMap;
use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::Weighter;

use super::fmap::Mapped;
use crate::meta::{decode_fmap_key, decode_onode_key, fmap_prefix, onode_key, DataLocation, Map};
use crate::meta::{MetaLimits, Onode};
use crate::txn::Transaction;

/// Largest extent map cached, in entries.
pub(crate) const MAX_CACHED_ENTRIES: usize = 16;

/// What is cached of an object's map.
#[derive(Clone)]
pub(crate) enum CachedMap {
    /// All of its entries, in offset order.
    Whole(Arc<[Mapped]>),
    /// More than [`MAX_CACHED_ENTRIES`]: read it in ranges.
    TooLarge,
}

/// A cached map and the onode generation it belongs to.
type Tagged = (u64, CachedMap);

#[derive(Clone)]
struct MapWeighter;

impl Weighter<u64, Tagged> for MapWeighter {
    fn weight(&self, _: &u64, (_, map): &Tagged) -> u64 {
        let CachedMap::Whole(entries) = map else { return 64 };
        let crcs: usize = entries.iter().map(|m| m.entry.crcs.len() * 4).sum();
        (64 + entries.len() * std::mem::size_of::<Mapped>() + crcs) as u64
    }
}

/// See the module doc.
pub(crate) struct ExtentCache {
    cache: Option<Cache<u64, Tagged, MapWeighter>>,
}

impl ExtentCache {
    /// A cache of `capacity_bytes` (0: none).
    pub(crate) fn new(capacity_bytes: usize) -> Self {
        let cache = (capacity_bytes > 0)
            .then(|| Cache::with_weighter((capacity_bytes / 256).max(16), capacity_bytes as u64, MapWeighter));
        ExtentCache { cache }
    }

    /// What is cached of the map of `object` at onode generation
    /// `generation`, if anything.
    pub(crate) fn get(&self, object: u64, generation: u64) -> Option<CachedMap> {
        let (tag, map) = self.cache.as_ref()?.get(&object)?;
        (tag == generation).then_some(map)
    }

    /// Keeps the map of `object` at `generation`: `entries` if it is all
    /// of it and at most [`MAX_CACHED_ENTRIES`], else that it is too large.
    pub(crate) fn insert(&self, object: u64, generation: u64, entries: &[Mapped], whole: bool) {
        if let Some(cache) = &self.cache {
            let map = if whole && entries.len() <= MAX_CACHED_ENTRIES {
                CachedMap::Whole(entries.into())
            } else {
                CachedMap::TooLarge
            };
            cache.insert(object, (generation, map));
        }
    }
}

impl ExtentCache {
    /// Whether a map of `object` is cached, of any generation.
    pub(crate) fn holds(&self, object: u64) -> bool {
        self.cache.as_ref().is_some_and(|c| c.contains_key(&object))
    }

    /// Whether maps are cached at all (a capacity of 0 caches none).
    pub(crate) fn is_enabled(&self) -> bool {
        self.cache.is_some()
    }

    /// Caches the maps a transaction left (see [`maps_after`]); called
    /// once its record is committed, its locks still held.
    pub(crate) fn settle(&self, maps: Vec<MapAfter>) {
        let Some(cache) = &self.cache else { return };
        for m in maps {
            let map = if m.entries.len() <= MAX_CACHED_ENTRIES {
                CachedMap::Whole(m.entries.into())
            } else {
                CachedMap::TooLarge
            };
            cache.insert(m.object, (m.generation, map));
        }
    }
}

/// An object's whole extent map as a transaction leaves it, and the onode
/// generation the transaction gives it.
pub(crate) struct MapAfter {
    object: u64,
    generation: u64,
    entries: Vec<Mapped>,
}

/// The maps `txn` leaves for the extent-mapped objects whose onode it
/// writes with a new generation (the onode of an object with no fmap
/// entry written and no map cached, a directory's say, is not even
/// decoded). Called before its record is committed, when the committed
/// state of each object it holds exclusively is still the state it started
/// from: the map at the committed generation (cached, or empty for an
/// object with no onode yet or with inline bytes, which have no fmap
/// entries) with the transaction's own fmap writes applied is the map at
/// the new generation. An object whose starting map is not cached, or
/// whose records do not decode, is left out: it is scanned at its next
/// read, as before.
pub(crate) fn maps_after(txn: &Transaction<'_>) -> Vec<MapAfter> {
    if !txn.store().extent_cache().is_enabled() {
        return Vec::new();
    }
    let limits = txn.limits();
    let omap = [Map::Omap.prefix()];
    let Some((omap_end, n)) = array_prefix_end(omap) else { return Vec::new() };
    txn.pending_in(&omap, &omap_end[..n])
        .filter_map(|(key, value)| map_after(txn, key, value.as_deref()?, &limits))
        .collect()
}

/// [`crate::meta::prefix_end`] of a fixed-size prefix, built in place: the end's bytes
/// and how many of them are the end (none when every byte is 0xFF). Two
/// calls per onode a transaction writes, so a create allocated three keys
/// for them.
fn array_prefix_end<const N: usize>(prefix: [u8; N]) -> Option<([u8; N], usize)> {
    let last = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut end = prefix;
    end[last] += 1;
    Some((end, last + 1))
}

/// [`maps_after`] for the onode `key` the transaction writes as `value`.
fn map_after(txn: &Transaction<'_>, key: &[u8], value: &[u8], limits: &MetaLimits) -> Option<MapAfter> {
    let object = decode_onode_key(key).ok()?;
    let prefix = fmap_prefix(object);
    let (end, n) = array_prefix_end(prefix)?;
    let end = &end[..n];
    let cache = txn.store().extent_cache();
    if txn.pending_in(&prefix, end).next().is_none() && !cache.holds(object) {
        // No entry written and no map to carry: nothing to decode.
        return None;
    }
    // Only the objects this transaction holds exclusively: their
    // committed state cannot change before its record commits.
    txn.check_locked(object).ok()?;
    let onode = Onode::decode(value, limits).ok()?;
    if !matches!(onode.location, DataLocation::Extents) {
        return None;
    }
    let committed = txn.store().get_meta(&onode_key(object)).ok()?;
    // Borrowed, not cloned: only its generation and where its bytes are
    // matter here.
    let committed = match &committed {
        Some(meta) => Some(meta.attributes(limits).ok()?),
        None => None,
    };
    let start: Vec<Mapped> = match committed {
        // Born in this transaction: ids are never reused, so no entry
        // was there before it.
        None => Vec::new(),
        // The same tag for what may be another map: cache nothing.
        Some(c) if c.generation == onode.generation => return None,
        Some(c) => match &c.location {
            DataLocation::Inline(_) => Vec::new(),
            DataLocation::Extents => match cache.get(object, c.generation)? {
                CachedMap::Whole(entries) => entries.to_vec(),
                CachedMap::TooLarge => return None,
            },
            DataLocation::OwnFile { .. } => return None,
        },
    };
    let mut map: BTreeMap<u64, Mapped> = start.into_iter().map(|m| (m.offset, m)).collect();
    for (key, value) in txn.pending_in(&prefix, end) {
        let (_, offset) = decode_fmap_key(key).ok()?;
        match value {
            Some(value) => map.insert(offset, Mapped::decode(key, value, limits).ok()?),
            None => map.remove(&offset),
        };
    }
    Some(MapAfter { object, generation: onode.generation, entries: map.into_values().collect() })
}

#[cfg(test)]
#[path = "extent_cache_tests.rs"]
mod tests;
