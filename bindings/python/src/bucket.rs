//! `larder.Bucket`: the KV calls on one bucket of a store.

use std::sync::Arc;

use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::batch::Batch;
use crate::convert::{bytes_of, optional_bytes_of};
use crate::scan::{ScanIterator, ScanKind};
use crate::store::StoreShared;

/// What a key names: its object and the value's size.
#[pyclass(module = "larder", frozen, get_all)]
pub struct Head {
    /// The object's id in the store.
    pub object: u64,
    /// The value's size in bytes.
    pub size: u64,
}

#[pymethods]
impl Head {
    fn __repr__(&self) -> String {
        format!("Head(object={}, size={})", self.object, self.size)
    }
}

/// A bucket of a store: keys are paths (`/` separates directory levels,
/// each a valid file name), values are bytes.
#[pyclass(module = "larder", frozen)]
pub struct Bucket {
    store: Arc<StoreShared>,
    name: Vec<u8>,
}

impl Bucket {
    pub(crate) fn new(store: Arc<StoreShared>, name: Vec<u8>) -> Bucket {
        Bucket { store, name }
    }

    fn scan_of(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        kind: ScanKind,
    ) -> PyResult<ScanIterator> {
        let start = optional_bytes_of(start, "start")?;
        let end = optional_bytes_of(end, "end")?;
        let (start, end) = match optional_bytes_of(prefix, "prefix")? {
            Some(prefix) => {
                if start.is_some() || end.is_some() {
                    return Err(PyValueError::new_err("give a prefix or a range (start, end), not both"));
                }
                let end = larder_object::meta::prefix_end(&prefix);
                (prefix, end)
            }
            None => (start.unwrap_or_default(), end),
        };
        Ok(ScanIterator::new(self.store.clone(), self.name.clone(), start, end, kind))
    }
}

#[pymethods]
impl Bucket {
    /// The bucket's name.
    #[getter]
    fn name<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.name)
    }

    /// Stores `value` under `key`, replacing any value there, atomically;
    /// durable when it returns if `durable` (default: the store's).
    #[pyo3(signature = (key, value, *, durable=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        durable: Option<bool>,
    ) -> PyResult<()> {
        let key = bytes_of(key, "key")?;
        let value = bytes_of(value, "value")?;
        let durability = self.store.durability(durable);
        self.store.with(py, |kv| kv.put(&self.name, &key, &value, durability))
    }

    /// The value under `key`, or `None`.
    fn get<'py>(&self, py: Python<'py>, key: &Bound<'_, PyAny>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let key = bytes_of(key, "key")?;
        let mut value = Vec::new();
        if let Some(found) = self.store.try_without_detach(|kv| kv.get_cached_into(&self.name, &key, &mut value))? {
            return Ok(found.then(|| PyBytes::new(py, &value)));
        }
        let value = self.store.with(py, |kv| kv.get(&self.name, &key))?;
        Ok(value.map(|v| PyBytes::new(py, &v)))
    }

    /// The object and size of the value under `key`, or `None`, without
    /// reading the value.
    fn head(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<Head>> {
        let key = bytes_of(key, "key")?;
        let head = self.store.with(py, |kv| kv.head(&self.name, &key))?;
        Ok(head.map(|h| Head { object: h.object, size: h.size }))
    }

    /// Removes `key`; returns whether it was there.
    #[pyo3(signature = (key, *, durable=None))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, durable: Option<bool>) -> PyResult<bool> {
        let key = bytes_of(key, "key")?;
        let durability = self.store.durability(durable);
        self.store.with(py, |kv| kv.delete(&self.name, &key, durability))
    }

    /// An iterator of `(key, value)` over the keys in `[start, end)` (no
    /// end: to the last) or starting with `prefix`, in byte order. Not a
    /// snapshot: a key present throughout is returned exactly once; keys
    /// added or removed meanwhile may or may not be.
    #[pyo3(signature = (start=None, end=None, *, prefix=None))]
    fn scan(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ScanIterator> {
        self.scan_of(start, end, prefix, ScanKind::Values)
    }

    /// Like `scan`, yielding `(key, size)` without reading the values.
    #[pyo3(signature = (start=None, end=None, *, prefix=None))]
    fn scan_sizes(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ScanIterator> {
        self.scan_of(start, end, prefix, ScanKind::Sizes)
    }

    /// A batch bound to this bucket: as a context manager, committed at
    /// the end of the block (nothing of it if the block raised).
    #[pyo3(signature = (*, durable=None))]
    fn batch(&self, durable: Option<bool>) -> Batch {
        Batch::bound(self.store.clone(), self.name.clone(), durable)
    }

    /// Applies `batch` to this bucket atomically: every operation or none
    /// (a refused key fails the whole batch and changes nothing).
    #[pyo3(signature = (batch, *, durable=None))]
    fn write(&self, py: Python<'_>, batch: &Batch, durable: Option<bool>) -> PyResult<()> {
        let operations = batch.operations()?;
        let durability = self.store.durability(durable);
        self.store.with(py, |kv| kv.write_batch(&self.name, &operations, durability))
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        match self.get(py, key)? {
            Some(value) => Ok(value),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __setitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.put(py, key, value, None)
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        if self.delete(py, key, None)? {
            Ok(())
        } else {
            Err(PyKeyError::new_err(key.clone().unbind()))
        }
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.head(py, key)?.is_some())
    }

    fn __iter__(&self) -> PyResult<ScanIterator> {
        self.scan_of(None, None, None, ScanKind::Keys)
    }

    fn __repr__(&self) -> String {
        format!("<larder.Bucket {:?}>", String::from_utf8_lossy(&self.name))
    }
}
