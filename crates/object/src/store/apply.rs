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
//! rule 1). So one lock, the turn, is held from a record's append (which
//! assigns its LSN) until its batch is in the index: LSNs are assigned in
//! the order the turn is taken, and every batch enters right after its
//! predecessor. The turn is held for a memtable insert, a few
//! microseconds. (Before, appenders took LSNs under the log's lock and
//! then raced to apply, each waiting, parked, for the batches before its
//! own: with 8 threads on 2 cores a thread preempted between the two held
//! up every later one, and those waits were two thirds of the file-server
//! mix's context switches.)

use std::sync::atomic::{AtomicBool, Ordering};

use larder_index::{Index, WriteBatch};
use larder_log::{Dependency, Log};
use parking_lot::Mutex;

use super::cache::MetaCache;
use crate::error::{ObjectError, Result};

/// Hands out turns to append and apply batches in LSN order.
pub(crate) struct ApplyOrder {
    /// Held from an append to its batch being in the index.
    turn: Mutex<()>,
    /// Why an earlier batch could not be applied, if one could not: the
    /// index then lacks a record the log holds, so nothing more is applied
    /// and no flush may declare anything durable. A lock of its own: the
    /// index's hook reads it from inside an apply (an inline flush).
    failed: Mutex<Option<String>>,
    /// Whether the index may hold an extended attribute: set at open when
    /// its xattr map is not empty, and before any batch that puts one
    /// enters the index; never cleared while open. Every batch after open
    /// enters through [`ApplyOrder::apply_one`], so while this is false no
    /// object has an attribute and a delete need not look for any (the
    /// range scan that found none was a tenth of an unlink in the file
    /// server's profile).
    xattrs: AtomicBool,
}

impl ApplyOrder {
    /// An order for an index that holds an extended attribute if `xattrs`.
    pub(crate) fn new(xattrs: bool) -> ApplyOrder {
        ApplyOrder { turn: Mutex::new(()), failed: Mutex::new(None), xattrs: AtomicBool::new(xattrs) }
    }

    /// Whether any object may have an extended attribute in the index (or
    /// about to enter it: a batch marks this before it goes in).
    pub(crate) fn xattrs_may_exist(&self) -> bool {
        self.xattrs.load(Ordering::Acquire)
    }

    /// Marks that an extended attribute may exist from now on.
    pub(crate) fn note_xattrs(&self) {
        self.xattrs.store(true, Ordering::Release);
    }

    /// Appends `record` (with `deps`) to `log` and applies `batch`, the
    /// batch it carries, to `index` under its LSN; returns the LSN. A
    /// failure to apply stops the log: the record may become durable and
    /// would be replayed on reopen, but this process's index lacks it.
    pub(crate) fn append_and_apply(
        &self,
        log: &Log,
        index: &Index,
        cache: &MetaCache,
        (record, deps): (Vec<u8>, Vec<Dependency>),
        batch: &WriteBatch,
    ) -> Result<u64> {
        let _turn = self.turn.lock();
        self.append_and_apply_in_turn(log, index, cache, (record, deps), batch)
    }

    /// [`ApplyOrder::append_and_apply`] for each of `items` in turn, in
    /// one turn; each one's result. A failure stops only its own item: a
    /// failed apply has poisoned the log, so the later ones fail too.
    pub(crate) fn append_and_apply_all<'b>(
        &self,
        log: &Log,
        index: &Index,
        cache: &MetaCache,
        items: impl IntoIterator<Item = ((Vec<u8>, Vec<Dependency>), &'b WriteBatch)>,
    ) -> Vec<Result<u64>> {
        let _turn = self.turn.lock();
        items
            .into_iter()
            .map(|(record, batch)| self.append_and_apply_in_turn(log, index, cache, record, batch))
            .collect()
    }

    /// Appends and applies one record; the caller holds the turn.
    fn append_and_apply_in_turn(
        &self,
        log: &Log,
        index: &Index,
        cache: &MetaCache,
        (record, deps): (Vec<u8>, Vec<Dependency>),
        batch: &WriteBatch,
    ) -> Result<u64> {
        self.refuse_if_stopped(index)?;
        let lsn = log.append_buffered_with(record, deps)?;
        self.apply_one(log, cache, lsn, batch, || index.write(lsn, batch))?;
        Ok(lsn)
    }

    /// Stops every later apply (and the log) with `why`, unless an
    /// earlier failure already did.
    pub(crate) fn fail(&self, log: &Log, why: String) {
        let mut f = self.failed.lock();
        if f.is_none() {
            log.poison(why.clone());
            *f = Some(why);
        }
    }

    /// Applies `batch`, appended as `lsn` by a caller that holds off every
    /// other appender (the store's append gate, exclusively), by `enter`
    /// (an ingest installs its run).
    pub(crate) fn apply_with(
        &self,
        log: &Log,
        cache: &MetaCache,
        lsn: u64,
        batch: &WriteBatch,
        enter: impl FnOnce() -> larder_index::Result<()>,
    ) -> Result<()> {
        let _turn = self.turn.lock();
        self.apply_one(log, cache, lsn, batch, enter)
    }

    /// Puts one batch into the index; a failure (or a panic) poisons the
    /// log and every later apply.
    fn apply_one(
        &self,
        log: &Log,
        cache: &MetaCache,
        lsn: u64,
        batch: &WriteBatch,
        enter: impl FnOnce() -> larder_index::Result<()>,
    ) -> Result<()> {
        self.check().map_err(|why| ObjectError::ApplyFailed { lsn, why })?;
        if !self.xattrs.load(Ordering::Relaxed) && puts_xattrs(batch) {
            self.note_xattrs();
        }
        let guard = PanicGuard { order: self };
        cache.invalidate(batch);
        let done = enter();
        cache.settle(done.is_ok().then_some(batch));
        std::mem::forget(guard);
        if let Err(e) = done {
            let why = format!("record {lsn} could not enter the index: {e}");
            log.poison(why.clone());
            *self.failed.lock() = Some(why.clone());
            return Err(ObjectError::ApplyFailed { lsn, why });
        }
        Ok(())
    }

    /// Refuses a new record, before anything is logged, once a batch could
    /// not be applied or the index stopped taking writes (a background
    /// flush or merge failed): appended anyway, it could become durable
    /// after its caller was told it failed.
    pub(crate) fn refuse_if_stopped(&self, index: &Index) -> Result<()> {
        if let Some(why) = index.poisoned() {
            return Err(ObjectError::Stopped { why: format!("the index stopped: {why}") });
        }
        self.check().map_err(|why| ObjectError::Stopped { why })
    }

    /// Err if a batch could not be applied (see [`ApplyOrder::failed`]).
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        match &*self.failed.lock() {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }
}

/// Whether `batch` puts (or merges into) a key of the xattr map.
fn puts_xattrs(batch: &WriteBatch) -> bool {
    batch.writes_first_byte(crate::meta::Map::Xattr.prefix())
}

/// Marks the order failed if a thread panics while applying a batch: the
/// batch may be partly in the index, so nothing later may enter.
struct PanicGuard<'a> {
    order: &'a ApplyOrder,
}

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        let mut f = self.order.failed.lock();
        if f.is_none() {
            *f = Some("a thread panicked while applying a batch to the index".into());
        }
    }
}
