//! Iterators over a tree's entries: [`TreeIter`] over a snapshot, and
//! [`TxIter`] over a write transaction's view (its own writes merged over
//! the committed state).

use std::iter::Peekable;
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::Arc;

use larder_index::{Iter, Snapshot};
use larder_object::meta::{prefix_end, tree_entry_prefix, TREE_ENTRY_PREFIX_BYTES};

use crate::registry::Serial;
use crate::start_hint::{Plan, Watch};
use crate::{KeyRange, Result};

/// An entry: the key and its value.
pub type Entry = (Vec<u8>, Vec<u8>);

/// The index keys of every entry of `tree`: `[start, end)`.
pub(crate) fn entry_bounds(tree: u64) -> (Vec<u8>, Vec<u8>) {
    let prefix = tree_entry_prefix(tree);
    // The prefix starts with the map's byte (0x70): it has an end.
    let end = prefix_end(&prefix).unwrap_or_default();
    (prefix.to_vec(), end)
}

/// Owned bounds of a range of index keys.
pub(crate) type IndexBounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// Index bounds of the entries of `tree` in `range`.
pub(crate) fn index_bounds(tree: u64, range: KeyRange<'_>) -> Result<IndexBounds> {
    let (lowest, past) = entry_bounds(tree);
    let full = |k: &[u8]| crate::tree::entry_key(tree, k);
    let start = match range.0 {
        Bound::Included(k) => Bound::Included(full(k)),
        Bound::Excluded(k) => Bound::Excluded(full(k)),
        Bound::Unbounded => Bound::Included(lowest),
    };
    let end = match range.1 {
        Bound::Included(k) => Bound::Included(full(k)),
        Bound::Excluded(k) => Bound::Excluded(full(k)),
        Bound::Unbounded => Bound::Excluded(past),
    };
    Ok((start, end))
}

/// Whether `key` lies below a forward scan's `start`.
fn below_start(key: &[u8], start: &Bound<Vec<u8>>) -> bool {
    match start {
        Bound::Included(s) => key < s.as_slice(),
        Bound::Excluded(s) => key <= s.as_slice(),
        Bound::Unbounded => false,
    }
}

/// Moves a forward scan's `start` up by a tree's start hint (see
/// `start_hint`): to the first of the plan's candidates at or past `start`
/// that `get` finds live, else to the plan's end, when that lies past
/// `start`. Returns the live candidate with its value: the plan proves no
/// live key lies between `start` and it, so it is the scan's first entry.
pub(crate) fn raise_start(
    start: &mut Bound<Vec<u8>>,
    plan: Option<Plan>,
    mut get: impl FnMut(&[u8]) -> larder_index::Result<Option<Vec<u8>>>,
) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    let Some(plan) = plan else { return Ok(None) };
    for candidate in plan.candidates {
        if below_start(&candidate, start) {
            continue;
        }
        if let Some(value) = get(&candidate)? {
            *start = Bound::Included(candidate.clone());
            return Ok(Some((candidate, value)));
        }
    }
    if !below_start(&plan.end, start) {
        *start = Bound::Included(plan.end);
    }
    Ok(None)
}

/// Whether no key lies between `start` and `end` (`BTreeMap::range`
/// panics on such bounds; the index returns nothing).
pub(crate) fn is_empty_range(start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e))
        | (Bound::Excluded(s), Bound::Excluded(e)) => s >= e,
        _ => false,
    }
}

fn strip(kv: larder_index::Result<(Vec<u8>, Vec<u8>)>) -> Result<Entry> {
    let (mut k, v) = kv?;
    k.drain(..TREE_ENTRY_PREFIX_BYTES.min(k.len()));
    Ok((k, v))
}

/// The entries of one tree in a range, from one snapshot: later commits
/// are invisible. Owns what it reads: `'static` and `Send`. An I/O or
/// corruption error is yielded once and ends the iteration.
pub struct TreeIter {
    inner: Option<Iter>,
    /// A scan from the tree's start that has yet to report its first live
    /// key to the tree's start hint.
    settle: Option<Settle>,
}

/// What a scan from a tree's start reports once it knows its first live
/// key.
struct Settle {
    serial: Arc<Serial>,
    watch: Watch,
    seq: u64,
    /// The end of the scanned range, if exclusive: the first key that can
    /// be live when the scan finds none.
    end: Option<Vec<u8>>,
    /// The end of the start hint's plan the scan started by, if any.
    plan_end: Option<Vec<u8>>,
}

impl TreeIter {
    /// A scan of `tree` in `range` as of `snapshot`. A forward scan starts
    /// no lower than the tree's start hint for the snapshot; `watch` (a
    /// forward scan from the tree's start, registered before the snapshot
    /// was taken) reports the first live key it finds.
    pub(crate) fn new(
        snapshot: &Snapshot,
        serial: &Arc<Serial>,
        tree: u64,
        range: KeyRange<'_>,
        forward: bool,
        watch: Option<Watch>,
    ) -> Result<TreeIter> {
        let (mut start, end) = index_bounds(tree, range)?;
        let mut settle = watch.map(|watch| Settle::new(serial, watch, snapshot, &end));
        if forward {
            if let Err(e) = settle_plan(snapshot, serial, tree, &mut start, settle.as_mut()) {
                if let Some(settle) = settle {
                    settle.serial.hints.cancel(&settle.watch);
                }
                return Err(e);
            }
        }
        TreeIter::scan(snapshot, &start, &end, forward, settle)
    }

    /// The first entry of `tree` as of `snapshot`: what the first item of
    /// a forward [`TreeIter`] over the whole tree would be, and it teaches
    /// the start hint alike. When the hint's plan yields a live candidate,
    /// that candidate is the answer and no merge iterator is built (a
    /// queue whose new keys land below its front, as Garage's Merkle to-do
    /// list, finds its first entry so).
    pub(crate) fn first(snapshot: &Snapshot, serial: &Arc<Serial>, tree: u64, watch: Watch) -> Result<Option<Entry>> {
        let (mut start, end) = index_bounds(tree, (Bound::Unbounded, Bound::Unbounded))?;
        let mut settle = Settle::new(serial, watch, snapshot, &end);
        match settle_plan(snapshot, serial, tree, &mut start, Some(&mut settle)) {
            Err(e) => {
                settle.serial.hints.cancel(&settle.watch);
                Err(e)
            }
            Ok(Some((key, value))) => {
                settle.serial.hints.settle(settle.watch, &key, settle.seq, settle.plan_end.as_deref());
                strip(Ok((key, value))).map(Some)
            }
            Ok(None) => TreeIter::scan(snapshot, &start, &end, true, Some(settle))?.next().transpose(),
        }
    }

    /// A scan of `[start, end]` as of `snapshot` that reports to `settle`.
    fn scan(
        snapshot: &Snapshot,
        start: &Bound<Vec<u8>>,
        end: &Bound<Vec<u8>>,
        forward: bool,
        settle: Option<Settle>,
    ) -> Result<TreeIter> {
        if is_empty_range(start, end) {
            // Empty by the hint or by the caller's bounds: nothing to learn.
            if let Some(settle) = settle {
                settle.serial.hints.cancel(&settle.watch);
            }
            return Ok(TreeIter { inner: None, settle: None });
        }
        let inner = match snapshot.range(as_slice(start), as_slice(end), forward) {
            Ok(inner) => inner,
            Err(e) => {
                if let Some(settle) = settle {
                    settle.serial.hints.cancel(&settle.watch);
                }
                return Err(e.into());
            }
        };
        Ok(TreeIter { inner: Some(inner), settle })
    }

    /// Reports the scan's first live key (`None`: the scan ended without
    /// one) to the tree's start hint; forgets the watch after an error.
    fn report(&mut self, first: Option<&larder_index::Result<(Vec<u8>, Vec<u8>)>>) {
        let Some(settle) = self.settle.take() else { return };
        let hints = &settle.serial.hints;
        match first {
            Some(Ok((key, _))) => hints.settle(settle.watch, key, settle.seq, settle.plan_end.as_deref()),
            None => match &settle.end {
                Some(end) => hints.settle(settle.watch, end, settle.seq, settle.plan_end.as_deref()),
                None => hints.cancel(&settle.watch),
            },
            Some(Err(_)) => hints.cancel(&settle.watch),
        }
    }
}

impl Settle {
    fn new(serial: &Arc<Serial>, watch: Watch, snapshot: &Snapshot, end: &Bound<Vec<u8>>) -> Settle {
        Settle {
            serial: serial.clone(),
            watch,
            seq: snapshot.seq(),
            end: match end {
                Bound::Excluded(e) => Some(e.clone()),
                _ => None,
            },
            plan_end: None,
        }
    }
}

/// Raises a forward scan's `start` by the tree's start hint for
/// `snapshot` (see [`raise_start`]), noting in `settle` the hint it
/// planned by; returns the live candidate found, if any.
fn settle_plan(
    snapshot: &Snapshot,
    serial: &Serial,
    tree: u64,
    start: &mut Bound<Vec<u8>>,
    settle: Option<&mut Settle>,
) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    let plan = serial.hints.plan(tree, Some(snapshot.seq()));
    if let (Some(settle), Some(plan)) = (settle, plan.as_ref()) {
        settle.plan_end = Some(plan.hint_end.clone());
    }
    raise_start(start, plan, |key| snapshot.get(key))
}

impl Drop for TreeIter {
    fn drop(&mut self) {
        if let Some(settle) = self.settle.take() {
            settle.serial.hints.cancel(&settle.watch);
        }
    }
}

pub(crate) fn as_slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

impl Iterator for TreeIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        let item = self.inner.as_mut()?.next();
        if self.settle.is_some() {
            self.report(item.as_ref());
        }
        let item = item?;
        if item.is_err() {
            self.inner = None;
        }
        Some(strip(item))
    }
}

/// The entries of one tree in a range as a write transaction sees them:
/// its own writes (as of the call) merged over the committed state. It
/// borrows the transaction, which cannot change while it lives.
pub struct TxIter<'a> {
    /// The transaction's writes in the range, in iteration order.
    pending: std::vec::IntoIter<(Vec<u8>, Option<Vec<u8>>)>,
    next_pending: Option<(Vec<u8>, Option<Vec<u8>>)>,
    /// The committed entries (none when the transaction cleared the tree).
    index: Option<Peekable<Iter>>,
    forward: bool,
    _tx: PhantomData<&'a ()>,
}

impl TxIter<'_> {
    pub(crate) fn new(
        mut pending: Vec<(Vec<u8>, Option<Vec<u8>>)>,
        index: Option<Iter>,
        forward: bool,
    ) -> TxIter<'static> {
        if !forward {
            pending.reverse();
        }
        let mut pending = pending.into_iter();
        let next_pending = pending.next();
        TxIter { pending, next_pending, index: index.map(Iterator::peekable), forward, _tx: PhantomData }
    }

    /// The next entry, with index keys (prefix still on).
    fn next_full(&mut self) -> Option<Result<Entry>> {
        loop {
            let index_key = match self.index.as_mut().and_then(|i| i.peek()) {
                Some(Ok((k, _))) => Some(k.clone()),
                Some(Err(_)) => {
                    let failed = self.index.as_mut().and_then(Iterator::next);
                    self.index = None;
                    return failed.map(|r| r.map_err(Into::into));
                }
                None => None,
            };
            // Which source holds the next key in iteration order; on a tie
            // the transaction's write wins and the committed one is skipped.
            let take_pending = match (&self.next_pending, &index_key) {
                (None, None) => return None,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((pk, _)), Some(ik)) => {
                    if pk == ik {
                        self.index.as_mut().and_then(Iterator::next);
                        true
                    } else {
                        (pk < ik) == self.forward
                    }
                }
            };
            if take_pending {
                let taken = std::mem::replace(&mut self.next_pending, self.pending.next());
                if let Some((k, Some(v))) = taken {
                    return Some(Ok((k, v)));
                }
                // A removal hides the committed entry: look further.
            } else {
                return self.index.as_mut().and_then(Iterator::next).map(|r| r.map_err(Into::into));
            }
        }
    }
}

impl Iterator for TxIter<'_> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        self.next_full().map(|r| r.and_then(|kv| strip(Ok(kv))))
    }
}
