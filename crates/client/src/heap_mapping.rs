//! A served heap object's file mapped into this process: `MAP_SHARED`
//! over a whole reservation at once, as the embedded heap maps (docs/heap.md,
//! "Mapping"): pages past the file's end are mapped but never handed out
//! and become the file's pages when it grows, so a growth inside the
//! reservation needs no descriptor and keeps the base.

use std::os::fd::BorrowedFd;

use rustix::mm::{MapFlags, ProtFlags};

use crate::error::{ClientError, Result};

/// A mapping of `reserve` bytes of one object's file.
#[derive(Debug)]
pub(crate) struct Mapping {
    base: *mut u8,
    reserve: usize,
}

// SAFETY: the mapping is plain shared memory owned by this value: any
// thread may read it (through raw pointers, as `RemoteHeap` does) and unmap
// it once, on drop, when no other owner is left.
#[allow(unsafe_code)]
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`; `&Mapping` gives out only the base address.
#[allow(unsafe_code)]
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `reserve` bytes of `file` shared, read-write when `writable`.
    pub(crate) fn map(file: BorrowedFd<'_>, reserve: u64, writable: bool) -> Result<Mapping> {
        let reserve = usize::try_from(reserve)
            .map_err(|_| ClientError::Invalid(format!("a reservation of {reserve} bytes does not fit memory")))?;
        let protection = if writable { ProtFlags::READ | ProtFlags::WRITE } else { ProtFlags::READ };
        #[allow(unsafe_code)]
        // SAFETY: a fresh mapping at an address the kernel picks (no
        // MAP_FIXED), so no existing memory is replaced; `reserve` is
        // nonzero (at least the minimum reservation) and the descriptor is
        // open for the call. The mapping is unmapped exactly once, in drop.
        let base = unsafe { rustix::mm::mmap(std::ptr::null_mut(), reserve, protection, MapFlags::SHARED, file, 0) }
            .map_err(|e| ClientError::Invalid(format!("mapping a heap object: {e}")))?;
        Ok(Mapping { base: base.cast(), reserve })
    }

    /// The first byte.
    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }

    /// Bytes reserved: the object may grow to this without moving.
    pub(crate) fn reserve(&self) -> u64 {
        self.reserve as u64
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        #[allow(unsafe_code)]
        // SAFETY: `base` and `reserve` are exactly what `mmap` returned and
        // was given; this is the only unmap, and no owner is left to use it
        // (raw pointers a caller kept past `close_object` are theirs to not
        // use, as with the embedded heap).
        unsafe {
            let _ = rustix::mm::munmap(self.base.cast(), self.reserve);
        }
    }
}
