//! `CheckedStorage`: the one choke point that latches the first failed sync.
//!
//! After fsync fails, Linux may already have dropped the dirty pages and
//! marked them clean, so a retried sync "succeeds" without writing them
//! (the fsyncgate problem). The only safe reaction is to stop writing and
//! recover from what is on disk; this wrapper enforces that for every file
//! of a store at once, so no caller can forget.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{IoError, IoResult};
use crate::storage::{File, FileRef, Lock, OpenOptions, Storage, StorageRef};

/// The latch shared by a `CheckedStorage` and every file it opened.
#[derive(Debug, Default)]
struct PoisonLatch {
    /// Fast path for the check on every mutating call.
    poisoned: AtomicBool,
    /// The first cause; later causes are ignored because the first failure
    /// is the one that explains the lost data.
    cause: Mutex<Option<String>>,
    /// The name of the thread that latched the first cause, if it had one.
    by: Mutex<Option<String>>,
}

impl PoisonLatch {
    fn poison(&self, cause: String) {
        let mut slot = self.cause.lock();
        if slot.is_none() {
            tracing::error!(%cause, "storage poisoned; refusing further writes");
            *self.by.lock() = std::thread::current().name().map(str::to_string);
            *slot = Some(cause);
        }
        self.poisoned.store(true, Ordering::Release);
    }

    fn check(&self) -> IoResult<()> {
        if !self.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        let cause = self.cause.lock().clone().unwrap_or_default();
        Err(IoError::Poisoned { cause })
    }

    /// Latches the error of a failed sync before handing it back, naming
    /// the operation, the file and the errno.
    fn on_sync<T>(&self, op: &str, path: &Path, result: IoResult<T>) -> IoResult<T> {
        if let Err(e) = &result {
            self.poison(failure_text(op, path, e));
        }
        result
    }
}

/// How a latched failure reads: `sync_data of /store/log/000001.log failed
/// (errno 5): ...`, so the first cause says which file, which call and
/// which error without the reader digging through logs.
fn failure_text(op: &str, path: &Path, error: &IoError) -> String {
    match error.errno() {
        Some(errno) => format!("{op} of {} failed (errno {errno}): {error}", path.display()),
        None => format!("{op} of {} failed: {error}", path.display()),
    }
}

/// Wraps a backend so that the first failed `sync_data` or `sync_dir`
/// poisons it: every later mutating call, on the storage or on any file it
/// opened, fails with [`IoError::Poisoned`] without reaching the backend.
/// Reads, `len`, `list_dir` and `exists` keep working.
#[derive(Debug, Clone)]
pub struct CheckedStorage {
    inner: StorageRef,
    latch: Arc<PoisonLatch>,
}

impl CheckedStorage {
    /// Wraps `inner`; the new wrapper is not poisoned.
    pub fn new(inner: StorageRef) -> CheckedStorage {
        CheckedStorage { inner, latch: Arc::new(PoisonLatch::default()) }
    }

    /// The latch `storage` goes through: its own if it already is a
    /// `CheckedStorage` (so wrapping twice never splits the latch), else a
    /// new wrapper around it.
    pub fn wrap(storage: StorageRef) -> CheckedStorage {
        match storage.checked() {
            Some(checked) => checked,
            None => CheckedStorage::new(storage),
        }
    }

    /// The wrapper as a storage reference for the handles an engine opens.
    pub fn storage_ref(&self) -> StorageRef {
        Arc::new(self.clone())
    }

    /// Fails with [`IoError::Poisoned`] naming the first cause once
    /// poisoned.
    pub fn check(&self) -> IoResult<()> {
        self.latch.check()
    }

    /// Whether a failed sync (or [`CheckedStorage::poison`]) has latched.
    pub fn is_poisoned(&self) -> bool {
        self.latch.poisoned.load(Ordering::Acquire)
    }

    /// The message of the first failure, if poisoned.
    pub fn poison_cause(&self) -> Option<String> {
        self.latch.cause.lock().clone()
    }

    /// The name of the thread whose failure latched first, if it had one:
    /// which of an engine's threads failed.
    pub fn poisoned_by(&self) -> Option<String> {
        self.latch.by.lock().clone()
    }

    /// Poisons the storage from outside, e.g. when an engine worker panicked
    /// midway through a write sequence. The first cause is kept.
    pub fn poison(&self, cause: String) {
        self.latch.poison(cause);
    }
}

impl Storage for CheckedStorage {
    fn open(&self, path: &Path, options: OpenOptions) -> IoResult<FileRef> {
        if options.write || options.create || options.create_new {
            self.latch.check()?;
        }
        let inner = self.inner.open(path, options)?;
        Ok(Arc::new(CheckedFile { inner, latch: Arc::clone(&self.latch) }))
    }

    fn create_dir_all(&self, path: &Path) -> IoResult<()> {
        self.latch.check()?;
        self.inner.create_dir_all(path)
    }

    fn list_dir(&self, path: &Path) -> IoResult<Vec<String>> {
        self.inner.list_dir(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> IoResult<()> {
        self.latch.check()?;
        self.inner.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> IoResult<()> {
        self.latch.check()?;
        self.inner.remove_file(path)
    }

    fn sync_dir(&self, path: &Path) -> IoResult<()> {
        self.latch.check()?;
        self.latch.on_sync("sync_dir", path, self.inner.sync_dir(path))
    }

    fn exists(&self, path: &Path) -> IoResult<bool> {
        self.inner.exists(path)
    }

    /// Locking stays allowed when poisoned: a poisoned engine still has to
    /// hold its lock until it shuts down, and the lock file carries no data.
    fn lock(&self, path: &Path) -> IoResult<Box<dyn Lock>> {
        self.inner.lock(path)
    }

    fn available_bytes(&self, path: &Path) -> IoResult<u64> {
        self.inner.available_bytes(path)
    }

    fn shares_flush(&self, synced: &Path, written: &Path) -> IoResult<bool> {
        self.inner.shares_flush(synced, written)
    }

    fn file_sync_keeps_new_entry(&self, dir: &Path) -> IoResult<bool> {
        self.inner.file_sync_keeps_new_entry(dir)
    }

    fn checked(&self) -> Option<CheckedStorage> {
        Some(self.clone())
    }

    fn file_status(&self, path: &Path) -> IoResult<crate::FileStatus> {
        self.inner.file_status(path)
    }

    /// Lookups change nothing, so the latch does not stand in their way.
    fn open_directory(&self, path: &Path) -> IoResult<Option<crate::DirectoryRef>> {
        self.inner.open_directory(path)
    }

    fn set_file_len(&self, path: &Path, len: u64) -> IoResult<()> {
        self.latch.check()?;
        self.inner.set_file_len(path, len)
    }

    fn map_shared_sized(
        &self,
        path: &Path,
        create: bool,
        len: u64,
        reserve: u64,
        access: crate::MapAccess,
    ) -> IoResult<crate::SharedRegion> {
        self.latch.check()?;
        self.inner.map_shared_sized(path, create, len, reserve, access)
    }

    fn write_file_from(&self, source: &crate::SharedRegion, to: &Path, len: u64) -> IoResult<()> {
        self.latch.check()?;
        self.inner.write_file_from(source, to, len)
    }

    fn open_unshared(&self, path: &Path) -> IoResult<Option<FileRef>> {
        self.latch.check()?;
        let inner = self.inner.open_unshared(path)?;
        Ok(inner.map(|inner| Arc::new(CheckedFile { inner, latch: Arc::clone(&self.latch) }) as FileRef))
    }

    /// A writable mapping is refused once poisoned. Stores through a mapping
    /// made before reach the page cache regardless: what makes them durable
    /// is a later sync, which the latch refuses.
    fn map_shared(&self, path: &Path, reserve: u64, access: crate::MapAccess) -> IoResult<crate::SharedRegion> {
        if access == crate::MapAccess::ReadWrite {
            self.latch.check()?;
        }
        self.inner.map_shared(path, reserve, access)
    }
}

/// A file opened through [`CheckedStorage`], sharing its latch.
#[derive(Debug)]
struct CheckedFile {
    inner: FileRef,
    latch: Arc<PoisonLatch>,
}

impl File for CheckedFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> IoResult<usize> {
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> IoResult<usize> {
        self.latch.check()?;
        self.inner.write_at(buf, offset)
    }

    fn sync_data(&self) -> IoResult<()> {
        self.latch.check()?;
        self.latch.on_sync("sync_data", self.inner.path(), self.inner.sync_data())
    }

    fn writes_direct(&self) -> bool {
        self.inner.writes_direct()
    }

    fn allocate(&self, offset: u64, len: u64) -> IoResult<()> {
        self.latch.check()?;
        self.inner.allocate(offset, len)
    }

    fn punch_hole(&self, offset: u64, len: u64) -> IoResult<()> {
        self.latch.check()?;
        self.inner.punch_hole(offset, len)
    }

    fn set_len(&self, len: u64) -> IoResult<()> {
        self.latch.check()?;
        self.inner.set_len(len)
    }

    fn len(&self) -> IoResult<u64> {
        self.inner.len()
    }

    fn map(&self) -> IoResult<Option<Arc<crate::Mapping>>> {
        self.inner.map()
    }

    fn holes(&self) -> IoResult<Option<Vec<(u64, u64)>>> {
        self.inner.holes()
    }

    fn drop_cache(&self, offset: u64, len: u64) -> IoResult<()> {
        self.latch.check()?;
        self.inner.drop_cache(offset, len)
    }

    fn start_write_back(&self, offset: u64, len: u64) -> IoResult<()> {
        self.latch.check()?;
        self.latch.on_sync("start_write_back", self.inner.path(), self.inner.start_write_back(offset, len))
    }

    /// A failed write-back latches like a failed sync: the kernel may have
    /// dropped the pages that failed.
    fn write_back(&self, offset: u64, len: u64) -> IoResult<()> {
        self.latch.check()?;
        self.latch.on_sync("write_back", self.inner.path(), self.inner.write_back(offset, len))
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }
}
