//! The writer lock: one write transaction (or catalog change) at a time,
//! and a clear error instead of a deadlock when the thread holding it
//! tries to start another.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

use crate::{Result, TreesError};

/// Hands each thread a distinct nonzero token.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static TOKEN: u64 = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
}

fn my_token() -> u64 {
    TOKEN.with(|t| *t)
}

/// The lock and which thread holds it (0: none).
#[derive(Default)]
pub(crate) struct WriterLock {
    lock: Mutex<()>,
    holder: AtomicU64,
}

/// The lock, held; released on drop.
pub(crate) struct WriterGuard<'a> {
    owner: &'a WriterLock,
    _guard: MutexGuard<'a, ()>,
}

impl WriterLock {
    /// Waits for the lock. Refused with [`TreesError::NestedWrite`] if this
    /// thread holds it already (it would wait for itself forever).
    pub(crate) fn acquire(&self) -> Result<WriterGuard<'_>> {
        let me = my_token();
        // Only this thread stores its own token, so reading it here is
        // exact for this thread whatever others do.
        if self.holder.load(Ordering::Relaxed) == me {
            return Err(TreesError::NestedWrite);
        }
        let guard = self.lock.lock();
        self.holder.store(me, Ordering::Relaxed);
        Ok(WriterGuard { owner: self, _guard: guard })
    }
}

impl Drop for WriterGuard<'_> {
    fn drop(&mut self) {
        // Cleared before the mutex is released (the guard field drops
        // after this body).
        self.owner.holder.store(0, Ordering::Relaxed);
    }
}
