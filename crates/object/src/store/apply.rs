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
//! then race: each waits here for its turn.

use larder_index::{Index, WriteBatch};
use larder_log::Log;
use parking_lot::{Condvar, Mutex};

use super::cache::MetaCache;
use crate::error::{ObjectError, Result};

/// Hands out turns to apply batches in LSN order.
pub(crate) struct ApplyOrder {
    /// The LSN whose batch is applied next.
    next: Mutex<u64>,
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
        ApplyOrder { next: Mutex::new(last_lsn + 1), cond: Condvar::new(), failed: Mutex::new(None) }
    }

    /// Applies `batch`, appended to `log` as `lsn`, to `index` once every
    /// earlier LSN has been applied. A failure stops the log: the record
    /// may become durable and would be replayed on reopen, but this
    /// process's index lacks it.
    pub(crate) fn apply(
        &self,
        log: &Log,
        index: &Index,
        cache: &MetaCache,
        lsn: u64,
        batch: &WriteBatch,
    ) -> Result<()> {
        self.apply_with(log, cache, lsn, batch, || index.write(lsn, batch))
    }

    /// Like [`ApplyOrder::apply`], with `enter` putting `batch` into the
    /// index (an ingest installs its run).
    pub(crate) fn apply_with(
        &self,
        log: &Log,
        cache: &MetaCache,
        lsn: u64,
        batch: &WriteBatch,
        enter: impl FnOnce() -> larder_index::Result<()>,
    ) -> Result<()> {
        let mut next = self.next.lock();
        while *next < lsn {
            self.cond.wait(&mut next);
        }
        // Every later appender waits for this one: it must advance even if
        // the write below panics.
        let _advance = Advance { order: self, next };
        self.check().map_err(|why| ObjectError::ApplyFailed { lsn, why })?;
        cache.invalidate(batch);
        let done = enter();
        cache.settle();
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

/// Moves the turn on when dropped.
struct Advance<'a> {
    order: &'a ApplyOrder,
    next: parking_lot::MutexGuard<'a, u64>,
}

impl Drop for Advance<'_> {
    fn drop(&mut self) {
        *self.next += 1;
        self.order.cond.notify_all();
    }
}
