//! The allocator of one heap object's arena: the state behind `alloc_in`
//! and `free_in` (docs/heap.md, "What an object is" and "Pointers"). Pure:
//! no I/O and no mapping. The owner grows the object when asked (a
//! callback), and persists the records [`Arena::take_dirty_records`] hands
//! it; [`Arena::load`] rebuilds the arena from them.
//!
//! # Design
//!
//! - **Small blocks** (up to 4 KiB) come from 64 KiB *spans*, one size
//!   class per span (48 classes, at most 12.5% apart: `classes`). A span
//!   has an occupancy bitmap searched from a low-water word, so taking a
//!   slot is a few word operations, and a counter per live slot (its
//!   generation). Each class keeps an intrusive list of its spans with free
//!   slots; a span that a free makes non-full goes to the list's head, so
//!   nearly full spans are refilled first. (Keeping these spans ordered by
//!   address and always filling the lowest, so that the upper ones drain,
//!   was measured too: on random 16 B - 4 KiB blocks it gave the same
//!   claimed/requested ratio, 1.13x with about 50,000 live blocks and 1.20x
//!   with 20,000, at one and a half to two times the cost per operation, so
//!   the O(1) list stays.) A free finds its span through a hash map from
//!   page to span. Nothing on these paths allocates, except making a span.
//! - **Large blocks** (above 4 KiB) are runs of whole pages.
//! - **Free page runs** are the claimed ranges minus spans and large
//!   blocks: never stored, rebuilt at load, best fit by (length, offset),
//!   coalesced on free (`runs`). An emptied span returns its pages, except
//!   that the most recently emptied one is kept (one per arena, not per
//!   class, so the slack is at most 64 KiB) so that a block allocated and
//!   freed in a loop does not create and dissolve a span each time.
//! - **Growth**: when no free run fits, the arena asks its owner for
//!   `max(needed, 64 KiB, claimed / 32)` bytes, rounded to pages. Growing
//!   by a thirty-second keeps the number of grows logarithmic in the
//!   arena's size (about 160 to reach 120 MiB) while the unused tail stays
//!   near 3% of it; a claimed/8 step left up to 12.5% unused, too much of
//!   the 1.25x budget of claimed over live bytes (20,000 live blocks of
//!   16 B - 4 KiB peaked at 1.20x with claimed/16, 1.18x with claimed/32).
//! - **Generations**: a block's generation differs from every earlier
//!   generation of a block at the same offset, whatever the pages were used
//!   for in between. The arena keeps `next_generation` (persisted, starting
//!   at 1; 0 means user bytes). A new span takes it as its base and issues
//!   `base + 1, base + 2, ...` (`span`); dissolving a span raises
//!   `next_generation` above every generation the span issued; a large
//!   block takes `next_generation` and increments it. So any block placed
//!   on pages that held something else gets a generation above all the
//!   earlier ones there.
//!
//! # Persistence
//!
//! One record per span and per large block, keyed by offset, and a header
//! (key [`HEADER_KEY`]: `next_generation` and the claimed ranges); the
//! formats are in docs/format.md, section 18, "Arena records". Changes mark
//! records dirty in O(1); [`Arena::take_dirty_records`] encodes them.
//! [`Arena::load`] refuses damaged records and inconsistent sets.

mod classes;
mod error;
pub mod fuzzing;
mod load;
mod record;
mod runs;
mod span;

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

pub use classes::{CLASS_BYTES, CLASS_COUNT, MAX_SMALL_BYTES, PAGE_BYTES, SPAN_BYTES};
pub use error::{ArenaError, GrowError};
pub use record::{HEADER_KEY, RECORD_VERSION};

use record::Record;
use runs::{Claimed, FreeRuns};
use span::{Span, NONE};

/// Largest alignment a block may ask for.
pub const MAX_ALIGN: u64 = 4096;

/// Largest block the arena hands out (1 TiB); bigger is [`ArenaError::TooLarge`].
pub const MAX_BLOCK_BYTES: u64 = 1 << 40;

/// Least the arena asks its owner to grow by.
pub const MIN_GROW_BYTES: u64 = 64 << 10;

/// The arena grows by at least its claimed bytes divided by this.
pub const GROW_DIVISOR: u64 = 32;

/// The owner's callback that grows the object by at least the bytes asked
/// (a multiple of [`PAGE_BYTES`]) and returns the page-aligned offset where
/// the new bytes start.
pub type Grow<'a> = dyn FnMut(u64) -> Result<u64, GrowError> + 'a;

/// A block the arena handed out: `len` bytes at `offset` in the object,
/// with the generation a pointer to it must carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Block {
    /// Offset of the block's first byte in the object.
    pub offset: u64,
    /// Bytes of the block (its class, or whole pages): at least the size asked for.
    pub len: u64,
    /// The block's generation (never 0).
    pub generation: u64,
}

/// A large block: whole pages.
#[derive(Clone, Copy, Debug)]
struct Large {
    pages: u64,
    generation: u64,
}

/// Hashes page numbers by one multiplication (Fibonacci hashing): page
/// numbers are distinct integers, so this spreads them as well as SipHash
/// at a fraction of the cost on the free path.
#[derive(Default)]
struct PageHasher(u64);

impl Hasher for PageHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, page: u64) {
        self.0 = page.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type PageMap = HashMap<u64, u32, BuildHasherDefault<PageHasher>>;

/// The allocation state of one heap object's arena.
pub struct Arena {
    next_generation: u64,
    claimed: Claimed,
    claimed_bytes: u64,
    free_runs: FreeRuns,
    /// Slab of spans; dissolved entries are [`Span::dead`] and listed in `dead_spans`.
    spans: Vec<Span>,
    dead_spans: Vec<u32>,
    /// Page number (offset / 4096) to span id, for every page of every span.
    span_pages: PageMap,
    /// Head of each class's list of spans with free slots.
    partial: [u32; CLASS_COUNT],
    /// The most recently emptied span, kept rather than dissolved.
    empty_span: Option<u32>,
    large: BTreeMap<u64, Large>,
    live_bytes: u64,
    live_blocks: u64,
    header_dirty: bool,
    /// Keys of records that changed (may repeat; deduplicated when taken).
    dirty_keys: Vec<u64>,
}

impl Default for Arena {
    fn default() -> Arena {
        Arena::new()
    }
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("next_generation", &self.next_generation)
            .field("claimed", &self.claimed.ranges())
            .field("live_blocks", &self.live_blocks)
            .field("live_bytes", &self.live_bytes)
            .finish_non_exhaustive()
    }
}

impl Arena {
    /// An arena that claimed nothing yet.
    pub fn new() -> Arena {
        Arena {
            next_generation: 1,
            claimed: Claimed::default(),
            claimed_bytes: 0,
            free_runs: FreeRuns::default(),
            spans: Vec::new(),
            dead_spans: Vec::new(),
            span_pages: PageMap::default(),
            partial: [NONE; CLASS_COUNT],
            empty_span: None,
            large: BTreeMap::new(),
            live_bytes: 0,
            live_blocks: 0,
            header_dirty: false,
            dirty_keys: Vec::new(),
        }
    }

    /// Rebuilds an arena from its persisted records `(key, bytes)`: key
    /// [`HEADER_KEY`] is the header, other keys are span and large-block
    /// offsets. No records at all is a new arena. Refuses a damaged record
    /// and an inconsistent set (see [`ArenaError::Corrupt`]).
    pub fn load<'a>(records: impl IntoIterator<Item = (u64, &'a [u8])>) -> Result<Arena, ArenaError> {
        load::load(records)
    }

    /// Hands out a block of at least `size` bytes aligned to `align`,
    /// growing the object through `grow` when no free pages fit.
    pub fn alloc(&mut self, size: u64, align: u64, grow: &mut Grow<'_>) -> Result<Block, ArenaError> {
        if !align.is_power_of_two() || align > MAX_ALIGN {
            return Err(ArenaError::BadAlignment { align });
        }
        if size == 0 {
            return Err(ArenaError::ZeroSize);
        }
        if size > MAX_BLOCK_BYTES {
            return Err(ArenaError::TooLarge { size });
        }
        match classes::class_for(size, align) {
            Some(class) => self.alloc_small(class, grow),
            None => self.alloc_large(size.div_ceil(PAGE_BYTES), grow),
        }
    }

    #[inline]
    fn alloc_small(&mut self, class: usize, grow: &mut Grow<'_>) -> Result<Block, ArenaError> {
        let mut id = self.partial[class];
        if id == NONE {
            id = self.new_span(class, grow)?;
        }
        let span = &mut self.spans[id as usize];
        let (slot, generation) = span.take_slot();
        let block = Block { offset: span.slot_offset(slot), len: u64::from(span.slot_bytes), generation };
        if !span.dirty {
            span.dirty = true;
            self.dirty_keys.push(span.offset);
        }
        if !span.can_take() {
            self.unlink(id);
        }
        if self.empty_span == Some(id) {
            self.empty_span = None;
        }
        self.live_bytes += block.len;
        self.live_blocks += 1;
        Ok(block)
    }

    fn new_span(&mut self, class: usize, grow: &mut Grow<'_>) -> Result<u32, ArenaError> {
        let base = self.next_generation;
        if base.checked_add(u64::from(u32::MAX) + 1).is_none() {
            return Err(ArenaError::GenerationsExhausted);
        }
        let offset = self.take_pages(SPAN_BYTES, grow)?;
        let span = Span::new(offset, class, base);
        let id = match self.dead_spans.pop() {
            Some(id) => {
                self.spans[id as usize] = span;
                id
            }
            None => {
                self.spans.push(span);
                (self.spans.len() - 1) as u32
            }
        };
        for page in 0..classes::SPAN_PAGES {
            self.span_pages.insert(offset / PAGE_BYTES + page, id);
        }
        self.link(id);
        Ok(id)
    }

    fn alloc_large(&mut self, pages: u64, grow: &mut Grow<'_>) -> Result<Block, ArenaError> {
        let generation = self.next_generation;
        let Some(next_generation) = generation.checked_add(1) else { return Err(ArenaError::GenerationsExhausted) };
        let len = pages * PAGE_BYTES;
        let offset = self.take_pages(len, grow)?;
        self.next_generation = next_generation;
        self.header_dirty = true;
        self.large.insert(offset, Large { pages, generation });
        self.mark_dirty(offset);
        self.live_bytes += len;
        self.live_blocks += 1;
        Ok(Block { offset, len, generation })
    }

    /// Takes `len` bytes (whole pages) from the free runs, growing the
    /// object when none fits.
    fn take_pages(&mut self, len: u64, grow: &mut Grow<'_>) -> Result<u64, ArenaError> {
        if let Some(offset) = self.free_runs.take(len) {
            return Ok(offset);
        }
        let request = len.max(MIN_GROW_BYTES).max((self.claimed_bytes / GROW_DIVISOR).next_multiple_of(PAGE_BYTES));
        let start = grow(request).map_err(ArenaError::Grow)?;
        if !start.is_multiple_of(PAGE_BYTES) || !self.claimed.add(start, request) {
            return Err(ArenaError::BadGrow { offset: start, len: request });
        }
        self.claimed_bytes += request;
        self.header_dirty = true;
        self.free_runs.insert(start, request);
        self.free_runs.take(len).ok_or(ArenaError::BadGrow { offset: start, len: request })
    }

    /// Frees the live block that starts at `offset` with `generation`.
    /// Anything else is [`ArenaError::Stale`] and changes nothing.
    pub fn free(&mut self, offset: u64, generation: u64) -> Result<Block, ArenaError> {
        let stale = ArenaError::Stale { offset, len: 0, generation };
        if let Some(&id) = self.span_pages.get(&(offset / PAGE_BYTES)) {
            let span = &mut self.spans[id as usize];
            let Some(slot) = span.slot_at(offset) else { return Err(stale) };
            if span.slot_offset(slot) != offset || span.generation(slot) != Some(generation) {
                return Err(stale);
            }
            span.release(slot);
            let block = Block { offset, len: u64::from(span.slot_bytes), generation };
            if !span.dirty {
                span.dirty = true;
                self.dirty_keys.push(span.offset);
            }
            let (listed, can_take, empty) = (span.listed, span.can_take(), span.live == 0);
            if !listed && can_take {
                self.link(id);
            }
            if empty {
                self.span_emptied(id);
            }
            self.live_bytes -= block.len;
            self.live_blocks -= 1;
            return Ok(block);
        }
        match self.large.get(&offset) {
            Some(large) if large.generation == generation => {
                let len = large.pages * PAGE_BYTES;
                self.large.remove(&offset);
                self.free_runs.insert(offset, len);
                self.mark_dirty(offset);
                self.live_bytes -= len;
                self.live_blocks -= 1;
                Ok(Block { offset, len, generation })
            }
            _ => Err(stale),
        }
    }

    /// Keeps the span that just emptied as the arena's one spare empty
    /// span, dissolving the previous spare; an exhausted span is dissolved
    /// at once.
    fn span_emptied(&mut self, id: u32) {
        if self.spans[id as usize].is_exhausted() {
            self.dissolve(id);
            return;
        }
        if let Some(previous) = self.empty_span.replace(id) {
            if previous != id && self.spans[previous as usize].live == 0 {
                self.dissolve(previous);
            }
        }
    }

    /// Returns an empty span's pages to the free runs.
    fn dissolve(&mut self, id: u32) {
        if self.spans[id as usize].listed {
            self.unlink(id);
        }
        let span = std::mem::replace(&mut self.spans[id as usize], Span::dead());
        self.next_generation = self.next_generation.max(span.generation_after());
        self.header_dirty = true;
        for page in 0..classes::SPAN_PAGES {
            self.span_pages.remove(&(span.offset / PAGE_BYTES + page));
        }
        self.free_runs.insert(span.offset, SPAN_BYTES);
        self.dirty_keys.push(span.offset);
        self.dead_spans.push(id);
        if self.empty_span == Some(id) {
            self.empty_span = None;
        }
    }

    /// The live block holding `[offset, offset + len)` (an interior pointer
    /// may start anywhere inside it) whose generation is `generation`;
    /// anything else is [`ArenaError::Stale`].
    pub fn check(&self, offset: u64, len: u64, generation: u64) -> Result<Block, ArenaError> {
        let stale = ArenaError::Stale { offset, len, generation };
        let Some(end) = offset.checked_add(len) else { return Err(stale) };
        if let Some(&id) = self.span_pages.get(&(offset / PAGE_BYTES)) {
            let span = &self.spans[id as usize];
            let Some(slot) = span.slot_at(offset) else { return Err(stale) };
            let block = Block { offset: span.slot_offset(slot), len: u64::from(span.slot_bytes), generation };
            return if span.generation(slot) == Some(generation) && end <= block.offset + block.len {
                Ok(block)
            } else {
                Err(stale)
            };
        }
        match self.large.range(..=offset).next_back() {
            Some((&start, large)) if large.generation == generation => {
                let block = Block { offset: start, len: large.pages * PAGE_BYTES, generation };
                if offset < block.offset + block.len && end <= block.offset + block.len {
                    Ok(block)
                } else {
                    Err(stale)
                }
            }
            _ => Err(stale),
        }
    }

    /// Records changed since the last call: `(key, Some(bytes))` to write,
    /// `(key, None)` to delete, in key order (the header, if changed, is
    /// last). Write them all in one transaction.
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
        if std::mem::take(&mut self.header_dirty) {
            out.push((HEADER_KEY, Some(self.header_record())));
        }
        out
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

    /// Bytes of the live blocks (their class sizes or whole pages).
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Bytes the arena claimed from its object.
    pub fn claimed_bytes(&self) -> u64 {
        self.claimed_bytes
    }

    /// Number of live blocks.
    pub fn live_blocks(&self) -> u64 {
        self.live_blocks
    }

    /// Whether `[offset, offset + len)` touches a byte the arena claimed
    /// (for `len` 0: whether `offset` is one).
    pub fn is_claimed(&self, offset: u64, len: u64) -> bool {
        self.claimed.touches(offset, len)
    }

    /// Claimed bytes in free page runs, neither in a span nor a large
    /// block (O(runs): for statistics and tests).
    pub fn free_run_bytes(&self) -> u64 {
        self.free_runs.iter().map(|(_, len)| len).sum()
    }

    /// The claimed ranges `(offset, len)`, ascending.
    pub fn claimed_ranges(&self) -> &[(u64, u64)] {
        self.claimed.ranges()
    }

    /// The next generation a large block or new span gets.
    pub fn next_generation(&self) -> u64 {
        self.next_generation
    }

    /// Every live block, in offset order (for fsck and tests: O(slots)).
    pub fn live(&self) -> Vec<Block> {
        let mut out: Vec<Block> = self
            .large
            .iter()
            .map(|(&offset, l)| Block { offset, len: l.pages * PAGE_BYTES, generation: l.generation })
            .collect();
        for span in self.spans.iter().filter(|s| s.slots != 0) {
            for slot in 0..span.slots {
                if let Some(generation) = span.generation(slot) {
                    out.push(Block { offset: span.slot_offset(slot), len: u64::from(span.slot_bytes), generation });
                }
            }
        }
        out.sort_unstable_by_key(|b| b.offset);
        out
    }

    /// Checks the arena's internal consistency (for tests and fsck): free
    /// runs, spans and large blocks tile the claimed ranges exactly, and
    /// the counts and class lists agree with the spans.
    pub fn verify(&self) -> Result<(), String> {
        let live_spans = || self.spans.iter().enumerate().filter(|(_, s)| s.slots != 0);
        let mut pieces: Vec<(u64, u64, &str)> = self.free_runs.iter().map(|(o, l)| (o, l, "free run")).collect();
        pieces.extend(live_spans().map(|(_, s)| (s.offset, SPAN_BYTES, "span")));
        pieces.extend(self.large.iter().map(|(&o, l)| (o, l.pages * PAGE_BYTES, "large block")));
        pieces.sort_unstable();
        let mut covered = 0;
        for (i, &(offset, len, what)) in pieces.iter().enumerate() {
            if !self.claimed.contains(offset, len) {
                return Err(format!("{what} at {offset}+{len} is outside the claimed ranges"));
            }
            if let Some(&(next, _, other)) = pieces.get(i + 1) {
                if offset + len > next {
                    return Err(format!("{what} at {offset}+{len} overlaps {other} at {next}"));
                }
            }
            covered += len;
        }
        if covered != self.claimed_bytes {
            return Err(format!("pieces cover {covered} of {} claimed bytes", self.claimed_bytes));
        }
        let (mut bytes, mut blocks) = (0, 0);
        for (id, span) in live_spans() {
            bytes += u64::from(span.live) * u64::from(span.slot_bytes);
            blocks += u64::from(span.live);
            if span.listed != span.can_take() {
                return Err(format!("span at {} listed {} but can take {}", span.offset, span.listed, span.can_take()));
            }
            for page in 0..classes::SPAN_PAGES {
                if self.span_pages.get(&(span.offset / PAGE_BYTES + page)) != Some(&(id as u32)) {
                    return Err(format!("span at {} is missing from the page map", span.offset));
                }
            }
            if span.base > self.next_generation {
                return Err(format!("span at {} has base {} above the next generation", span.offset, span.base));
            }
        }
        bytes += self.large.values().map(|l| l.pages * PAGE_BYTES).sum::<u64>();
        blocks += self.large.len() as u64;
        if (bytes, blocks) != (self.live_bytes, self.live_blocks) {
            return Err(format!(
                "counted {bytes} bytes in {blocks} blocks, kept {} in {}",
                self.live_bytes, self.live_blocks
            ));
        }
        if self.span_pages.len() as u64 != live_spans().count() as u64 * classes::SPAN_PAGES {
            return Err("the page map has pages of no span".to_string());
        }
        Ok(())
    }

    fn span_at(&self, key: u64) -> Option<u32> {
        let &id = self.span_pages.get(&(key / PAGE_BYTES))?;
        (self.spans[id as usize].offset == key).then_some(id)
    }

    fn record_at(&self, key: u64) -> Option<Vec<u8>> {
        if let Some(id) = self.span_at(key) {
            let span = &self.spans[id as usize];
            return Some(record::encode_span(
                span.offset,
                usize::from(span.class),
                span.base,
                span.issued,
                span.counters(),
            ));
        }
        let large = self.large.get(&key)?;
        Some(record::encode_large(key, large.pages, large.generation))
    }

    fn header_record(&self) -> Vec<u8> {
        Record::Header { next_generation: self.next_generation, claimed: self.claimed.ranges().to_vec() }.encode()
    }

    fn mark_dirty(&mut self, key: u64) {
        self.dirty_keys.push(key);
        // Large blocks allocated and freed between two takes each add a key;
        // fold repeats so the list stays proportional to the records.
        if self.dirty_keys.len() > 1024 && self.dirty_keys.len() > 2 * (self.spans.len() + self.large.len()) {
            self.dirty_keys.sort_unstable();
            self.dirty_keys.dedup();
        }
    }

    /// Puts span `id` at the head of its class's list.
    fn link(&mut self, id: u32) {
        let class = usize::from(self.spans[id as usize].class);
        let head = self.partial[class];
        if head != NONE {
            self.spans[head as usize].previous = id;
        }
        let span = &mut self.spans[id as usize];
        span.previous = NONE;
        span.next = head;
        span.listed = true;
        self.partial[class] = id;
    }

    /// Takes span `id` out of its class's list.
    fn unlink(&mut self, id: u32) {
        let span = &mut self.spans[id as usize];
        let (previous, next, class) = (span.previous, span.next, usize::from(span.class));
        span.previous = NONE;
        span.next = NONE;
        span.listed = false;
        if previous == NONE {
            self.partial[class] = next;
        } else {
            self.spans[previous as usize].next = next;
        }
        if next != NONE {
            self.spans[next as usize].previous = previous;
        }
    }
}
