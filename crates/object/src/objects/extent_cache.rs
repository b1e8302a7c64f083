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

use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::Weighter;

use super::fmap::Mapped;

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
