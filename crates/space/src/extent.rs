//! Extents: a run of whole 4 KiB blocks inside one container, and their
//! fixed 24-byte encoding (format.md, section 12).

use std::fmt;

use crate::error::{Result, SpaceError};
use crate::BLOCK_BYTES;

/// Bytes of an encoded [`Extent`].
pub const EXTENT_BYTES: usize = 24;

/// A run of whole blocks in one container: bytes `[offset, offset + len)`
/// of container file `container`. A valid extent has `offset` and `len`
/// multiples of 4 KiB, `len > 0`, and ends at or before the container's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Extent {
    /// The container's id (its file is `<id:016x>.ctr`).
    pub container: u64,
    /// Byte offset of the first block in the container.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

impl fmt::Display for Extent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "container {:016x} bytes [{}, +{})", self.container, self.offset, self.len)
    }
}

impl Extent {
    /// The byte just past the extent (saturating, so a malformed extent
    /// cannot overflow).
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.len)
    }

    /// Encodes the extent as 24 bytes: `container`, `offset`, `len`, each a
    /// `u64` little-endian.
    pub fn encode(&self) -> [u8; EXTENT_BYTES] {
        let mut out = [0u8; EXTENT_BYTES];
        out[0..8].copy_from_slice(&self.container.to_le_bytes());
        out[8..16].copy_from_slice(&self.offset.to_le_bytes());
        out[16..24].copy_from_slice(&self.len.to_le_bytes());
        out
    }

    /// Decodes 24 bytes written by [`Extent::encode`] and checks the result
    /// against `container_bytes` (see [`Extent::check`]). Never panics.
    pub fn decode(bytes: &[u8], container_bytes: u64) -> Result<Extent> {
        let field = |i: usize| -> Option<u64> {
            let b: [u8; 8] = bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?;
            Some(u64::from_le_bytes(b))
        };
        let (Some(container), Some(offset), Some(len)) = (field(0), field(1), field(2)) else {
            return Err(SpaceError::BadEncoding { len: bytes.len(), expected: EXTENT_BYTES });
        };
        if bytes.len() != EXTENT_BYTES {
            return Err(SpaceError::BadEncoding { len: bytes.len(), expected: EXTENT_BYTES });
        }
        let extent = Extent { container, offset, len };
        extent.check(container_bytes)?;
        Ok(extent)
    }

    /// Checks the shape of the extent for containers of `container_bytes`:
    /// block-aligned offset and length, nonzero length, inside the container.
    /// Whether the container exists is for the caller to check.
    pub fn check(&self, container_bytes: u64) -> Result<()> {
        let bad = |what| Err(SpaceError::InvalidExtent { extent: *self, what });
        if self.len == 0 {
            return bad("zero length");
        }
        if !self.offset.is_multiple_of(BLOCK_BYTES) {
            return bad("offset is not a multiple of 4096");
        }
        if !self.len.is_multiple_of(BLOCK_BYTES) {
            return bad("length is not a multiple of 4096");
        }
        match self.offset.checked_add(self.len) {
            Some(end) if end <= container_bytes => Ok(()),
            _ => bad("runs past the end of its container"),
        }
    }

    /// First block and block count (for a checked extent).
    pub(crate) fn blocks(&self) -> (u64, u64) {
        (self.offset / BLOCK_BYTES, self.len / BLOCK_BYTES)
    }

    /// The extent covering blocks `[start, end)` of `container`.
    pub(crate) fn from_blocks(container: u64, start: u64, end: u64) -> Extent {
        Extent { container, offset: start * BLOCK_BYTES, len: (end - start) * BLOCK_BYTES }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn encoding_is_little_endian_and_round_trips() {
        let e = Extent { container: 0x0102, offset: 0x3000, len: 0x2000 };
        let b = e.encode();
        assert_eq!(&b[0..8], &[2, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[8..16], &[0, 0x30, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[16..24], &[0, 0x20, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Extent::decode(&b, 1 << 20).unwrap(), e);
    }

    #[test]
    fn decode_refuses_bad_shapes() {
        let cases = [
            (Extent { container: 0, offset: 0, len: 0 }, "zero length"),
            (Extent { container: 0, offset: 1, len: 4096 }, "offset"),
            (Extent { container: 0, offset: 0, len: 4095 }, "length"),
            (Extent { container: 0, offset: 1 << 20, len: 4096 }, "past the end"),
            (Extent { container: 0, offset: u64::MAX - 4095, len: 8192 }, "past the end"),
            (Extent { container: 0, offset: 4096, len: u64::MAX - 4095 }, "past the end"),
        ];
        for (e, what) in cases {
            let err = Extent::decode(&e.encode(), 1 << 20).unwrap_err().to_string();
            assert!(err.contains(what), "{e:?}: {err}");
        }
        assert!(matches!(Extent::decode(&[0; 23], 1 << 20), Err(SpaceError::BadEncoding { len: 23, .. })));
        assert!(matches!(Extent::decode(&[0; 25], 1 << 20), Err(SpaceError::BadEncoding { len: 25, .. })));
    }
}
