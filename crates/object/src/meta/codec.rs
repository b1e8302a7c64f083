//! Bounds-checked reading of metadata keys and values: the engine's shared
//! decoder (`larder_io::codec`), which never panics; a short or malformed
//! input yields a `what` string that callers turn into
//! [`crate::ObjectError::BadRecord`] naming the record.

pub(crate) use larder_io::codec::{DecodeResult, Decoder as Reader};

/// Reads a record's version byte: 0 is never written (a zeroed value), a
/// version above `supported` is a newer format, reported as such.
pub(crate) fn version(r: &mut Reader<'_>, record: &'static str, supported: u8) -> crate::Result<u8> {
    let v = r.u8("version").map_err(|what| crate::ObjectError::BadRecord { record, what })?;
    if v == 0 {
        return Err(crate::ObjectError::BadRecord { record, what: "version 0 is never written".into() });
    }
    if v > supported {
        return Err(crate::ObjectError::NewerRecord { record, found: v, supported });
    }
    Ok(v)
}
