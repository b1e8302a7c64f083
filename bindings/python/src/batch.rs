//! `larder.Batch`: puts and deletes of one bucket committed atomically.

use std::sync::Arc;

use larder_kv::KvBatch;
use pyo3::prelude::*;

use crate::convert::bytes_of;
use crate::pending::Pending;
use crate::store::StoreShared;

/// The bucket a batch made by `Bucket.batch` commits to.
struct Target {
    store: Arc<StoreShared>,
    bucket: Vec<u8>,
    durable: Option<bool>,
}

/// Puts and deletes applied in order, all or none. Made by `Batch()` and
/// applied with `Bucket.write`, or made by `Bucket.batch()` and committed
/// by `commit()` or at the end of a `with` block (discarded if the block
/// raised).
#[pyclass(module = "larder", frozen)]
pub struct Batch {
    target: Option<Target>,
    pending: Pending<KvBatch>,
}

impl Batch {
    pub(crate) fn bound(store: Arc<StoreShared>, bucket: Vec<u8>, durable: Option<bool>) -> Batch {
        Batch { target: Some(Target { store, bucket, durable }), pending: Pending::default() }
    }

    /// A copy of the operations, for `Bucket.write`.
    pub(crate) fn operations(&self) -> PyResult<KvBatch> {
        self.pending.copy()
    }
}

#[pymethods]
impl Batch {
    /// An empty batch, applied with `Bucket.write`.
    #[new]
    fn new() -> Batch {
        Batch { target: None, pending: Pending::default() }
    }

    /// Adds a put of `value` under `key`.
    fn put(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = bytes_of(key, "key")?;
        let value = bytes_of(value, "value")?.into_owned();
        self.pending.with_open(|b| {
            b.put(key, value);
        })
    }

    /// Adds a delete of `key`.
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = bytes_of(key, "key")?;
        self.pending.with_open(|b| {
            b.delete(key);
        })
    }

    /// Commits a batch made by `Bucket.batch()`: every operation or none.
    /// It cannot be used again, even if the commit failed.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        let Some(target) = &self.target else {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "this batch belongs to no bucket; apply it with Bucket.write(batch)",
            ));
        };
        let operations = self.pending.take()?;
        let durability = target.store.durability(target.durable);
        target.store.with(py, |kv| kv.write_batch(&target.bucket, &operations, durability))
    }

    /// Drops every operation; a bound batch cannot be used again.
    fn discard(&self) {
        self.pending.discard(self.target.is_some());
    }

    fn __len__(&self) -> usize {
        self.pending.len()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// A bound batch is committed if the block ended normally, discarded
    /// if it raised; an unbound one is left as it is.
    #[pyo3(signature = (kind=None, _value=None, _traceback=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.pending.end_block(self.target.is_some(), kind, || self.commit(py))
    }

    fn __repr__(&self) -> String {
        format!("<larder.Batch of {} operations>", self.__len__())
    }
}
