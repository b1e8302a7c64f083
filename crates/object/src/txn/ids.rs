//! Object ids: u64s from a logged high-water mark, never reused.
//!
//! The store key `next_object_id` holds H: every id below H may have been
//! handed out, none at or above it was. Ids come from a chunk reserved by
//! a transaction that raises H and is committed *before* any id of the
//! chunk is handed out: its LSN precedes every transaction using one, and
//! durability is prefix-closed, so no durable transaction can name an id
//! at or above the recovered H. (Raising H inside the allocating
//! transaction would not do: another transaction using an id of the same
//! chunk could get an earlier LSN and be durable while the one raising H
//! was lost.) A crash wastes at most one chunk of ids: with 2^64 ids, a
//! chunk of 65,536 costs nothing, and keeps the high-water commits (one
//! sync each) rare: at 1,024 they were a quarter of a million-file create.

use parking_lot::Mutex;

use crate::error::Result;

/// Ids reserved per durable high-water-mark update.
pub(crate) const CHUNK: u64 = 1 << 16;
/// The first id ever handed out (0 is never an object; 1 is the root).
pub(crate) const FIRST_ID: u64 = 2;

struct Range {
    next: u64,
    reserved: u64,
}

/// Hands out ids; `reserve` makes a new high-water mark durable.
pub(crate) struct IdAllocator {
    range: Mutex<Range>,
}

impl IdAllocator {
    /// Starts at the recovered high-water mark (ids at or above it are free).
    pub(crate) fn new(high_water: u64) -> Self {
        let start = high_water.max(FIRST_ID);
        IdAllocator { range: Mutex::new(Range { next: start, reserved: start }) }
    }

    /// `count` consecutive new ids. `reserve(h)` must durably record `h`
    /// as the new high-water mark; it runs (under this allocator's lock, at
    /// most once) when the current chunk cannot hold them.
    pub(crate) fn allocate_range(
        &self,
        count: u64,
        reserve: impl FnOnce(u64) -> Result<()>,
    ) -> Result<std::ops::Range<u64>> {
        let mut r = self.range.lock();
        let end = r.next.saturating_add(count);
        if end > r.reserved {
            let high = end.saturating_add(CHUNK);
            reserve(high)?;
            r.reserved = high;
        }
        let ids = r.next..end;
        r.next = end;
        Ok(ids)
    }
}
