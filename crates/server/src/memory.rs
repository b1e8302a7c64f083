//! The client's data area, as the executor sees it: slices it copies
//! from and into. The workers use [`ClientMemory`] over each client's
//! shared region (`region_memory.rs`); tests use [`VecMemory`].

use larder_protocol::message::BufferSlice;
use parking_lot::Mutex;

use crate::error::Violation;

/// A client's data area. Implementations copy: what `copy_out` returns is
/// the server's own memory, which the client can no longer change, so
/// checks and checksums made on it hold for what reaches the disk.
pub trait ClientMemory {
    /// The bytes of `slice`, copied into server memory; a [`Violation`]
    /// if the slice does not lie inside the area.
    fn copy_out(&self, slice: BufferSlice) -> Result<Vec<u8>, Violation>;

    /// Writes `bytes` (at most `slice.length` of them) at the start of
    /// `slice`; a [`Violation`] if the slice does not lie inside the area.
    fn copy_in(&self, slice: BufferSlice, bytes: &[u8]) -> Result<(), Violation>;

    /// Checks that `slice` lies inside the area, copying nothing: a
    /// request that fills a slice is refused as a violation before any
    /// work, whatever else is wrong with it.
    fn check(&self, slice: BufferSlice) -> Result<(), Violation> {
        self.copy_in(slice, &[])
    }
}

/// The byte range of `slice` in an area of `area_bytes`, or the
/// violation it is.
pub fn slice_range(slice: BufferSlice, area_bytes: u64) -> Result<std::ops::Range<usize>, Violation> {
    let end = slice.offset.checked_add(u64::from(slice.length));
    match end {
        Some(end) if end <= area_bytes => {
            let start = usize::try_from(slice.offset).map_err(|_| outside(slice, area_bytes))?;
            let end = usize::try_from(end).map_err(|_| outside(slice, area_bytes))?;
            Ok(start..end)
        }
        _ => Err(outside(slice, area_bytes)),
    }
}

fn outside(slice: BufferSlice, area_bytes: u64) -> Violation {
    Violation::new(format!(
        "buffer slice at offset {} of {} bytes lies outside the data area of {area_bytes} bytes",
        slice.offset, slice.length
    ))
}

/// A data area in a vector: for tests, and for callers that run the
/// executor in their own process.
#[derive(Debug, Default)]
pub struct VecMemory {
    bytes: Mutex<Vec<u8>>,
}

impl VecMemory {
    /// An area of `bytes` zero bytes.
    pub fn new(bytes: usize) -> VecMemory {
        VecMemory { bytes: Mutex::new(vec![0; bytes]) }
    }

    /// Copies `bytes` into the area at `offset` (the client's side of a
    /// write); a [`Violation`] if they do not fit.
    pub fn fill(&self, offset: u64, bytes: &[u8]) -> Result<(), Violation> {
        let length = u32::try_from(bytes.len()).map_err(|_| Violation::new("more than 4 GiB"))?;
        self.copy_in(BufferSlice { offset, length }, bytes)
    }

    /// A copy of the whole area.
    pub fn snapshot(&self) -> Vec<u8> {
        self.bytes.lock().clone()
    }
}

impl ClientMemory for VecMemory {
    fn copy_out(&self, slice: BufferSlice) -> Result<Vec<u8>, Violation> {
        let bytes = self.bytes.lock();
        let range = slice_range(slice, bytes.len() as u64)?;
        Ok(bytes[range].to_vec())
    }

    fn copy_in(&self, slice: BufferSlice, data: &[u8]) -> Result<(), Violation> {
        let mut bytes = self.bytes.lock();
        let range = slice_range(slice, bytes.len() as u64)?;
        let n = data.len().min(range.len());
        bytes[range.start..range.start + n].copy_from_slice(&data[..n]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_must_lie_inside_the_area() {
        let s = |offset, length| BufferSlice { offset, length };
        assert_eq!(slice_range(s(0, 16), 16), Ok(0..16));
        assert_eq!(slice_range(s(16, 0), 16), Ok(16..16));
        assert!(slice_range(s(1, 16), 16).is_err());
        assert!(slice_range(s(17, 0), 16).is_err());
        assert!(slice_range(s(u64::MAX, 1), 16).is_err(), "an offset that overflows");
        let m = VecMemory::new(8);
        assert!(m.copy_out(s(4, 8)).is_err());
        m.copy_in(s(2, 2), b"abcd").ok();
        assert_eq!(m.snapshot(), b"\0\0ab\0\0\0\0", "copy_in writes no more than the slice");
    }
}
