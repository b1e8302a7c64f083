//! Helpers shared by the log's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

pub mod crash_points;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use larder_io::{SimStorage, StorageRef};
use larder_log::{Log, LogError, Lsn, Options};

/// Where every test keeps its log.
pub const DIR: &str = "/data/log";

/// Small segments (header + 3 blocks), no background flusher, so the
/// sequence of writes and syncs depends only on the test.
pub fn small_options() -> Options {
    Options {
        segment_bytes: 16 << 10,
        max_segments: 4,
        buffered_sync_interval: None,
        full_wait: Duration::from_secs(10),
        ..Options::default()
    }
}

/// The path of segment `id`.
pub fn segment_path(id: u64) -> PathBuf {
    Path::new(DIR).join(format!("{id:016x}.seg"))
}

/// A payload that names its LSN, of a size derived from it.
pub fn payload(lsn: Lsn) -> Vec<u8> {
    let len = 8 + (lsn as usize * 131) % 1500;
    let mut p = lsn.to_le_bytes().to_vec();
    p.extend((0..len - 8).map(|i| (lsn as usize + i) as u8));
    p
}

/// Records as replayed: (LSN, payload).
pub type Replayed = Vec<(Lsn, Vec<u8>)>;

/// Opens the log on `sim`, collecting the replayed records.
pub fn open(sim: &SimStorage, options: Options, covered: Lsn) -> Result<(Log, Replayed), LogError> {
    let storage: StorageRef = Arc::new(sim.clone());
    let mut replayed = Vec::new();
    let log = Log::open(storage, Path::new(DIR), options, covered, |lsn, p: &[u8]| {
        replayed.push((lsn, p.to_vec()));
        Ok::<(), std::io::Error>(())
    })?;
    Ok((log, replayed))
}

/// Asserts that `replayed` is exactly `covered+1 ..= covered+len` with the
/// payloads [`payload`] gives, and returns the last LSN.
pub fn check_prefix(replayed: &[(Lsn, Vec<u8>)], covered: Lsn) -> Lsn {
    for (i, (lsn, p)) in replayed.iter().enumerate() {
        assert_eq!(*lsn, covered + 1 + i as u64, "replayed LSNs are not a gap-free run after {covered}");
        assert_eq!(p, &payload(*lsn), "wrong payload for LSN {lsn}");
    }
    covered + replayed.len() as u64
}

/// Opens the log in `DIR` on any storage, collecting the replayed records.
pub fn open_on(storage: StorageRef, options: Options, covered: Lsn) -> Result<(Log, Replayed), LogError> {
    let mut replayed = Vec::new();
    let log = Log::open(storage, Path::new(DIR), options, covered, |lsn, p: &[u8]| {
        replayed.push((lsn, p.to_vec()));
        Ok::<(), std::io::Error>(())
    })?;
    Ok((log, replayed))
}

/// What a [`Hooked`] storage does around its files' writes and syncs.
pub trait Hooks: Send + Sync + std::fmt::Debug {
    /// Before a `read_at` of `len` bytes at `offset`.
    fn before_read(&self, _path: &Path, _offset: u64, _len: usize) {}
    /// Before a `write_at` reaches the simulated disk.
    fn before_write(&self, _path: &Path, _offset: u64) {}
    /// Before a `sync_data`; an error fails the sync without reaching the
    /// simulated disk.
    fn before_sync(&self, _path: &Path) -> larder_io::IoResult<()> {
        Ok(())
    }
    /// After a `sync_data` that succeeded.
    fn after_sync(&self, _path: &Path) {}
    /// After a `write_back` that succeeded.
    fn after_write_back(&self, _path: &Path) {}
}

/// A storage over a [`SimStorage`] whose files call `hooks`.
#[derive(Debug, Clone)]
pub struct Hooked {
    pub inner: SimStorage,
    pub hooks: Arc<dyn Hooks>,
}

impl Hooked {
    /// A handle for `Log::open`.
    pub fn storage(&self) -> StorageRef {
        Arc::new(self.clone())
    }
}

/// Models a process dying between a write and its `fdatasync`: once
/// `syncs_left` reaches 0, every `sync_data` fails (EINTR) *without*
/// reaching the simulated disk, so the written bytes stay readable (page
/// cache) but pending, not dropped. A reboot (`SimStorage::crash_with`)
/// then decides whether they survive.
#[derive(Debug)]
pub struct Stall {
    pub inner: SimStorage,
    /// Successful syncs still allowed; `u64::MAX` never stalls.
    pub syncs_left: Arc<std::sync::atomic::AtomicU64>,
}

#[derive(Debug)]
struct StallHooks(Arc<std::sync::atomic::AtomicU64>);

impl Hooks for StallHooks {
    fn before_sync(&self, path: &Path) -> larder_io::IoResult<()> {
        use std::sync::atomic::Ordering;
        let left = self.0.load(Ordering::SeqCst);
        if left == 0 {
            let e = std::io::Error::from_raw_os_error(4);
            return Err(larder_io::IoError::os("sync", path, e));
        }
        if left != u64::MAX {
            self.0.store(left - 1, Ordering::SeqCst);
        }
        Ok(())
    }
}

impl Stall {
    /// A storage over `sim` that stalls after `syncs` more syncs.
    pub fn new(sim: &SimStorage, syncs: u64) -> Stall {
        Stall { inner: sim.clone(), syncs_left: Arc::new(std::sync::atomic::AtomicU64::new(syncs)) }
    }

    /// Lets syncs through again (the "process" restarted).
    pub fn resume(&self) {
        self.syncs_left.store(u64::MAX, std::sync::atomic::Ordering::SeqCst);
    }

    /// A handle for `Log::open`.
    pub fn storage(&self) -> StorageRef {
        Hooked { inner: self.inner.clone(), hooks: Arc::new(StallHooks(self.syncs_left.clone())) }.storage()
    }
}

#[derive(Debug)]
struct HookedFile {
    inner: larder_io::FileRef,
    hooks: Arc<dyn Hooks>,
}

impl larder_io::File for HookedFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> larder_io::IoResult<usize> {
        self.hooks.before_read(self.inner.path(), offset, buf.len());
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> larder_io::IoResult<usize> {
        self.hooks.before_write(self.inner.path(), offset);
        self.inner.write_at(buf, offset)
    }
    fn sync_data(&self) -> larder_io::IoResult<()> {
        self.hooks.before_sync(self.inner.path())?;
        self.inner.sync_data()?;
        self.hooks.after_sync(self.inner.path());
        Ok(())
    }
    fn holes(&self) -> larder_io::IoResult<Option<Vec<(u64, u64)>>> {
        self.inner.holes()
    }
    fn start_write_back(&self, offset: u64, len: u64) -> larder_io::IoResult<()> {
        self.inner.start_write_back(offset, len)
    }
    fn write_back(&self, offset: u64, len: u64) -> larder_io::IoResult<()> {
        self.inner.write_back(offset, len)?;
        self.hooks.after_write_back(self.inner.path());
        Ok(())
    }
    fn allocate(&self, offset: u64, len: u64) -> larder_io::IoResult<()> {
        self.inner.allocate(offset, len)
    }
    fn punch_hole(&self, offset: u64, len: u64) -> larder_io::IoResult<()> {
        self.inner.punch_hole(offset, len)
    }
    fn set_len(&self, len: u64) -> larder_io::IoResult<()> {
        self.inner.set_len(len)
    }
    fn len(&self) -> larder_io::IoResult<u64> {
        self.inner.len()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

impl larder_io::Storage for Hooked {
    fn open(&self, path: &Path, options: larder_io::OpenOptions) -> larder_io::IoResult<larder_io::FileRef> {
        let inner = self.inner.open(path, options)?;
        Ok(Arc::new(HookedFile { inner, hooks: self.hooks.clone() }))
    }
    fn create_dir_all(&self, path: &Path) -> larder_io::IoResult<()> {
        self.inner.create_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> larder_io::IoResult<Vec<String>> {
        self.inner.list_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> larder_io::IoResult<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> larder_io::IoResult<()> {
        self.inner.remove_file(path)
    }
    fn sync_dir(&self, path: &Path) -> larder_io::IoResult<()> {
        self.inner.sync_dir(path)
    }
    fn exists(&self, path: &Path) -> larder_io::IoResult<bool> {
        self.inner.exists(path)
    }
    fn lock(&self, path: &Path) -> larder_io::IoResult<Box<dyn larder_io::Lock>> {
        self.inner.lock(path)
    }
    fn shares_flush(&self, synced: &Path, written: &Path) -> larder_io::IoResult<bool> {
        self.inner.shares_flush(synced, written)
    }
}
