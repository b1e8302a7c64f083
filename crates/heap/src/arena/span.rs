//! A small span: 64 KiB of one size class, an occupancy bitmap and the
//! generation of each live slot.

use super::classes::{self, CLASS_BYTES};

pub(crate) struct Span {
    /// Offset of the span's first byte in the object (page-aligned).
    pub(crate) offset: u64,
    pub(crate) class: u8,
    pub(crate) slot_bytes: u32,
    pub(crate) slots: u32,
    /// Slots live now.
    pub(crate) live: u32,
    /// Bit set: slot live. Bits past `slots` are set, so a search never
    /// picks them.
    used: Box<[u64]>,
    /// Generation of each live slot; 0 for a free slot.
    generations: Box<[u64]>,
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

/// No span: the end of a class's list of spans with free slots.
pub(crate) const NONE: u32 = u32::MAX;

impl Span {
    /// An empty span of `class` at `offset`.
    pub(crate) fn new(offset: u64, class: usize) -> Span {
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
            live: 0,
            used,
            generations: vec![0u64; slots as usize].into_boxed_slice(),
            search_from: 0,
            previous: NONE,
            next: NONE,
            listed: false,
            dirty: false,
        }
    }

    /// A span as a record describes it: `generations` has one entry per
    /// slot (0 = free).
    pub(crate) fn from_generations(offset: u64, class: usize, generations: &[u64]) -> Span {
        let mut span = Span::new(offset, class);
        for (slot, &generation) in generations.iter().enumerate().take(span.slots as usize) {
            if generation != 0 {
                span.generations[slot] = generation;
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
            live: 0,
            used: Box::new([]),
            generations: Box::new([]),
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

    /// Generation of each slot (0 = free).
    pub(crate) fn generations(&self) -> &[u64] {
        &self.generations
    }

    /// Hands out the lowest free slot with `generation`; returns the slot.
    /// The caller checks the span is not full first.
    #[inline]
    pub(crate) fn take_slot(&mut self, generation: u64) -> u32 {
        let mut word = self.search_from as usize;
        while self.used[word] == !0 {
            word += 1;
        }
        self.search_from = word as u32;
        let bit = (!self.used[word]).trailing_zeros();
        self.used[word] |= 1 << bit;
        let slot = word as u32 * 64 + bit;
        self.live += 1;
        self.generations[slot as usize] = generation;
        slot
    }

    /// The generation of `slot` if it is live.
    #[inline]
    pub(crate) fn generation(&self, slot: u32) -> Option<u64> {
        match self.generations.get(slot as usize) {
            Some(&generation) if generation != 0 => Some(generation),
            _ => None,
        }
    }

    /// Frees a live `slot`.
    #[inline]
    pub(crate) fn release(&mut self, slot: u32) {
        let word = slot as usize / 64;
        self.used[word] &= !(1 << (slot % 64));
        self.generations[slot as usize] = 0;
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
}
