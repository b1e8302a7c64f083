//! The allocator state behind the space manager's lock: per-container
//! buddy lists and range sets, the deferred frees, and the allocation
//! policy (contiguous, unpunched, best fit; fragments when it must).

use std::collections::BTreeMap;

use larder_io::FileRef;

use crate::buddy::{ceil_log2, Buddy};
use crate::deferred::Deferred;
use crate::error::{Result, SpaceError};
use crate::extent::Extent;
use crate::punch::TokenBucket;
use crate::stats::Counters;
use crate::BLOCK_BYTES;
use larder_io::RangeSet;

/// One container's allocator state. Every block is in exactly one of:
/// free (`buddy`), allocated (counted in `allocated`), pending release
/// (`pending`), or being punched (`punching`, off the free lists while the
/// lock is dropped). `dirty` and `punched` are disjoint subsets of free.
#[derive(Debug)]
pub(crate) struct Container {
    pub(crate) file: FileRef,
    pub(crate) buddy: Buddy,
    pub(crate) allocated: u64,
    pub(crate) pending: RangeSet,
    pub(crate) punching: RangeSet,
    /// Free space released by a free in this session: it may hold old data,
    /// so it is what gets punched.
    pub(crate) dirty: RangeSet,
    /// Free space punched: a write into it costs file-system metadata work,
    /// so allocation avoids it when it can.
    pub(crate) punched: RangeSet,
    /// Blocks that may not be allocated and written on disk: holes found
    /// at open and everything punched since, kept (conservatively) even
    /// after rewritten. Data written elsewhere overwrites written blocks,
    /// which changes no file metadata.
    pub(crate) holes: RangeSet,
    /// Blocks the file holds, zero-filled and synced: `[0, filled)` may be
    /// allocated; `[filled, blocks)` is off the free lists until the file
    /// grows over it (see `SpaceManager::allocate`).
    pub(crate) filled: u64,
    /// The file is growing with the lock dropped; no one else grows it.
    pub(crate) growing: bool,
}

impl Container {
    pub(crate) fn new(file: FileRef, buddy: Buddy, allocated: u64, holes: RangeSet, filled: u64) -> Container {
        Container {
            file,
            buddy,
            allocated,
            pending: RangeSet::default(),
            punching: RangeSet::default(),
            dirty: RangeSet::default(),
            punched: RangeSet::default(),
            holes,
            filled,
            growing: false,
        }
    }

    /// Nothing is allocated or pending in it.
    pub(crate) fn is_spare(&self) -> bool {
        self.buddy.free_blocks() + self.punching.total() == self.filled
    }
}

/// Everything the manager's lock guards.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) containers: BTreeMap<u64, Container>,
    pub(crate) blocks: u64,
    pub(crate) next_id: u64,
    /// Containers being created with the lock dropped.
    pub(crate) creating: u64,
    /// Blocks being zero-filled, by creations and growths, with the lock
    /// dropped: the file system does not count them as used yet.
    pub(crate) filling: u64,
    pub(crate) deferred: Deferred,
    pub(crate) durable_lsn: u64,
    pub(crate) bucket: TokenBucket,
    pub(crate) counters: Counters,
}

/// Free chunks [`State::find_contiguous`] checks for unpunched space
/// before it settles for punched space.
const PUNCH_CHECKS: usize = 32;

/// Takes up to `*rem` blocks from `ranges` (`(container, start, end)`),
/// lowering `*rem`: the smallest range that holds all of the rest, else
/// the largest, until the rest is 0 or the ranges are used up. Returns
/// the pieces taken as `(container, start, blocks)`.
fn pick(ranges: &mut Vec<(u64, u64, u64)>, rem: &mut u64) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::new();
    while *rem > 0 {
        let len = |&(_, s, e): &(u64, u64, u64)| e - s;
        let fits = ranges.iter().enumerate().filter(|(_, r)| len(r) >= *rem).min_by_key(|(_, r)| len(r));
        let Some((i, _)) = fits.or_else(|| ranges.iter().enumerate().max_by_key(|(_, r)| len(r))) else { break };
        let (id, s, e) = ranges.swap_remove(i);
        let take = (e - s).min(*rem);
        out.push((id, s, take));
        *rem -= take;
    }
    out
}

/// Blocks in the deferred frees.
fn deferred_blocks(deferred: &Deferred) -> u64 {
    deferred.extents().map(|e| e.len / BLOCK_BYTES).sum()
}

impl State {
    pub(crate) fn free_blocks(&self) -> u64 {
        self.containers.values().map(|c| c.buddy.free_blocks()).sum()
    }

    /// Reserves `count` new container ids, each to be `blocks_each` blocks.
    pub(crate) fn reserve(&mut self, count: u64, blocks_each: u64) -> Vec<u64> {
        let ids = (self.next_id..self.next_id + count).collect();
        self.next_id += count;
        self.creating += count;
        self.filling += count * blocks_each;
        ids
    }

    /// Allocates `n` blocks, or returns `None`, changing nothing, if free
    /// space is short.
    pub(crate) fn try_allocate(&mut self, n: u64) -> Result<Option<Vec<Extent>>> {
        if self.free_blocks() < n {
            return Ok(None);
        }
        let mut out: Vec<Extent> = Vec::new();
        let mut rem = n;
        while rem > 0 {
            if let Some((id, s)) = self.find_contiguous(rem, true).or_else(|| self.find_contiguous(rem, false)) {
                out.push(self.take(id, s, rem)?);
                break;
            }
            // No chunk is big enough: take the largest there is whole.
            let Some((id, s, size)) = self.find_largest() else {
                return Err(SpaceError::invariant(0, "free blocks counted but none on the free lists"));
            };
            let size = size.min(rem);
            out.push(self.take(id, s, size)?);
            rem -= size;
        }
        // Merge pieces that happen to be adjacent, in order.
        let mut merged: Vec<Extent> = Vec::with_capacity(out.len());
        for e in out {
            match merged.last_mut() {
                Some(last) if last.container == e.container && last.end() == e.offset => last.len += e.len,
                _ => merged.push(e),
            }
        }
        Ok(Some(merged))
    }

    /// Free blocks punched this session, which the file system must
    /// allocate again when they are written.
    pub(crate) fn punched_blocks(&self) -> u64 {
        self.containers.values().map(|c| c.punched.total()).sum()
    }

    /// Free blocks an allocation may take when the file system has room
    /// for only `room` more beyond the reserve: every unpunched one, and
    /// punched ones up to `room`.
    pub(crate) fn usable_blocks(&self, room: u64) -> u64 {
        let punched = self.punched_blocks();
        self.free_blocks() - punched + punched.min(room)
    }

    /// Allocates `n` blocks of which at most `room` are punched, or
    /// returns `None`, changing nothing, if free space is short. For a file
    /// system with less room beyond the reserve than `n`: writing punched
    /// space allocates the file system's blocks again, so taking it freely
    /// (as [`State::try_allocate`] does) would spend the reserve while
    /// unpunched space stays free. Unpunched space first, then punched; in
    /// each, the smallest range that holds the rest, else the largest.
    pub(crate) fn try_allocate_within(&mut self, n: u64, room: u64) -> Result<Option<Vec<Extent>>> {
        if self.usable_blocks(room) < n {
            return Ok(None);
        }
        let (mut unpunched, mut punched) = (Vec::new(), Vec::new());
        for (&id, c) in &self.containers {
            for (s, e) in c.buddy.free_ranges() {
                let mut pos = s;
                for (ps, pe) in c.punched.overlapping(s, e) {
                    let (ps, pe) = (ps.max(s), pe.min(e));
                    if ps > pos {
                        unpunched.push((id, pos, ps));
                    }
                    punched.push((id, ps, pe));
                    pos = pe;
                }
                if pos < e {
                    unpunched.push((id, pos, e));
                }
            }
        }
        let mut rem = n;
        let mut plan = pick(&mut unpunched, &mut rem);
        plan.extend(pick(&mut punched, &mut rem));
        if rem > 0 {
            return Err(SpaceError::invariant(0, "usable free blocks counted but not found"));
        }
        let mut out: Vec<Extent> = Vec::with_capacity(plan.len());
        for (id, s, len) in plan {
            let e = self.take(id, s, len)?;
            match out.last_mut() {
                Some(last) if last.container == e.container && last.end() == e.offset => last.len += e.len,
                _ => out.push(e),
            }
        }
        Ok(Some(out))
    }

    /// The smallest free chunk able to hold `n` contiguous blocks (and, if
    /// `avoid_punched`, an aligned place in it that misses punched space),
    /// as `(container, first block)`.
    ///
    /// Avoiding punched space checks at most [`PUNCH_CHECKS`] free chunks:
    /// once deletes have freed and punched many, every chunk checked could
    /// be punched, and a scan of all of them made each allocation cost
    /// time in the number of free chunks (15% of a file server's time).
    /// Past the budget the caller takes punched space, which the
    /// container's file system allocates again on write.
    fn find_contiguous(&self, n: u64, avoid_punched: bool) -> Option<(u64, u64)> {
        let k = ceil_log2(n);
        let max_order = self.containers.values().next()?.buddy.max_order();
        let mut checks = 0;
        for order in k..=max_order {
            for (&id, c) in &self.containers {
                for s in c.buddy.free_of_order(order) {
                    if !avoid_punched {
                        return Some((id, s));
                    }
                    if let Some(at) = c.punched.first_gap(s, s + (1 << order), n, 1 << k) {
                        return Some((id, at));
                    }
                    checks += 1;
                    if checks >= PUNCH_CHECKS {
                        return None;
                    }
                }
            }
        }
        None
    }

    /// The largest free block, unpunched ones first among equals, as
    /// `(container, first block, blocks)`.
    fn find_largest(&self) -> Option<(u64, u64, u64)> {
        let max_order = self.containers.values().next()?.buddy.max_order();
        for order in (0..=max_order).rev() {
            let size = 1u64 << order;
            let mut any = None;
            for (&id, c) in &self.containers {
                for s in c.buddy.free_of_order(order) {
                    if !c.punched.intersects(s, s + size) {
                        return Some((id, s, size));
                    }
                    any.get_or_insert((id, s, size));
                }
            }
            if any.is_some() {
                return any;
            }
        }
        None
    }

    /// Takes free blocks `[s, s + n)` of container `id` for an extent.
    fn take(&mut self, id: u64, s: u64, n: u64) -> Result<Extent> {
        let c = self.containers.get_mut(&id).ok_or_else(|| SpaceError::invariant(id, "no such container"))?;
        if !c.buddy.take_range(s, s + n) {
            return Err(SpaceError::invariant(id, format!("blocks [{s}, {}) chosen but not free", s + n)));
        }
        // The caller is about to write it: it is no longer a hole, nor a
        // punch candidate.
        c.punched.remove(s, s + n);
        c.dirty.remove(s, s + n);
        c.allocated += n;
        Ok(Extent::from_blocks(id, s, s + n))
    }

    pub(crate) fn check(&self) -> Result<()> {
        let mut pending_total = 0;
        for (&id, c) in &self.containers {
            c.buddy.check().map_err(|what| SpaceError::invariant(id, what))?;
            if c.filled > self.blocks {
                return Err(SpaceError::invariant(id, format!("{} blocks filled of {}", c.filled, self.blocks)));
            }
            let unfilled = self.blocks - c.filled;
            let sum = c.buddy.free_blocks() + c.allocated + c.pending.total() + c.punching.total() + unfilled;
            if sum != self.blocks {
                return Err(SpaceError::invariant(
                    id,
                    format!(
                        "free {} + allocated {} + pending {} + punching {} + unfilled {unfilled} != {} blocks",
                        c.buddy.free_blocks(),
                        c.allocated,
                        c.pending.total(),
                        c.punching.total(),
                        self.blocks
                    ),
                ));
            }
            if c.buddy.any_free(c.filled, self.blocks) {
                return Err(SpaceError::invariant(id, format!("blocks past the filled {} are free", c.filled)));
            }
            for (s, e) in c.pending.iter().chain(c.punching.iter()) {
                if c.buddy.any_free(s, e) {
                    return Err(SpaceError::invariant(id, format!("pending or punching [{s}, {e}) is also free")));
                }
            }
            if let Some((s, e)) = c.pending.intersection(&c.punching).first() {
                return Err(SpaceError::invariant(id, format!("[{s}, {e}) both pending and punching")));
            }
            for (s, e) in c.dirty.iter().chain(c.punched.iter()) {
                if !c.buddy.all_free_in(s, e) {
                    return Err(SpaceError::invariant(id, format!("dirty or punched [{s}, {e}) is not free")));
                }
            }
            if let Some((s, e)) = c.dirty.intersection(&c.punched).first() {
                return Err(SpaceError::invariant(id, format!("[{s}, {e}) both dirty and punched")));
            }
            pending_total += c.pending.total();
        }
        if deferred_blocks(&self.deferred) != pending_total {
            return Err(SpaceError::invariant(0, "the deferred frees do not match the pending space"));
        }
        Ok(())
    }
}
