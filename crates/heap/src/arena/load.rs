//! Rebuilding an arena from its records, refusing inconsistent sets.

use super::classes::{PAGE_BYTES, SPAN_BYTES, SPAN_PAGES};
use super::record::{self, Record};
use super::runs::Claimed;
use super::span::Span;
use super::{Arena, ArenaError, Large};

pub(super) fn load<'a>(records: impl IntoIterator<Item = (u64, &'a [u8])>) -> Result<Arena, ArenaError> {
    let mut header = None;
    let mut spans = Vec::new();
    let mut large = Vec::new();
    for (key, bytes) in records {
        match record::decode(key, bytes)? {
            Record::Header { reserved, claimed } => {
                if header.replace((reserved, claimed)).is_some() {
                    return Err(ArenaError::corrupt(key, "two headers"));
                }
            }
            Record::Span { offset, class, generations } => spans.push((offset, class, generations)),
            Record::Large { offset, pages, generation } => large.push((offset, pages, generation)),
        }
    }
    let Some((reserved, ranges)) = header else {
        return match spans.first().map(|s| s.0).or(large.first().map(|l| l.0)) {
            Some(key) => Err(ArenaError::corrupt(key, "span or large-block records without a header")),
            None => Ok(Arena::new()),
        };
    };
    let claimed = Claimed::from_ranges(ranges);

    // Every span and large block lies inside one claimed range and no two overlap.
    let mut occupied: Vec<(u64, u64)> = spans
        .iter()
        .map(|s| (s.0, SPAN_BYTES))
        .chain(large.iter().map(|&(offset, pages, _)| (offset, pages * PAGE_BYTES)))
        .collect();
    occupied.sort_unstable();
    for (i, &(offset, len)) in occupied.iter().enumerate() {
        if !claimed.contains(offset, len) {
            return Err(ArenaError::corrupt(offset, "block outside the claimed ranges"));
        }
        if let Some(&(next, _)) = occupied.get(i + 1) {
            if offset + len > next {
                return Err(ArenaError::corrupt(next, "overlaps another span or large block"));
            }
        }
    }

    // Generations issued before a crash may be anywhere below the
    // reservation: start above them all, and issue none until a new
    // reservation is durable.
    let mut arena = Arena::new();
    arena.next_generation = reserved;
    arena.durable_limit = reserved;
    arena.claimed_bytes = claimed.ranges().iter().map(|&(_, len)| len).sum();
    for &(start, len) in claimed.ranges() {
        let end = start + len;
        let mut at = start;
        let first = occupied.partition_point(|&(o, _)| o < start);
        for &(offset, len) in occupied[first..].iter().take_while(|&&(o, _)| o < end) {
            if offset > at {
                arena.free_runs.insert(at, offset - at);
            }
            at = offset + len;
        }
        if end > at {
            arena.free_runs.insert(at, end - at);
        }
    }
    arena.claimed = claimed;

    for (offset, pages, generation) in large {
        if generation >= reserved {
            return Err(ArenaError::corrupt(offset, "large-block generation not below the reservation"));
        }
        arena.large.insert(offset, Large { pages, generation });
        arena.live_bytes += pages * PAGE_BYTES;
        arena.live_blocks += 1;
    }
    for (offset, class, generations) in spans {
        if generations.iter().any(|&generation| generation >= reserved) {
            return Err(ArenaError::corrupt(offset, "span generation not below the reservation"));
        }
        let span = Span::from_generations(offset, class, &generations);
        let id = arena.spans.len() as u32;
        arena.live_bytes += u64::from(span.live) * u64::from(span.slot_bytes);
        arena.live_blocks += u64::from(span.live);
        let (can_take, empty) = (!span.is_full(), span.live == 0);
        arena.spans.push(span);
        for page in 0..SPAN_PAGES {
            arena.span_pages.insert(offset / PAGE_BYTES + page, id);
        }
        if can_take {
            arena.link(id);
        }
        if empty && arena.empty_span.is_none() {
            arena.empty_span = Some(id);
        }
    }
    debug_assert!(arena.dirty_keys.is_empty() && !arena.header_dirty);
    Ok(arena)
}
