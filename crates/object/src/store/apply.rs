//! Applying committed batches to the index, in LSN order, as they are
//! appended to the log rather than once their group is durable.
//!
//! Why at append: a buffered transaction is then visible at once to every
//! reader and to the next transaction on the same objects, so neither has
//! to wait for a log sync (a buffered create followed by another in the
//! same directory used to cost one sync each). What keeps this safe is the
//! index's `before_durable` hook: a flush syncs the log through the
//! flushed sequence number before its manifest declares it durable, so the
//! index's durable sequence number never runs ahead of the log (DESIGN.md,
//! ordering rule 2), and a crash loses only records the log never made
//! durable, as it always did.
//!
//! The index takes sequence numbers in increasing order only (ordering
//! rule 1), while LSNs are assigned under the log's lock and appenders
//! then race. The appender whose LSN is next applies its batch and then
//! every queued batch that follows, in order, for their threads (which
//! sleep until theirs is done): with more writers than cores, handing the
//! turn from thread to thread made each batch wait for its predecessor's
//! thread to be scheduled (a convoy; profiled in the file-server mix).
//! A waiting thread is woken alone (parked, then unparked by the leader
//! once its batch is in, or when the turn falls to it): waking every
//! waiter after each batch made 62% of the file-server mix's context
//! switches.

use std::collections::BTreeMap;
use std::sync::Arc;

use larder_index::{Index, WriteBatch};
use larder_log::Log;
use parking_lot::{Condvar, Mutex};

use super::cache::MetaCache;
use crate::error::{ObjectError, Result};

/// A batch waiting for its turn, and what became of it.
struct Queued {
    batch: Arc<WriteBatch>,
    /// Set by the leader that applied it: Ok, or why it failed.
    done: Option<std::result::Result<(), String>>,
    /// The thread waiting for it, parked.
    waiter: std::thread::Thread,
}

struct State {
    /// The LSN whose batch is applied next.
    next: u64,
    /// A thread is applying batches (its own, then queued ones).
    leading: bool,
    /// Batches of later LSNs waiting for their turn.
    queued: BTreeMap<u64, Queued>,
}

/// Hands out turns to apply batches in LSN order.
pub(crate) struct ApplyOrder {
    state: Mutex<State>,
    cond: Condvar,
    /// Why an earlier batch could not be applied, if one could not: the
    /// index then lacks a record the log holds, so nothing more is applied
    /// and no flush may declare anything durable. A lock of its own: the
    /// index's hook reads it from inside an apply (an inline flush).
    failed: Mutex<Option<String>>,
}

impl ApplyOrder {
    /// Turns start after `last_lsn`, the last LSN the log assigned so far.
    pub(crate) fn new(last_lsn: u64) -> ApplyOrder {
        ApplyOrder {
            state: Mutex::new(State { next: last_lsn + 1, leading: false, queued: BTreeMap::new() }),
            cond: Condvar::new(),
            failed: Mutex::new(None),
        }
    }

    /// Applies `batch`, appended to `log` as `lsn`, to `index` once every
    /// earlier LSN has been applied (by this thread, or by the one ahead
    /// of it, which then applies it too). A failure stops the log: the
    /// record may become durable and would be replayed on reopen, but this
    /// process's index lacks it.
    pub(crate) fn apply(
        &self,
        log: &Log,
        index: &Index,
        cache: &MetaCache,
        lsn: u64,
        batch: &WriteBatch,
    ) -> Result<()> {
        let mut st = self.state.lock();
        if st.next != lsn || st.leading {
            let waiter = std::thread::current();
            st.queued.insert(lsn, Queued { batch: Arc::new(batch.clone()), done: None, waiter });
            loop {
                // An unpark before the park makes it return at once, so no
                // wakeup is lost; a spurious one only loops.
                parking_lot::MutexGuard::unlocked(&mut st, std::thread::park);
                if let Some(done) = st.queued.get(&lsn).and_then(|q| q.done.clone()) {
                    st.queued.remove(&lsn);
                    return done.map_err(|why| ObjectError::ApplyFailed { lsn, why });
                }
                if st.next == lsn && !st.leading {
                    // The turn fell to this batch (the leader stopped
                    // before it was queued, or was queued behind it).
                    st.queued.remove(&lsn);
                    break;
                }
            }
        }
        st.leading = true;
        drop(st);
        // Every later appender may be waiting for this leader: the turn must
        // move on even if a write below panics.
        let mut lead = Lead { order: self, applied: 0, for_other: None };
        let own = self.apply_one(log, cache, lsn, batch, || index.write(lsn, batch));
        lead.applied = 1;
        // Then the queued batches that follow, in order.
        loop {
            let next = {
                let mut st = self.state.lock();
                st.next += lead.applied;
                lead.applied = 0;
                let next = st.next;
                match st.queued.get(&next) {
                    Some(q) if q.done.is_none() => (next, q.batch.clone()),
                    _ => break,
                }
            };
            let (at, queued) = next;
            lead.for_other = Some(at);
            let done = self.apply_one(log, cache, at, &queued, || index.write(at, &queued));
            lead.for_other = None;
            let mut st = self.state.lock();
            let waiter = st.queued.get_mut(&at).map(|q| {
                q.done = Some(done.map_err(|e| e.to_string()));
                q.waiter.clone()
            });
            lead.applied = 1;
            drop(st);
            if let Some(w) = waiter {
                w.unpark();
            }
        }
        own
    }

    /// Like [`ApplyOrder::apply`] for a batch that enters the index by
    /// `enter` (an ingest installs its run), with no other appender (the
    /// store's append gate is held exclusively).
    pub(crate) fn apply_with(
        &self,
        log: &Log,
        cache: &MetaCache,
        lsn: u64,
        batch: &WriteBatch,
        enter: impl FnOnce() -> larder_index::Result<()>,
    ) -> Result<()> {
        {
            let mut st = self.state.lock();
            // The last leader may still be finishing its turn (its
            // followers return as soon as their batches are in).
            while st.leading && st.next <= lsn {
                self.cond.wait(&mut st);
            }
            if st.next != lsn {
                let why = format!("the batch at {lsn} is not next ({} is)", st.next);
                return Err(ObjectError::ApplyFailed { lsn, why });
            }
            st.leading = true;
        }
        let mut lead = Lead { order: self, applied: 0, for_other: None };
        let done = self.apply_one(log, cache, lsn, batch, enter);
        lead.applied = 1;
        drop(lead);
        done
    }

    /// Puts one batch into the index; a failure poisons the log and every
    /// later apply.
    fn apply_one(
        &self,
        log: &Log,
        cache: &MetaCache,
        lsn: u64,
        batch: &WriteBatch,
        enter: impl FnOnce() -> larder_index::Result<()>,
    ) -> Result<()> {
        self.check().map_err(|why| ObjectError::ApplyFailed { lsn, why })?;
        cache.invalidate(batch);
        let done = enter();
        cache.settle(done.is_ok().then_some(batch));
        if let Err(e) = done {
            let why = format!("record {lsn} could not enter the index: {e}");
            log.poison(why.clone());
            *self.failed.lock() = Some(why.clone());
            return Err(ObjectError::ApplyFailed { lsn, why });
        }
        Ok(())
    }

    /// Err if a batch could not be applied (see [`ApplyOrder::failed`]).
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        match &*self.failed.lock() {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }
}

/// Ends a leader's turn when dropped: counts what it applied (a panic
/// mid-write counts the batch as taken, and marks the log failed),
/// clears `leading` and wakes every waiter, one of which may lead next.
struct Lead<'a> {
    order: &'a ApplyOrder,
    /// Batches applied since `next` was last moved (0 or 1).
    applied: u64,
    /// The LSN of another thread's batch being applied, if one is.
    for_other: Option<u64>,
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        const PANICKED: &str = "a thread panicked while applying a batch to the index";
        let panicked = std::thread::panicking();
        if panicked {
            let mut f = self.order.failed.lock();
            if f.is_none() {
                *f = Some(PANICKED.into());
            }
            // The batch being applied is taken: nothing later may enter.
            self.applied = 1;
        }
        let mut st = self.order.state.lock();
        let mut wake = Vec::new();
        if let Some(at) = self.for_other.filter(|_| panicked) {
            if let Some(q) = st.queued.get_mut(&at) {
                q.done = Some(Err(PANICKED.into()));
                wake.push(q.waiter.clone());
            }
        }
        st.next += self.applied;
        st.leading = false;
        // The turn falls to the batch at `next`, if its thread is waiting.
        let next = st.next;
        if let Some(q) = st.queued.get(&next).filter(|q| q.done.is_none()) {
            wake.push(q.waiter.clone());
        }
        drop(st);
        for w in wake {
            w.unpark();
        }
        // apply_with waits for the turn on the condvar.
        self.order.cond.notify_all();
    }
}
