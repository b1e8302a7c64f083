//! Combining commit for durable transactions: one thread appends and
//! applies every durable transaction waiting, makes them durable with one
//! log sync, and wakes their threads once.
//!
//! Why: each durable commit used to take the apply turn itself, then wait
//! in the log for its group. With 8 writers on 2 cores the turn was
//! contended: a thread preempted while holding it held up the others,
//! which spun, yielded and parked (the turn's waits were 30% of a durable
//! put's context switches, and futex wakes and task switches a fifth of
//! its CPU). Here a committing thread queues its transaction; if no thread
//! is combining, it combines: it takes the queue (its own transaction
//! included), appends and applies each in one turn, hands the combiner's
//! role to the first transaction queued meanwhile, syncs the log through
//! the last one, and wakes each thread. The others sleep once, from
//! queueing to durable, which they would have done in the log anyway; the
//! records of a round reach the log together, so its groups grow.
//!
//! Only durable commits combine: a buffered one does not sleep at all
//! today unless the turn is taken, and would sleep every time here.
//!
//! The thread that queued a transaction runs everything after it (the
//! change observer, freeing space, checkpoints): the observer (the FUSE
//! mount's kernel-cache invalidation) must not run on another request's
//! thread, which may hold a kernel lock that invalidation waits for.

use std::sync::Arc;
use std::thread::Thread;

use larder_index::WriteBatch;
use larder_log::Dependency;
use parking_lot::Mutex;

use super::{payload, Store};
use crate::error::{ObjectError, Result};

/// Rounds a combiner takes before it syncs (later arrivals go to the
/// next combiner): more rounds make bigger groups but make the first
/// round's threads wait for the later rounds' applies.
pub(crate) const MAX_ROUNDS: usize = 2;

/// A queued durable transaction, shared by its thread and the combiner.
pub(crate) struct Request {
    /// The batch; the combiner applies it, the thread reads it after.
    pub(crate) batch: WriteBatch,
    step: Mutex<Option<Step>>,
    thread: Thread,
}

/// What the combiner tells a waiting thread.
pub(crate) enum Step {
    /// Combine now: the previous combiner left this thread's transaction
    /// (and any after it) queued.
    Lead,
    /// The transaction's LSN once it is appended and applied (and synced,
    /// unless the sync failed: the thread's own `sync_to` then reports
    /// the poisoned log), or why it could not be.
    Done(Result<u64>),
}

impl Request {
    /// A request for the calling thread.
    pub(crate) fn new(batch: WriteBatch) -> Arc<Request> {
        Arc::new(Request { batch, step: Mutex::new(None), thread: std::thread::current() })
    }

    /// Sleeps until the combiner says what to do.
    pub(crate) fn wait(&self) -> Step {
        loop {
            if let Some(step) = self.step.lock().take() {
                return step;
            }
            // A wake before this park makes it return at once, and a
            // spurious return just looks again.
            std::thread::park();
        }
    }

    /// Tells the waiting thread `step` and wakes it.
    pub(crate) fn tell(&self, step: Step) {
        *self.step.lock() = Some(step);
        self.thread.unpark();
    }
}

/// A request with its record, waiting for a combiner.
pub(crate) struct Queued {
    pub(crate) request: Arc<Request>,
    pub(crate) record: Vec<u8>,
    pub(crate) deps: Vec<Dependency>,
}

/// The queue of durable transactions and whether a thread combines.
#[derive(Default)]
pub(crate) struct Combiner {
    state: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    queue: Vec<Queued>,
    /// A thread is combining (or has been told to): queued requests wait.
    active: bool,
}

impl Combiner {
    /// Queues `q`. True if the caller is now the combiner and must call
    /// [`Combiner::take`] until it is done, then [`Combiner::release`].
    pub(crate) fn join(&self, q: Queued) -> bool {
        let mut w = self.state.lock();
        w.queue.push(q);
        !std::mem::replace(&mut w.active, true)
    }

    /// Every request queued now, oldest first.
    pub(crate) fn take(&self) -> Vec<Queued> {
        std::mem::take(&mut self.state.lock().queue)
    }

    /// Ends the caller's turn as combiner: the oldest queued request's
    /// thread combines next, or, with none queued, the next to join.
    pub(crate) fn release(&self) {
        let mut w = self.state.lock();
        match w.queue.first() {
            Some(next) => next.request.tell(Step::Lead),
            None => w.active = false,
        }
    }
}

impl Store {
    /// Commits `batch` durably, combined with the durable commits of other
    /// threads (see the module's comment).
    pub(super) fn commit_durable(&self, batch: WriteBatch, deps: Vec<Dependency>) -> Result<u64> {
        // Nothing to record: what the caller needs is what a record's sync
        // gives besides the record, every earlier transaction durable and
        // the device flushed (a heap sync whose pages were written back and
        // whose allocator changed nothing).
        if batch.is_empty() && deps.is_empty() && self.log.flush()? {
            return Ok(self.log.durable_lsn());
        }
        let record = payload::encode_batch(&batch);
        let request = Request::new(batch);
        let mut step = None;
        if !self.combiner.join(Queued { request: request.clone(), record, deps }) {
            step = Some(request.wait());
        }
        let lsn = match step {
            Some(Step::Done(result)) => result?,
            // Combining told this thread its transaction's step before
            // returning.
            None | Some(Step::Lead) => {
                self.combine();
                match request.wait() {
                    Step::Done(result) => result?,
                    Step::Lead => return Err(self.stop("a combiner's own request was told to lead")),
                }
            }
        };
        // Returns at once unless the combiner's sync failed (the log is
        // then poisoned and says why).
        self.log.sync_to(lsn)?;
        self.after_commit(&request.batch, lsn);
        Ok(lsn)
    }

    /// Appends and applies the queued requests (up to [`MAX_ROUNDS`]
    /// takes of the queue), hands the role on, syncs the log through the
    /// last record appended and tells every request its outcome.
    fn combine(&self) {
        let mut open = Unfinished { store: self, pending: Vec::new(), released: false };
        let mut last = None;
        for _ in 0..MAX_ROUNDS {
            let round = self.combiner.take();
            if round.is_empty() {
                break;
            }
            let first = open.pending.len();
            let mut records = Vec::with_capacity(round.len());
            for q in round {
                open.pending.push((q.request, None));
                records.push((q.record, q.deps));
            }
            let gate = self.append_gate.read();
            let batches = open.pending[first..].iter().map(|(r, _)| &r.batch);
            let results = self.apply_order.append_and_apply_all(
                &self.log,
                &self.index,
                &self.meta_cache,
                records.into_iter().zip(batches),
            );
            drop(gate);
            for ((request, lsn), result) in open.pending[first..].iter_mut().zip(results) {
                match result {
                    Ok(l) => {
                        *lsn = Some(l);
                        last = Some(l);
                    }
                    // Nothing to wait for: told now.
                    Err(e) => request.tell(Step::Done(Err(e))),
                }
            }
            open.pending.retain(|(_, lsn)| lsn.is_some());
        }
        open.released = true;
        self.combiner.release();
        if let Some(lsn) = last {
            // A failure poisons the log: each thread's own sync_to then
            // reports it.
            if let Err(e) = self.log.sync_to(lsn) {
                tracing::debug!(error = %e, "a combined log sync failed");
            }
        }
        for (request, lsn) in std::mem::take(&mut open.pending) {
            request.tell(Step::Done(lsn.ok_or_else(|| self.stop("a combined request was told before it was applied"))));
        }
    }

    /// Stops the store (every later apply and the log) with `why`; the
    /// error to return.
    fn stop(&self, why: &str) -> ObjectError {
        self.apply_order.fail(&self.log, why.to_string());
        ObjectError::Stopped { why: why.to_string() }
    }
}

/// The requests a combiner took and has not told yet. Dropped with some
/// left only if the combiner panicked: the store then stops (a batch may
/// be half applied) and each waiting thread is told so instead of
/// sleeping forever.
struct Unfinished<'a> {
    store: &'a Store,
    /// Each request and, once applied, its LSN.
    pending: Vec<(Arc<Request>, Option<u64>)>,
    /// Whether the combiner's role was handed on.
    released: bool,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if self.pending.is_empty() && self.released {
            return;
        }
        const WHY: &str = "a thread committing this transaction together with others panicked";
        self.store.apply_order.fail(&self.store.log, WHY.to_string());
        for (request, _) in self.pending.drain(..) {
            request.tell(Step::Done(Err(ObjectError::Stopped { why: WHY.to_string() })));
        }
        if !self.released {
            self.store.combiner.release();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn queued() -> (Arc<Request>, Queued) {
        let request = Request::new(WriteBatch::new());
        (request.clone(), Queued { request, record: Vec::new(), deps: Vec::new() })
    }

    #[test]
    fn the_first_to_join_combines_and_hands_over_to_the_oldest_queued() {
        let c = Combiner::default();
        let (_a, qa) = queued();
        assert!(c.join(qa), "nobody combines: the first joiner must");
        let (b, qb) = queued();
        let (_c2, qc) = queued();
        assert!(!c.join(qb), "a combiner is active");
        assert!(!c.join(qc));
        let round = c.take();
        assert_eq!(round.len(), 3);
        assert!(c.take().is_empty());
        let (d, qd) = queued();
        assert!(!c.join(qd));
        c.release();
        // d was queued when the combiner left: it leads, b does not.
        assert!(matches!(d.wait(), Step::Lead));
        assert!(b.step.lock().is_none());
        let (_e, qe) = queued();
        assert!(!c.join(qe), "d's thread is combining now");
        assert_eq!(c.take().len(), 2);
        c.release();
        let (_f, qf) = queued();
        assert!(c.join(qf), "released with nothing queued: the next joiner combines");
    }

    #[test]
    fn a_waiter_sleeps_until_told() {
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            // Made on the waiting thread: the one a tell wakes.
            let r = Request::new(WriteBatch::new());
            tx.send(r.clone()).unwrap();
            match r.wait() {
                Step::Done(Ok(lsn)) => lsn,
                _ => 0,
            }
        });
        let r = rx.recv().unwrap();
        r.tell(Step::Done(Ok(42)));
        assert_eq!(waiter.join().unwrap(), 42);
    }
}
