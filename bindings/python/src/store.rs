//! `larder.Store`: an open KV store (a store directory), its options, its
//! buckets, and a clean close.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use larder_io::Storage;
use larder_kv::{Durability, Kv, KvError, KvOptions};
use larder_object::{CreationOptions, ObjectError};
use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::bucket::Bucket;
use crate::convert::bytes_of;
use crate::errors::{closed, kv_error};

/// What a store's handles share: the open store (`None` once closed) and
/// the durability calls get when they do not say.
///
/// Locks are waited for only while the GIL is released (inside `detach`),
/// so a thread waiting for one never holds the GIL that the holder needs;
/// with the GIL held they are only tried.
pub(crate) struct StoreShared {
    kv: RwLock<Option<Kv>>,
    path: PathBuf,
    durable: bool,
}

impl StoreShared {
    /// Runs `call` on the open store, with the GIL released.
    pub(crate) fn with<T: Send>(
        &self,
        py: Python<'_>,
        call: impl FnOnce(&Kv) -> Result<T, KvError> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let guard = self.kv.read();
            let kv = guard.as_ref().ok_or_else(|| closed("store"))?;
            call(kv).map_err(kv_error)
        })
    }

    /// Runs `call`, which never blocks (a read from the caches alone), on
    /// the open store with the GIL held: `None` when the store's lock is
    /// not free at once or the store is closed, so the caller falls back
    /// to [`StoreShared::with`] (which reports a closed store). Releasing
    /// and taking back the GIL costs more than such a read.
    pub(crate) fn try_without_detach<T>(
        &self,
        call: impl FnOnce(&Kv) -> Result<Option<T>, KvError>,
    ) -> PyResult<Option<T>> {
        let Some(guard) = self.kv.try_read() else { return Ok(None) };
        let Some(kv) = guard.as_ref() else { return Ok(None) };
        call(kv).map_err(kv_error)
    }

    /// The durability of a call: its own, else the store's default.
    pub(crate) fn durability(&self, durable: Option<bool>) -> Durability {
        if durable.unwrap_or(self.durable) {
            Durability::Durable
        } else {
            Durability::Buffered
        }
    }

    /// Closes the store (everything made durable) if it is open.
    fn close(&self) -> Result<(), KvError> {
        let taken = self.kv.write().take();
        match taken {
            Some(kv) => kv.close(),
            None => Ok(()),
        }
    }
}

impl Drop for StoreShared {
    /// A store never closed is closed when its last handle goes: buffered
    /// changes are made durable (an error here has no caller to reach).
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// An open store: a directory holding Larder's files.
#[pyclass(module = "larder", frozen)]
pub struct Store {
    pub(crate) shared: Arc<StoreShared>,
}

/// Options of [`Store`] as Python passes them.
struct Settings {
    durable: bool,
    memtable_bytes: Option<usize>,
    cache_bytes: Option<usize>,
    meta_cache_bytes: Option<usize>,
    log_segment_bytes: Option<u64>,
}

impl Settings {
    fn kv_options(&self, dir: &Path) -> Result<KvOptions, KvError> {
        let mut options = KvOptions::default();
        if let Some(bytes) = self.memtable_bytes {
            options.store.index.memtable_size_bytes = bytes;
        }
        if let Some(bytes) = self.cache_bytes {
            options.store.index.block_cache_bytes = bytes;
        }
        if let Some(bytes) = self.meta_cache_bytes {
            options.store.meta_cache_bytes = bytes;
        }
        // As `larder init`: log segments fitted to the file system's free
        // space (a small file system gets small segments).
        let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        let on = absolute.ancestors().find(|a| a.is_dir()).unwrap_or(Path::new("/"));
        let available = larder_io::RealStorage::new().available_bytes(on).map_err(ObjectError::from)?;
        options.creation = CreationOptions::fitted_to(available);
        if let Some(bytes) = self.log_segment_bytes {
            options.creation.log_segment_bytes = bytes;
        }
        Ok(options)
    }
}

/// How a store is reached.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Open,
    Create,
    OpenOrCreate,
}

fn open_store(path: PathBuf, mode: Mode, settings: &Settings) -> Result<Kv, KvError> {
    let options = settings.kv_options(&path)?;
    match mode {
        Mode::Create => Kv::create(&path, options),
        Mode::Open => Kv::open(&path, options),
        Mode::OpenOrCreate => {
            if path.join("SUPERBLOCK").exists() {
                Kv::open(&path, options)
            } else {
                Kv::create(&path, options)
            }
        }
    }
}

fn new_store(py: Python<'_>, path: PathBuf, mode: Mode, settings: Settings) -> PyResult<Store> {
    let kv = py.detach(|| open_store(path.clone(), mode, &settings)).map_err(kv_error)?;
    Ok(Store { shared: Arc::new(StoreShared { kv: RwLock::new(Some(kv)), path, durable: settings.durable }) })
}

#[pymethods]
impl Store {
    /// Opens the store in `path`, creating it first if the directory holds
    /// none and `create` is true (else `NotAStore`).
    #[new]
    #[pyo3(signature = (path, *, create=true, durable=true, memtable_bytes=None, cache_bytes=None,
                        meta_cache_bytes=None, log_segment_bytes=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        create: bool,
        durable: bool,
        memtable_bytes: Option<usize>,
        cache_bytes: Option<usize>,
        meta_cache_bytes: Option<usize>,
        log_segment_bytes: Option<u64>,
    ) -> PyResult<Store> {
        let settings = Settings { durable, memtable_bytes, cache_bytes, meta_cache_bytes, log_segment_bytes };
        new_store(py, path, if create { Mode::OpenOrCreate } else { Mode::Open }, settings)
    }

    /// Creates a new store in `path`; `AlreadyExists` if one is there.
    #[staticmethod]
    #[pyo3(signature = (path, *, durable=true, memtable_bytes=None, cache_bytes=None,
                        meta_cache_bytes=None, log_segment_bytes=None))]
    fn create(
        py: Python<'_>,
        path: PathBuf,
        durable: bool,
        memtable_bytes: Option<usize>,
        cache_bytes: Option<usize>,
        meta_cache_bytes: Option<usize>,
        log_segment_bytes: Option<u64>,
    ) -> PyResult<Store> {
        let settings = Settings { durable, memtable_bytes, cache_bytes, meta_cache_bytes, log_segment_bytes };
        new_store(py, path, Mode::Create, settings)
    }

    /// The store's directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.shared.path.clone()
    }

    /// Whether calls that do not say are durable when they return.
    #[getter]
    fn durable(&self) -> bool {
        self.shared.durable
    }

    /// Whether the store was closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        py.detach(|| self.shared.kv.read().is_none())
    }

    /// Creates bucket `name` (durably) and returns it; `BucketExists` if
    /// it is there.
    fn create_bucket(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Bucket> {
        let name = bytes_of(name, "bucket name")?.into_owned();
        self.shared.with(py, |kv| kv.create_bucket(&name))?;
        Ok(Bucket::new(self.shared.clone(), name))
    }

    /// Bucket `name`; with `create`, created (durably) if missing, else
    /// `NoSuchBucket` if missing.
    #[pyo3(signature = (name, *, create=false))]
    fn bucket(&self, py: Python<'_>, name: &Bound<'_, PyAny>, create: bool) -> PyResult<Bucket> {
        let name = bytes_of(name, "bucket name")?.into_owned();
        self.shared.with(py, |kv| {
            if kv.buckets()?.contains(&name) {
                return Ok(());
            }
            if !create {
                return Err(KvError::NoSuchBucket { bucket: String::from_utf8_lossy(&name).into_owned() });
            }
            match kv.create_bucket(&name) {
                Err(KvError::BucketExists { .. }) => Ok(()),
                other => other,
            }
        })?;
        Ok(Bucket::new(self.shared.clone(), name))
    }

    /// Deletes the empty bucket `name` (durably); `BucketNotEmpty` if it
    /// holds keys.
    fn delete_bucket(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<()> {
        let name = bytes_of(name, "bucket name")?.into_owned();
        self.shared.with(py, |kv| kv.delete_bucket(&name))
    }

    /// Every bucket's name, in byte order.
    fn buckets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let names = self.shared.with(py, |kv| kv.buckets())?;
        PyList::new(py, names.iter().map(|n| PyBytes::new(py, n)))
    }

    /// Makes every change so far durable.
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.with(py, |kv| kv.sync())
    }

    /// Bytes of values a batch should hold at most (larger batches may be
    /// refused as too large).
    #[getter]
    fn batch_budget_bytes(&self, py: Python<'_>) -> PyResult<u64> {
        self.shared.with(py, |kv| Ok(kv.batch_budget_bytes()))
    }

    /// Counters of the store's intent log: records, groups (one write and
    /// one sync each), syncs, bytes written.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let log = self.shared.with(py, |kv| Ok(kv.store().log_stats()))?;
        let dict = PyDict::new(py);
        dict.set_item("log_records", log.records)?;
        dict.set_item("log_groups", log.groups)?;
        dict.set_item("log_syncs", log.syncs)?;
        dict.set_item("log_bytes_written", log.bytes_written)?;
        Ok(dict)
    }

    /// Makes everything durable and closes the store; later calls raise
    /// `Closed`. Closing twice is allowed.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.shared.close()).map_err(kv_error)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the store, durably, whether the block raised or not.
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
        format!("<larder.Store {:?} {state}>", self.shared.path)
    }
}
