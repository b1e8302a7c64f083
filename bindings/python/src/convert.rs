//! Keys and values from Python objects: `bytes` and `bytearray` as they
//! are, `str` as its UTF-8 bytes.

use std::borrow::Cow;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};

/// The bytes of `value` (`what` names the argument in the error).
pub(crate) fn bytes_of<'a>(value: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(bytes) = value.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(bytes.as_bytes()));
    }
    if let Ok(text) = value.cast::<PyString>() {
        return Ok(Cow::Owned(text.to_cow()?.into_owned().into_bytes()));
    }
    if let Ok(array) = value.cast::<PyByteArray>() {
        return Ok(Cow::Owned(array.to_vec()));
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be bytes, bytearray or str, not {}",
        value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "an unknown type".to_string())
    )))
}

/// Like [`bytes_of`] for an optional argument (`None` stays `None`).
pub(crate) fn optional_bytes_of(value: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Vec<u8>>> {
    match value {
        Some(v) if !v.is_none() => Ok(Some(bytes_of(v, what)?.into_owned())),
        _ => Ok(None),
    }
}
