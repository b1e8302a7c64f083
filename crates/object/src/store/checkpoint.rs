//! The checkpointer: a thread that keeps the intent log from filling.
//!
//! When the log asks for a checkpoint (or a flush of the index moved its
//! durable sequence number), it flushes the index and tells the log that
//! every record up to the index's durable sequence number is covered, so
//! the segments holding only such records can be reused (DESIGN.md,
//! ordering rule 3). The log's hook cannot call back into the log, so the
//! hook only wakes this thread. The same thread punches freed space,
//! creates spare containers, and checkpoints when much freed space waits
//! for one (frees are reusable only once the index covers them).
//!
//! Neither thread ends silently: an error worth a retry (see
//! `health::Reaction`) is retried with a doubling backoff, any other error
//! or a panic poisons the store, and both stop touching the disk once the
//! store is poisoned, whoever poisoned it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use larder_index::Index;
use larder_log::Log;
use larder_space::SpaceManager;
use parking_lot::{Condvar, Mutex};

use super::health::{self, Poisoner, Reaction, ThreadHealth, ThreadState, ThreadStatus};
use crate::error::CheckpointError;

/// The checkpointer thread's name.
pub(crate) const CHECKPOINT_THREAD: &str = "larder-checkpoint";
/// The spare-container thread's name.
pub(crate) const SPARES_THREAD: &str = "larder-spares";

/// How often the thread looks even without being woken: index flushes
/// triggered by a full memtable also let the log reuse segments.
const POLL: Duration = Duration::from_millis(200);

#[derive(Default)]
struct Flags {
    wanted: bool,
    stop: bool,
}

/// Wakes the checkpointer; shared with the log's hook.
#[derive(Default)]
pub(crate) struct Signal {
    flags: Mutex<Flags>,
    cond: Condvar,
}

impl Signal {
    pub(crate) fn wake(&self) {
        self.flags.lock().wanted = true;
        self.cond.notify_all();
    }

    fn stop(&self) {
        self.flags.lock().stop = true;
        self.cond.notify_all();
    }

    /// Waits `wait` unless stopped first; returns whether it was stopped.
    fn sleep(&self, wait: Duration) -> bool {
        let deadline = std::time::Instant::now() + wait;
        let mut f = self.flags.lock();
        while !f.stop && !self.cond.wait_until(&mut f, deadline).timed_out() {}
        f.stop
    }
}

/// The running checkpointer.
pub(crate) struct Checkpointer {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
    /// Keeps spare containers ready, zero-filling them paced, on a thread
    /// of its own: a gigabyte of zeros takes seconds, which the
    /// checkpoints must not wait for, and at full speed it made durable
    /// commits queue behind it (puts stalled up to 200 ms).
    spares: Option<JoinHandle<()>>,
    /// Stops the spare thread, and a zero-fill it is in.
    stop_spares: Arc<AtomicBool>,
    /// The checkpoint thread's state, then the spare thread's.
    statuses: [Arc<ThreadStatus>; 2],
}

/// Share of a container that may wait to be freed before the checkpointer
/// flushes the index for it (see [`frees_wait_for_checkpoint`]).
const PENDING_FREE_SHARE: u64 = 4;
/// Least time between two checkpoints taken for space.
const SPACE_CHECKPOINT_EVERY: Duration = Duration::from_secs(1);
/// Longest freed space waits for a checkpoint when less than
/// [`PENDING_FREE_SHARE`] of it waits: a store that goes quiet after
/// deletes would otherwise keep their space (neither reusable nor given
/// back to the file system) until the log next needs a checkpoint.
const PENDING_FREE_LONGEST_WAIT: Duration = Duration::from_secs(5);

/// Whether enough freed space waits for a checkpoint (frees become
/// reusable only once the index covers the transaction that made them)
/// that one should be taken now: checkpoints otherwise come when the log
/// needs room, and under churn (files written and deleted) allocations
/// would run into the spare container and a new one be zero-filled for
/// space that is already free. Measured: the file-server mix left 567 MB
/// pending through its run.
///
/// Of the container space there is, when containers are still growing: a
/// small store on a small file system frees all it has long before a
/// quarter of a whole container waits.
fn frees_wait_for_checkpoint(stats: &larder_space::SpaceStats, container_bytes: u64) -> bool {
    let space = container_bytes.min(stats.bytes_total);
    stats.bytes_pending_free >= (space / PENDING_FREE_SHARE).max(larder_space::BLOCK_BYTES)
}

/// Flushes the index if the log needs room, then records what the index
/// covers.
pub(crate) fn checkpoint_once(
    index: &Index,
    log: &Log,
    space: &SpaceManager,
    force_flush: bool,
) -> Result<(), CheckpointError> {
    if force_flush || log.needs_checkpoint() {
        index.flush().map_err(CheckpointError::IndexFlush)?;
    }
    // IMPORTANT: the index's flush hook keeps its durable sequence number
    // at or below the log's durable LSN; the `min` guards that, since the
    // log refuses a checkpoint past its durable LSN.
    let covered = index.durable_seq().min(log.durable_lsn());
    log.checkpoint(covered).map_err(CheckpointError::Log)?;
    // Extents freed by transactions the index now covers may be reused.
    space.set_durable_lsn(covered);
    Ok(())
}

/// What one round of the checkpointer failed at.
#[derive(Debug)]
enum RoundError {
    Checkpoint(CheckpointError),
    Punch(larder_space::SpaceError),
}

impl RoundError {
    fn reaction(&self) -> Reaction {
        match self {
            RoundError::Checkpoint(e) => health::checkpoint_reaction(e),
            RoundError::Punch(e) => health::space_reaction(e),
        }
    }
}

impl std::fmt::Display for RoundError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RoundError::Checkpoint(e) => write!(f, "checkpoint: {e}"),
            RoundError::Punch(e) => write!(f, "hole punching: {e}"),
        }
    }
}

/// Counts a thread's failed tries and decides what the next failure does.
#[derive(Default)]
struct Retries {
    /// Failed tries in a row.
    attempt: u32,
}

impl Retries {
    /// After a failure: `Some(backoff)` to try again, `None` to give up.
    fn next(&mut self, reaction: Reaction) -> Option<Duration> {
        self.attempt += 1;
        match reaction {
            Reaction::RetryWhileItLasts => Some(health::backoff(self.attempt)),
            Reaction::RetryBriefly if self.attempt <= health::MAX_BRIEF_RETRIES => Some(health::backoff(self.attempt)),
            Reaction::RetryBriefly | Reaction::Poison => None,
        }
    }
}

/// What a failure leaves a thread to do: `Some(wait)` to try again after
/// `wait`, `None` to end (the store is poisoned, by this failure or an
/// earlier one).
fn after_failure(
    status: &ThreadStatus,
    poisoner: &Poisoner,
    retries: &mut Retries,
    reaction: Reaction,
    error: String,
) -> Option<Duration> {
    // Poisoned meanwhile (this failure, say a failed sync, latched it, or
    // another thread's did): no retry may touch the disk again.
    let latch = &poisoner.latch;
    if latch.is_poisoned() {
        // A failed sync latched without poisoning the log: waiters on the
        // log must wake too.
        poisoner.poison(latch.poison_cause().unwrap_or_default());
        let first_is_ours = latch.poisoned_by().as_deref() == Some(status.name().as_str());
        let state = if first_is_ours { ThreadState::Failed } else { ThreadState::Stopped };
        status.end(state, Some(error));
        return None;
    }
    match retries.next(reaction) {
        Some(wait) => {
            tracing::warn!(thread = %status.name(), error = %error, ?wait, "background work failed; retrying");
            status.retrying(error);
            Some(wait)
        }
        None => {
            tracing::error!(thread = %status.name(), error = %error, "background work failed for good");
            health::fail(status, poisoner, error);
            None
        }
    }
}

/// Ends a thread that found the store poisoned before it started a round
/// (and poisons the log, should the first failure have missed it, so
/// appenders waiting for room wake).
fn stop_if_poisoned(status: &ThreadStatus, poisoner: &Poisoner) -> bool {
    if let Some(cause) = poisoner.latch.poison_cause() {
        poisoner.log.poison(cause);
        status.end(ThreadState::Stopped, None);
        return true;
    }
    false
}

/// What the checkpointer's threads share.
pub(crate) struct Parts {
    pub(crate) index: Arc<Index>,
    pub(crate) space: Arc<SpaceManager>,
    /// Poisons the store (and holds its log).
    pub(crate) poisoner: Poisoner,
}

impl Checkpointer {
    pub(crate) fn start(signal: Arc<Signal>, parts: Parts) -> std::io::Result<Checkpointer> {
        let checkpoint_status = Arc::new(ThreadStatus::new(CHECKPOINT_THREAD));
        let spares_status = Arc::new(ThreadStatus::new(SPARES_THREAD));
        let s = signal.clone();
        let status = checkpoint_status.clone();
        let spare_space = parts.space.clone();
        let spare_poisoner = parts.poisoner.clone();
        let thread = std::thread::Builder::new()
            .name(CHECKPOINT_THREAD.into())
            .spawn(move || health::run_guarded(&status, &parts.poisoner, || checkpoint_loop(&s, &parts, &status)))?;
        let stop_spares = Arc::new(AtomicBool::new(false));
        let stop = stop_spares.clone();
        let status = spares_status.clone();
        let spares = std::thread::Builder::new().name(SPARES_THREAD.into()).spawn(move || {
            health::run_guarded(&status, &spare_poisoner, || spares_loop(&stop, &spare_space, &spare_poisoner, &status))
        });
        let mut checkpointer = Checkpointer {
            signal,
            thread: Some(thread),
            spares: None,
            stop_spares,
            statuses: [checkpoint_status, spares_status],
        };
        match spares {
            Ok(t) => checkpointer.spares = Some(t),
            // Not left running for a store that failed to open.
            Err(e) => {
                checkpointer.stop();
                return Err(e);
            }
        }
        Ok(checkpointer)
    }

    /// The threads' states.
    pub(crate) fn health(&self) -> Vec<ThreadHealth> {
        self.statuses.iter().map(|s| s.snapshot()).collect()
    }

    pub(crate) fn stop(&mut self) {
        self.signal.stop();
        self.stop_spares.store(true, Ordering::Relaxed);
        if let Some(t) = self.spares.take() {
            t.thread().unpark();
            join(t, &self.statuses[1]);
        }
        if let Some(t) = self.thread.take() {
            join(t, &self.statuses[0]);
        }
    }
}

/// Joins a thread; its panic was caught and reported by `run_guarded`, so
/// a join error here can only be a panic while reporting, logged all the
/// same.
fn join(thread: JoinHandle<()>, status: &ThreadStatus) {
    if thread.join().is_err() {
        tracing::error!(thread = %status.name(), "background thread panicked while reporting a failure");
        status.end(ThreadState::Failed, Some("panicked".into()));
    }
    status.end(ThreadState::Stopped, None);
}

/// The checkpointer's thread: waits to be woken (or [`POLL`]), then
/// checkpoints if the log or freed space asks for it and punches freed
/// space.
fn checkpoint_loop(signal: &Signal, parts: &Parts, status: &ThreadStatus) {
    let Parts { index, space, poisoner } = parts;
    let log = &poisoner.log;
    // When a checkpoint for space was last taken: at most one a second,
    // so frees held back by an old reader (not by the index) cost a
    // small flush a second, not one per poll.
    let mut for_space_at: Option<std::time::Instant> = None;
    // Since when some freed space has waited for a checkpoint.
    let mut pending_since: Option<std::time::Instant> = None;
    let mut retries = Retries::default();
    // A failed round is tried again whole, its flush forced.
    let mut retry_wanted = false;
    loop {
        let wanted = {
            let mut f = signal.flags.lock();
            if !f.wanted && !f.stop {
                signal.cond.wait_for(&mut f, POLL);
            }
            if f.stop {
                return;
            }
            std::mem::take(&mut f.wanted) || std::mem::take(&mut retry_wanted)
        };
        if stop_if_poisoned(status, poisoner) {
            return;
        }
        let stats = space.stats();
        let now = std::time::Instant::now();
        pending_since = (stats.bytes_pending_free > 0).then(|| pending_since.unwrap_or(now));
        let waited_long = pending_since.is_some_and(|t| now.duration_since(t) >= PENDING_FREE_LONGEST_WAIT);
        let for_space = (frees_wait_for_checkpoint(&stats, space.options().container_bytes) || waited_long)
            && for_space_at.is_none_or(|t| t.elapsed() >= SPACE_CHECKPOINT_EVERY);
        if for_space {
            for_space_at = Some(now);
            // Frees an old reader still holds wait another while.
            pending_since = None;
        }
        let round = checkpoint_once(index, log, space, wanted || for_space)
            .map_err(RoundError::Checkpoint)
            // Hole punching rides on the same thread (coalesced and
            // rate-limited by the space manager).
            .and_then(|()| space.punch_some(std::time::Instant::now()).map_err(RoundError::Punch));
        match round {
            Ok(_) => {
                retries = Retries::default();
                status.ok();
            }
            Err(e) => match after_failure(status, poisoner, &mut retries, e.reaction(), e.to_string()) {
                Some(wait) => {
                    retry_wanted = true;
                    if signal.sleep(wait) {
                        return;
                    }
                }
                None => return,
            },
        }
    }
}

/// The spares thread: keeps spare containers ready, paced.
fn spares_loop(stop: &AtomicBool, space: &SpaceManager, poisoner: &Poisoner, status: &ThreadStatus) {
    let mut retries = Retries::default();
    while !stop.load(Ordering::Relaxed) {
        if stop_if_poisoned(status, poisoner) {
            return;
        }
        let mut wait = POLL;
        match space.ensure_spares_in_background(stop) {
            Ok(_) | Err(larder_space::SpaceError::Stopped) => {
                retries = Retries::default();
                status.ok();
            }
            // A full disk is retried (the next allocation that needs a
            // container also makes one itself, and reports it).
            Err(e) => match after_failure(status, poisoner, &mut retries, health::space_reaction(&e), e.to_string()) {
                Some(backoff) => wait = wait.max(backoff),
                None => return,
            },
        }
        std::thread::park_timeout(wait);
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarter_container_of_pending_frees_asks_for_a_checkpoint() {
        let mut s = larder_space::SpaceStats::default();
        let gib = 1u64 << 30;
        s.bytes_total = 4 * gib;
        assert!(!frees_wait_for_checkpoint(&s, gib));
        s.bytes_pending_free = gib / 4 - 4096;
        assert!(!frees_wait_for_checkpoint(&s, gib));
        s.bytes_pending_free = gib / 4;
        assert!(frees_wait_for_checkpoint(&s, gib));
        // Tiny containers: at least a block must wait.
        s.bytes_pending_free = 0;
        assert!(!frees_wait_for_checkpoint(&s, 8192));
        s.bytes_pending_free = 4096;
        assert!(frees_wait_for_checkpoint(&s, 8192));
    }

    #[test]
    fn a_quarter_of_growing_containers_asks_for_a_checkpoint() {
        let mut s = larder_space::SpaceStats::default();
        s.bytes_total = 200 << 20;
        s.bytes_pending_free = 50 << 20;
        assert!(frees_wait_for_checkpoint(&s, 1 << 30), "a quarter of a 200 MiB store freed waits");
        s.bytes_pending_free = (50 << 20) - 4096;
        assert!(!frees_wait_for_checkpoint(&s, 1 << 30));
    }
}
