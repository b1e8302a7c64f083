//! Bounds-checked reading of metadata values, little-endian.
//!
//! Every decoder in this module goes through [`Reader`], which never
//! panics: a short input yields a `what` string that the caller turns into
//! [`crate::ObjectError::BadRecord`] naming the record.

/// Why a decode failed (turned into a `BadRecord` error by the caller).
pub(crate) type DecodeResult<T> = std::result::Result<T, String>;

/// A cursor over a key or value read back from the index.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize, what: &str) -> DecodeResult<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end.and_then(|end| self.buf.get(self.pos..end).map(|s| (s, end))) {
            Some((s, end)) => {
                self.pos = end;
                Ok(s)
            }
            None => Err(format!("{what}: needs {n} bytes at offset {}, only {} left", self.pos, self.remaining())),
        }
    }

    fn array<const N: usize>(&mut self, what: &str) -> DecodeResult<[u8; N]> {
        let s = self.bytes(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(crate) fn u8(&mut self, what: &str) -> DecodeResult<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u32(&mut self, what: &str) -> DecodeResult<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u64(&mut self, what: &str) -> DecodeResult<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn i64(&mut self, what: &str) -> DecodeResult<i64> {
        Ok(i64::from_le_bytes(self.array(what)?))
    }

    /// A big-endian u64: only index keys use it, so that byte order sorts
    /// numerically.
    pub(crate) fn u64_be(&mut self, what: &str) -> DecodeResult<u64> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }

    /// Everything not yet read.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = self.buf.get(self.pos..).unwrap_or(&[]);
        self.pos = self.buf.len();
        s
    }

    /// Refuses bytes after the last field: a value with a tail would decode
    /// to something that does not re-encode to the same bytes.
    pub(crate) fn finish(&self) -> DecodeResult<()> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(format!("{n} trailing bytes after the last field at offset {}", self.pos)),
        }
    }
}

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
