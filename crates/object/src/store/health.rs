//! What a store reports about its failures and background threads, and the
//! rules its own threads follow on an error: which errors are worth a
//! retry, how long to wait between tries, and what a panic does.
//!
//! A store has one poison latch (its `CheckedStorage`): the first failed
//! sync or write-back of any of its files, or a thread that failed for
//! good, latches it, and from then on every write is refused with that
//! first cause while reads go on.

use std::sync::Arc;
use std::time::Duration;

use larder_io::{CheckedStorage, IoError};
use larder_log::Log;
use parking_lot::Mutex;

use crate::error::CheckpointError;

/// What a background thread is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadState {
    /// Working or waiting for work.
    Running,
    /// Its last try failed with an error that may pass (a full disk, an
    /// interrupted call); it tries again after a backoff.
    Retrying,
    /// It has ended: the store is closing, or it is poisoned by another
    /// thread's failure and so writes nothing more.
    Stopped,
    /// It failed for good (or panicked), which poisoned the store.
    Failed,
}

impl std::fmt::Display for ThreadState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ThreadState::Running => "running",
            ThreadState::Retrying => "retrying",
            ThreadState::Stopped => "stopped",
            ThreadState::Failed => "failed",
        })
    }
}

/// One background thread's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadHealth {
    /// The thread's name (`larder-checkpoint`, `larder-spares`,
    /// `larder-log-flush`, `larder-flush`, `larder-merge-N`).
    pub name: String,
    /// What it is doing.
    pub state: ThreadState,
    /// The last error it met, if any (kept after a successful retry).
    pub last_error: Option<String>,
    /// Tries that failed with an error worth retrying, since this open.
    pub retries: u64,
}

/// A store's failure state and its background threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreHealth {
    /// The first failure, once the store refuses writes.
    pub poisoned: Option<String>,
    /// Every background thread of the store and of its index and log.
    pub threads: Vec<ThreadHealth>,
}

/// The state a thread of the store's own keeps for [`StoreHealth`].
#[derive(Debug)]
pub(crate) struct ThreadStatus {
    health: Mutex<ThreadHealth>,
}

impl ThreadStatus {
    pub(crate) fn new(name: &str) -> ThreadStatus {
        let health = ThreadHealth { name: name.to_string(), state: ThreadState::Running, last_error: None, retries: 0 };
        ThreadStatus { health: Mutex::new(health) }
    }

    pub(crate) fn name(&self) -> String {
        self.health.lock().name.clone()
    }

    pub(crate) fn snapshot(&self) -> ThreadHealth {
        self.health.lock().clone()
    }

    /// A try succeeded (a retrying thread is running again).
    pub(crate) fn ok(&self) {
        let mut h = self.health.lock();
        if h.state == ThreadState::Retrying {
            h.state = ThreadState::Running;
        }
    }

    pub(crate) fn retrying(&self, error: String) {
        let mut h = self.health.lock();
        h.state = ThreadState::Retrying;
        h.last_error = Some(error);
        h.retries += 1;
    }

    /// Ends the thread; a failure stays a failure.
    pub(crate) fn end(&self, state: ThreadState, error: Option<String>) {
        let mut h = self.health.lock();
        if h.state != ThreadState::Failed {
            h.state = state;
        }
        if error.is_some() {
            h.last_error = error;
        }
    }
}

/// What a background thread does about an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reaction {
    /// Try again after a backoff, for as long as the error lasts: the disk
    /// is full (ENOSPC, or the store's own space limit). Space comes back
    /// when deletes and punches free it, and a full disk must not stop a
    /// store that can still delete.
    RetryWhileItLasts,
    /// Try again after a backoff, at most [`MAX_BRIEF_RETRIES`] times in a
    /// row: EINTR, EAGAIN, ENOMEM, EBUSY, which say "not now", not "never".
    RetryBriefly,
    /// Give up and poison the store: anything else (EIO, a failed sync,
    /// corruption, a broken invariant), which a retry would not cure or,
    /// after a failed sync, would make look cured while pages were lost.
    Poison,
}

/// Tries in a row an error of [`Reaction::RetryBriefly`] gets before it
/// poisons the store.
pub(crate) const MAX_BRIEF_RETRIES: u32 = 8;
/// The first backoff.
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
/// The longest backoff.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The backoff before try `attempt` (1-based): doubling from 10 ms, at
/// most 2 s.
pub(crate) fn backoff(attempt: u32) -> Duration {
    FIRST_BACKOFF.saturating_mul(1 << attempt.saturating_sub(1).min(16)).min(MAX_BACKOFF)
}

fn io_reaction(e: &IoError) -> Reaction {
    match e {
        IoError::NoSpace { .. } => Reaction::RetryWhileItLasts,
        IoError::Os { source, .. } if matches!(source.raw_os_error(), Some(4 | 11 | 12 | 16)) => Reaction::RetryBriefly,
        _ => Reaction::Poison,
    }
}

fn index_reaction(e: &larder_index::IndexError) -> Reaction {
    match e {
        larder_index::IndexError::Io(io) => io_reaction(io),
        _ => Reaction::Poison,
    }
}

fn log_reaction(e: &larder_log::LogError) -> Reaction {
    match e {
        larder_log::LogError::Io(io) => io_reaction(io),
        _ => Reaction::Poison,
    }
}

/// The reaction to a space-management error.
pub(crate) fn space_reaction(e: &larder_space::SpaceError) -> Reaction {
    match e {
        // The store's own container limit, or the file system at its
        // reserve: both pass when space is freed.
        _ if e.is_no_space() => Reaction::RetryWhileItLasts,
        larder_space::SpaceError::Io(io) => io_reaction(io),
        _ => Reaction::Poison,
    }
}

/// The reaction to a checkpoint's error.
pub(crate) fn checkpoint_reaction(e: &CheckpointError) -> Reaction {
    match e {
        CheckpointError::IndexFlush(e) => index_reaction(e),
        CheckpointError::Log(e) => log_reaction(e),
    }
}

/// The text of a panic's payload.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

/// Poisons a store from one of its own threads.
#[derive(Clone)]
pub(crate) struct Poisoner {
    /// The store's latch.
    pub(crate) latch: CheckedStorage,
    /// Poisoned too, so appenders waiting for log room (which a dead
    /// checkpointer would never make) wake with the cause at once.
    pub(crate) log: Arc<Log>,
}

impl Poisoner {
    pub(crate) fn poison(&self, cause: String) {
        poison(&self.latch, &self.log, cause);
    }
}

/// Poisons a store: its latch, so every later write fails with the first
/// cause, and its log, so appenders waiting for room wake at once.
pub(crate) fn poison(latch: &CheckedStorage, log: &Log, cause: String) {
    latch.poison(cause.clone());
    log.poison(cause);
}

/// Runs a background thread's body so that a panic cannot end it
/// silently: the panic poisons the store (naming the thread and the panic
/// message) and marks the thread failed, and the next write reports it.
/// The panic is caught rather than seen by a drop guard so its message
/// reaches the cause.
pub(crate) fn run_guarded(status: &ThreadStatus, poisoner: &Poisoner, body: impl FnOnce()) {
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        let cause = format!("{} panicked: {}", status.name(), panic_text(&*payload));
        // The thread shows as failed before the store as poisoned, so
        // whoever sees the poison in `health()` sees its thread too.
        status.end(ThreadState::Failed, Some(cause.clone()));
        poisoner.poison(cause);
    }
}

/// Poisons the store for a thread that failed for good (the thread marked
/// failed first, as in [`run_guarded`]).
pub(crate) fn fail(status: &ThreadStatus, poisoner: &Poisoner, error: String) {
    let cause = format!("{} failed: {error}", status.name());
    status.end(ThreadState::Failed, Some(error));
    poisoner.poison(cause);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_bounded() {
        assert_eq!(backoff(1), Duration::from_millis(10));
        assert_eq!(backoff(2), Duration::from_millis(20));
        assert_eq!(backoff(5), Duration::from_millis(160));
        assert_eq!(backoff(100), MAX_BACKOFF);
    }

    #[test]
    fn a_full_disk_is_retried_and_eio_poisons() {
        let path = std::path::PathBuf::from("/s/data/c");
        assert_eq!(io_reaction(&IoError::NoSpace { path: path.clone() }), Reaction::RetryWhileItLasts);
        let os =
            |errno| IoError::Os { op: "write", path: path.clone(), source: std::io::Error::from_raw_os_error(errno) };
        assert_eq!(io_reaction(&os(4)), Reaction::RetryBriefly);
        assert_eq!(io_reaction(&os(11)), Reaction::RetryBriefly);
        assert_eq!(io_reaction(&os(5)), Reaction::Poison);
        assert_eq!(io_reaction(&IoError::Poisoned { cause: "x".into() }), Reaction::Poison);
    }
}
