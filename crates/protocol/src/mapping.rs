//! A mapping of memory another process can write, and the only ways this
//! crate touches it: atomic loads and stores of aligned words, and copies
//! made of relaxed atomic loads and stores.
//!
//! Rust forbids a reference to memory that changes under it unless the
//! memory sits in an `UnsafeCell`, so no `&[u8]` or `&mut [u8]` into the
//! mapping is ever made: the peer may write any byte at any time, and every
//! access here is one the language defines under such races (an atomic
//! access races with nothing). Bounds are checked here with `assert!` as a
//! last line of defence; callers check them first against values they
//! copied out, and turn failures into [`crate::error::Violation`]s.

use std::ffi::c_void;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

use rustix::mm::{MapFlags, ProtFlags};

use crate::error::TransportError;

/// A read-write mapping, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value until drop, and
// every access goes through atomics (see the module comment), so sharing
// it between threads or moving it to another thread adds no data race.
#[allow(unsafe_code)]
unsafe impl Send for Mapping {}
// SAFETY: as for Send: `&Mapping` allows only atomic accesses.
#[allow(unsafe_code)]
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` shared, read-write.
    pub(crate) fn shared(fd: impl AsFd, len: usize, what: &'static str) -> Result<Mapping, TransportError> {
        // SAFETY: a new mapping at an address the kernel chooses aliases no
        // Rust object; the memfd is sealed against shrinking (the caller
        // checked or set the seals), so no page of it can vanish and fault.
        #[allow(unsafe_code)]
        let base = unsafe {
            rustix::mm::mmap(std::ptr::null_mut(), len, ProtFlags::READ | ProtFlags::WRITE, MapFlags::SHARED, fd, 0)
        }
        .map_err(|e| TransportError::io(what, e))?;
        Ok(Mapping { base: base.cast(), len })
    }

    /// Maps `len` bytes of private anonymous memory (tests and fuzzing:
    /// both sides in one process).
    pub(crate) fn anonymous(len: usize, what: &'static str) -> Result<Mapping, TransportError> {
        // SAFETY: a new anonymous mapping aliases no Rust object.
        #[allow(unsafe_code)]
        let base = unsafe {
            rustix::mm::mmap_anonymous(std::ptr::null_mut(), len, ProtFlags::READ | ProtFlags::WRITE, MapFlags::PRIVATE)
        }
        .map_err(|e| TransportError::io(what, e))?;
        Ok(Mapping { base: base.cast(), len })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }

    /// The 32-bit word at `offset` (4-byte aligned, inside the mapping).
    pub(crate) fn word32(&self, offset: usize) -> &AtomicU32 {
        assert!(offset.is_multiple_of(4) && offset <= self.len.saturating_sub(4), "word32 at {offset} of {}", self.len);
        // SAFETY: in bounds and aligned (the base is page-aligned), the
        // mapping lives as long as `self`, and the memory is only ever
        // accessed atomically by this process (module comment).
        #[allow(unsafe_code)]
        unsafe {
            AtomicU32::from_ptr(self.base.add(offset).cast())
        }
    }

    fn word64(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset.is_multiple_of(8) && offset + 8 <= self.len);
        // SAFETY: callers pass an 8-aligned offset with 8 bytes in bounds
        // (checked in `read`/`write`); otherwise as in `word32`.
        #[allow(unsafe_code)]
        unsafe {
            AtomicU64::from_ptr(self.base.add(offset).cast())
        }
    }

    fn byte(&self, offset: usize) -> &AtomicU8 {
        debug_assert!(offset < self.len);
        // SAFETY: callers pass an offset in bounds (checked in
        // `read`/`write`); a byte needs no alignment; otherwise as in
        // `word32`.
        #[allow(unsafe_code)]
        unsafe {
            AtomicU8::from_ptr(self.base.add(offset))
        }
    }

    fn check_range(&self, offset: usize, len: usize) {
        assert!(
            offset <= self.len && len <= self.len - offset,
            "{len} bytes at {offset} outside a mapping of {}",
            self.len
        );
    }

    /// Copies `out.len()` bytes at `offset` out of the mapping. Each byte is
    /// one the peer wrote at some moment; nothing more is promised, so the
    /// caller checks the copy, not the mapping.
    pub(crate) fn read(&self, offset: usize, out: &mut [u8]) {
        self.check_range(offset, out.len());
        let mut done = 0;
        while done < out.len() && !(offset + done).is_multiple_of(8) {
            out[done] = self.byte(offset + done).load(Ordering::Relaxed);
            done += 1;
        }
        while out.len() - done >= 8 {
            let word = self.word64(offset + done).load(Ordering::Relaxed);
            out[done..done + 8].copy_from_slice(&word.to_ne_bytes());
            done += 8;
        }
        while done < out.len() {
            out[done] = self.byte(offset + done).load(Ordering::Relaxed);
            done += 1;
        }
    }

    /// Copies `bytes` into the mapping at `offset`.
    pub(crate) fn write(&self, offset: usize, bytes: &[u8]) {
        self.check_range(offset, bytes.len());
        let mut done = 0;
        while done < bytes.len() && !(offset + done).is_multiple_of(8) {
            self.byte(offset + done).store(bytes[done], Ordering::Relaxed);
            done += 1;
        }
        while bytes.len() - done >= 8 {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[done..done + 8]);
            self.word64(offset + done).store(u64::from_ne_bytes(word), Ordering::Relaxed);
            done += 8;
        }
        while done < bytes.len() {
            self.byte(offset + done).store(bytes[done], Ordering::Relaxed);
            done += 1;
        }
    }

    /// Sets `len` bytes at `offset` to zero.
    pub(crate) fn zero(&self, offset: usize, len: usize) {
        self.check_range(offset, len);
        for at in offset..offset + len {
            self.byte(at).store(0, Ordering::Relaxed);
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are this mapping's, and every reference into
        // it borrows `self`, so none outlives the unmap.
        #[allow(unsafe_code)]
        let result = unsafe { rustix::mm::munmap(self.base.cast::<c_void>(), self.len) };
        // munmap of a whole mapping we made fails only on a kernel bug;
        // there is nobody to report it to in a destructor.
        debug_assert!(result.is_ok(), "munmap: {result:?}");
    }
}

/// Creates a memfd of `len` bytes sealed against shrinking, growing and
/// further sealing.
pub(crate) fn sealed_memfd(name: &str, len: u64, what: &'static str) -> Result<std::os::fd::OwnedFd, TransportError> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
        .map_err(|e| TransportError::io(what, e))?;
    rustix::fs::ftruncate(&fd, len).map_err(|e| TransportError::io(what, e))?;
    rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
        .map_err(|e| TransportError::io(what, e))?;
    Ok(fd)
}

/// Checks a memfd received from the peer: its size is `len` and it is
/// sealed against shrinking and growing (so it cannot fault under our
/// mapping) and against new seals.
pub(crate) fn check_sealed_memfd(fd: impl AsFd, len: u64, what: &'static str) -> Result<(), TransportError> {
    use rustix::fs::SealFlags;
    let stat = rustix::fs::fstat(&fd).map_err(|e| TransportError::io(what, e))?;
    let actual = u64::try_from(stat.st_size).unwrap_or(0);
    if actual != len {
        return Err(TransportError::Size { what, expected: len, actual });
    }
    let required = SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL;
    let present = rustix::fs::fcntl_get_seals(&fd).map_err(|e| TransportError::io(what, e))?;
    if !present.contains(required) {
        return Err(TransportError::NotSealed { what, missing: (required - present).bits(), present: present.bits() });
    }
    Ok(())
}
