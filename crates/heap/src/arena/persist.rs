//! The arena's records: what changed since the last sync, all of them, and
//! the generation reservation they carry.

use super::record::{self, Record, HEADER_KEY};
use super::{Arena, GENERATION_LEASE, PAGE_BYTES};

impl Arena {
    /// Records changed since the last call: `(key, Some(bytes))` to write,
    /// `(key, None)` to delete, in key order (the header, if changed, is
    /// last). Write them all in one transaction, and once it is durable
    /// call [`Arena::records_durable`]. The header is included whenever
    /// the claimed ranges changed or the generation reservation is half
    /// used; it then reserves [`GENERATION_LEASE`] generations ahead.
    pub fn take_dirty_records(&mut self) -> Vec<(u64, Option<Vec<u8>>)> {
        let mut keys = std::mem::take(&mut self.dirty_keys);
        keys.sort_unstable();
        keys.dedup();
        let mut out = Vec::with_capacity(keys.len() + 1);
        for key in keys {
            if let Some(id) = self.span_at(key) {
                self.spans[id as usize].dirty = false;
            }
            out.push((key, self.record_at(key)));
        }
        let reserved = self.durable_limit.max(self.pending_limit.unwrap_or(0));
        let reservation_low = self.next_generation.saturating_add(GENERATION_LEASE / 2) > reserved;
        if std::mem::take(&mut self.header_dirty) || reservation_low {
            self.pending_limit = Some(reserved.max(self.next_generation.saturating_add(GENERATION_LEASE)));
            out.push((HEADER_KEY, Some(self.header_record())));
        }
        out
    }

    /// Tells the arena that every record taken by
    /// [`Arena::take_dirty_records`] so far is durable, so it may issue the
    /// generations their header reserved.
    pub fn records_durable(&mut self) {
        if let Some(limit) = self.pending_limit.take() {
            self.durable_limit = self.durable_limit.max(limit);
        }
    }

    /// Every record of the arena, in key order (the header last).
    pub fn all_records(&self) -> Vec<(u64, Vec<u8>)> {
        let mut keys: Vec<u64> =
            self.spans.iter().filter(|s| s.slots != 0).map(|s| s.offset).chain(self.large.keys().copied()).collect();
        keys.sort_unstable();
        let mut out: Vec<(u64, Vec<u8>)> =
            keys.into_iter().filter_map(|key| self.record_at(key).map(|bytes| (key, bytes))).collect();
        out.push((HEADER_KEY, self.header_record()));
        out
    }

    fn span_at(&self, key: u64) -> Option<u32> {
        let &id = self.span_pages.get(&(key / PAGE_BYTES))?;
        (self.spans[id as usize].offset == key).then_some(id)
    }

    fn record_at(&self, key: u64) -> Option<Vec<u8>> {
        if let Some(id) = self.span_at(key) {
            let span = &self.spans[id as usize];
            return Some(record::encode_span(span.offset, usize::from(span.class), span.generations()));
        }
        let large = self.large.get(&key)?;
        Some(record::encode_large(key, large.pages, large.generation))
    }

    fn header_record(&self) -> Vec<u8> {
        Record::Header { reserved: self.reserved_generation(), claimed: self.claimed.ranges().to_vec() }.encode()
    }

    pub(super) fn mark_dirty(&mut self, key: u64) {
        self.dirty_keys.push(key);
        // Large blocks allocated and freed between two takes each add a key;
        // fold repeats so the list stays proportional to the records.
        if self.dirty_keys.len() > 1024 && self.dirty_keys.len() > 2 * (self.spans.len() + self.large.len()) {
            self.dirty_keys.sort_unstable();
            self.dirty_keys.dedup();
        }
    }
}
