//! Helpers shared by the log's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

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

/// A storage over a [`SimStorage`] that models a process dying between a
/// write and its `fdatasync`: once `syncs_left` reaches 0, every
/// `sync_data` fails (EINTR) *without* reaching the simulated disk, so the
/// written bytes stay readable (page cache) but pending, not dropped. A
/// reboot (`SimStorage::crash_with`) then decides whether they survive.
#[derive(Debug)]
pub struct Stall {
    pub inner: SimStorage,
    /// Successful syncs still allowed; `u64::MAX` never stalls.
    pub syncs_left: Arc<std::sync::atomic::AtomicU64>,
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
        Arc::new(Stall { inner: self.inner.clone(), syncs_left: self.syncs_left.clone() })
    }
}

#[derive(Debug)]
struct StallFile {
    inner: larder_io::FileRef,
    syncs_left: Arc<std::sync::atomic::AtomicU64>,
}

impl larder_io::File for StallFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> larder_io::IoResult<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> larder_io::IoResult<usize> {
        self.inner.write_at(buf, offset)
    }
    fn sync_data(&self) -> larder_io::IoResult<()> {
        use std::sync::atomic::Ordering;
        let left = self.syncs_left.load(Ordering::SeqCst);
        if left == 0 {
            let e = std::io::Error::from_raw_os_error(4);
            return Err(larder_io::IoError::os("sync", self.inner.path(), e));
        }
        if left != u64::MAX {
            self.syncs_left.store(left - 1, Ordering::SeqCst);
        }
        self.inner.sync_data()
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

impl larder_io::Storage for Stall {
    fn open(&self, path: &Path, options: larder_io::OpenOptions) -> larder_io::IoResult<larder_io::FileRef> {
        let inner = self.inner.open(path, options)?;
        Ok(Arc::new(StallFile { inner, syncs_left: self.syncs_left.clone() }))
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
}
