//! The count of open sessions, with a way to wait for it to fall: a
//! session counts from its opening until it is dropped, after it released
//! everything it held, so a count that fell means the store got back
//! what those clients held.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// Open sessions, and a condition signalled whenever one closes.
#[derive(Debug, Default)]
pub(crate) struct ClientCount {
    open: AtomicUsize,
    /// Taken by a waiter while it checks the count and by a closer before
    /// it signals, so a close between the check and the wait is not lost.
    lock: Mutex<()>,
    closed: Condvar,
}

impl ClientCount {
    /// Counts one more session, unless `max` are open.
    pub(crate) fn try_add(&self, max: usize) -> bool {
        self.open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1)).is_ok()
    }

    /// Counts one session less and wakes those waiting.
    pub(crate) fn remove(&self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
        let _held = self.lock.lock();
        self.closed.notify_all();
    }

    /// Sessions open now.
    pub(crate) fn get(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Waits until at most `n` sessions are open, or `timeout` passes;
    /// returns whether the count got there.
    pub(crate) fn wait_at_most(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut held = self.lock.lock();
        while self.get() > n {
            if self.closed.wait_until(&mut held, deadline).timed_out() {
                return self.get() <= n;
            }
        }
        true
    }
}
