//! Deferred frees (shadowing): freed space stays untouched until the
//! freeing transaction is durable and no reader that may still see the old
//! mapping remains.

use std::collections::BTreeMap;

use crate::error::{Result, SpaceError};
use crate::extent::Extent;

/// Live readers by snapshot LSN, and the newest LSN whose frees have been
/// released (a reader older than that may read reused space, so it is
/// refused).
#[derive(Debug, Default)]
pub(crate) struct Readers {
    live: BTreeMap<u64, usize>,
    released: u64,
}

impl Readers {
    /// Registers a reader at `lsn`, unless frees newer than `lsn` have
    /// already been released.
    pub(crate) fn add(&mut self, lsn: u64) -> Result<()> {
        if lsn < self.released {
            return Err(SpaceError::ReaderTooOld { lsn, released: self.released });
        }
        *self.live.entry(lsn).or_default() += 1;
        Ok(())
    }

    /// Unregisters one reader at `lsn`.
    pub(crate) fn remove(&mut self, lsn: u64) {
        if let Some(n) = self.live.get_mut(&lsn) {
            *n -= 1;
            if *n == 0 {
                self.live.remove(&lsn);
            }
        }
    }

    /// The oldest live reader's LSN.
    pub(crate) fn oldest(&self) -> Option<u64> {
        self.live.keys().next().copied()
    }

    /// Live readers.
    pub(crate) fn count(&self) -> usize {
        self.live.values().sum()
    }

    /// Records that frees up to `lsn` were released.
    pub(crate) fn note_released(&mut self, lsn: u64) {
        self.released = self.released.max(lsn);
    }
}

/// Frees waiting for release, in LSN order (then call order).
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    queue: BTreeMap<(u64, u64), Extent>,
    calls: u64,
}

impl Deferred {
    /// Queues `extent`, freed by the transaction with LSN `lsn`.
    pub(crate) fn push(&mut self, lsn: u64, extent: Extent) {
        self.calls += 1;
        self.queue.insert((lsn, self.calls), extent);
    }

    /// Removes and returns the frees with LSN at most `bound`. Both release
    /// conditions (durable LSN and oldest reader) are bounds on the LSN, so
    /// the releasable frees are always a prefix of the queue.
    pub(crate) fn pop_through(&mut self, bound: u64) -> Vec<(u64, Extent)> {
        let mut out = Vec::new();
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 > bound {
                break;
            }
            let ((lsn, _), extent) = entry.remove_entry();
            out.push((lsn, extent));
        }
        out
    }

    /// The extents waiting.
    pub(crate) fn extents(&self) -> impl Iterator<Item = &Extent> + '_ {
        self.queue.values()
    }

    /// Frees waiting.
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }
}

/// The highest LSN whose frees may be released: the freeing transaction
/// must be durable (else a crash brings back the extent map that uses the
/// space) and every live reader must see that transaction (a reader at
/// snapshot `r` sees transactions up to `r`, so it may still read space
/// freed after `r`).
pub(crate) fn release_bound(durable: u64, oldest_reader: Option<u64>) -> u64 {
    oldest_reader.map_or(durable, |r| r.min(durable))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn release_needs_durability_and_no_older_reader() {
        assert_eq!(release_bound(5, None), 5);
        assert_eq!(release_bound(5, Some(3)), 3);
        assert_eq!(release_bound(5, Some(9)), 5);
        let mut d = Deferred::default();
        let e = |o| Extent { container: 0, offset: o, len: 4096 };
        d.push(4, e(0));
        d.push(2, e(4096));
        d.push(4, e(8192));
        assert!(d.pop_through(1).is_empty());
        assert_eq!(d.pop_through(3), vec![(2, e(4096))]);
        assert_eq!(d.pop_through(4), vec![(4, e(0)), (4, e(8192))]);
        let mut r = Readers::default();
        r.add(3).unwrap();
        r.add(3).unwrap();
        r.note_released(2);
        assert!(matches!(r.add(1), Err(SpaceError::ReaderTooOld { lsn: 1, released: 2 })));
        r.remove(3);
        assert_eq!(r.oldest(), Some(3));
        r.remove(3);
        assert_eq!(r.oldest(), None);
    }
}
