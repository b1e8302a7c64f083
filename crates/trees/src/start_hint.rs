//! Where a forward scan of a tree may start: the lowest key that can be
//! live, learned by earlier scans.
//!
//! A tree used as a queue (Garage's Merkle to-do list, its insert queues)
//! is read from its first entry and emptied from the front. In a
//! write-optimized index every removed entry stays behind as a tombstone
//! until a merge drops it, so a scan from the tree's start steps over all
//! of them before it finds the first live entry: LMDB's B+tree finds it in
//! one descent. A scan that found its first live key `K` therefore records
//! that no key below `K` is live as of its snapshot; later scans whose
//! snapshot is at least as new start at `K`. Removals keep the hint true;
//! every commit that inserts into the tree lowers the hint to its smallest
//! inserted key before the insert becomes visible, so no snapshot that
//! holds the insert can read a hint above it.
//!
//! Setting a hint races with commits: a scan that found `K` in its
//! snapshot must not raise the hint above a key inserted by a commit its
//! snapshot missed. So a scan registers a watch before it takes its
//! snapshot; the commit being applied at that moment and every later one
//! lower the watch as they lower the hint, and the scan sets the hint to
//! the smaller of `K` and its watch.

use std::collections::HashMap;

use parking_lot::Mutex;

/// No key of the tree below `key` is live in any snapshot at `seq` or
/// later, but for keys inserted since, which lowered `key`.
#[derive(Clone, Debug)]
struct Hint {
    key: Vec<u8>,
    seq: u64,
}

/// A tree's hint and what may change it.
#[derive(Default)]
struct TreeState {
    hint: Option<Hint>,
    /// The smallest key the commit now being applied inserts (set before
    /// the commit's batch enters the index, cleared once it is visible).
    in_flight: Option<Vec<u8>>,
    /// Scans that may set the hint: each one's id and the smallest key
    /// inserted since it registered (or in flight then).
    watches: Vec<(u64, Option<Vec<u8>>)>,
}

fn lower(slot: &mut Option<Vec<u8>>, key: &[u8]) {
    if slot.as_deref().is_none_or(|current| key < current) {
        *slot = Some(key.to_vec());
    }
}

/// The hints of every tree of one store (shared by every `Trees` on it).
#[derive(Default)]
pub(crate) struct StartHints {
    trees: Mutex<HashMap<u64, TreeState>>,
    next_watch: Mutex<u64>,
}

/// A scan that may set its tree's hint once it knows its first live key.
/// Dropped unsettled, it sets nothing.
pub(crate) struct Watch {
    tree: u64,
    id: u64,
}

impl StartHints {
    /// Registers a scan of `tree` from its start; call before taking the
    /// scan's snapshot.
    pub(crate) fn watch(&self, tree: u64) -> Watch {
        let id = {
            let mut next = self.next_watch.lock();
            *next += 1;
            *next
        };
        let mut trees = self.trees.lock();
        let state = trees.entry(tree).or_default();
        let seen = state.in_flight.clone();
        state.watches.push((id, seen));
        Watch { tree, id }
    }

    /// Records that no key of the watched tree below `first_live` is live
    /// in the scan's snapshot `seq` (`first_live` is the first live key
    /// the scan found, or the end of its range if it found none).
    pub(crate) fn settle(&self, watch: Watch, first_live: &[u8], seq: u64) {
        let mut trees = self.trees.lock();
        let Some(state) = trees.get_mut(&watch.tree) else { return };
        let Some(at) = state.watches.iter().position(|(id, _)| *id == watch.id) else { return };
        let (_, inserted) = state.watches.swap_remove(at);
        let key = match inserted {
            Some(inserted) if inserted.as_slice() < first_live => inserted,
            _ => first_live.to_vec(),
        };
        if state.hint.as_ref().is_none_or(|hint| key > hint.key) {
            state.hint = Some(Hint { key, seq });
        }
    }

    /// Forgets a scan that will not settle (it failed, or was dropped
    /// before its first entry).
    pub(crate) fn cancel(&self, watch: &Watch) {
        let mut trees = self.trees.lock();
        if let Some(state) = trees.get_mut(&watch.tree) {
            state.watches.retain(|(id, _)| *id != watch.id);
        }
    }

    /// The key a forward scan of `tree` from a snapshot at `seq` may start
    /// at (call after taking the snapshot); None if nothing is known.
    pub(crate) fn start_for(&self, tree: u64, seq: u64) -> Option<Vec<u8>> {
        let trees = self.trees.lock();
        let hint = trees.get(&tree)?.hint.as_ref()?;
        (hint.seq <= seq).then(|| hint.key.clone())
    }

    /// The start for a scan of the latest state by the one running write
    /// transaction (no commit can be in flight beside it).
    pub(crate) fn start_now(&self, tree: u64) -> Option<Vec<u8>> {
        let trees = self.trees.lock();
        trees.get(&tree)?.hint.as_ref().map(|hint| hint.key.clone())
    }

    /// A commit that inserts, per tree, keys from `smallest` up is about to
    /// enter the index: lowers hints and watches now; the returned guard
    /// ends the commit's flight once its batch is visible (or failed).
    pub(crate) fn inserting<'a>(&'a self, smallest: &HashMap<u64, Vec<u8>>) -> InFlight<'a> {
        let mut trees = self.trees.lock();
        for (&tree, key) in smallest {
            let state = trees.entry(tree).or_default();
            if let Some(hint) = state.hint.as_mut() {
                if key.as_slice() < hint.key.as_slice() {
                    hint.key = key.clone();
                }
            }
            for (_, seen) in &mut state.watches {
                lower(seen, key);
            }
            lower(&mut state.in_flight, key);
        }
        InFlight { hints: self, trees: smallest.keys().copied().collect() }
    }

    /// Forgets a deleted tree (ids are never reused).
    pub(crate) fn forget(&self, tree: u64) {
        self.trees.lock().remove(&tree);
    }
}

/// A commit's inserts on their way into the index (see
/// [`StartHints::inserting`]).
pub(crate) struct InFlight<'a> {
    hints: &'a StartHints,
    trees: Vec<u64>,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut trees = self.hints.trees.lock();
        for tree in &self.trees {
            if let Some(state) = trees.get_mut(tree) {
                state.in_flight = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settled_scan_sets_the_hint_for_newer_snapshots_only() {
        let hints = StartHints::default();
        let watch = hints.watch(7);
        hints.settle(watch, b"k5", 10);
        assert_eq!(hints.start_for(7, 10), Some(b"k5".to_vec()));
        assert_eq!(hints.start_for(7, 9), None);
        assert_eq!(hints.start_for(8, 10), None);
        assert_eq!(hints.start_now(7), Some(b"k5".to_vec()));
    }

    #[test]
    fn inserts_lower_the_hint_before_they_are_visible() {
        let hints = StartHints::default();
        hints.settle(hints.watch(1), b"m", 3);
        let flight = hints.inserting(&HashMap::from([(1, b"c".to_vec())]));
        assert_eq!(hints.start_for(1, 3), Some(b"c".to_vec()));
        drop(flight);
        // An insert above the hint leaves it.
        drop(hints.inserting(&HashMap::from([(1, b"z".to_vec())])));
        assert_eq!(hints.start_now(1), Some(b"c".to_vec()));
    }

    #[test]
    fn a_scan_cannot_raise_the_hint_over_an_insert_its_snapshot_missed() {
        let hints = StartHints::default();
        // In flight when the scan registers.
        let flight = hints.inserting(&HashMap::from([(1, b"b".to_vec())]));
        let early = hints.watch(1);
        drop(flight);
        hints.settle(early, b"x", 5);
        assert_eq!(hints.start_now(1), Some(b"b".to_vec()));

        // Committed after the scan registered.
        let hints = StartHints::default();
        let late = hints.watch(1);
        drop(hints.inserting(&HashMap::from([(1, b"d".to_vec())])));
        hints.settle(late, b"x", 5);
        assert_eq!(hints.start_now(1), Some(b"d".to_vec()));
    }

    #[test]
    fn a_lower_or_cancelled_settle_changes_nothing() {
        let hints = StartHints::default();
        hints.settle(hints.watch(1), b"m", 3);
        hints.settle(hints.watch(1), b"f", 4);
        assert_eq!(hints.start_now(1), Some(b"m".to_vec()));
        let watch = hints.watch(1);
        hints.cancel(&watch);
        hints.settle(watch, b"z", 5);
        assert_eq!(hints.start_now(1), Some(b"m".to_vec()));
        hints.forget(1);
        assert_eq!(hints.start_now(1), None);
    }
}
