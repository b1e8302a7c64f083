//! A storage that panics once, in a chosen thread, on a chosen call: how
//! the tests make a background thread panic midway through its work.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use larder_io::{File, FileRef, IoResult, Lock, OpenOptions, Storage, StorageRef};

/// Which call panics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Write,
    Sync,
}

#[derive(Debug)]
struct Rule {
    /// The thread's name starts with this.
    thread: &'static str,
    call: Call,
    /// The file's path contains this.
    path: &'static str,
    fired: AtomicBool,
}

impl Rule {
    fn check(&self, call: Call, path: &Path) {
        let in_thread = std::thread::current().name().is_some_and(|n| n.starts_with(self.thread));
        if in_thread
            && call == self.call
            && path.to_string_lossy().contains(self.path)
            && !self.fired.swap(true, Ordering::SeqCst)
        {
            panic!("injected panic: {call:?} of {} in {}", path.display(), self.thread);
        }
    }
}

/// Wraps a storage; panics once when `thread` makes `call` on a path
/// containing `path`.
#[derive(Debug, Clone)]
pub struct PanickingStorage {
    inner: StorageRef,
    rule: Arc<Rule>,
}

impl PanickingStorage {
    pub fn new(inner: StorageRef, thread: &'static str, call: Call, path: &'static str) -> PanickingStorage {
        PanickingStorage { inner, rule: Arc::new(Rule { thread, call, path, fired: AtomicBool::new(false) }) }
    }

    /// Whether the panic happened.
    pub fn fired(&self) -> bool {
        self.rule.fired.load(Ordering::SeqCst)
    }
}

impl Storage for PanickingStorage {
    fn open(&self, path: &Path, options: OpenOptions) -> IoResult<FileRef> {
        let inner = self.inner.open(path, options)?;
        Ok(Arc::new(PanickingFile { inner, rule: self.rule.clone() }))
    }
    fn create_dir_all(&self, path: &Path) -> IoResult<()> {
        self.inner.create_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> IoResult<Vec<String>> {
        self.inner.list_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> IoResult<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> IoResult<()> {
        self.inner.remove_file(path)
    }
    fn sync_dir(&self, path: &Path) -> IoResult<()> {
        self.rule.check(Call::Sync, path);
        self.inner.sync_dir(path)
    }
    fn exists(&self, path: &Path) -> IoResult<bool> {
        self.inner.exists(path)
    }
    fn lock(&self, path: &Path) -> IoResult<Box<dyn Lock>> {
        self.inner.lock(path)
    }
    fn available_bytes(&self, path: &Path) -> IoResult<u64> {
        self.inner.available_bytes(path)
    }
    fn shares_flush(&self, synced: &Path, written: &Path) -> IoResult<bool> {
        self.inner.shares_flush(synced, written)
    }
}

#[derive(Debug)]
struct PanickingFile {
    inner: FileRef,
    rule: Arc<Rule>,
}

impl File for PanickingFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> IoResult<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> IoResult<usize> {
        self.rule.check(Call::Write, self.inner.path());
        self.inner.write_at(buf, offset)
    }
    fn sync_data(&self) -> IoResult<()> {
        self.rule.check(Call::Sync, self.inner.path());
        self.inner.sync_data()
    }
    fn allocate(&self, offset: u64, len: u64) -> IoResult<()> {
        self.inner.allocate(offset, len)
    }
    fn punch_hole(&self, offset: u64, len: u64) -> IoResult<()> {
        self.inner.punch_hole(offset, len)
    }
    fn set_len(&self, len: u64) -> IoResult<()> {
        self.inner.set_len(len)
    }
    fn len(&self) -> IoResult<u64> {
        self.inner.len()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn map(&self) -> IoResult<Option<Arc<larder_io::Mapping>>> {
        self.inner.map()
    }
    fn holes(&self) -> IoResult<Option<Vec<(u64, u64)>>> {
        self.inner.holes()
    }
    fn start_write_back(&self, offset: u64, len: u64) -> IoResult<()> {
        self.inner.start_write_back(offset, len)
    }
    fn drop_cache(&self, offset: u64, len: u64) -> IoResult<()> {
        self.inner.drop_cache(offset, len)
    }
    fn write_back(&self, offset: u64, len: u64) -> IoResult<()> {
        self.rule.check(Call::Sync, self.inner.path());
        self.inner.write_back(offset, len)
    }
}
