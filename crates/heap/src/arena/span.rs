//! A small span: 64 KiB of one size class, an occupancy bitmap and the
//! generation counter of each live slot.
//!
//! A span issues generations `base + 1, base + 2, ...`: `issued` counts the
//! slots handed out over the span's life, and a slot handed out gets
//! `issued` (after the increment) as its counter, so a slot's generations
//! only grow and differ from every earlier one at that offset. When
//! `issued` reaches `u32::MAX` the span is *exhausted*: it hands out no
//! more slots and is dissolved once empty; the arena then sets its
//! `next_generation` past `base + issued`, above every generation the span
//! ever issued.

use super::classes::{self, CLASS_BYTES};

/// No span: the end of a class's list of spans with free slots.
pub(crate) const NONE: u32 = u32::MAX;

pub(crate) struct Span {
    /// Offset of the span's first byte in the object (page-aligned).
    pub(crate) offset: u64,
    pub(crate) class: u8,
    pub(crate) slot_bytes: u32,
    pub(crate) slots: u32,
    /// Generation base: a slot with counter `c` has generation `base + c`.
    pub(crate) base: u64,
    /// Slots handed out over the span's life.
    pub(crate) issued: u32,
    /// Slots live now.
    pub(crate) live: u32,
    /// Bit set: slot live. Bits past `slots` are set, so a search never
    /// picks them.
    used: Box<[u64]>,
    /// Counter of each live slot; 0 for a free slot.
    counters: Box<[u32]>,
    /// No word before this one has a free bit.
    search_from: u32,
    /// Neighbours in the class's list of spans with free slots.
    pub(crate) previous: u32,
    pub(crate) next: u32,
    /// Whether the span is in its class's list.
    pub(crate) listed: bool,
    /// Whether the span changed since its record was last taken.
    pub(crate) dirty: bool,
}

impl Span {
    /// An empty span of `class` at `offset` issuing generations above `base`.
    pub(crate) fn new(offset: u64, class: usize, base: u64) -> Span {
        let slots = classes::slots(class);
        let words = (slots as usize).div_ceil(64);
        let mut used = vec![0u64; words].into_boxed_slice();
        if !slots.is_multiple_of(64) {
            used[words - 1] = !0u64 << (slots % 64);
        }
        Span {
            offset,
            class: class as u8,
            slot_bytes: CLASS_BYTES[class],
            slots,
            base,
            issued: 0,
            live: 0,
            used,
            counters: vec![0u32; slots as usize].into_boxed_slice(),
            search_from: 0,
            previous: NONE,
            next: NONE,
            listed: false,
            dirty: false,
        }
    }

    /// A span as a record describes it: `counters` has one entry per slot
    /// (0 = free), each at most `issued` (the decoder checks).
    pub(crate) fn from_counters(offset: u64, class: usize, base: u64, issued: u32, counters: &[u32]) -> Span {
        let mut span = Span::new(offset, class, base);
        span.issued = issued;
        for (slot, &counter) in counters.iter().enumerate().take(span.slots as usize) {
            if counter != 0 {
                span.counters[slot] = counter;
                span.used[slot / 64] |= 1 << (slot % 64);
                span.live += 1;
            }
        }
        span
    }

    /// A span that no longer exists (its slab entry awaits reuse).
    pub(crate) fn dead() -> Span {
        Span {
            offset: 0,
            class: 0,
            slot_bytes: 0,
            slots: 0,
            base: 0,
            issued: 0,
            live: 0,
            used: Box::new([]),
            counters: Box::new([]),
            search_from: 0,
            previous: NONE,
            next: NONE,
            listed: false,
            dirty: false,
        }
    }

    pub(crate) fn is_full(&self) -> bool {
        self.live == self.slots
    }

    pub(crate) fn is_exhausted(&self) -> bool {
        self.issued == u32::MAX
    }

    /// Whether the span can hand out a slot.
    pub(crate) fn can_take(&self) -> bool {
        !self.is_full() && !self.is_exhausted()
    }

    /// Counter of each slot (0 = free).
    pub(crate) fn counters(&self) -> &[u32] {
        &self.counters
    }

    /// Hands out the lowest free slot: its index and generation. The
    /// caller checks [`Span::can_take`] first.
    #[inline]
    pub(crate) fn take_slot(&mut self) -> (u32, u64) {
        let mut word = self.search_from as usize;
        while self.used[word] == !0 {
            word += 1;
        }
        self.search_from = word as u32;
        let bit = (!self.used[word]).trailing_zeros();
        self.used[word] |= 1 << bit;
        let slot = word as u32 * 64 + bit;
        self.issued += 1;
        self.live += 1;
        self.counters[slot as usize] = self.issued;
        (slot, self.base + u64::from(self.issued))
    }

    /// The generation of `slot` if it is live.
    #[inline]
    pub(crate) fn generation(&self, slot: u32) -> Option<u64> {
        match self.counters.get(slot as usize) {
            Some(&counter) if counter != 0 => Some(self.base + u64::from(counter)),
            _ => None,
        }
    }

    /// Frees a live `slot`.
    #[inline]
    pub(crate) fn release(&mut self, slot: u32) {
        let word = slot as usize / 64;
        self.used[word] &= !(1 << (slot % 64));
        self.counters[slot as usize] = 0;
        self.live -= 1;
        self.search_from = self.search_from.min(word as u32);
    }

    /// The slot holding `offset` (inside the span), if it is within a slot
    /// rather than in the span's unused tail.
    #[inline]
    pub(crate) fn slot_at(&self, offset: u64) -> Option<u32> {
        let slot = (offset - self.offset) / u64::from(self.slot_bytes);
        (slot < u64::from(self.slots)).then_some(slot as u32)
    }

    /// Offset of `slot`'s first byte.
    #[inline]
    pub(crate) fn slot_offset(&self, slot: u32) -> u64 {
        self.offset + u64::from(slot) * u64::from(self.slot_bytes)
    }

    /// The lowest generation a block at any of the span's offsets may get
    /// once the span is gone: above every generation it issued.
    pub(crate) fn generation_after(&self) -> u64 {
        self.base + u64::from(self.issued) + 1
    }
}
