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
//!   slot is a few word operations, and the generation of each live slot.
//!   Each class keeps an intrusive list of its spans with free
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
//! - **Generations** are unique in the arena: every block handed out takes
//!   `next_generation` and increments it (0 is never issued: it means user
//!   bytes). So a block's generation differs from every earlier one at the
//!   same offset, whatever the pages held in between, and a slot keeps its
//!   block's full 64-bit generation (8 bytes of memory and record per live
//!   slot).
//! - **Generations survive crashes**: a block handed out after the last
//!   `sync` is lost in a crash, but a pointer to it may already be in the
//!   object's bytes (the kernel writes mapped pages back when it likes),
//!   so a generation must never be issued again even if the arena's state
//!   was not persisted. The header persists a *reservation*: every
//!   generation issued is below it. [`Arena::load`] restarts
//!   `next_generation` at the reservation, above anything issued before a
//!   crash, and the arena issues generations only below a reservation that
//!   is durable: [`Arena::take_dirty_records`] writes a new one
//!   (`next_generation` + [`GENERATION_LEASE`]) when half of the old one is
//!   used, and [`Arena::records_durable`] says it is on disk. Past it (and
//!   right after `new` or `load`), `alloc` returns [`ArenaError::NeedsSync`]:
//!   the owner syncs and retries, once per `GENERATION_LEASE`
//!   allocations and once per load.
//!
//! # Persistence
//!
//! One record per span and per large block, keyed by offset, and a header
//! (key [`HEADER_KEY`]: the generation reservation and the claimed ranges); the
//! formats are in docs/format.md, section 18, "Arena records". Changes mark
//! records dirty in O(1); [`Arena::take_dirty_records`] encodes them.
//! [`Arena::load`] refuses damaged records and inconsistent sets.

mod classes;
mod error;
pub mod fuzzing;
mod load;
mod persist;
mod record;
mod runs;
mod span;
mod verify;

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

pub use classes::{CLASS_BYTES, CLASS_COUNT, MAX_SMALL_BYTES, PAGE_BYTES, SPAN_BYTES};
pub use error::{ArenaError, GrowError};
pub use record::{HEADER_KEY, RECORD_VERSION};

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

/// Generations a header reservation covers beyond `next_generation` when
/// it is written (2^36: about 45 minutes of allocation at 40 ns each
/// between two syncs; a load skips at most this many).
pub const GENERATION_LEASE: u64 = 1 << 36;

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

/// Hashes page numbers by one multiplication (Fibonacci hashing). The keys
/// are page numbers the arena picks itself, so SipHash's defence against
/// chosen keys buys nothing here; the multiplication made random
/// alloc/free a few percent faster (44 against 45-58 ns per operation).
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
    /// The generation the next block gets.
    next_generation: u64,
    /// Generations below this are covered by a durable reservation.
    durable_limit: u64,
    /// The reservation in records taken but not yet reported durable.
    pending_limit: Option<u64>,
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
            durable_limit: 1,
            pending_limit: None,
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
        if self.next_generation >= self.durable_limit {
            return Err(if self.durable_limit == u64::MAX {
                ArenaError::GenerationsExhausted
            } else {
                ArenaError::NeedsSync
            });
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
        let generation = self.next_generation;
        self.next_generation += 1;
        let span = &mut self.spans[id as usize];
        let slot = span.take_slot(generation);
        let block = Block { offset: span.slot_offset(slot), len: u64::from(span.slot_bytes), generation };
        if !span.dirty {
            span.dirty = true;
            self.dirty_keys.push(span.offset);
        }
        if span.is_full() {
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
        let offset = self.take_pages(SPAN_BYTES, grow)?;
        let span = Span::new(offset, class);
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
        let len = pages * PAGE_BYTES;
        let offset = self.take_pages(len, grow)?;
        let generation = self.next_generation;
        self.next_generation += 1;
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
            let (listed, empty) = (span.listed, span.live == 0);
            if !listed {
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
    /// span, dissolving the previous spare.
    fn span_emptied(&mut self, id: u32) {
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

    /// The generation the next block gets.
    pub fn next_generation(&self) -> u64 {
        self.next_generation
    }

    /// The generation reservation the arena's header records: above every
    /// generation issued.
    pub fn reserved_generation(&self) -> u64 {
        self.durable_limit.max(self.pending_limit.unwrap_or(0)).max(self.next_generation)
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
