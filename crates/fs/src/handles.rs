//! Open file and directory handles, and the open counts that decide when
//! an unlinked object is freed.
//!
//! An open and an unlink of the same object are ordered by a per-object
//! gate (a striped mutex): an open holds it while it checks the object
//! still exists and counts itself; an unlink holds it across its
//! transaction, which records an orphan instead of deleting the object if
//! the count is not zero. So no handle ever refers to a deleted object.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::dirs::Listing;

/// Gate stripes.
const GATES: usize = 256;

/// An open file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileHandle {
    /// The object.
    pub(crate) ino: u64,
    /// Opened for reading.
    pub(crate) read: bool,
    /// Opened for writing.
    pub(crate) write: bool,
    /// Every write goes to the end (O_APPEND).
    pub(crate) append: bool,
}

/// Every open handle.
pub(crate) struct Handles {
    next: AtomicU64,
    files: Mutex<HashMap<u64, FileHandle>>,
    dirs: Mutex<HashMap<u64, Arc<Mutex<Listing>>>>,
    /// File handles open per object.
    open: Mutex<HashMap<u64, u32>>,
    gates: Vec<Mutex<()>>,
}

impl Handles {
    pub(crate) fn new() -> Handles {
        Handles {
            next: AtomicU64::new(1),
            files: Mutex::new(HashMap::new()),
            dirs: Mutex::new(HashMap::new()),
            open: Mutex::new(HashMap::new()),
            gates: (0..GATES).map(|_| Mutex::new(())).collect(),
        }
    }

    /// The gate of object `ino` (see the module doc).
    pub(crate) fn gate(&self, ino: u64) -> MutexGuard<'_, ()> {
        // Stripes exist for every index: GATES > 0.
        self.gates[(ino % GATES as u64) as usize].lock()
    }

    /// The gates of every object of `inos`, each stripe taken once and in
    /// stripe order (so that two callers never wait on each other).
    pub(crate) fn gates(&self, inos: impl IntoIterator<Item = u64>) -> Vec<MutexGuard<'_, ()>> {
        let mut stripes: Vec<usize> = inos.into_iter().map(|ino| (ino % GATES as u64) as usize).collect();
        stripes.sort_unstable();
        stripes.dedup();
        stripes.into_iter().filter_map(|i| self.gates.get(i)).map(|g| g.lock()).collect()
    }

    /// Whether any file handle of `ino` is open. Call with its gate held.
    pub(crate) fn is_open(&self, ino: u64) -> bool {
        self.open.lock().get(&ino).is_some_and(|&n| n > 0)
    }

    /// Registers an open file; returns its handle number. Call with the
    /// object's gate held.
    pub(crate) fn add_file(&self, handle: FileHandle) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed);
        *self.open.lock().entry(handle.ino).or_insert(0) += 1;
        self.files.lock().insert(fh, handle);
        fh
    }

    /// The open file `fh`, if open.
    pub(crate) fn file(&self, fh: u64) -> Option<FileHandle> {
        self.files.lock().get(&fh).copied()
    }

    /// Forgets file handle `fh`; returns it and how many handles of its
    /// object remain. Call with the object's gate held.
    pub(crate) fn remove_file(&self, fh: u64) -> Option<(FileHandle, u32)> {
        let handle = self.files.lock().remove(&fh)?;
        let mut open = self.open.lock();
        let left = match open.get_mut(&handle.ino) {
            Some(n) if *n > 1 => {
                *n -= 1;
                *n
            }
            _ => {
                open.remove(&handle.ino);
                0
            }
        };
        Some((handle, left))
    }

    /// Registers an open directory listing; returns its handle number.
    pub(crate) fn add_dir(&self, listing: Listing) -> u64 {
        let dh = self.next.fetch_add(1, Ordering::Relaxed);
        self.dirs.lock().insert(dh, Arc::new(Mutex::new(listing)));
        dh
    }

    /// The open directory listing `dh`, if open.
    pub(crate) fn dir(&self, dh: u64) -> Option<Arc<Mutex<Listing>>> {
        self.dirs.lock().get(&dh).cloned()
    }

    /// Forgets directory handle `dh`; whether it was open.
    pub(crate) fn remove_dir(&self, dh: u64) -> bool {
        self.dirs.lock().remove(&dh).is_some()
    }
}
