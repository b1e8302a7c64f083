//! The operations a batch object (`Batch`, `IndexBatch`) gathers before it
//! is written, and whether it was spent.

use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::errors::closed;

/// The batch types of the two engines, as a batch object keeps them.
pub(crate) trait Operations: Clone + Default {
    /// How many operations are gathered.
    fn count(&self) -> usize;
}

impl Operations for larder_kv::KvBatch {
    fn count(&self) -> usize {
        self.len()
    }
}

impl Operations for larder_index::WriteBatch {
    fn count(&self) -> usize {
        self.len()
    }
}

#[derive(Default)]
struct State<B> {
    operations: B,
    /// Committed or discarded: a bound batch is used once.
    spent: bool,
}

/// A batch object's operations; once spent, every use raises `Closed`.
#[derive(Default)]
pub(crate) struct Pending<B> {
    state: Mutex<State<B>>,
}

impl<B: Operations> Pending<B> {
    /// A copy of the operations, for `Bucket.write` and `Index.write`.
    pub(crate) fn copy(&self) -> PyResult<B> {
        self.with_open(|operations| operations.clone())
    }

    /// Applies `change` to the operations unless they were spent.
    pub(crate) fn with_open<T>(&self, change: impl FnOnce(&mut B) -> T) -> PyResult<T> {
        let mut state = self.state.lock();
        if state.spent {
            return Err(closed("batch (committed or discarded)"));
        }
        Ok(change(&mut state.operations))
    }

    /// The operations, to commit: they are spent even if the commit fails.
    pub(crate) fn take(&self) -> PyResult<B> {
        let mut state = self.state.lock();
        if state.spent {
            return Err(closed("batch (committed or discarded)"));
        }
        state.spent = true;
        Ok(std::mem::take(&mut state.operations))
    }

    /// Drops every operation; a bound batch (one with a target to commit
    /// to) is spent by it, an unbound one can be filled again.
    pub(crate) fn discard(&self, bound: bool) {
        let mut state = self.state.lock();
        state.operations = B::default();
        state.spent = bound;
    }

    /// How many operations are gathered.
    pub(crate) fn len(&self) -> usize {
        self.state.lock().operations.count()
    }

    /// The end of a `with` block over a batch: a bound batch is committed
    /// (by `commit`) if the block ended normally, discarded if it raised
    /// (`kind` is the exception's type); an unbound one is left as it is.
    /// The exception, if any, is never suppressed.
    pub(crate) fn end_block(
        &self,
        bound: bool,
        kind: Option<&Bound<'_, PyAny>>,
        commit: impl FnOnce() -> PyResult<()>,
    ) -> PyResult<bool> {
        if !bound {
            return Ok(false);
        }
        if kind.is_some_and(|k| !k.is_none()) {
            self.discard(true);
        } else {
            commit()?;
        }
        Ok(false)
    }
}
