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

    /// Makes the next `count` ids allocatable without a high-water commit
    /// each: if the current chunk cannot hold them, `reserve(h)` records
    /// a high-water mark `h` past them (and a chunk more), as
    /// [`IdAllocator::allocate_range`] would for one range of `count`.
    pub(crate) fn reserve_ahead(&self, count: u64, reserve: impl FnOnce(u64) -> Result<()>) -> Result<()> {
        let mut r = self.range.lock();
        let end = r.next.saturating_add(count);
        r.cover(end, reserve)
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
        r.cover(end, reserve)?;
        let ids = r.next..end;
        r.next = end;
        Ok(ids)
    }
}

impl Range {
    /// Makes ids below `end` allocatable: if they pass the reserved mark,
    /// `reserve(h)` records a high-water mark `h` a chunk past `end`.
    fn cover(&mut self, end: u64, reserve: impl FnOnce(u64) -> Result<()>) -> Result<()> {
        if end > self.reserved {
            let high = end.saturating_add(CHUNK);
            reserve(high)?;
            self.reserved = high;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::cell::RefCell;

    use super::*;

    #[test]
    fn ids_reserved_ahead_are_allocated_without_another_high_water_commit() {
        let ids = IdAllocator::new(100);
        let commits = RefCell::new(Vec::new());
        let record = |h: u64| -> Result<()> {
            commits.borrow_mut().push(h);
            Ok(())
        };
        ids.reserve_ahead(3 * CHUNK, record).unwrap();
        assert_eq!(*commits.borrow(), [100 + 4 * CHUNK]);
        // Three chunks' worth in three ranges: no commit at all.
        let mut next = 100;
        for _ in 0..3 {
            let range = ids.allocate_range(CHUNK, record).unwrap();
            assert_eq!(range, next..next + CHUNK);
            next += CHUNK;
        }
        assert_eq!(commits.borrow().len(), 1);
        // Reserving what is already reserved commits nothing.
        ids.reserve_ahead(CHUNK, record).unwrap();
        assert_eq!(commits.borrow().len(), 1);
        // Past the reservation: a commit, and the ids go on from there.
        let range = ids.allocate_range(CHUNK + 1, record).unwrap();
        assert_eq!(range, next..next + CHUNK + 1);
        assert_eq!(*commits.borrow(), [100 + 4 * CHUNK, next + 2 * CHUNK + 1]);
    }

    #[test]
    fn a_failed_reservation_changes_nothing() {
        let ids = IdAllocator::new(FIRST_ID);
        let failed = ids.reserve_ahead(10, |_| Err(crate::ObjectError::Poisoned { cause: "test".into() }));
        assert!(failed.is_err());
        let mut commits = 0;
        let range = ids
            .allocate_range(1, |_| {
                commits += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!((range, commits), (FIRST_ID..FIRST_ID + 1, 1));
    }
}
