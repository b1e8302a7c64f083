//! The Python iterator over an index scan: it reads a page of entries at a
//! time with the GIL released.

use std::collections::VecDeque;

use larder_index::Iter;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::errors::index_error;

/// Entries read per page.
const PAGE: usize = 512;

/// The bounds of a scan: `[start, end)` or a prefix, and its direction.
pub(crate) struct Range {
    pub(crate) start: Option<Vec<u8>>,
    pub(crate) end: Option<Vec<u8>>,
    pub(crate) prefix: Option<Vec<u8>>,
    pub(crate) forward: bool,
}

struct State {
    /// The scan, until it ends or fails.
    iter: Option<Iter>,
    page: VecDeque<(Vec<u8>, Vec<u8>)>,
}

/// An iterator of `(key, value)` over an index or snapshot scan.
#[pyclass(module = "larder", frozen)]
pub struct IndexIterator {
    state: Mutex<State>,
}

impl IndexIterator {
    pub(crate) fn new(iter: Iter) -> IndexIterator {
        IndexIterator { state: Mutex::new(State { iter: Some(iter), page: VecDeque::new() }) }
    }
}

#[pymethods]
impl IndexIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        // The lock's holder never waits for the GIL (it refills with the
        // GIL released), so taking it with the GIL held is safe.
        let buffered = self.state.lock().page.pop_front();
        let entry = match buffered {
            Some(entry) => Some(entry),
            None => py
                .detach(|| {
                    let mut state = self.state.lock();
                    if state.page.is_empty() {
                        if let Some(iter) = state.iter.as_mut() {
                            let page: Vec<_> = iter.take(PAGE).collect::<Result<_, _>>()?;
                            if page.len() < PAGE {
                                state.iter = None;
                            }
                            state.page.extend(page);
                        }
                    }
                    Ok(state.page.pop_front())
                })
                .map_err(index_error)?,
        };
        let Some((key, value)) = entry else { return Ok(None) };
        Ok(Some(PyTuple::new(py, [PyBytes::new(py, &key), PyBytes::new(py, &value)])?))
    }
}
