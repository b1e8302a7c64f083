//! Shared read-write mappings of files that grow in place: the heap's
//! objects (docs/heap.md, "Mapping").
//!
//! A [`SharedRegion`] reserves an address range once and keeps the file's
//! bytes `[0, len)` at its start. The real backend maps the file
//! `MAP_SHARED` over the whole reservation, so pages the file gains later
//! are already mapped at the same addresses ([`SharedRegion::grow_to`]
//! only widens the bounds the region hands out), no descriptor is kept, and
//! stores reach the page cache that every other process mapping or reading
//! the file sees. The simulated backend cannot share pages: its region is
//! an anonymous reservation filled from the file with reads and written
//! back by [`SharedRegion::flush`], so crash tests see exactly the bytes a
//! caller flushed and synced.

use std::collections::BTreeSet;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rustix::mm::{MapFlags, MprotectFlags, MsyncFlags, ProtFlags};

use crate::error::{IoError, IoResult};
use crate::storage::{read_exact_at, write_all_at, FileRef};

/// Whether a region may be written through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapAccess {
    /// Loads and stores (the file must be writable by the caller).
    ReadWrite,
    /// Loads only: a store through the region faults.
    ReadOnly,
}

/// Which file a path named when it was looked at: its device and inode
/// numbers. A file replaced under the same name (removed and made again,
/// or renamed over) has another identity; one truncated or written in place
/// keeps its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    /// The device holding the file (`st_dev`).
    pub device: u64,
    /// The file's inode number (`st_ino`).
    pub inode: u64,
}

/// A file's identity and length, read by its path without opening it
/// ([`crate::Storage::file_status`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStatus {
    /// Which file the path names; `None` on storage that does not tell (the
    /// simulation), where a caller cannot tell a replaced file from the one
    /// it saw.
    pub identity: Option<FileIdentity>,
    /// The file's length in bytes.
    pub len: u64,
}

/// How the region's pages reach the file.
#[derive(Debug)]
enum Backing {
    /// The file itself is mapped `MAP_SHARED` over the whole reservation.
    /// `descriptor` is the file, opened at the first
    /// [`SharedRegion::write_back_except`] and kept until
    /// [`SharedRegion::release_descriptor`] (the owner bounds how many
    /// regions keep one) or the drop: a sync per durable operation then
    /// opens nothing.
    Mapped { descriptor: Mutex<Option<std::fs::File>> },
    /// Anonymous memory copied from the file, written back by `flush`. The
    /// lock serialises growth (which changes protections and fills pages).
    Emulated { file: FileRef, grow: Mutex<()> },
}

/// A file mapped at a fixed base that stays put while the file grows up to
/// the reservation. Unmapped when dropped.
///
/// The bytes are shared memory: any thread (and, for a real mapping, any
/// process) may store to them at any time through [`SharedRegion::as_ptr`].
/// The region never creates Rust references to them; callers that do must
/// arrange their own exclusion.
#[derive(Debug)]
pub struct SharedRegion {
    base: NonNull<u8>,
    /// Bytes reserved at `base`, a multiple of the page size.
    reserve: u64,
    /// Bytes of the file the region exposes; only grows.
    len: AtomicU64,
    access: MapAccess,
    backing: Backing,
    path: PathBuf,
    /// The file mapped, as it was when mapped (real mappings only).
    identity: Option<FileIdentity>,
}

// SAFETY: the region owns its mapping (nothing else unmaps it) and holds no
// thread-bound state: the base is a plain address valid until drop, `len` is
// atomic, and the emulated backing's file handle is Send + Sync. Concurrent
// stores through the base are the shared-memory contract the type documents.
#[allow(unsafe_code)]
unsafe impl Send for SharedRegion {}
// SAFETY: as for Send; every `&self` method is safe to call concurrently
// (growth of an emulated region is serialised by its lock, a mapped region's
// growth only raises an atomic).
#[allow(unsafe_code)]
unsafe impl Sync for SharedRegion {}

/// The system's page size.
pub fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

fn round_up(value: u64, to: u64) -> Option<u64> {
    value.checked_add(to - 1).map(|v| v / to * to)
}

fn invalid(path: &Path, reason: &'static str) -> IoError {
    IoError::InvalidInput { path: path.to_path_buf(), reason }
}

fn os(op: &'static str, path: &Path, e: rustix::io::Errno) -> IoError {
    IoError::os(op, path, e.into())
}

/// The reservation for a request: at least one page, whole pages, and
/// addressable on this machine.
fn reservation(path: &Path, reserve: u64, len: u64) -> IoResult<u64> {
    if len > reserve {
        return Err(invalid(path, "the file is longer than the reservation"));
    }
    let reserve = round_up(reserve.max(1), page_size()).ok_or_else(|| invalid(path, "reservation too large"))?;
    usize::try_from(reserve).map_err(|_| invalid(path, "reservation exceeds the address space"))?;
    Ok(reserve)
}

impl SharedRegion {
    /// Maps `file` (its length now, `len`; which file it is, `identity`)
    /// `MAP_SHARED` over a reservation of `reserve` bytes. The descriptor
    /// may be closed afterwards.
    pub(crate) fn map_file(
        file: &std::fs::File,
        path: &Path,
        status: FileStatus,
        reserve: u64,
        access: MapAccess,
    ) -> IoResult<SharedRegion> {
        let len = status.len;
        let reserve = reservation(path, reserve, len)?;
        let prot = match access {
            MapAccess::ReadWrite => ProtFlags::READ | ProtFlags::WRITE,
            MapAccess::ReadOnly => ProtFlags::READ,
        };
        #[allow(unsafe_code)]
        // SAFETY: a null hint lets the kernel choose a free range, so no
        // existing mapping is replaced; the length fits usize (checked by
        // `reservation`). Pages past the file's end are mapped but never
        // handed out (`len` bounds every access the region makes), and become
        // the file's pages once it grows.
        let base = unsafe {
            rustix::mm::mmap(std::ptr::null_mut(), reserve as usize, prot, MapFlags::SHARED, file, 0)
                .map_err(|e| os("mmap", path, e))?
        };
        let base = NonNull::new(base.cast::<u8>()).ok_or_else(|| invalid(path, "mmap returned null"))?;
        Ok(SharedRegion {
            base,
            reserve,
            len: AtomicU64::new(len),
            access,
            backing: Backing::Mapped { descriptor: Mutex::new(None) },
            path: path.to_path_buf(),
            identity: status.identity,
        })
    }

    /// An emulated region: anonymous memory of `reserve` bytes holding a
    /// copy of `file`, written back by [`SharedRegion::flush`]. For backends
    /// that cannot share pages (the simulation).
    pub fn emulated(file: FileRef, reserve: u64, access: MapAccess) -> IoResult<SharedRegion> {
        let path = file.path().to_path_buf();
        let len = file.len()?;
        let reserve = reservation(&path, reserve, len)?;
        #[allow(unsafe_code)]
        // SAFETY: a null hint lets the kernel choose a free range; the
        // reservation is inaccessible (PROT_NONE) until `grow_to` opens the
        // pages that hold file bytes, and NORESERVE commits no memory for it.
        let base = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                reserve as usize,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )
            .map_err(|e| os("mmap", &path, e))?
        };
        let base = NonNull::new(base.cast::<u8>()).ok_or_else(|| invalid(&path, "mmap returned null"))?;
        let region = SharedRegion {
            base,
            reserve,
            len: AtomicU64::new(0),
            access,
            backing: Backing::Emulated { file, grow: Mutex::new(()) },
            path,
            identity: None,
        };
        region.grow_to(len)?;
        Ok(region)
    }

    /// The first byte of the file in memory. Valid for
    /// [`SharedRegion::len`] bytes until the region is dropped; writable
    /// only if the region is [`MapAccess::ReadWrite`].
    pub fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Bytes of the file the region exposes.
    pub fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    /// Whether the region exposes no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes reserved at the base: the most [`SharedRegion::grow_to`] reaches.
    pub fn reserve(&self) -> u64 {
        self.reserve
    }

    /// Whether stores are allowed.
    pub fn access(&self) -> MapAccess {
        self.access
    }

    /// Whether the bytes are a copy written back by `flush` (the simulation)
    /// rather than the file's own pages.
    pub fn is_emulated(&self) -> bool {
        matches!(self.backing, Backing::Emulated { .. })
    }

    /// The file the region maps, for error messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Which file a real mapping maps (as [`crate::Storage::file_status`]
    /// reports it); `None` for an emulated region, whose bytes are a copy
    /// and so cannot be told current by the file's identity alone.
    pub fn identity(&self) -> Option<FileIdentity> {
        self.identity
    }

    /// Exposes the file's bytes up to `new_len` at the same base, after the
    /// caller extended the file to at least that length. Fails (changing
    /// nothing) past the reservation: the caller maps a new region then.
    /// A smaller `new_len` than the current one is refused: regions never
    /// shrink, so pointers handed out stay in bounds.
    pub fn grow_to(&self, new_len: u64) -> IoResult<()> {
        if new_len > self.reserve {
            return Err(invalid(&self.path, "growth past the region's reservation"));
        }
        match &self.backing {
            Backing::Mapped { .. } => {
                let old = self.len.fetch_max(new_len, Ordering::AcqRel);
                if new_len < old {
                    return Err(invalid(&self.path, "a shared region never shrinks"));
                }
                Ok(())
            }
            Backing::Emulated { file, grow } => {
                let _serial = grow.lock();
                let old = self.len.load(Ordering::Acquire);
                if new_len < old {
                    return Err(invalid(&self.path, "a shared region never shrinks"));
                }
                if new_len == old {
                    return Ok(());
                }
                self.fill(file, old, new_len)?;
                self.len.store(new_len, Ordering::Release);
                Ok(())
            }
        }
    }

    /// Copies the first `len` bytes `source` exposes to the start of this
    /// region (writable, at least `len` long: both checked). Either
    /// region's bytes may be stored to by other threads meanwhile (shared
    /// memory): the copy then holds some mix of old and new bytes, as a
    /// copy by the kernel would.
    pub fn copy_from(&self, source: &SharedRegion, len: u64) -> IoResult<()> {
        if len > source.len() || len > self.len() {
            return Err(invalid(&self.path, "copy past a region's length"));
        }
        if self.access != MapAccess::ReadWrite {
            return Err(invalid(&self.path, "copy into a read-only region"));
        }
        #[allow(unsafe_code)]
        // SAFETY: `[0, len)` is inside both regions' lengths (checked
        // above), so its pages are mapped in each, readable in `source` and
        // writable here; both regions stay mapped for the copy (borrowed).
        // `copy` allows the two to be one region. No reference to the
        // shared bytes is formed.
        unsafe {
            std::ptr::copy(source.base.as_ptr(), self.base.as_ptr(), len as usize);
        }
        Ok(())
    }

    /// Writes the first `len` bytes the region exposes (checked) to the
    /// start of `file` (`path`, for errors) with `pwrite` straight from
    /// the region's pages: one copy, by the kernel, where
    /// `copy_file_range` from the mapped file splices its page cache one
    /// small folio at a time (a file written through a mapping has 4 KiB
    /// folios): 1 MiB in 216 against 293 µs (2026-11-28, this machine).
    pub(crate) fn write_to(&self, file: &std::fs::File, path: &Path, len: u64) -> IoResult<()> {
        use std::os::fd::AsRawFd;
        if len > self.len() {
            return Err(invalid(&self.path, "write past the region's length"));
        }
        let mut done = 0u64;
        while done < len {
            let want = usize::try_from(len - done).unwrap_or(usize::MAX).min(1 << 30);
            let offset = libc::off_t::try_from(done).map_err(|_| invalid(path, "offset past off_t"))?;
            #[allow(unsafe_code)]
            // SAFETY: `[done, done + want)` lies below `len <= self.len()`,
            // so its pages are mapped and readable, and the borrow keeps the
            // mapping alive for the call. The kernel reads the bytes; Rust
            // forms no reference to them (other threads may store there).
            let written = unsafe {
                libc::pwrite(file.as_raw_fd(), self.base.as_ptr().add(done as usize).cast::<c_void>(), want, offset)
            };
            match written {
                n if n > 0 => done += n as u64,
                0 => return Err(IoError::os("pwrite", path, std::io::ErrorKind::WriteZero.into())),
                _ => {
                    let error = std::io::Error::last_os_error();
                    if error.kind() != std::io::ErrorKind::Interrupted {
                        return Err(IoError::os("pwrite", path, error));
                    }
                }
            }
        }
        Ok(())
    }

    /// Maps every page of the bytes the region exposes writable now
    /// (Linux's `MADV_POPULATE_WRITE`: page tables made, pages read if not
    /// cached, marked dirty as a store would), so that later stores take
    /// no page fault: for an owner that can pay for the faults before the
    /// stores that would otherwise meet them. Says whether the kernel did
    /// it (false for an emulated or read-only region, on a kernel without
    /// the advice, or for a file cut short meanwhile).
    pub fn populate_for_stores(&self) -> bool {
        let len = self.len();
        if len == 0 || self.access != MapAccess::ReadWrite || self.is_emulated() {
            return false;
        }
        #[cfg(target_os = "linux")]
        {
            #[allow(unsafe_code)]
            // SAFETY: `[0, len)` lies inside the reservation this region owns
            // and maps its file read-write; populating changes no byte.
            unsafe {
                rustix::mm::madvise(
                    self.base.as_ptr().cast::<c_void>(),
                    len as usize,
                    rustix::mm::Advice::LinuxPopulateWrite,
                )
                .is_ok()
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    /// Exposes no byte of the file until [`SharedRegion::grow_to`], for an
    /// owner about to change the file's length under a region it has not
    /// handed out (the exclusive borrow: nothing else holds this region).
    /// A real mapping keeps its pages mapped; an emulated region fills
    /// its bytes from the file again as it grows.
    pub fn expose_none(&mut self) {
        *self.len.get_mut() = 0;
    }

    /// Opens the pages covering `[old, new)` of an emulated region and copies
    /// the file's bytes there. Runs under the growth lock.
    fn fill(&self, file: &FileRef, old: u64, new: u64) -> IoResult<()> {
        let page = page_size();
        let start = old / page * page;
        let end = round_up(new, page).ok_or_else(|| invalid(&self.path, "length overflows"))?;
        let mut bytes = vec![0u8; usize::try_from(new - old).map_err(|_| invalid(&self.path, "length too large"))?];
        read_exact_at(&**file, &mut bytes, old)?;
        self.protect(start, end, MprotectFlags::READ | MprotectFlags::WRITE)?;
        #[allow(unsafe_code)]
        // SAFETY: `[old, new)` lies inside the reservation (new <= reserve,
        // checked by the caller) and its pages were just made writable; no
        // thread reads or writes those bytes yet, because `len` still says
        // `old` and the region hands out nothing past it.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.as_ptr().add(old as usize), bytes.len());
        }
        if self.access == MapAccess::ReadOnly {
            self.protect(start, end, MprotectFlags::READ)?;
        }
        Ok(())
    }

    fn protect(&self, start: u64, end: u64, flags: MprotectFlags) -> IoResult<()> {
        if start >= end {
            return Ok(());
        }
        #[allow(unsafe_code)]
        // SAFETY: `[start, end)` is page-aligned and inside the reservation
        // this region owns; widening or narrowing its protection affects no
        // other mapping.
        unsafe {
            rustix::mm::mprotect(self.base.as_ptr().add(start as usize).cast::<c_void>(), (end - start) as usize, flags)
                .map_err(|e| os("mprotect", &self.path, e))
        }
    }

    /// Makes the bytes `[offset, offset + len)` stored through the region
    /// reach the file. A real mapping waits for them to be written and
    /// synced (msync MS_SYNC). An emulated region writes them to the file
    /// with `write_at` and nothing else: the caller syncs the file. A
    /// read-only region has nothing to write.
    pub fn flush(&self, offset: u64, len: u64) -> IoResult<()> {
        let end = offset.checked_add(len).ok_or_else(|| invalid(&self.path, "flush range overflows"))?;
        if end > self.len() {
            return Err(invalid(&self.path, "flush past the region's length"));
        }
        if len == 0 || self.access == MapAccess::ReadOnly {
            return Ok(());
        }
        match &self.backing {
            Backing::Mapped { .. } => {
                let start = offset / page_size() * page_size();
                #[allow(unsafe_code)]
                // SAFETY: `[start, end)` lies inside the mapped reservation
                // (end <= len <= reserve) and msync neither reads nor changes
                // the bytes as Rust sees them.
                unsafe {
                    rustix::mm::msync(
                        self.base.as_ptr().add(start as usize).cast::<c_void>(),
                        (end - start) as usize,
                        MsyncFlags::SYNC,
                    )
                    .map_err(|e| os("msync", &self.path, e))
                }
            }
            Backing::Emulated { file, .. } => {
                let mut bytes = vec![0u8; len as usize];
                #[allow(unsafe_code)]
                // SAFETY: `[offset, end)` is below `len`, so its pages are
                // readable. Other threads may store to these bytes meanwhile
                // (shared memory): the copy then holds some mix of old and new
                // bytes, exactly what a kernel write-back of a mapping would
                // write. No reference to the shared bytes is formed.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.base.as_ptr().add(offset as usize),
                        bytes.as_mut_ptr(),
                        bytes.len(),
                    );
                }
                write_all_at(&**file, &bytes, offset)
            }
        }
    }
}

impl SharedRegion {
    /// Writes to the device, and waits for, every page of `[0, end)` (cut
    /// at [`SharedRegion::len`]) outside `skip` (page offsets) whose stores
    /// may not be on the file's blocks, without flushing the device's cache
    /// or writing metadata: for a real mapping, the pages the page cache
    /// holds dirty or under write-back (sync_file_range WAIT_BEFORE | WRITE
    /// | WAIT_AFTER over the ranges between the pages of `skip`, through
    /// the region's descriptor); for an emulated region, the pages whose
    /// bytes differ from the file's, written and written back as
    /// [`SharedRegion::write_back_at_will`] does. Those bytes are durable
    /// once a later sync flushes the device ([`crate::File::write_back`]).
    /// Returns false, having written nothing, if the file at the region's
    /// path is not the one mapped. A read-only region has nothing to write.
    ///
    /// A page stored to through a shared mapping is dirty from the store's
    /// write fault until its write-back starts, and under write-back until
    /// that ends; a clean page's entries are write-protected, so the next
    /// store faults and dirties it again. So when this returns, every store
    /// made before the call into a page outside `skip` was written to the
    /// device. The kernel finds dirty pages by the page cache's tags, so a
    /// range with none costs no walk over its cached pages (cachestat(2)
    /// walked every one: 16% of a durable allocation, 2026-11-27).
    pub fn write_back_except(&self, end: u64, skip: &BTreeSet<u64>) -> IoResult<bool> {
        if self.access == MapAccess::ReadOnly {
            return Ok(true);
        }
        let page = page_size();
        let end = end.min(self.len());
        let mut ranges = Vec::new();
        let mut from = 0;
        for &at in skip.iter().take_while(|&&at| at < end) {
            if at > from {
                ranges.push((from, at));
            }
            from = from.max(at + page);
        }
        if from < end {
            ranges.push((from, end));
        }
        self.write_back_ranges(&ranges, true)
    }

    /// Starts writing to the device the pages at `pages` (page offsets,
    /// those at or past `end` or [`SharedRegion::len`] left out), and any
    /// other page between the first and the last of them, whose stores may
    /// not be on the file's blocks, without waiting for the writes: one
    /// sync_file_range(WRITE) over that span, a submission for them all
    /// (an emulated region writes them to its file, pending). A later
    /// [`SharedRegion::write_back_except`] that does not skip them waits
    /// for these writes. Returns false, having written nothing, if the
    /// file at the region's path is not the one mapped.
    pub fn start_write_back(&self, end: u64, pages: &BTreeSet<u64>) -> IoResult<bool> {
        if self.access == MapAccess::ReadOnly {
            return Ok(true);
        }
        let end = end.min(self.len());
        let mut within = pages.iter().copied().take_while(|&at| at < end);
        let Some(first) = within.next() else { return Ok(true) };
        let last = within.last().unwrap_or(first);
        let stop = (last + page_size()).min(end);
        self.write_back_ranges(&[(first, stop)], false)
    }

    /// Writes back `ranges` (start, stop) as [`SharedRegion::write_back_except`]
    /// says, waiting for the writes when `wait`.
    fn write_back_ranges(&self, ranges: &[(u64, u64)], wait: bool) -> IoResult<bool> {
        let page = page_size();
        match &self.backing {
            Backing::Mapped { descriptor } => {
                let mut descriptor = descriptor.lock();
                let file = match descriptor.take() {
                    Some(file) => file,
                    None => match self.open_mapped_file()? {
                        Some(file) => file,
                        None => return Ok(false),
                    },
                };
                let file = descriptor.insert(file);
                for &(start, stop) in ranges {
                    crate::write_back::sync_file_range(file, start, stop - start, wait)
                        .map_err(|e| IoError::os("write_back", &self.path, e))?;
                }
                Ok(true)
            }
            Backing::Emulated { file, .. } => {
                // The pages whose bytes differ from the file's are written
                // to it (the page cache's dirty pages); waiting moves every
                // write of the range to the device (written back, durable
                // at the next flush), those an earlier call without a wait
                // only started included. Without a wait they stay pending:
                // a write started may not have ended when a flush comes.
                let mut on_file = vec![0u8; page as usize];
                let mut here = vec![0u8; page as usize];
                for &(start, stop) in ranges {
                    let mut at = start;
                    while at < stop {
                        let n = (stop - at).min(page) as usize;
                        read_exact_at(&**file, &mut on_file[..n], at)?;
                        self.copy_out(at, &mut here[..n]);
                        if on_file[..n] != here[..n] {
                            write_all_at(&**file, &here[..n], at)?;
                        }
                        at += n as u64;
                    }
                    if wait {
                        file.write_back(start, stop - start)?;
                    }
                }
                Ok(true)
            }
        }
    }

    /// The mapped file, opened by its path; `None` if the path names
    /// another file now.
    fn open_mapped_file(&self) -> IoResult<Option<std::fs::File>> {
        let file = std::fs::File::open(&self.path).map_err(|e| IoError::os("open", &self.path, e))?;
        if let Some(identity) = self.identity {
            let stat = rustix::fs::fstat(&file).map_err(|e| os("fstat", &self.path, e))?;
            #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
            let now = FileIdentity { device: stat.st_dev as u64, inode: stat.st_ino as u64 };
            if now != identity {
                return Ok(None);
            }
        }
        Ok(Some(file))
    }

    /// Closes the descriptor [`SharedRegion::write_back_except`] kept, if
    /// any (the next one opens the file again).
    pub fn release_descriptor(&self) {
        if let Backing::Mapped { descriptor } = &self.backing {
            descriptor.lock().take();
        }
    }

    /// Whether the region keeps a descriptor of its file now.
    pub fn holds_descriptor(&self) -> bool {
        matches!(&self.backing, Backing::Mapped { descriptor } if descriptor.lock().is_some())
    }

    /// Copies the region's bytes at `offset` into `out` (inside
    /// [`SharedRegion::len`]: checked). Other threads may store meanwhile:
    /// the copy is then some mix of old and new bytes, as a write-back's.
    pub fn read_into(&self, offset: u64, out: &mut [u8]) -> IoResult<()> {
        match offset.checked_add(out.len() as u64) {
            Some(end) if end <= self.len() => {
                self.copy_out(offset, out);
                Ok(())
            }
            _ => Err(invalid(&self.path, "read past the region's length")),
        }
    }

    /// `read_into` without the bounds check.
    fn copy_out(&self, offset: u64, out: &mut [u8]) {
        #[allow(unsafe_code)]
        // SAFETY: callers keep `[offset, offset + out.len())` below `len`,
        // so the pages are mapped and readable; no reference to the shared
        // bytes is formed.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.as_ptr().add(offset as usize), out.as_mut_ptr(), out.len());
        }
    }

    /// Makes every page of `[offset, offset + len)` (inside the region)
    /// dirty without changing a byte, so that the next
    /// [`SharedRegion::flush`] writes them all to the file's blocks and the
    /// file has no hole there (a page never stored to would stay one). A
    /// real mapping takes an atomic `or` of zero on one byte of each page,
    /// which a concurrent store cannot be lost to; an emulated region
    /// writes its whole range at every flush, so has nothing to do.
    pub fn dirty_range(&self, offset: u64, len: u64) -> IoResult<()> {
        let end = offset.checked_add(len).filter(|end| *end <= self.len());
        let Some(end) = end else { return Err(invalid(&self.path, "range past the region's length")) };
        if self.access == MapAccess::ReadOnly || matches!(self.backing, Backing::Emulated { .. }) {
            return Ok(());
        }
        let page = page_size();
        let mut at = offset / page * page;
        while at < end {
            let byte = at.max(offset);
            #[allow(unsafe_code)]
            // SAFETY: `byte` is below `len`, in a writable shared mapping;
            // the byte is accessed only atomically here, and an `or` of zero
            // leaves whatever any other store put there.
            unsafe {
                let cell = &*(self.base.as_ptr().add(byte as usize) as *const std::sync::atomic::AtomicU8);
                cell.fetch_or(0, Ordering::Relaxed);
            }
            at += page;
        }
        Ok(())
    }

    /// For crash tests: does what the kernel does to a mapping's dirty
    /// pages at will, to `[offset, offset + len)` of an emulated region:
    /// writes them to the file and to the device without a flush
    /// ([`crate::File::write_back`]: durable at any later sync, on written
    /// blocks only). A real mapping's kernel does this on its own: nothing
    /// to do.
    pub fn write_back_at_will(&self, offset: u64, len: u64) -> IoResult<()> {
        let Backing::Emulated { file, .. } = &self.backing else { return Ok(()) };
        if self.access == MapAccess::ReadOnly || len == 0 {
            return Ok(());
        }
        let end = offset.checked_add(len).filter(|end| *end <= self.len());
        if end.is_none() {
            return Err(invalid(&self.path, "write-back past the region's length"));
        }
        let mut bytes = vec![0u8; len as usize];
        self.copy_out(offset, &mut bytes);
        write_all_at(&**file, &bytes, offset)?;
        file.write_back(offset, len)
    }
}

impl Drop for SharedRegion {
    fn drop(&mut self) {
        #[allow(unsafe_code)]
        // SAFETY: the reservation was mapped by this region and is unmapped
        // once, here; every pointer the region handed out was documented as
        // valid only until the drop.
        let result = unsafe { rustix::mm::munmap(self.base.as_ptr().cast::<c_void>(), self.reserve as usize) };
        if let Err(e) = result {
            tracing::error!(path = %self.path.display(), error = %e, "munmap of a shared region failed");
        }
    }
}
