//! `larder.Index`: the standalone ordered index (an index directory), its
//! batches and snapshots.
//!
//! The index keeps no log of its own: writes live in its memtable until a
//! flush writes them into durable runs (`flush()`, `close()`, or the
//! background flusher when a memtable fills). A crash loses what was not
//! flushed, never part of a batch.

use std::ops::Bound as Limit;
use std::path::PathBuf;
use std::sync::{Arc, Weak};

use larder_index::{IndexError, Options, WriteBatch};
use parking_lot::{Mutex, RwLock};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::{bytes_of, optional_bytes_of};
use crate::errors::{closed, index_error};
use crate::index_iter::{IndexIterator, Range};
use crate::pending::Pending;

/// A snapshot's view, dropped when it or its index is closed.
pub(crate) type SnapshotCell = RwLock<Option<larder_index::Snapshot>>;

/// What an index's handles share. Locks are taken only with the GIL
/// released (see `StoreShared`).
pub(crate) struct IndexShared {
    index: RwLock<Option<larder_index::Index>>,
    /// Serializes writes, each taking the next sequence number.
    writer: Mutex<()>,
    /// Open snapshots, closed with the index (each holds its directory).
    snapshots: Mutex<Vec<Weak<SnapshotCell>>>,
    path: PathBuf,
}

impl IndexShared {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        call: impl FnOnce(&larder_index::Index) -> Result<T, IndexError> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let guard = self.index.read();
            let index = guard.as_ref().ok_or_else(|| closed("index"))?;
            call(index).map_err(index_error)
        })
    }

    /// Applies `batch` as the next sequence number.
    fn write(&self, py: Python<'_>, batch: &WriteBatch) -> PyResult<()> {
        self.with(py, |index| {
            let _writer = self.writer.lock();
            index.write(index.last_seq() + 1, batch)
        })
    }

    /// Closes the snapshots, flushes and closes the index, if open.
    fn close(&self) -> Result<(), IndexError> {
        let taken = self.index.write().take();
        for snapshot in self.snapshots.lock().drain(..) {
            if let Some(cell) = snapshot.upgrade() {
                cell.write().take();
            }
        }
        match taken {
            Some(index) => index.close(),
            None => Ok(()),
        }
    }
}

impl Drop for IndexShared {
    /// An index never closed is flushed and closed when its last handle
    /// goes (an error here has no caller to reach).
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// The bounds of a scan from Python's arguments.
fn range_of(
    start: Option<&Bound<'_, PyAny>>,
    end: Option<&Bound<'_, PyAny>>,
    prefix: Option<&Bound<'_, PyAny>>,
    reverse: bool,
) -> PyResult<Range> {
    let start = optional_bytes_of(start, "start")?;
    let end = optional_bytes_of(end, "end")?;
    let prefix = optional_bytes_of(prefix, "prefix")?;
    if prefix.is_some() && (start.is_some() || end.is_some()) {
        return Err(PyValueError::new_err("give a prefix or a range (start, end), not both"));
    }
    Ok(Range { start, end, prefix, forward: !reverse })
}

fn iterator_of(
    range: &Range,
    from: impl FnOnce(Limit<&[u8]>, Limit<&[u8]>, bool) -> Result<larder_index::Iter, IndexError>,
    prefixed: impl FnOnce(&[u8], bool) -> Result<larder_index::Iter, IndexError>,
) -> Result<larder_index::Iter, IndexError> {
    if let Some(prefix) = &range.prefix {
        return prefixed(prefix, range.forward);
    }
    let start = range.start.as_deref().map_or(Limit::Unbounded, Limit::Included);
    let end = range.end.as_deref().map_or(Limit::Unbounded, Limit::Excluded);
    from(start, end, range.forward)
}

/// A persistent, ordered map of byte keys to byte values in a directory,
/// usable without a store. Writes are atomic per call or batch and
/// durable after `flush()` or `close()`.
#[pyclass(module = "larder", frozen)]
pub struct Index {
    shared: Arc<IndexShared>,
}

#[pymethods]
impl Index {
    /// Opens the index in `path`, creating it if the directory is empty or
    /// missing.
    #[new]
    #[pyo3(signature = (path, *, memtable_bytes=None, cache_bytes=None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        memtable_bytes: Option<usize>,
        cache_bytes: Option<usize>,
    ) -> PyResult<Index> {
        let mut options = Options::default();
        if let Some(bytes) = memtable_bytes {
            options.memtable_size_bytes = bytes;
        }
        if let Some(bytes) = cache_bytes {
            options.block_cache_bytes = bytes;
        }
        let index = py
            .detach(|| larder_index::Index::open(Arc::new(larder_io::RealStorage::new()), &path, options))
            .map_err(index_error)?;
        let shared = IndexShared {
            index: RwLock::new(Some(index)),
            writer: Mutex::new(()),
            snapshots: Mutex::new(Vec::new()),
            path,
        };
        Ok(Index { shared: Arc::new(shared) })
    }

    /// The index's directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.shared.path.clone()
    }

    /// Whether the index was closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        py.detach(|| self.shared.index.read().is_none())
    }

    /// The sequence number of the last write (each put, delete or batch
    /// takes one).
    #[getter]
    fn last_seq(&self, py: Python<'_>) -> PyResult<u64> {
        self.shared.with(py, |index| Ok(index.last_seq()))
    }

    /// The sequence number up to which writes are durable.
    #[getter]
    fn durable_seq(&self, py: Python<'_>) -> PyResult<u64> {
        self.shared.with(py, |index| Ok(index.durable_seq()))
    }

    /// Stores `value` under `key`.
    fn put(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut batch = WriteBatch::new();
        batch.put(bytes_of(key, "key")?, bytes_of(value, "value")?);
        self.shared.write(py, &batch)
    }

    /// Removes `key` (nothing happens if it is absent).
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut batch = WriteBatch::new();
        batch.delete(bytes_of(key, "key")?);
        self.shared.write(py, &batch)
    }

    /// Removes every key in `[start, end)`.
    fn delete_range(&self, py: Python<'_>, start: &Bound<'_, PyAny>, end: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range(bytes_of(start, "start")?, bytes_of(end, "end")?);
        self.shared.write(py, &batch)
    }

    /// The value of `key`, or `None`.
    fn get<'py>(&self, py: Python<'py>, key: &Bound<'_, PyAny>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let key = bytes_of(key, "key")?;
        let value = self.shared.with(py, |index| index.get(&key))?;
        Ok(value.map(|v| PyBytes::new(py, &v)))
    }

    /// An iterator of `(key, value)` over `[start, end)` (either open) or
    /// the keys starting with `prefix`, in byte order or, with `reverse`,
    /// backward; it sees the index as it was when the scan began.
    #[pyo3(signature = (start=None, end=None, *, prefix=None, reverse=false))]
    fn scan(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<IndexIterator> {
        let range = range_of(start, end, prefix, reverse)?;
        let iter = self
            .shared
            .with(py, |index| iterator_of(&range, |s, e, f| index.range(s, e, f), |p, f| index.prefix(p, f)))?;
        Ok(IndexIterator::new(iter))
    }

    /// A batch: as a context manager, written at the end of the block
    /// (nothing of it if the block raised).
    fn batch(&self) -> IndexBatch {
        IndexBatch { target: Some(self.shared.clone()), pending: Pending::default() }
    }

    /// Applies `batch` atomically: all of it or none.
    fn write(&self, py: Python<'_>, batch: &IndexBatch) -> PyResult<()> {
        let operations = batch.pending.copy()?;
        self.shared.write(py, &operations)
    }

    /// A consistent view as of now; later writes stay invisible to it.
    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let snapshot = self.shared.with(py, |index| Ok(index.snapshot()))?;
        let cell = Arc::new(RwLock::new(Some(snapshot)));
        let mut open = self.shared.snapshots.lock();
        open.retain(|s| s.strong_count() > 0);
        open.push(Arc::downgrade(&cell));
        Ok(Snapshot { cell })
    }

    /// Makes every write so far durable.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.with(py, |index| index.flush())
    }

    /// Merges every run into one (after a flush).
    fn compact(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.with(py, |index| index.compact_all())
    }

    /// Flushes and closes the index (and its snapshots); later calls raise
    /// `Closed`. Closing twice is allowed.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.shared.close()).map_err(index_error)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (_kind=None, _value=None, _traceback=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let state = if self.closed(py) { "closed" } else { "open" };
        format!("<larder.Index {:?} {state}>", self.shared.path)
    }
}

/// Puts, deletes and range deletes applied in order, all or none: made by
/// `IndexBatch()` and applied with `Index.write`, or made by
/// `Index.batch()` and written by `commit()` or at the end of a `with`
/// block (discarded if the block raised).
#[pyclass(module = "larder", frozen)]
pub struct IndexBatch {
    target: Option<Arc<IndexShared>>,
    pending: Pending<WriteBatch>,
}

#[pymethods]
impl IndexBatch {
    /// An empty batch, applied with `Index.write`.
    #[new]
    fn new() -> IndexBatch {
        IndexBatch { target: None, pending: Pending::default() }
    }

    /// Adds a put of `value` under `key`.
    fn put(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (key, value) = (bytes_of(key, "key")?, bytes_of(value, "value")?);
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

    /// Adds a delete of every key in `[start, end)`.
    fn delete_range(&self, start: &Bound<'_, PyAny>, end: &Bound<'_, PyAny>) -> PyResult<()> {
        let (start, end) = (bytes_of(start, "start")?, bytes_of(end, "end")?);
        self.pending.with_open(|b| {
            b.delete_range(start, end);
        })
    }

    /// Writes a batch made by `Index.batch()`: all of it or none. It cannot
    /// be used again, even if the write failed.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        let Some(target) = &self.target else {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "this batch belongs to no index; apply it with Index.write(batch)",
            ));
        };
        let operations = self.pending.take()?;
        target.write(py, &operations)
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

    /// A bound batch is written if the block ended normally, discarded if
    /// it raised; an unbound one is left as it is.
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
}

/// A fixed view of an index (`Index.snapshot()`); close it (or leave the
/// `with` block) to let the index drop what it keeps alive for it.
#[pyclass(module = "larder", frozen)]
pub struct Snapshot {
    cell: Arc<SnapshotCell>,
}

impl Snapshot {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        call: impl FnOnce(&larder_index::Snapshot) -> Result<T, IndexError> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let guard = self.cell.read();
            let snapshot = guard.as_ref().ok_or_else(|| closed("snapshot"))?;
            call(snapshot).map_err(index_error)
        })
    }
}

#[pymethods]
impl Snapshot {
    /// The sequence number the snapshot sees up to.
    #[getter]
    fn seq(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |s| Ok(s.seq()))
    }

    /// The value of `key` as of the snapshot, or `None`.
    fn get<'py>(&self, py: Python<'py>, key: &Bound<'_, PyAny>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let key = bytes_of(key, "key")?;
        let value = self.with(py, |s| s.get(&key))?;
        Ok(value.map(|v| PyBytes::new(py, &v)))
    }

    /// Like `Index.scan`, as of the snapshot.
    #[pyo3(signature = (start=None, end=None, *, prefix=None, reverse=false))]
    fn scan(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<IndexIterator> {
        let range = range_of(start, end, prefix, reverse)?;
        let iter = self.with(py, |s| iterator_of(&range, |a, b, f| s.range(a, b, f), |p, f| s.prefix(p, f)))?;
        Ok(IndexIterator::new(iter))
    }

    /// Releases the snapshot; later calls raise `Closed`.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.cell.write().take());
    }

    /// Whether the snapshot was closed (by itself or by its index).
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        py.detach(|| self.cell.read().is_none())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (_kind=None, _value=None, _traceback=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.close(py);
        false
    }
}
