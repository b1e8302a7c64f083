//! Futex waits and wakes on words in shared memory, across processes (no
//! FUTEX_PRIVATE_FLAG: the word may be mapped by several processes).

use std::io;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::thread::futex;

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// What was waited for was there without sleeping.
    Ready,
    /// The waiter slept and was woken (or the word changed before it slept).
    Woken,
    /// The timeout passed.
    TimedOut,
}

/// Sleeps while `word` holds `expected`, for at most `timeout`. Returns
/// whether the timeout passed; a signal or a changed word returns early.
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Duration) -> io::Result<bool> {
    let timespec = futex::Timespec {
        tv_sec: futex::Secs::try_from(timeout.as_secs()).unwrap_or(futex::Secs::MAX),
        tv_nsec: futex::Nsecs::from(timeout.subsec_nanos()),
    };
    match futex::wait(word, futex::Flags::empty(), expected, Some(&timespec)) {
        Ok(()) | Err(Errno::AGAIN) | Err(Errno::INTR) => Ok(false),
        Err(Errno::TIMEDOUT) => Ok(true),
        Err(e) => Err(e.into()),
    }
}

/// Wakes every waiter on `word`.
pub(crate) fn wake(word: &AtomicU32) -> io::Result<()> {
    futex::wake(word, futex::Flags::empty(), i32::MAX as u32).map(|_| ()).map_err(Into::into)
}

/// A point in time a whole operation must end by (a peer that sends one
/// byte at a time does not restart the clock).
#[derive(Clone, Copy)]
pub(crate) struct Deadline(Instant);

impl Deadline {
    /// `timeout` from now; timeouts beyond a day count as a day.
    pub(crate) fn after(timeout: Duration) -> Deadline {
        Deadline(Instant::now() + timeout.min(Duration::from_secs(86_400)))
    }

    /// Time left, or `None` once passed.
    pub(crate) fn remaining(&self) -> Option<Duration> {
        let left = self.0.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }
}
