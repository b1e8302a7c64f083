//! Open file and directory handles, the references a kernel holds by
//! inode number ([`Fs::retain`](crate::Fs::retain)), and the counts of
//! both that decide when an unlinked object (or a removed directory) is
//! freed.
//!
//! An open and an unlink of the same object are ordered by a per-object
//! gate (a striped mutex): an open holds it while it checks the object
//! still exists and counts itself; an unlink holds it across its
//! transaction, which records an orphan instead of deleting the object if
//! the count is not zero, and marks the open object orphaned here. So no
//! handle ever refers to a deleted object, and the last release knows from
//! the mark alone, without reading the object, whether to free it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::dirs::Listing;

/// What closing a file handle leaves of its object's opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Closed {
    /// Other handles still have the object open.
    StillOpen,
    /// That was the last handle or reference; the object has a name.
    Last,
    /// That was the last handle or reference of an object that lost its
    /// last name while open ([`Handles::mark_orphaned`]): to be freed.
    LastOfOrphan,
}

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

/// An open directory handle: the directory and its listing.
type OpenDir = (u64, Arc<Mutex<Listing>>);

/// An object with open handles or kernel references.
#[derive(Clone, Copy, Debug, Default)]
struct Open {
    /// File and directory handles open on it: a directory removed while
    /// open is kept, as a file is, so that its handles still read its
    /// attributes (as after `rmdir(2)` of an open directory).
    handles: u32,
    /// References a kernel holds by inode number (a FUSE lookup count):
    /// they keep the object as a handle does, so that a directory that is
    /// only a process's working directory still reads its attributes
    /// once removed.
    refs: u64,
    /// It has no name left (an orphan record keeps it): the last release
    /// frees it.
    orphaned: bool,
}

/// Every open handle.
pub(crate) struct Handles {
    next: AtomicU64,
    files: Mutex<HashMap<u64, FileHandle>>,
    /// Open directory handles: the directory and its listing.
    dirs: Mutex<HashMap<u64, OpenDir>>,
    /// Open objects: their file handles' count, and whether they lost
    /// their last name while open.
    open: Mutex<HashMap<u64, Open>>,
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

    /// Whether any handle (file or directory) of `ino` is open or a
    /// kernel reference to it is held. Call with its gate held.
    pub(crate) fn is_open(&self, ino: u64) -> bool {
        self.open.lock().get(&ino).is_some_and(|o| o.handles > 0 || o.refs > 0)
    }

    /// Counts one kernel reference to `ino` more. Call with its gate held.
    pub(crate) fn retain(&self, ino: u64) {
        let mut open = self.open.lock();
        let o = open.entry(ino).or_default();
        o.refs = o.refs.saturating_add(1);
    }

    /// Counts `n` kernel references to `ino` fewer (more than it holds
    /// counts as all); what that leaves. Call with its gate held.
    pub(crate) fn forget(&self, ino: u64, n: u64) -> Closed {
        let mut open = self.open.lock();
        let Some(o) = open.get_mut(&ino) else { return Closed::Last };
        o.refs = o.refs.saturating_sub(n);
        Self::settle(&mut open, ino)
    }

    /// What object `ino`'s counts leave after one of them dropped: still
    /// open, or closed (its entry gone), to be freed if orphaned.
    fn settle(open: &mut HashMap<u64, Open>, ino: u64) -> Closed {
        match open.get(&ino) {
            Some(o) if o.handles > 0 || o.refs > 0 => Closed::StillOpen,
            Some(&Open { orphaned: true, .. }) => {
                open.remove(&ino);
                Closed::LastOfOrphan
            }
            _ => {
                open.remove(&ino);
                Closed::Last
            }
        }
    }

    /// Marks open object `ino` as having lost its last name (its unlink
    /// committed an orphan record because a handle has it open): its last
    /// release frees it. Call with its gate held, after that commit.
    pub(crate) fn mark_orphaned(&self, ino: u64) {
        if let Some(o) = self.open.lock().get_mut(&ino) {
            o.orphaned = true;
        }
    }

    /// Registers an open file; returns its handle number. Call with the
    /// object's gate held.
    pub(crate) fn add_file(&self, handle: FileHandle) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed);
        self.open.lock().entry(handle.ino).or_default().handles += 1;
        self.files.lock().insert(fh, handle);
        fh
    }

    /// The open file `fh`, if open.
    pub(crate) fn file(&self, fh: u64) -> Option<FileHandle> {
        self.files.lock().get(&fh).copied()
    }

    /// Forgets file handle `fh`; returns it and what closing it leaves.
    /// Call with the object's gate held.
    pub(crate) fn remove_file(&self, fh: u64) -> Option<(FileHandle, Closed)> {
        let handle = self.files.lock().remove(&fh)?;
        Some((handle, self.close(handle.ino)))
    }

    /// One handle of `ino` fewer: what that leaves.
    fn close(&self, ino: u64) -> Closed {
        let mut open = self.open.lock();
        if let Some(o) = open.get_mut(&ino) {
            o.handles = o.handles.saturating_sub(1);
        }
        Self::settle(&mut open, ino)
    }

    /// Registers an open listing of directory `ino`; returns its handle
    /// number. Call with the directory's gate held.
    pub(crate) fn add_dir(&self, ino: u64, listing: Listing) -> u64 {
        let dh = self.next.fetch_add(1, Ordering::Relaxed);
        self.open.lock().entry(ino).or_default().handles += 1;
        self.dirs.lock().insert(dh, (ino, Arc::new(Mutex::new(listing))));
        dh
    }

    /// The open directory listing `dh`, if open.
    pub(crate) fn dir(&self, dh: u64) -> Option<Arc<Mutex<Listing>>> {
        self.dirs.lock().get(&dh).map(|(_, l)| Arc::clone(l))
    }

    /// The directory open as `dh`, if open.
    pub(crate) fn dir_ino(&self, dh: u64) -> Option<u64> {
        self.dirs.lock().get(&dh).map(|&(ino, _)| ino)
    }

    /// Forgets directory handle `dh`; what closing it leaves, if it was
    /// open. Call with the directory's gate held.
    pub(crate) fn remove_dir(&self, dh: u64) -> Option<Closed> {
        let (ino, _) = self.dirs.lock().remove(&dh)?;
        Some(self.close(ino))
    }
}

/// The gates of some objects, held ([`Fs::hold_open`](crate::Fs::hold_open)):
/// for a change made beside the file system on the same store (the KV API)
/// that may leave an object without a name, as an unlink holds its gate.
pub struct OpenGates<'a> {
    handles: &'a Handles,
    _gates: Vec<MutexGuard<'a, ()>>,
}

impl<'a> OpenGates<'a> {
    pub(crate) fn new(handles: &'a Handles, objects: &[u64]) -> OpenGates<'a> {
        OpenGates { handles, _gates: handles.gates(objects.iter().copied()) }
    }

    /// Whether a handle (file or directory) of `object` (one of those
    /// held) is open, or a kernel reference to it is held.
    pub fn is_open(&self, object: u64) -> bool {
        self.handles.is_open(object)
    }

    /// Marks open `object` (one of those held), which a committed change
    /// left without a name and with an orphan record, so that its last
    /// release frees it.
    pub fn mark_orphaned(&self, object: u64) {
        self.handles.mark_orphaned(object);
    }
}
