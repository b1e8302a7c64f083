//! Listing the live blocks and checking the arena's internal consistency
//! (for tests, fuzzing and fsck).

use super::classes::{self, SPAN_BYTES};
use super::{Arena, Block, PAGE_BYTES};

impl Arena {
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
            if span.listed == span.is_full() {
                return Err(format!("span at {} listed {} but full {}", span.offset, span.listed, span.is_full()));
            }
            if let Some(&generation) = span.generations().iter().find(|&&g| g >= self.next_generation) {
                return Err(format!("span at {} has generation {generation}, not below the next", span.offset));
            }
            for page in 0..classes::SPAN_PAGES {
                if self.span_pages.get(&(span.offset / PAGE_BYTES + page)) != Some(&(id as u32)) {
                    return Err(format!("span at {} is missing from the page map", span.offset));
                }
            }
        }
        if let Some((offset, _)) = self.large.iter().find(|(_, l)| l.generation >= self.next_generation) {
            return Err(format!("large block at {offset} has a generation not below the next"));
        }
        if self.next_generation > self.durable_limit {
            return Err(format!(
                "issued generations up to {} beyond the durable {}",
                self.next_generation, self.durable_limit
            ));
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
}
