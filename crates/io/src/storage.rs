//! The `Storage` and `File` traits: the only way engine crates touch files.

use std::path::Path;
use std::sync::Arc;

use crate::error::{IoError, IoResult};

/// A shared handle to a storage backend.
pub type StorageRef = Arc<dyn Storage>;
/// A shared handle to an open file.
pub type FileRef = Arc<dyn File>;

/// How to open a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Create the file if it does not exist.
    pub create: bool,
    /// Fail with [`IoError::AlreadyExists`] if the file exists (implies `create`).
    pub create_new: bool,
    /// Open for writing as well as reading.
    pub write: bool,
    /// Writes of whole aligned blocks bypass the page cache (O_DIRECT)
    /// where the backend and file system allow it; other writes, and all
    /// reads, go through the cache as usual. Durability is unchanged:
    /// a write is durable only after [`File::sync_data`]. For files written
    /// in whole blocks and rarely read back (the log): no copy into the
    /// cache and no write-back pass over it at each sync.
    pub direct: bool,
}

impl OpenOptions {
    /// Open an existing file read-only.
    pub const READ: OpenOptions = OpenOptions { create: false, create_new: false, write: false, direct: false };
    /// Open an existing file for reading and writing.
    pub const WRITE: OpenOptions = OpenOptions { create: false, create_new: false, write: true, direct: false };
    /// Create a new file (it must not exist) for reading and writing.
    pub const CREATE_NEW: OpenOptions = OpenOptions { create: true, create_new: true, write: true, direct: false };
    /// Open for reading and writing, creating the file if missing.
    pub const CREATE: OpenOptions = OpenOptions { create: true, create_new: false, write: true, direct: false };

    /// These options with [`OpenOptions::direct`] set.
    pub const fn direct(self) -> OpenOptions {
        OpenOptions { direct: true, ..self }
    }
}

/// Alignment of a direct write's offset, length and buffer.
pub const DIRECT_ALIGN: usize = 4096;

/// An open file. All offsets are absolute; there is no cursor, so a handle
/// can be shared between threads.
pub trait File: Send + Sync + std::fmt::Debug {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read
    /// (fewer only at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> IoResult<usize>;
    /// Writes up to `buf.len()` bytes at `offset`; returns how many were
    /// written. A short count is possible (a full device); callers use
    /// [`write_all_at`].
    fn write_at(&self, buf: &[u8], offset: u64) -> IoResult<usize>;
    /// Makes every completed write to this file durable (fdatasync). A
    /// failure may have lost those writes even if a later call succeeds.
    fn sync_data(&self) -> IoResult<()>;
    /// Whether writes of whole aligned blocks ([`DIRECT_ALIGN`]) skip the
    /// page cache (the file was opened with [`OpenOptions::direct`] and
    /// the file system took it). The default: no.
    fn writes_direct(&self) -> bool {
        false
    }
    /// Reserves space for `[offset, offset + len)`, extending the file if
    /// needed (fallocate without KEEP_SIZE). Bytes already in the range are
    /// kept; bytes the call adds past the old end read as zeros.
    fn allocate(&self, offset: u64, len: u64) -> IoResult<()>;
    /// Frees the space of `[offset, offset + len)` while keeping the file's
    /// length (fallocate PUNCH_HOLE | KEEP_SIZE). Reads of the range return zeros.
    fn punch_hole(&self, offset: u64, len: u64) -> IoResult<()>;
    /// Sets the file's length, zero-filling on growth.
    fn set_len(&self, len: u64) -> IoResult<()>;
    /// The file's current length in bytes.
    fn len(&self) -> IoResult<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> IoResult<bool> {
        Ok(self.len()? == 0)
    }
    /// The path the file was opened with, for error messages.
    fn path(&self) -> &Path;
    /// The whole file mapped read-only, if this backend maps files (the
    /// real one does; the simulation does not, and callers then read with
    /// [`File::read_at`]). Only for a file nothing writes, truncates or
    /// replaces in place while the mapping lives; `None` for an empty file.
    fn map(&self) -> IoResult<Option<Arc<crate::Mapping>>> {
        Ok(None)
    }
    /// The ranges `(start, end)` of the file, in order, that may not lie
    /// on blocks allocated and written on disk (holes, and ranges whose
    /// metadata a pending operation changes), or `None` when unknown (the
    /// default). Overwriting bytes outside them changes no file metadata,
    /// so [`File::write_back`] plus a device flush makes the new bytes
    /// durable. Costs a walk of the file's extents: for use at open.
    fn holes(&self) -> IoResult<Option<Vec<(u64, u64)>>> {
        Ok(None)
    }
    /// Starts writing the range's dirty pages to the device, without
    /// waiting (sync_file_range WRITE). A hint: the default does nothing.
    fn start_write_back(&self, offset: u64, len: u64) -> IoResult<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// Asks the OS to drop the range's clean cached pages (fadvise
    /// DONTNEED; `len` 0 means to the end of the file). A hint: the
    /// default does nothing. For a range written in large stretches and
    /// then overwritten in small pieces (a zero-filled log segment): see
    /// docs/design.md, "A zero-filled segment's pages are dropped".
    fn drop_cache(&self, offset: u64, len: u64) -> IoResult<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// Writes the range's dirty pages to the device and waits for them,
    /// without flushing the device's cache or writing metadata
    /// (sync_file_range WAIT_BEFORE | WRITE | WAIT_AFTER). The bytes are
    /// durable only after a later sync on a storage that
    /// [`Storage::shares_flush`] says flushes them, and only outside the
    /// [`File::holes`] of the file before they were written. The default
    /// syncs the whole file, which is always enough.
    fn write_back(&self, offset: u64, len: u64) -> IoResult<()> {
        let _ = (offset, len);
        self.sync_data()
    }
}

/// A held exclusive lock on a file; released when dropped (or when the
/// process dies, for the real backend).
pub trait Lock: Send + Sync + std::fmt::Debug {}

/// A directory held open so that the files in it are looked up by name
/// without walking the directory's path each time
/// ([`Storage::open_directory`]).
pub trait Directory: Send + Sync + std::fmt::Debug {
    /// The identity and length of the file `name` in this directory,
    /// without opening it (one `fstatat` on the real backend).
    fn file_status(&self, name: &str) -> IoResult<crate::FileStatus>;
}

/// A shared directory handle.
pub type DirectoryRef = Box<dyn Directory>;

/// A file system as the engine sees it.
///
/// Directory operations (create, rename, remove) are durable only after
/// [`Storage::sync_dir`] on the directory that holds the name.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Opens (or creates) a file.
    fn open(&self, path: &Path, options: OpenOptions) -> IoResult<FileRef>;
    /// Creates a directory and any missing parents. Like a file create, the
    /// new directory's name is durable only after its parent is synced.
    fn create_dir_all(&self, path: &Path) -> IoResult<()>;
    /// Names in a directory (files and directories), sorted, without `.`/`..`.
    fn list_dir(&self, path: &Path) -> IoResult<Vec<String>>;
    /// Atomically renames `from` to `to`, replacing `to` if it exists. Both
    /// must be in the same directory.
    fn rename(&self, from: &Path, to: &Path) -> IoResult<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> IoResult<()>;
    /// Makes the directory's entries (creates, renames, removes) durable.
    fn sync_dir(&self, path: &Path) -> IoResult<()>;
    /// Whether a file or directory exists.
    fn exists(&self, path: &Path) -> IoResult<bool>;
    /// Takes an exclusive lock on `path` (creating it if needed) without
    /// waiting; fails with [`IoError::Locked`] if another owner holds it.
    fn lock(&self, path: &Path) -> IoResult<Box<dyn Lock>>;
    /// Bytes the file system holding `path` still has for unprivileged
    /// writers (`statvfs`'s `f_bavail * f_frsize`), for `statfs`. The
    /// default knows no bound (`u64::MAX`): for test doubles.
    fn available_bytes(&self, path: &Path) -> IoResult<u64> {
        let _ = path;
        Ok(u64::MAX)
    }
    /// Whether a [`File::sync_data`] of any file under `synced` flushes the
    /// device cache that [`File::write_back`] of files under `written` wrote
    /// to, so written-back bytes (on written blocks) are durable once such a
    /// sync that started after the write-back returned. The default says
    /// no: write-backs are then never relied on.
    fn shares_flush(&self, synced: &Path, written: &Path) -> IoResult<bool> {
        let _ = (synced, written);
        Ok(false)
    }
    /// Whether a sync of a file created in directory `dir` since `dir`'s
    /// last sync ([`File::sync_data`], or `msync(MS_SYNC)` of a mapping of
    /// it) also makes the file's entry in `dir` durable, so that syncing
    /// `dir` after it would add only a device flush. The default says no:
    /// the directory is then synced.
    fn file_sync_keeps_new_entry(&self, dir: &Path) -> IoResult<bool> {
        let _ = dir;
        Ok(false)
    }
    /// The poison latch this storage already goes through, if it is a
    /// [`crate::CheckedStorage`]: an engine wraps its storage in one only
    /// once, so every handle shares one latch.
    fn checked(&self) -> Option<crate::CheckedStorage> {
        None
    }
    /// The identity and length of the file at `path`, read without opening
    /// it (one `stat` on the real backend), so a caller that mapped the
    /// file earlier can tell whether the name still names the file it
    /// mapped and how long that file is now. The default opens the file
    /// for its length and reports no identity (the simulation).
    fn file_status(&self, path: &Path) -> IoResult<crate::FileStatus> {
        let file = self.open(path, OpenOptions::READ)?;
        Ok(crate::FileStatus { identity: None, len: file.len()? })
    }
    /// Holds the directory at `path` open for [`Directory::file_status`]
    /// lookups by name: one descriptor for the directory (`O_PATH` on the
    /// real backend), none per file. `None` where the storage has no such
    /// handle (the default; the simulation): callers then use
    /// [`Storage::file_status`] with the file's path.
    fn open_directory(&self, path: &Path) -> IoResult<Option<DirectoryRef>> {
        let _ = path;
        Ok(None)
    }
    /// Sets the length of the file at `path` (zeros past the old end),
    /// without keeping it open: one `truncate` on the real backend.
    fn set_file_len(&self, path: &Path, len: u64) -> IoResult<()> {
        self.open(path, OpenOptions::WRITE)?.set_len(len)
    }
    /// Opens the file at `path` for writing (creating it if `create`: it
    /// must not exist then), extends it to `len` bytes (zeros) if it is
    /// shorter, and maps it as [`Storage::map_shared`] does, through the
    /// one descriptor on the real backend. For a new heap object: its file
    /// made and mapped in one open.
    fn map_shared_sized(
        &self,
        path: &Path,
        create: bool,
        len: u64,
        reserve: u64,
        access: crate::MapAccess,
    ) -> IoResult<crate::SharedRegion> {
        let options = if create { OpenOptions::CREATE_NEW } else { OpenOptions::WRITE };
        let file = self.open(path, options)?;
        if file.len()? < len {
            file.set_len(len)?;
        }
        drop(file);
        self.map_shared(path, reserve, access)
    }
    /// Makes the first `len` bytes of the file at `to` (which exists, not
    /// kept open) the first `len` bytes `source` exposes (checked); `to`
    /// ends at least `len` bytes long. Other threads may store to `source`
    /// meanwhile: `to` then gets some mix of old and new bytes, as from a
    /// write-back. The real backend writes straight from the mapped pages
    /// (`pwrite`: one copy, by the kernel); the default copies through a
    /// buffer.
    fn write_file_from(&self, source: &crate::SharedRegion, to: &Path, len: u64) -> IoResult<()> {
        if len > source.len() {
            return Err(IoError::InvalidInput { path: to.to_path_buf(), reason: "write past the region's length" });
        }
        let target = self.open(to, OpenOptions::WRITE)?;
        let mut buf = vec![0u8; len.min(1 << 20) as usize];
        let mut offset = 0;
        while offset < len {
            let n = (len - offset).min(buf.len() as u64) as usize;
            source.read_into(offset, &mut buf[..n])?;
            write_all_at(&*target, &buf[..n], offset)?;
            offset += n as u64;
        }
        Ok(())
    }
    /// Opens the file at `path` for writing only if no other open file
    /// description refers to it: no descriptor and no mapping, in this
    /// process or another. For a caller that reuses a file it no longer
    /// names (a freed heap object's): one that someone still reads or maps
    /// is left alone. `None` when it is in use, or when the backend cannot
    /// tell (the default). The answer holds only while nobody opens the
    /// file anew by its path.
    fn open_unshared(&self, path: &Path) -> IoResult<Option<FileRef>> {
        let _ = path;
        Ok(None)
    }
    /// Maps the file at `path` for shared loads and stores inside a
    /// reservation of `reserve` bytes (at least the file's length), so the
    /// file can later grow in place ([`crate::SharedRegion::grow_to`]). No
    /// descriptor stays open. The default builds an emulated region (a copy
    /// written back by [`crate::SharedRegion::flush`]), for backends that
    /// cannot share pages; the real backend maps the file `MAP_SHARED`.
    fn map_shared(&self, path: &Path, reserve: u64, access: crate::MapAccess) -> IoResult<crate::SharedRegion> {
        let options = match access {
            crate::MapAccess::ReadWrite => OpenOptions::WRITE,
            crate::MapAccess::ReadOnly => OpenOptions::READ,
        };
        let file = self.open(path, options)?;
        crate::SharedRegion::emulated(file, reserve, access)
    }
}

/// Reads exactly `buf.len()` bytes at `offset`, or fails with
/// [`IoError::UnexpectedEof`] naming the file.
pub fn read_exact_at(file: &dyn File, mut buf: &mut [u8], mut offset: u64) -> IoResult<()> {
    while !buf.is_empty() {
        let n = file.read_at(buf, offset)?;
        if n == 0 {
            return Err(IoError::UnexpectedEof { path: file.path().to_path_buf(), offset });
        }
        buf = &mut buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// Writes all of `buf` at `offset`, retrying short writes; a write that makes
/// no progress fails with [`IoError::NoSpace`].
pub fn write_all_at(file: &dyn File, mut buf: &[u8], mut offset: u64) -> IoResult<()> {
    while !buf.is_empty() {
        let n = file.write_at(buf, offset)?;
        if n == 0 {
            return Err(IoError::NoSpace { path: file.path().to_path_buf() });
        }
        buf = &buf[n..];
        offset += n as u64;
    }
    Ok(())
}
