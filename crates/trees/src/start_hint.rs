//! Where a forward scan of a tree may start: below a key learned by an
//! earlier scan nothing is live but the few keys inserted since.
//!
//! A tree used as a queue (Garage's Merkle to-do list, its insert queues,
//! any work queue) is read from its first entry and emptied from the
//! front. In a write-optimized index every removed entry stays behind as a
//! tombstone until a merge drops it, so a scan from the tree's start steps
//! over all of them before it finds the first live entry: LMDB's B+tree
//! finds it in one descent. A scan that found its first live key `K`
//! therefore records that no key below `K` is live as of its snapshot.
//! A commit that inserts keys below `K` adds them to the hint as
//! exceptions before they become visible (queues whose keys are hashes get
//! new entries anywhere, mostly below the front). A later scan whose
//! snapshot is at least as new checks the exceptions in order by point
//! reads (a removed one reads as absent) and starts at the first live one,
//! or at `K`. Removals keep the hint true.
//!
//! Setting a hint races with commits: a scan that found `K` in its
//! snapshot must not drop an exception inserted by a commit its snapshot
//! missed. So a scan registers a watch before it takes its snapshot; the
//! commit being applied at that moment and every later one add their
//! inserted keys to the watch as to the hint, and the scan's new hint
//! keeps those below `K` as its exceptions.

use std::collections::{BTreeSet, HashMap};

use parking_lot::Mutex;

/// Most keys a hint, a watch or one commit's record keeps before giving
/// up (the hint is dropped, the watch sets nothing): bounded memory for
/// trees that are not queues.
const MAX_TRACKED: usize = 4096;

/// No key of the tree below `end` is live in any snapshot at `seq` or
/// later, but for the keys in `inserted` (inserted since).
#[derive(Clone, Debug)]
struct Hint {
    end: Vec<u8>,
    seq: u64,
    inserted: BTreeSet<Vec<u8>>,
}

/// A scan that may set its tree's hint, and the keys inserted into the
/// tree since it registered (or in flight then).
struct WatchState {
    id: u64,
    inserted: BTreeSet<Vec<u8>>,
    overflowed: bool,
}

/// A tree's hint and what may change it.
#[derive(Default)]
struct TreeState {
    hint: Option<Hint>,
    /// The keys the commit now being applied inserts (set before the
    /// commit's batch enters the index, cleared once it is visible).
    in_flight: Option<Inserted>,
    watches: Vec<WatchState>,
}

/// The keys one commit inserts into one tree: all of them, or, past
/// [`MAX_TRACKED`], only the fact that there were too many.
#[derive(Clone, Debug, Default)]
pub(crate) struct Inserted {
    keys: Vec<Vec<u8>>,
    overflowed: bool,
}

impl Inserted {
    /// Records `key` (an index key of the tree).
    pub(crate) fn add(&mut self, key: &[u8]) {
        if self.overflowed {
            return;
        }
        if self.keys.len() >= MAX_TRACKED {
            self.keys = Vec::new();
            self.overflowed = true;
        } else {
            self.keys.push(key.to_vec());
        }
    }
}

/// Most exceptions one plan hands out. A scan point-reads them in order
/// and nearly always stops at the first few; past them it starts at the
/// next exception and steps over what lies between by iterating, so a
/// queue whose front is rarely read costs a scan no more than this many
/// copies and reads under the hints' mutex.
const PLAN_CANDIDATES: usize = 64;

/// Where a forward scan may start: the first of `candidates` that is live
/// in its snapshot, else `end`.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Keys below `end` that may be live, in order.
    pub(crate) candidates: Vec<Vec<u8>>,
    /// The first key at or above which entries may be live: the hint's end,
    /// or the first exception past `candidates` when it has more.
    pub(crate) end: Vec<u8>,
    /// The hint's end (what a settling scan reports it planned by).
    pub(crate) hint_end: Vec<u8>,
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

impl WatchState {
    fn add(&mut self, inserted: &Inserted) {
        if inserted.overflowed || self.inserted.len() + inserted.keys.len() > MAX_TRACKED {
            self.overflowed = true;
            self.inserted.clear();
        }
        if !self.overflowed {
            self.inserted.extend(inserted.keys.iter().cloned());
        }
    }
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
        let mut watch = WatchState { id, inserted: BTreeSet::new(), overflowed: false };
        if let Some(in_flight) = &state.in_flight {
            watch.add(in_flight);
        }
        state.watches.push(watch);
        Watch { tree, id }
    }

    /// Records that the scan's snapshot `seq` holds no live key of the
    /// watched tree below `first_live` (the first live key the scan found,
    /// or the end of its range if it found none). `plan_end` is the end of
    /// the hint the scan planned by ([`Plan::hint_end`]), if any: when the scan found a live
    /// candidate below it, the hint keeps that end and drops only the
    /// candidates below `first_live` (the scan read them as removed), so
    /// popping the front of a queue whose new keys land below it does not
    /// forget what lies between them and the old end.
    pub(crate) fn settle(&self, watch: Watch, first_live: &[u8], seq: u64, plan_end: Option<&[u8]>) {
        let mut trees = self.trees.lock();
        let Some(state) = trees.get_mut(&watch.tree) else { return };
        let Some(at) = state.watches.iter().position(|w| w.id == watch.id) else { return };
        let found = state.watches.swap_remove(at);
        if found.overflowed {
            return;
        }
        match (state.hint.as_mut(), plan_end) {
            // Still the hint the scan planned by: the candidates below
            // `first_live` were read as removed in a snapshot holding every
            // insert but those the watch saw, which stay.
            (Some(hint), Some(end)) if first_live < end && hint.end.as_slice() == end && hint.seq <= seq => {
                let mut kept = hint.inserted.split_off(first_live);
                kept.extend(found.inserted.into_iter().filter(|k| k.as_slice() < end));
                hint.inserted = kept;
                hint.seq = seq;
            }
            (Some(hint), _) if hint.seq > seq => {}
            _ => {
                let inserted = found.inserted.into_iter().filter(|k| k.as_slice() < first_live).collect();
                state.hint = Some(Hint { end: first_live.to_vec(), seq, inserted });
            }
        }
    }

    /// Forgets a scan that will not settle (it failed, or was dropped
    /// before its first entry).
    pub(crate) fn cancel(&self, watch: &Watch) {
        let mut trees = self.trees.lock();
        if let Some(state) = trees.get_mut(&watch.tree) {
            state.watches.retain(|w| w.id != watch.id);
        }
    }

    /// Where a forward scan of `tree` may start: from a snapshot at `seq`
    /// (call after taking the snapshot), or, with `None`, of the latest
    /// state by the one running write transaction (no commit can be in
    /// flight beside it). None if nothing is known.
    pub(crate) fn plan(&self, tree: u64, seq: Option<u64>) -> Option<Plan> {
        let trees = self.trees.lock();
        let hint = trees.get(&tree)?.hint.as_ref()?;
        if seq.is_some_and(|seq| hint.seq > seq) {
            return None;
        }
        let mut exceptions = hint.inserted.iter();
        let candidates: Vec<Vec<u8>> = exceptions.by_ref().take(PLAN_CANDIDATES).cloned().collect();
        let end = exceptions.next().unwrap_or(&hint.end).clone();
        Some(Plan { candidates, end, hint_end: hint.end.clone() })
    }

    /// A commit that inserts `inserted` (per tree) is about to enter the
    /// index: records the keys in hints and watches now, and keeps them as
    /// the tree's keys in flight for watches registered meanwhile; the
    /// returned guard ends the commit's flight once its batch is visible
    /// (or failed).
    pub(crate) fn inserting(&self, inserted: HashMap<u64, Inserted>) -> InFlight<'_> {
        let mut trees = self.trees.lock();
        let mut flying = Vec::with_capacity(inserted.len());
        for (tree, keys) in inserted {
            let state = trees.entry(tree).or_default();
            if let Some(hint) = state.hint.as_mut() {
                if keys.overflowed {
                    state.hint = None;
                } else {
                    hint.inserted.extend(keys.keys.iter().filter(|k| k.as_slice() < hint.end.as_slice()).cloned());
                    if hint.inserted.len() > MAX_TRACKED {
                        state.hint = None;
                    }
                }
            }
            for watch in &mut state.watches {
                watch.add(&keys);
            }
            state.in_flight = Some(keys);
            flying.push(tree);
        }
        InFlight { hints: self, trees: flying }
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

    fn inserted(keys: &[&[u8]]) -> Inserted {
        let mut inserted = Inserted::default();
        for key in keys {
            inserted.add(key);
        }
        inserted
    }

    fn plan(hints: &StartHints, tree: u64, seq: Option<u64>) -> Option<(Vec<Vec<u8>>, Vec<u8>)> {
        hints.plan(tree, seq).map(|plan| (plan.candidates, plan.end))
    }

    #[test]
    fn a_settled_scan_sets_the_hint_for_newer_snapshots_only() {
        let hints = StartHints::default();
        let watch = hints.watch(7);
        hints.settle(watch, b"k5", 10, None);
        assert_eq!(plan(&hints, 7, Some(10)), Some((vec![], b"k5".to_vec())));
        assert_eq!(plan(&hints, 7, Some(9)), None);
        assert_eq!(plan(&hints, 8, Some(10)), None);
        assert_eq!(plan(&hints, 7, None), Some((vec![], b"k5".to_vec())));
    }

    #[test]
    fn inserts_below_the_end_become_candidates_before_they_are_visible() {
        let hints = StartHints::default();
        hints.settle(hints.watch(1), b"m", 3, None);
        let flight = hints.inserting(HashMap::from([(1, inserted(&[b"c", b"x", b"a"]))]));
        assert_eq!(plan(&hints, 1, Some(3)), Some((vec![b"a".to_vec(), b"c".to_vec()], b"m".to_vec())));
        drop(flight);
    }

    #[test]
    fn a_scan_keeps_the_inserts_its_snapshot_may_have_missed() {
        let hints = StartHints::default();
        // In flight when the scan registers.
        let flight = hints.inserting(HashMap::from([(1, inserted(&[b"b"]))]));
        let early = hints.watch(1);
        drop(flight);
        hints.settle(early, b"x", 5, None);
        assert_eq!(plan(&hints, 1, None), Some((vec![b"b".to_vec()], b"x".to_vec())));

        // Committed after the scan registered; one above what it found.
        let hints = StartHints::default();
        let late = hints.watch(1);
        drop(hints.inserting(HashMap::from([(1, inserted(&[b"d", b"y"]))])));
        hints.settle(late, b"x", 5, None);
        assert_eq!(plan(&hints, 1, None), Some((vec![b"d".to_vec()], b"x".to_vec())));
    }

    #[test]
    fn a_live_candidate_keeps_the_end_and_drops_the_removed_ones() {
        let hints = StartHints::default();
        hints.settle(hints.watch(1), b"m", 3, None);
        drop(hints.inserting(HashMap::from([(1, inserted(&[b"a", b"c", b"e"]))])));
        let watch = hints.watch(1);
        let Some((candidates, end)) = plan(&hints, 1, Some(4)) else { panic!("the hint gives no plan") };
        assert_eq!((candidates.len(), end.as_slice()), (3, &b"m"[..]));
        // While the scan reads "a" as removed and "c" as live, a commit
        // inserts "b", which its snapshot may miss.
        drop(hints.inserting(HashMap::from([(1, inserted(&[b"b"]))])));
        hints.settle(watch, b"c", 4, Some(b"m"));
        assert_eq!(plan(&hints, 1, None), Some((vec![b"b".to_vec(), b"c".to_vec(), b"e".to_vec()], b"m".to_vec())));
    }

    #[test]
    fn a_plan_hands_out_the_first_exceptions_and_starts_at_the_next() {
        let hints = StartHints::default();
        hints.settle(hints.watch(1), b"z", 1, None);
        let keys: Vec<String> = (0..PLAN_CANDIDATES + 10).map(|i| format!("k{i:03}")).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
        drop(hints.inserting(HashMap::from([(1, inserted(&refs))])));
        let watch = hints.watch(1);
        let Some(plan) = hints.plan(1, Some(2)) else { panic!("the hint gives no plan") };
        assert_eq!(plan.candidates.len(), PLAN_CANDIDATES);
        assert_eq!(plan.candidates.last().map(Vec::as_slice), Some(keys[PLAN_CANDIDATES - 1].as_bytes()));
        assert_eq!(plan.end, keys[PLAN_CANDIDATES].as_bytes());
        assert_eq!(plan.hint_end, b"z");
        // The scan stepped past the handed-out exceptions and found the
        // fifth after them live: the rest stay exceptions below the end.
        let first_live = keys[PLAN_CANDIDATES + 4].as_bytes();
        hints.settle(watch, first_live, 2, Some(&plan.hint_end));
        let Some(after) = hints.plan(1, None) else { panic!("the hint was dropped") };
        assert_eq!(
            after.candidates,
            keys[PLAN_CANDIDATES + 4..].iter().map(|k| k.as_bytes().to_vec()).collect::<Vec<_>>()
        );
        assert_eq!(after.end, b"z");
    }

    #[test]
    fn an_older_settle_or_a_cancelled_one_changes_nothing() {
        let hints = StartHints::default();
        hints.settle(hints.watch(1), b"m", 4, None);
        hints.settle(hints.watch(1), b"z", 3, None);
        assert_eq!(plan(&hints, 1, None), Some((vec![], b"m".to_vec())));
        let watch = hints.watch(1);
        hints.cancel(&watch);
        hints.settle(watch, b"z", 5, None);
        assert_eq!(plan(&hints, 1, None), Some((vec![], b"m".to_vec())));
        hints.forget(1);
        assert_eq!(plan(&hints, 1, None), None);
    }

    #[test]
    fn too_many_inserts_drop_the_hint_and_void_the_watches() {
        let hints = StartHints::default();
        hints.settle(hints.watch(1), b"zzzz", 1, None);
        let watch = hints.watch(1);
        let mut many = Inserted::default();
        for i in 0..=MAX_TRACKED {
            many.add(format!("k{i:05}").as_bytes());
        }
        drop(hints.inserting(HashMap::from([(1, many)])));
        assert_eq!(plan(&hints, 1, None), None);
        hints.settle(watch, b"zzzz", 2, None);
        assert_eq!(plan(&hints, 1, None), None);
    }
}
