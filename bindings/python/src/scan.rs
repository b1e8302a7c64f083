//! The Python iterator over a bucket's keys.
//!
//! A KV scan borrows its store, which a Python object cannot hold; so the
//! iterator reads a page of entries at a time, each page a new scan
//! starting at the last key returned (skipped), with the GIL released.
//! This keeps the scan's guarantee (a key present throughout is returned
//! exactly once), holds no lock between pages (a store can close under
//! an unfinished iterator, which then raises `Closed`), and pays the
//! release of the GIL once per page rather than per key.

use std::collections::VecDeque;
use std::sync::Arc;

use larder_kv::KvError;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::store::StoreShared;

/// Entries read per page.
const PAGE: usize = 512;

/// What each item of a scan is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScanKind {
    /// `(key, value)`.
    Values,
    /// `(key, size)`.
    Sizes,
    /// `key`.
    Keys,
}

/// One entry read: the key, its size, and its value when asked for.
struct Entry {
    key: Vec<u8>,
    size: u64,
    value: Vec<u8>,
}

struct State {
    /// Where the next page starts.
    start: Vec<u8>,
    /// The last key returned, which the next page skips.
    last: Option<Vec<u8>>,
    end: Option<Vec<u8>>,
    page: VecDeque<Entry>,
    /// No page remains to read.
    finished: bool,
}

/// An iterator over a bucket's keys in byte order (see `Bucket.scan`).
#[pyclass(module = "larder", frozen)]
pub struct ScanIterator {
    store: Arc<StoreShared>,
    bucket: Vec<u8>,
    kind: ScanKind,
    state: Mutex<State>,
}

impl ScanIterator {
    pub(crate) fn new(
        store: Arc<StoreShared>,
        bucket: Vec<u8>,
        start: Vec<u8>,
        end: Option<Vec<u8>>,
        kind: ScanKind,
    ) -> ScanIterator {
        let state = State { start, last: None, end, page: VecDeque::new(), finished: false };
        ScanIterator { store, bucket, kind, state: Mutex::new(state) }
    }

    /// Reads the next page into `state` (the GIL released by the caller).
    fn refill(&self, kv: &larder_kv::Kv, state: &mut State) -> Result<(), KvError> {
        let mut scan = kv.scan_range(&self.bucket, &state.start, state.end.as_deref())?;
        let mut read = 0;
        let mut scanned_all = true;
        loop {
            let mut key = Vec::new();
            let mut value = Vec::new();
            // A key deleted since its listing is skipped by the scan.
            let size = if self.kind == ScanKind::Values {
                if scan.next_value_into(&mut key, &mut value)?.is_none() {
                    break;
                }
                value.len() as u64
            } else {
                let Some(entry) = scan.next().transpose()? else { break };
                key = entry.key;
                entry.size
            };
            if state.last.as_deref() == Some(key.as_slice()) {
                continue;
            }
            state.page.push_back(Entry { key, size, value });
            read += 1;
            if read == PAGE {
                scanned_all = false;
                break;
            }
        }
        match state.page.back() {
            Some(last) if !scanned_all => {
                state.start = last.key.clone();
                state.last = Some(last.key.clone());
            }
            _ => state.finished = true,
        }
        Ok(())
    }
}

#[pymethods]
impl ScanIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        // Taking the lock with the GIL held is safe: its holder never
        // waits for the GIL (it refills with the GIL released).
        let buffered = {
            let mut state = self.state.lock();
            match state.page.pop_front() {
                Some(entry) => Some(entry),
                None if state.finished => return Ok(None),
                None => None,
            }
        };
        let entry = match buffered {
            Some(entry) => Some(entry),
            None => self.store.with(py, |kv| {
                let mut state = self.state.lock();
                if state.page.is_empty() && !state.finished {
                    self.refill(kv, &mut state)?;
                }
                Ok(state.page.pop_front())
            })?,
        };
        let Some(entry) = entry else { return Ok(None) };
        let key = PyBytes::new(py, &entry.key);
        let item = match self.kind {
            ScanKind::Keys => key.into_any(),
            ScanKind::Sizes => PyTuple::new(py, [key.into_any(), entry.size.into_pyobject(py)?.into_any()])?.into_any(),
            ScanKind::Values => PyTuple::new(py, [key, PyBytes::new(py, &entry.value)])?.into_any(),
        };
        Ok(Some(item))
    }
}
