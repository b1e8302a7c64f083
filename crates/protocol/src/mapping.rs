//! A mapping of memory another process can write, and the only ways this
//! crate touches it: atomic loads and stores of aligned words, and copies
//! made of relaxed atomic loads and stores (long ones by one string
//! instruction whose effect is such a sequence of byte accesses:
//! `bulk_copy`).
//!
//! Rust forbids a reference to memory that changes under it unless the
//! memory sits in an `UnsafeCell`, so no `&[u8]` or `&mut [u8]` into the
//! mapping is ever made: the peer may write any byte at any time, and every
//! access here is one the language defines under such races (an atomic
//! access races with nothing). The peer is another process, outside this
//! one's memory model, and the hardware makes each aligned access atomic
//! whatever size the peer's are. Within one process (tests and fuzzing
//! map both sides) Rust's model also asks racing atomic accesses of which
//! one is a store to be of the same size, so a test's hostile writer stores
//! header words as words (`Region::write_word32`); scripts/miri.sh checks
//! these tests under Miri. Bounds are checked here with `assert!` as a
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

    /// The aligned 64-bit words from `offset` (8-aligned unless `count`
    /// is 0) on, `count` of them, all inside the mapping.
    fn words64(&self, offset: usize, count: usize) -> &[AtomicU64] {
        if count == 0 {
            return &[];
        }
        assert!(
            offset.is_multiple_of(8) && count <= (self.len.saturating_sub(offset)) / 8,
            "{count} words at {offset} of {}",
            self.len
        );
        // SAFETY: in bounds and aligned (checked above; the base is
        // page-aligned), the mapping lives as long as `self`, and the words
        // are only ever accessed atomically (module comment).
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts(self.base.add(offset).cast::<AtomicU64>(), count)
        }
    }

    /// Copies `out.len()` bytes at `offset` out of the mapping. Each byte is
    /// one the peer wrote at some moment; nothing more is promised, so the
    /// caller checks the copy, not the mapping.
    pub(crate) fn read(&self, offset: usize, out: &mut [u8]) {
        self.check_range(offset, out.len());
        // SAFETY: the range is inside the mapping (checked above) and `out`
        // is this process's own memory, borrowed exclusively.
        #[allow(unsafe_code)]
        if unsafe { bulk_copy(self.base.add(offset), out.as_mut_ptr(), out.len()) } {
            return;
        }
        // Bytes up to the first aligned word, whole words, then the rest:
        // the words are copied by iterators over both sides, which compile
        // to a load and a store each (indexing both cost about 3x that).
        let head = (offset.next_multiple_of(8) - offset).min(out.len());
        let (first, rest) = out.split_at_mut(head);
        for (i, byte) in first.iter_mut().enumerate() {
            *byte = self.byte(offset + i).load(Ordering::Relaxed);
        }
        let words = self.words64(offset + head, rest.len() / 8);
        let mut chunks = rest.chunks_exact_mut(8);
        for (chunk, word) in (&mut chunks).zip(words) {
            chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
        }
        let tail_at = offset + head + words.len() * 8;
        for (i, byte) in chunks.into_remainder().iter_mut().enumerate() {
            *byte = self.byte(tail_at + i).load(Ordering::Relaxed);
        }
    }

    /// Appends `len` bytes at `offset` to `out`, as `read` copies them,
    /// without first zeroing room for them in `out`.
    pub(crate) fn read_appending(&self, offset: usize, len: usize, out: &mut Vec<u8>) {
        self.check_range(offset, len);
        out.reserve(len);
        let start = out.len();
        let spare = &mut out.spare_capacity_mut()[..len];
        // SAFETY: the range is inside the mapping (checked above), `spare`
        // is `len` bytes of `out`'s own capacity, borrowed exclusively, and
        // a copy that happened wrote every one of them, so they are
        // initialised for `set_len`.
        #[allow(unsafe_code)]
        unsafe {
            if bulk_copy(self.base.add(offset), spare.as_mut_ptr().cast::<u8>(), len) {
                out.set_len(start + len);
                return;
            }
        }
        let head = (offset.next_multiple_of(8) - offset).min(len);
        let (first, rest) = spare.split_at_mut(head);
        for (i, byte) in first.iter_mut().enumerate() {
            byte.write(self.byte(offset + i).load(Ordering::Relaxed));
        }
        let words = self.words64(offset + head, rest.len() / 8);
        let mut chunks = rest.chunks_exact_mut(8);
        for (chunk, word) in (&mut chunks).zip(words) {
            for (byte, value) in chunk.iter_mut().zip(word.load(Ordering::Relaxed).to_ne_bytes()) {
                byte.write(value);
            }
        }
        let tail_at = offset + head + words.len() * 8;
        for (i, byte) in chunks.into_remainder().iter_mut().enumerate() {
            byte.write(self.byte(tail_at + i).load(Ordering::Relaxed));
        }
        // SAFETY: the `len` bytes after `start` were each written above
        // (the head, every whole word and the remainder cover them), and
        // `reserve` made room for them.
        #[allow(unsafe_code)]
        unsafe {
            out.set_len(start + len);
        }
    }

    /// Copies `bytes` into the mapping at `offset`.
    pub(crate) fn write(&self, offset: usize, bytes: &[u8]) {
        self.check_range(offset, bytes.len());
        // SAFETY: the range is inside the mapping (checked above) and
        // `bytes` is this process's own memory.
        #[allow(unsafe_code)]
        if unsafe { bulk_copy(bytes.as_ptr(), self.base.add(offset), bytes.len()) } {
            return;
        }
        let head = (offset.next_multiple_of(8) - offset).min(bytes.len());
        let (first, rest) = bytes.split_at(head);
        for (i, &byte) in first.iter().enumerate() {
            self.byte(offset + i).store(byte, Ordering::Relaxed);
        }
        let words = self.words64(offset + head, rest.len() / 8);
        let mut chunks = rest.chunks_exact(8);
        for (chunk, word) in (&mut chunks).zip(words) {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(chunk);
            word.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
        }
        let tail_at = offset + head + words.len() * 8;
        for (i, &byte) in chunks.remainder().iter().enumerate() {
            self.byte(tail_at + i).store(byte, Ordering::Relaxed);
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

/// Copies of at least this many bytes go through [`bulk_copy`]: below it,
/// the string instruction's start-up costs more than the word loop.
#[cfg_attr(not(all(target_arch = "x86_64", not(miri))), allow(dead_code))]
const BULK_BYTES: usize = 512;

/// Copies `len` bytes from `src` to `dst` with one `rep movsb` and returns
/// true, where that is available (x86-64, not under Miri, which cannot run
/// inline assembly) and `len` is at least [`BULK_BYTES`]; otherwise copies
/// nothing and returns false, and the caller copies word by word.
///
/// The word loop costs a load and a store per 8 bytes, since the compiler
/// neither widens nor merges atomic accesses; the string instruction moves
/// whole cache lines (a 16 KiB zero-copy write's bytes: measured 3-4x
/// faster, docs/bench-history/2026-11-28-server-16k-append-copies.md). Its
/// effect on the mapping is a sequence of byte loads (or stores), each
/// atomic, in some order: what the relaxed atomic copies here promise, no
/// more (each byte one the peer wrote at some moment). The assembly block
/// is opaque to the compiler, which derives nothing from the bytes'
/// staying put.
///
/// # Safety
///
/// `src` must be valid for reads and `dst` for writes of `len` bytes, the
/// two ranges must not overlap, and the side that is this process's own
/// memory must not be borrowed elsewhere during the call.
#[allow(unsafe_code)]
unsafe fn bulk_copy(src: *const u8, dst: *mut u8, len: usize) -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if len >= BULK_BYTES {
        // SAFETY: the caller's contract covers both ranges; the direction
        // flag is clear on entry to any Rust code (the ABI's rule), so the
        // copy runs forwards over exactly `len` bytes; `rep movsb` changes
        // no flags and no stack.
        unsafe {
            std::arch::asm!(
                "rep movsb",
                inout("rcx") len => _,
                inout("rsi") src => _,
                inout("rdi") dst => _,
                options(nostack, preserves_flags),
            );
        }
        return true;
    }
    let _ = (src, dst, len);
    false
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_copies_at_every_alignment_touch_only_their_bytes() {
        // Lengths around the bulk copy's threshold and a 16 KiB write's.
        let map = Mapping::anonymous(1 << 16, "test").expect("mmap");
        let source: Vec<u8> = (0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let lengths: &[usize] =
            if cfg!(miri) { &[BULK_BYTES, 600] } else { &[511, 512, 513, 1000, 4096, 16_384, 16_391] };
        for offset in 0..if cfg!(miri) { 3 } else { 17 } {
            for &length in lengths {
                let region = offset + length + 16;
                map.write(0, &vec![0u8; region]);
                map.write(offset, &source[..length]);
                let mut all = vec![0xffu8; region];
                map.read(0, &mut all);
                assert!(all[..offset].iter().all(|&b| b == 0), "before a write of {length} at {offset}");
                assert_eq!(&all[offset..offset + length], &source[..length], "write of {length} at {offset}");
                assert!(all[offset + length..].iter().all(|&b| b == 0), "after a write of {length} at {offset}");
                let mut out = vec![0u8; length];
                map.read(offset, &mut out);
                assert_eq!(out, &source[..length], "read of {length} at {offset}");
                let mut appended = vec![9u8; 5];
                map.read_appending(offset, length, &mut appended);
                assert_eq!(appended[..5], [9; 5]);
                assert_eq!(appended[5..], source[..length], "appending read of {length} at {offset}");
            }
        }
    }

    #[test]
    fn copies_at_every_alignment_and_length_touch_only_their_bytes() {
        let map = Mapping::anonymous(4096, "test").expect("mmap");
        let source: Vec<u8> = (0..100u8).map(|b| b.wrapping_mul(37).wrapping_add(1)).collect();
        // Under Miri (scripts/miri.sh) every alignment, fewer lengths.
        let step = if cfg!(miri) { 7 } else { 1 };
        for offset in 0..24 {
            for length in (0..40).step_by(step) {
                let mut zeros = vec![0u8; 128];
                map.write(0, &zeros);
                map.write(offset, &source[..length]);
                map.read(0, &mut zeros);
                let mut expected = vec![0u8; 128];
                expected[offset..offset + length].copy_from_slice(&source[..length]);
                assert_eq!(zeros, expected, "write of {length} at {offset}");
                let mut out = vec![0xffu8; length];
                map.read(offset, &mut out);
                assert_eq!(out, &source[..length], "read of {length} at {offset}");
                let mut appended = vec![7u8; 3];
                map.read_appending(offset, length, &mut appended);
                assert_eq!(appended[..3], [7, 7, 7]);
                assert_eq!(appended[3..], source[..length], "appending read of {length} at {offset}");
            }
        }
    }
}
