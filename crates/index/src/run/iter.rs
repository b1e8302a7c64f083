//! Iterates the entries of one run over a key range, in either direction.

use std::ops::Bound;
use std::sync::Arc;

use super::block::{Block, BlockRef, EntrySpan, Shape};
use super::cache::BlockCache;
use super::reader::OpenRun;
use crate::entry::{EntryRef, Kind, OpRef, Stamp};
use crate::error::Result;
use crate::memtable::key_head16;
use crate::stats::Stats;

/// The block a cursor is in: read through the block cache, or viewed in
/// place in a mapped run (no system call, copy or cache entry): block
/// `index`, its entries and offset table `shape.len()` bytes from byte
/// `at` of the mapping (found once per block, not per entry).
enum Loaded {
    Cached(Arc<Block>),
    Mapped { index: usize, at: usize, shape: Shape },
}

/// The range a scan reads, shared by the cursors of its runs (the bound
/// keys copied once per scan, not once per run and again to position).
pub(crate) struct ScanRange {
    pub(crate) start: Bound<Vec<u8>>,
    pub(crate) end: Bound<Vec<u8>>,
}

/// A cursor over one run. Blocks are viewed in the mapping when the run
/// is mapped, else read: user scans through the cache, merges around it
/// (they must not evict the working set). A merge checks every entry of
/// every block it reads, mapped or not, before it rewrites them.
pub(crate) struct RunIter {
    run: Arc<OpenRun>,
    cache: Option<Arc<BlockCache>>,
    stats: Arc<Stats>,
    forward: bool,
    range: Arc<ScanRange>,
    /// The head ([`key_head16`]) of the bound the range ends at in the
    /// iteration direction (0 if unbounded): most range checks are
    /// settled by it.
    far_head: u128,
    block_idx: usize,
    block: Option<Loaded>,
    /// Next entry to return within `block` (forward: index; backward: index + 1).
    pos: usize,
    /// The entry under the cursor, decoded once (in range, not done).
    current: Option<EntrySpan>,
    /// The head ([`key_head16`]) of `current`'s key, taken by the range
    /// check: the merge orders sources by it without slicing the key again.
    head: u128,
    started: bool,
    done: bool,
    /// What [`RunIter::start_block`] found in the block index for the
    /// range's starting bound, kept for positioning (one search, not two).
    found: Option<usize>,
}

/// The bytes of the block a cursor is in.
fn view<'a>(run: &'a OpenRun, loaded: &'a Loaded) -> BlockRef<'a> {
    match loaded {
        Loaded::Cached(block) => block.view(),
        Loaded::Mapped { at, shape, .. } => BlockRef::with_shape(run.mapped_at(*at, shape.len()), *shape),
    }
}

impl RunIter {
    pub(crate) fn new(
        run: Arc<OpenRun>,
        cache: Option<Arc<BlockCache>>,
        stats: Arc<Stats>,
        range: Arc<ScanRange>,
        forward: bool,
    ) -> Self {
        let far = if forward { &range.end } else { &range.start };
        let far_head = match far {
            Bound::Included(k) | Bound::Excluded(k) => key_head16(k),
            Bound::Unbounded => 0,
        };
        RunIter {
            run,
            cache,
            stats,
            forward,
            range,
            far_head,
            block_idx: 0,
            block: None,
            pos: 0,
            current: None,
            head: 0,
            started: false,
            done: false,
            found: None,
        }
    }

    fn load(&mut self, i: usize) -> Result<()> {
        self.block_idx = i;
        let first = self.block.take().is_none();
        if self.cache.is_some() && self.run.is_mapped() && self.run.scan_block(i, first, &self.stats)? {
            let view = self.run.checked_view(i);
            // A checked block never views as empty: the file was cut under
            // the mapping since.
            if view.len() == 0 {
                return Err(self.run.changed(self.run.index.handle(i).offset));
            }
            let at = usize::try_from(self.run.index.handle(i).offset).unwrap_or(usize::MAX);
            self.block = Some(Loaded::Mapped { index: i, at, shape: view.shape() });
            // The block after this one in the scan order starts loading its
            // first entry and its entry count: a cursor that moves on to it
            // reads those first, and its miss then overlaps this block's.
            let next = if self.forward { i.checked_add(1) } else { i.checked_sub(1) };
            if let Some(next) = next.filter(|&n| n < self.run.index.len()) {
                self.run.touch_block_ends(next);
            }
        } else if let Some(view) = self.merge_view(i)? {
            let at = usize::try_from(self.run.index.handle(i).offset).unwrap_or(usize::MAX);
            self.block = Some(Loaded::Mapped { index: i, at, shape: view.shape() });
        } else {
            self.block = Some(Loaded::Cached(self.run.block(i, self.cache.as_deref(), &self.stats)?));
        }
        Ok(())
    }

    /// A merge's cursor (no cache) over a mapped, guarded run: block `i`
    /// checked in full in the mapping, so the merge reads it in place;
    /// None otherwise.
    fn merge_view(&self, i: usize) -> Result<Option<BlockRef<'_>>> {
        if self.cache.is_some() {
            return Ok(None);
        }
        self.run.merge_block(i, &self.stats)
    }

    /// The key a user scan's cursor searches the block index for to
    /// position itself, while it is not positioned: None once started, for
    /// an unbounded start, in an empty run, and for a merge's cursor,
    /// which reads around the mapping.
    pub(crate) fn search_key(&self) -> Option<&[u8]> {
        if self.started || self.run.index.is_empty() || self.cache.is_none() {
            return None;
        }
        match if self.forward { &self.range.start } else { &self.range.end } {
            Bound::Included(k) | Bound::Excluded(k) => Some(k),
            Bound::Unbounded => None,
        }
    }

    /// Gives the cursor the block index's answer for its
    /// [`RunIter::search_key`], found by the caller (for several runs
    /// together), which positioning then uses instead of searching.
    pub(crate) fn set_found(&mut self, found: usize) {
        self.found = Some(found);
    }

    /// The block a user scan's cursor will start in, before it is
    /// positioned (None once started, when the range starts past the run,
    /// and for a merge's cursor, which reads around the mapping).
    pub(crate) fn start_block(&mut self) -> Option<usize> {
        let n = self.run.index.len();
        if self.started || n == 0 || self.cache.is_none() {
            return None;
        }
        let bound = if self.forward { &self.range.start } else { &self.range.end };
        let block = match bound {
            Bound::Included(k) | Bound::Excluded(k) => {
                let found = self.found.unwrap_or_else(|| self.run.index.find(k));
                self.found = Some(found);
                found
            }
            Bound::Unbounded if self.forward => 0,
            Bound::Unbounded => n - 1,
        };
        if self.forward {
            (block < n).then_some(block)
        } else {
            Some(block.min(n - 1))
        }
    }

    /// The run read.
    pub(crate) fn run(&self) -> &OpenRun {
        &self.run
    }

    /// Entries in the current block (0 if none is loaded).
    fn block_len(&self) -> usize {
        self.block.as_ref().map_or(0, |b| view(&self.run, b).len())
    }

    /// The first position in the current block at or after `(key, stamp)`.
    fn block_seek(&self, key: &[u8], stamp: Stamp) -> usize {
        self.block.as_ref().map_or(0, |b| view(&self.run, b).seek(key, stamp))
    }

    /// Whether entry `i` of the current block has key `key`.
    fn key_at_is(&self, i: usize, key: &[u8]) -> bool {
        self.block.as_ref().is_some_and(|b| {
            let block = view(&self.run, b);
            i < block.len() && block.entry(i).key == key
        })
    }

    fn position(&mut self) -> Result<()> {
        self.started = true;
        let n = self.run.index.len();
        if n == 0 {
            self.done = true;
            return Ok(());
        }
        let range = self.range.clone();
        if self.forward {
            let (key, stamp) = match &range.start {
                Bound::Included(k) => (Some(k.as_slice()), Stamp { seq: u64::MAX, sub: u32::MAX }),
                // Past every version of the excluded key.
                Bound::Excluded(k) => (Some(k.as_slice()), Stamp { seq: 0, sub: 0 }),
                Bound::Unbounded => (None, Stamp { seq: 0, sub: 0 }),
            };
            let Some(key) = key else {
                self.load(0)?;
                self.pos = 0;
                return Ok(());
            };
            let bi = self.found.take().unwrap_or_else(|| self.run.index.find(key));
            if bi == n {
                self.done = true;
                return Ok(());
            }
            self.load(bi)?;
            self.pos = self.block_seek(key, stamp);
            if matches!(range.start, Bound::Excluded(_)) {
                while self.key_at_is(self.pos, key) {
                    self.pos += 1;
                }
            }
        } else {
            let (key, stamp) = match &range.end {
                // Past every version of the included key.
                Bound::Included(k) => (Some(k.as_slice()), Stamp { seq: 0, sub: 0 }),
                Bound::Excluded(k) => (Some(k.as_slice()), Stamp { seq: u64::MAX, sub: u32::MAX }),
                Bound::Unbounded => (None, Stamp { seq: 0, sub: 0 }),
            };
            match key {
                None => {
                    self.load(n - 1)?;
                    self.pos = self.block_len();
                }
                Some(key) => {
                    let bi = self.found.take().unwrap_or_else(|| self.run.index.find(key)).min(n - 1);
                    self.load(bi)?;
                    self.pos = self.block_seek(key, stamp);
                    if matches!(range.end, Bound::Included(_)) {
                        while self.key_at_is(self.pos, key) {
                            self.pos += 1;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether `key`, of head `head`, is within the range's far bound.
    fn in_range(&self, key: &[u8], head: u128) -> bool {
        // Unequal heads order the key and the bound as their bytes do.
        let bounded = !matches!(if self.forward { &self.range.end } else { &self.range.start }, Bound::Unbounded);
        if bounded && head != self.far_head {
            return (head < self.far_head) == self.forward;
        }
        if self.forward {
            match &self.range.end {
                Bound::Included(e) => key <= e.as_slice(),
                Bound::Excluded(e) => key < e.as_slice(),
                Bound::Unbounded => true,
            }
        } else {
            match &self.range.start {
                Bound::Included(s) => key >= s.as_slice(),
                Bound::Excluded(s) => key > s.as_slice(),
                Bound::Unbounded => true,
            }
        }
    }

    /// Moves to the entry at or after the cursor in the iteration
    /// direction (the next block if this one is used up) and ends the
    /// iteration past the range. Forward, `pos` is the entry's index;
    /// backward, the index plus one.
    fn settle(&mut self) -> Result<()> {
        self.current = None;
        loop {
            if self.done {
                return Ok(());
            }
            let Some(loaded) = &self.block else {
                self.done = true;
                return Ok(());
            };
            let block = view(&self.run, loaded);
            if let Loaded::Mapped { index, .. } = loaded {
                // Viewed once per block at its load, where a block that
                // views as empty is refused: the mapping reads shorter now.
                if block.len() == 0 {
                    return Err(self.run.changed(self.run.index.handle(*index).offset));
                }
            }
            let at = if self.forward {
                if self.pos >= block.len() {
                    if self.block_idx + 1 >= self.run.index.len() {
                        self.done = true;
                        continue;
                    }
                    self.load(self.block_idx + 1)?;
                    self.pos = 0;
                    continue;
                }
                self.pos
            } else {
                if self.pos == 0 {
                    if self.block_idx == 0 {
                        self.done = true;
                        continue;
                    }
                    self.load(self.block_idx - 1)?;
                    self.pos = self.block_len();
                    continue;
                }
                self.pos - 1
            };
            let span = block.span(at);
            let key = block.bytes().get(span.key.clone()).unwrap_or_default();
            let head = key_head16(key);
            if self.in_range(key, head) {
                self.head = head;
                self.current = Some(span);
            } else {
                self.done = true;
            }
            return Ok(());
        }
    }

    /// Positions the cursor at its first entry (once).
    fn start(&mut self) -> Result<()> {
        if !self.started {
            self.position()?;
            self.settle()?;
        }
        Ok(())
    }

    /// The entry under the cursor, borrowed (None when the iteration is
    /// over). Call [`RunIter::start`] first; a merge operand's operator
    /// is the registry's id.
    pub(crate) fn current(&self) -> Option<EntryRef<'_>> {
        let span = self.current.as_ref()?;
        let bytes = self.block_bytes()?;
        let payload = bytes.get(span.payload.clone()).unwrap_or_default();
        let op = match span.kind {
            Kind::Put => OpRef::Put(payload),
            Kind::Delete => OpRef::Delete,
            Kind::Merge => OpRef::Merge {
                operator: self.run.op_map.get(span.run_op_id as usize).copied().unwrap_or(u32::MAX),
                operand: payload,
            },
        };
        Some(EntryRef { key: bytes.get(span.key.clone()).unwrap_or_default(), stamp: span.stamp, op })
    }

    /// The key of [`RunIter::current`]'s entry.
    pub(crate) fn current_key(&self) -> Option<&[u8]> {
        let span = self.current.as_ref()?;
        Some(self.block_bytes()?.get(span.key.clone()).unwrap_or_default())
    }

    /// The head ([`key_head16`]) of [`RunIter::current_key`]'s key.
    pub(crate) fn current_head(&self) -> Option<u128> {
        self.current.as_ref().map(|_| self.head)
    }

    /// The bytes the current entry's [`EntrySpan`] indexes.
    fn block_bytes(&self) -> Option<&[u8]> {
        Some(match self.block.as_ref()? {
            Loaded::Cached(block) => block.view().bytes(),
            Loaded::Mapped { at, shape, .. } => self.run.mapped_at(*at, shape.len()),
        })
    }

    /// Moves past the entry under the cursor.
    pub(crate) fn advance(&mut self) -> Result<()> {
        if !self.started {
            return self.start();
        }
        if self.done {
            return Ok(());
        }
        if self.forward {
            self.pos += 1;
        } else {
            self.pos -= 1;
        }
        self.settle()
    }

    /// Vouches for what was read of the run so far: an error if it is
    /// mapped and a read of it faulted (its file was cut under the index).
    pub(crate) fn check(&self) -> Result<()> {
        match self.block {
            Some(Loaded::Mapped { .. }) => self.run.check_mapping(),
            _ => Ok(()),
        }
    }

    /// Positions the cursor if it was not (the first call); a no-op after.
    pub(crate) fn prime(&mut self) -> Result<()> {
        self.start()
    }
}
