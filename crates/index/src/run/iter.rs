//! Iterates the entries of one run over a key range, in either direction.

use std::ops::Bound;
use std::sync::Arc;

use super::block::Block;
use super::cache::BlockCache;
use super::reader::OpenRun;
use crate::entry::{Entry, Stamp};
use crate::error::Result;
use crate::stats::Stats;

/// A cursor over one run. Blocks go through the cache for user scans and
/// around it for merges, so a merge does not evict the working set.
pub(crate) struct RunIter {
    run: Arc<OpenRun>,
    cache: Option<Arc<BlockCache>>,
    stats: Arc<Stats>,
    forward: bool,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    block_idx: usize,
    block: Option<Arc<Block>>,
    /// Next entry to return within `block` (forward: index; backward: index + 1).
    pos: usize,
    started: bool,
    done: bool,
}

impl RunIter {
    pub(crate) fn new(
        run: Arc<OpenRun>,
        cache: Option<Arc<BlockCache>>,
        stats: Arc<Stats>,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        forward: bool,
    ) -> Self {
        RunIter {
            run,
            cache,
            stats,
            forward,
            start,
            end,
            block_idx: 0,
            block: None,
            pos: 0,
            started: false,
            done: false,
        }
    }

    fn load(&mut self, i: usize) -> Result<()> {
        self.block_idx = i;
        self.block = Some(self.run.block(i, self.cache.as_deref(), &self.stats)?);
        Ok(())
    }

    fn position(&mut self) -> Result<()> {
        self.started = true;
        let n = self.run.index.len();
        if n == 0 {
            self.done = true;
            return Ok(());
        }
        if self.forward {
            let (key, stamp) = match &self.start {
                Bound::Included(k) => (Some(k.clone()), Stamp { seq: u64::MAX, sub: u32::MAX }),
                // Past every version of the excluded key.
                Bound::Excluded(k) => (Some(k.clone()), Stamp { seq: 0, sub: 0 }),
                Bound::Unbounded => (None, Stamp { seq: 0, sub: 0 }),
            };
            let Some(key) = key else {
                self.load(0)?;
                self.pos = 0;
                return Ok(());
            };
            let bi = self.run.index.find(&key);
            if bi == n {
                self.done = true;
                return Ok(());
            }
            self.load(bi)?;
            let block = self.block.as_ref().map(|b| b.seek(&key, stamp)).unwrap_or(0);
            self.pos = block;
            if let (Bound::Excluded(k), Some(b)) = (&self.start, &self.block) {
                while self.pos < b.len() && b.entry(self.pos).key == k.as_slice() {
                    self.pos += 1;
                }
            }
        } else {
            let (key, stamp) = match &self.end {
                // Past every version of the included key.
                Bound::Included(k) => (Some(k.clone()), Stamp { seq: 0, sub: 0 }),
                Bound::Excluded(k) => (Some(k.clone()), Stamp { seq: u64::MAX, sub: u32::MAX }),
                Bound::Unbounded => (None, Stamp { seq: 0, sub: 0 }),
            };
            match key {
                None => {
                    self.load(n - 1)?;
                    self.pos = self.block.as_ref().map_or(0, |b| b.len());
                }
                Some(key) => {
                    let bi = self.run.index.find(&key).min(n - 1);
                    self.load(bi)?;
                    let b = self.block.as_ref().map_or(0, |b| {
                        let mut p = b.seek(&key, stamp);
                        if matches!(self.end, Bound::Included(_)) {
                            while p < b.len() && b.entry(p).key == key.as_slice() {
                                p += 1;
                            }
                        }
                        p
                    });
                    self.pos = b;
                }
            }
        }
        Ok(())
    }

    fn in_range(&self, key: &[u8]) -> bool {
        if self.forward {
            match &self.end {
                Bound::Included(e) => key <= e.as_slice(),
                Bound::Excluded(e) => key < e.as_slice(),
                Bound::Unbounded => true,
            }
        } else {
            match &self.start {
                Bound::Included(s) => key >= s.as_slice(),
                Bound::Excluded(s) => key > s.as_slice(),
                Bound::Unbounded => true,
            }
        }
    }

    /// The next entry in the iteration direction.
    pub(crate) fn next_entry(&mut self) -> Result<Option<Entry>> {
        if !self.started {
            self.position()?;
        }
        loop {
            if self.done {
                return Ok(None);
            }
            let Some(block) = self.block.clone() else { return Ok(None) };
            if self.forward {
                if self.pos >= block.len() {
                    if self.block_idx + 1 >= self.run.index.len() {
                        self.done = true;
                        continue;
                    }
                    self.load(self.block_idx + 1)?;
                    self.pos = 0;
                    continue;
                }
                let e = block.entry(self.pos);
                self.pos += 1;
                if !self.in_range(e.key) {
                    self.done = true;
                    return Ok(None);
                }
                return Ok(Some(e.to_entry(&self.run.op_map)));
            } else {
                if self.pos == 0 {
                    if self.block_idx == 0 {
                        self.done = true;
                        continue;
                    }
                    self.load(self.block_idx - 1)?;
                    self.pos = self.block.as_ref().map_or(0, |b| b.len());
                    continue;
                }
                self.pos -= 1;
                let e = block.entry(self.pos);
                if !self.in_range(e.key) {
                    self.done = true;
                    return Ok(None);
                }
                return Ok(Some(e.to_entry(&self.run.op_map)));
            }
        }
    }
}
