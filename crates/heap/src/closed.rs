//! Mappings of closed objects, kept a while (docs/heap.md, "Closed
//! mappings"): attaching an object closed a moment ago then costs one
//! `stat` of its file instead of an open, an mmap, page faults and, at the
//! next close, the munmap of its whole reservation. Bounded in count and in
//! bytes (`limits::CLOSED_MAPPINGS`, `limits::CLOSED_MAPPING_BYTES`); the
//! oldest closed is unmapped first. Only real mappings are kept: an
//! emulated region is a copy of the file, which writes through the object
//! layer would leave behind.

use std::collections::BTreeMap;
use std::sync::Arc;

use larder_io::{MapAccess, SharedRegion};

use crate::arena_glue::IdMap;
use crate::credentials::Owner;
use crate::limits::{CLOSED_MAPPINGS, CLOSED_MAPPING_BYTES};

/// A closed object's mapping, as it was when closed.
#[derive(Debug)]
pub(crate) struct ClosedMapping {
    pub(crate) region: Arc<SharedRegion>,
    pub(crate) access: MapAccess,
    /// Owner and mode the mapping's access was decided for.
    pub(crate) owner: Owner,
    /// When it was closed, in this set's order of closes.
    stamp: u64,
    /// The region's length when kept, as counted in the set's bytes (a
    /// thread still holding the object's old handle may grow the region).
    counted: u64,
}

/// A heap's closed mappings, one per object at most.
#[derive(Debug, Default)]
pub(crate) struct ClosedMappings {
    by_id: IdMap<ClosedMapping>,
    /// Close stamp -> object, oldest first: the order of eviction.
    order: BTreeMap<u64, u64>,
    next_stamp: u64,
    /// Bytes of the files the kept regions expose, summed.
    bytes: u64,
}

impl ClosedMappings {
    /// Keeps object `id`'s mapping, replacing one kept before for it, and
    /// evicts the oldest while the set is over its bounds. Returns what
    /// leaves the set (a region refused for being emulated or alone above
    /// the byte bound included), for the caller to drop once it released
    /// its lock: dropping the last reference unmaps.
    pub(crate) fn keep(
        &mut self,
        id: u64,
        region: Arc<SharedRegion>,
        access: MapAccess,
        owner: Owner,
    ) -> Vec<Arc<SharedRegion>> {
        // A closed object is not synced: its mapping keeps no descriptor.
        region.release_descriptor();
        let mut gone: Vec<Arc<SharedRegion>> = self.take(id).map(|m| m.region).into_iter().collect();
        if region.is_emulated() || region.len() > CLOSED_MAPPING_BYTES || CLOSED_MAPPINGS == 0 {
            gone.push(region);
            return gone;
        }
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        let counted = region.len();
        self.bytes += counted;
        self.order.insert(stamp, id);
        self.by_id.insert(id, ClosedMapping { region, access, owner, stamp, counted });
        while self.by_id.len() > CLOSED_MAPPINGS || self.bytes > CLOSED_MAPPING_BYTES {
            let Some((_, oldest)) = self.order.first_key_value().map(|(s, i)| (*s, *i)) else { break };
            match self.take(oldest) {
                Some(m) => gone.push(m.region),
                None => break,
            }
        }
        gone
    }

    /// Takes object `id`'s kept mapping out of the set.
    pub(crate) fn take(&mut self, id: u64) -> Option<ClosedMapping> {
        let mapping = self.by_id.remove(&id)?;
        self.order.remove(&mapping.stamp);
        self.bytes -= mapping.counted;
        Some(mapping)
    }

    /// Empties the set, returning every region it kept.
    pub(crate) fn clear(&mut self) -> Vec<Arc<SharedRegion>> {
        self.order.clear();
        self.bytes = 0;
        self.by_id.drain().map(|(_, m)| m.region).collect()
    }

    /// How many mappings are kept.
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }
}
