//! The real backend: the local file system through pread / pwrite /
//! fdatasync / fallocate / flock.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FallocateFlags, FlockOperation, Mode, OFlags};

use crate::direct::DirectWriter;
use crate::error::{IoError, IoResult};
use crate::shared::{FileIdentity, FileStatus, MapAccess, SharedRegion};
use crate::storage::{Directory, DirectoryRef, File, FileRef, Lock, OpenOptions, Storage};

/// The local file system. Paths are used as given.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealStorage;

impl RealStorage {
    /// Returns the real backend (it holds no state).
    pub fn new() -> RealStorage {
        RealStorage
    }
}

/// An open file on the local file system.
#[derive(Debug)]
struct RealFile {
    file: std::fs::File,
    path: PathBuf,
    /// Where whole-block writes go when opened with `direct`.
    direct: Option<DirectWriter>,
}

/// A held `flock`; the kernel releases it when the descriptor closes, so
/// keeping the file here ties the lock to this value's lifetime.
#[derive(Debug)]
struct RealLock {
    _file: std::fs::File,
}

impl Lock for RealLock {}

/// Rejects renames across directories: only a same-directory rename is
/// atomic under one directory sync, and the simulated backend enforces the
/// same rule, so both backends fail alike.
pub(crate) fn check_same_dir(from: &Path, to: &Path) -> IoResult<()> {
    if from.parent() != to.parent() {
        return Err(IoError::InvalidInput { path: to.to_path_buf(), reason: "rename must stay within one directory" });
    }
    Ok(())
}

impl Storage for RealStorage {
    fn open(&self, path: &Path, options: OpenOptions) -> IoResult<FileRef> {
        let create = options.create || options.create_new;
        // std refuses to create without write access, so creating implies write.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(options.write || create)
            .create(options.create && !options.create_new)
            .create_new(options.create_new)
            .open(path)
            .map_err(|e| IoError::os("open", path, e))?;
        let direct = if options.direct && (options.write || create) { DirectWriter::open(path) } else { None };
        Ok(Arc::new(RealFile { file, path: path.to_path_buf(), direct }))
    }

    /// A write lease, taken and dropped at once: the kernel grants one only
    /// while the inode has no open file description but this one (mappings
    /// hold theirs), whether for reading or writing.
    fn open_unshared(&self, path: &Path) -> IoResult<Option<FileRef>> {
        let file =
            std::fs::OpenOptions::new().read(true).write(true).open(path).map_err(|e| IoError::os("open", path, e))?;
        if !write_lease_granted(&file) {
            return Ok(None);
        }
        Ok(Some(Arc::new(RealFile { file, path: path.to_path_buf(), direct: None })))
    }

    /// One `pwrite` (a few for huge regions) straight from the region's
    /// pages (`SharedRegion::write_to`).
    fn write_file_from(&self, source: &SharedRegion, to: &Path, len: u64) -> IoResult<()> {
        let target = std::fs::OpenOptions::new().write(true).open(to).map_err(|e| IoError::os("open", to, e))?;
        source.write_to(&target, to, len)
    }

    fn create_dir_all(&self, path: &Path) -> IoResult<()> {
        std::fs::create_dir_all(path).map_err(|e| IoError::os("create_dir_all", path, e))
    }

    fn list_dir(&self, path: &Path) -> IoResult<Vec<String>> {
        let entries = std::fs::read_dir(path).map_err(|e| IoError::os("list_dir", path, e))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| IoError::os("list_dir", path, e))?;
            let name = entry.file_name().into_string().map_err(|_| IoError::InvalidInput {
                path: path.join(entry.file_name()),
                reason: "file name is not UTF-8",
            })?;
            names.push(name);
        }
        names.sort();
        Ok(names)
    }

    fn rename(&self, from: &Path, to: &Path) -> IoResult<()> {
        check_same_dir(from, to)?;
        std::fs::rename(from, to).map_err(|e| IoError::os("rename", from, e))
    }

    fn remove_file(&self, path: &Path) -> IoResult<()> {
        std::fs::remove_file(path).map_err(|e| IoError::os("remove_file", path, e))
    }

    fn sync_dir(&self, path: &Path) -> IoResult<()> {
        let dir = std::fs::File::open(path).map_err(|e| IoError::os("sync_dir", path, e))?;
        rustix::fs::fsync(&dir).map_err(|e| IoError::os("sync_dir", path, e.into()))
    }

    fn exists(&self, path: &Path) -> IoResult<bool> {
        path.try_exists().map_err(|e| IoError::os("exists", path, e))
    }

    fn available_bytes(&self, path: &Path) -> IoResult<u64> {
        let st = rustix::fs::statvfs(path).map_err(|e| IoError::os("statvfs", path, e.into()))?;
        Ok(st.f_bavail.saturating_mul(st.f_frsize))
    }

    /// Only on one device, and only for file systems whose fdatasync
    /// flushes the device cache even when the file had nothing to write
    /// (ext4 and XFS do: a journal commit with a flush, or an explicit
    /// flush when no commit was needed).
    fn shares_flush(&self, synced: &Path, written: &Path) -> IoResult<bool> {
        let (a, b) = (stat_path(synced)?, stat_path(written)?);
        if a.st_dev != b.st_dev {
            return Ok(false);
        }
        let magic = file_system_magic(written)?;
        Ok(magic == EXT4_SUPER_MAGIC || magic == XFS_SUPER_MAGIC)
    }

    /// Only on ext4. With a journal, creating a file and its directory
    /// entry are one transaction, and the file's fdatasync commits the
    /// transaction that created the inode or a later one (the new inode's
    /// datasync transaction is set at its creation; jbd2 commits in order);
    /// without a journal, ext4's fsync syncs the directory of an inode
    /// created since (`ext4_sync_parent`). msync(MS_SYNC) is the same
    /// fdatasync of the mapped range.
    fn file_sync_keeps_new_entry(&self, dir: &Path) -> IoResult<bool> {
        Ok(file_system_magic(dir)? == EXT4_SUPER_MAGIC)
    }

    /// Opens the file, maps it over the whole reservation and closes it
    /// again: the mapping keeps the file's pages, not the descriptor.
    fn map_shared(&self, path: &Path, reserve: u64, access: MapAccess) -> IoResult<SharedRegion> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(access == MapAccess::ReadWrite)
            .open(path)
            .map_err(|e| IoError::os("open", path, e))?;
        let stat = rustix::fs::fstat(&file).map_err(|e| IoError::os("len", path, e.into()))?;
        SharedRegion::map_file(&file, path, status_of(&stat), reserve, access)
    }

    fn set_file_len(&self, path: &Path, len: u64) -> IoResult<()> {
        use std::os::unix::ffi::OsStrExt;
        let invalid = || IoError::InvalidInput { path: path.to_path_buf(), reason: "a path with a NUL byte" };
        let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| invalid())?;
        let len =
            i64::try_from(len).map_err(|_| IoError::InvalidInput { path: path.to_path_buf(), reason: "too long" })?;
        #[allow(unsafe_code)]
        // SAFETY: `c_path` is a NUL-terminated string alive for the call.
        let done = unsafe { libc::truncate(c_path.as_ptr(), len) };
        if done == 0 {
            Ok(())
        } else {
            Err(IoError::os("truncate", path, std::io::Error::last_os_error()))
        }
    }

    fn map_shared_sized(
        &self,
        path: &Path,
        create: bool,
        len: u64,
        reserve: u64,
        access: MapAccess,
    ) -> IoResult<SharedRegion> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(create)
            .open(path)
            .map_err(|e| IoError::os("open", path, e))?;
        let mut status = if create {
            // A new file is empty; its identity comes from the stat below only
            // if it must be extended first.
            FileStatus { identity: None, len: 0 }
        } else {
            status_of(&rustix::fs::fstat(&file).map_err(|e| IoError::os("len", path, e.into()))?)
        };
        if status.len < len {
            file.set_len(len).map_err(|e| IoError::os("set_len", path, e))?;
            status.len = len;
        }
        if status.identity.is_none() {
            let stat = rustix::fs::fstat(&file).map_err(|e| IoError::os("len", path, e.into()))?;
            status.identity = status_of(&stat).identity;
        }
        SharedRegion::map_file(&file, path, status, reserve, access)
    }

    /// One `stat` of the path (no open): the inode and device numbers and
    /// the size.
    fn file_status(&self, path: &Path) -> IoResult<FileStatus> {
        Ok(status_of(&stat_path(path)?))
    }

    /// An `O_PATH` descriptor of the directory: it grants no access of its
    /// own, and `fstatat` through it walks one component, not the path.
    fn open_directory(&self, path: &Path) -> IoResult<Option<DirectoryRef>> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| IoError::os("open", path, e.into()))?;
        Ok(Some(Box::new(RealDirectory { fd, path: path.to_path_buf() })))
    }

    fn lock(&self, path: &Path) -> IoResult<Box<dyn Lock>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| IoError::os("lock", path, e))?;
        match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Box::new(RealLock { _file: file })),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => Err(IoError::Locked { path: path.to_path_buf() }),
            Err(e) => Err(IoError::os("lock", path, e.into())),
        }
    }
}

impl File for RealFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> IoResult<usize> {
        loop {
            match self.file.read_at(buf, offset) {
                Ok(n) => return Ok(n),
                // A signal interrupted the call before it read anything; retry.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(IoError::os("read", &self.path, e)),
            }
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> IoResult<usize> {
        if let Some(written) = self.direct.as_ref().and_then(|d| d.write(buf, offset)) {
            return written.map_err(|e| IoError::os("write", &self.path, e));
        }
        loop {
            match self.file.write_at(buf, offset) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(IoError::os("write", &self.path, e)),
            }
        }
    }

    fn writes_direct(&self) -> bool {
        self.direct.is_some()
    }

    fn sync_data(&self) -> IoResult<()> {
        rustix::fs::fdatasync(&self.file).map_err(|e| IoError::os("sync", &self.path, e.into()))
    }

    fn allocate(&self, offset: u64, len: u64) -> IoResult<()> {
        rustix::fs::fallocate(&self.file, FallocateFlags::empty(), offset, len)
            .map_err(|e| IoError::os("allocate", &self.path, e.into()))
    }

    fn punch_hole(&self, offset: u64, len: u64) -> IoResult<()> {
        let mode = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
        rustix::fs::fallocate(&self.file, mode, offset, len)
            .map_err(|e| IoError::os("punch_hole", &self.path, e.into()))
    }

    fn set_len(&self, len: u64) -> IoResult<()> {
        rustix::fs::ftruncate(&self.file, len).map_err(|e| IoError::os("set_len", &self.path, e.into()))
    }

    fn len(&self) -> IoResult<u64> {
        let stat = rustix::fs::fstat(&self.file).map_err(|e| IoError::os("len", &self.path, e.into()))?;
        // st_size is never negative for a regular file; treat a negative one as empty.
        Ok(u64::try_from(stat.st_size).unwrap_or(0))
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn map(&self) -> IoResult<Option<Arc<crate::Mapping>>> {
        let mapped = crate::Mapping::of(&self.file).map_err(|e| IoError::os("map", &self.path, e))?;
        Ok(mapped.map(Arc::new))
    }

    /// Walks SEEK_HOLE / SEEK_DATA over the file. A punched range not yet
    /// rewritten, or rewritten but not yet synced, is a hole here (its
    /// pages get blocks only at writeback, which is metadata). Unwritten
    /// extents (fallocate) may report as data when their pages are cached,
    /// so this is only for files that are never fallocated (containers are
    /// zero-filled by writes).
    fn holes(&self) -> IoResult<Option<Vec<(u64, u64)>>> {
        use rustix::fs::{seek, SeekFrom};
        let len = self.len()?;
        let mut holes = Vec::new();
        let mut pos = 0;
        while pos < len {
            let hole =
                seek(&self.file, SeekFrom::Hole(pos)).map_err(|e| IoError::os("seek_hole", &self.path, e.into()))?;
            if hole >= len {
                break;
            }
            let data = match seek(&self.file, SeekFrom::Data(hole)) {
                Ok(d) => d.min(len),
                // No data after the hole: it runs to the end.
                Err(rustix::io::Errno::NXIO) => len,
                Err(e) => return Err(IoError::os("seek_data", &self.path, e.into())),
            };
            holes.push((hole, data));
            pos = data;
        }
        Ok(Some(holes))
    }

    fn drop_cache(&self, offset: u64, len: u64) -> IoResult<()> {
        let len = std::num::NonZeroU64::new(len);
        rustix::fs::fadvise(&self.file, offset, len, rustix::fs::Advice::DontNeed)
            .map_err(|e| IoError::os("drop_cache", &self.path, e.into()))
    }

    fn start_write_back(&self, offset: u64, len: u64) -> IoResult<()> {
        crate::write_back::sync_file_range(&self.file, offset, len, false)
            .map_err(|e| IoError::os("write_back", &self.path, e))
    }

    fn write_back(&self, offset: u64, len: u64) -> IoResult<()> {
        crate::write_back::sync_file_range(&self.file, offset, len, true)
            .map_err(|e| IoError::os("write_back", &self.path, e))
    }
}

const EXT4_SUPER_MAGIC: u64 = 0xEF53;
const XFS_SUPER_MAGIC: u64 = 0x5846_5342;

/// The `f_type` of the file system holding `path`.
fn file_system_magic(path: &Path) -> IoResult<u64> {
    let fs = rustix::fs::statfs(path).map_err(|e| IoError::os("statfs", path, e.into()))?;
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let magic = u64::try_from(fs.f_type as i64).unwrap_or(0);
    Ok(magic)
}

/// A directory held open by an `O_PATH` descriptor.
#[derive(Debug)]
struct RealDirectory {
    fd: std::os::fd::OwnedFd,
    path: PathBuf,
}

impl Directory for RealDirectory {
    fn file_status(&self, name: &str) -> IoResult<FileStatus> {
        match rustix::fs::statat(&self.fd, name, AtFlags::empty()) {
            Ok(stat) => Ok(status_of(&stat)),
            Err(e) => Err(IoError::os("stat", self.path.join(name), e.into())),
        }
    }
}

/// A file's identity and length from its `stat`.
#[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
fn status_of(stat: &rustix::fs::Stat) -> FileStatus {
    FileStatus {
        identity: Some(FileIdentity { device: stat.st_dev as u64, inode: stat.st_ino as u64 }),
        // st_size is never negative for a regular file; treat a negative one as empty.
        len: u64::try_from(stat.st_size).unwrap_or(0),
    }
}

fn stat_path(path: &Path) -> IoResult<rustix::fs::Stat> {
    rustix::fs::stat(path).map_err(|e| IoError::os("stat", path, e.into()))
}

/// Whether the kernel grants `file` a write lease (then dropped): only
/// when nothing else holds the file open or mapped. Refused also where
/// leases are off (`fs.leases-enable`), unsupported by the file system, or
/// not ours to take (the caller does not own the file): all read as
/// "maybe shared".
fn write_lease_granted(file: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    #[allow(unsafe_code)]
    // SAFETY: F_SETLEASE takes an int argument and touches no memory; `fd`
    // is open for the call's duration (borrowed from `file`).
    let granted = unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_WRLCK) } == 0;
    if granted {
        #[allow(unsafe_code)]
        // SAFETY: as above. Dropping a lease this descriptor holds; should
        // it fail, closing the descriptor drops the lease anyway.
        unsafe {
            libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK);
        }
    }
    granted
}
