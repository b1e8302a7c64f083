//! Larder's file system layer (DESIGN.md, layer 7, `fs`): POSIX semantics
//! on the namespace and objects of a store, embedded in the calling
//! process. The FUSE mount (`larder-fuse`) is a thin adapter over it.
//!
//! Calls are made on inode numbers (object ids) as the kernel makes them,
//! plus a path layer ([`Fs::resolve`]) for embedded callers. Every call
//! takes the caller's [`Cred`] and checks permissions as Linux does for a
//! local file system ([`perm`]).
//!
//! Each change is one transaction of the object engine, committed
//! buffered: visible at once, durable at the next `fsync`, `fsyncdir` or
//! [`Fs::sync`] (which make every earlier change durable too, since the
//! log is prefix-closed) or within the log's buffered interval. Closing a
//! file does not sync it.
//!
//! Open-file lifetimes: an object unlinked while a handle is open keeps
//! an orphan record and its data until the last handle is released; after
//! a crash the next open of the store frees it.
#![deny(missing_docs)]

mod attr;
mod bulk;
mod cred;
mod dirs;
mod error;
mod files;
mod handles;
mod heap;
mod meta_batch;
mod names;
mod path;
pub mod perm;
mod rename;
mod statfs;
mod xattrs;

use std::path::Path;
use std::sync::Arc;

pub use attr::{Attr, SetAttr, SetTime, BLOCK_BYTES};
pub use bulk::BulkCreated;
pub use cred::Cred;
pub use dirs::DirEntry;
pub use error::{FsError, Result};
pub use handles::OpenGates;
pub use larder_namespace::bulk::{BULK_CHUNK, BULK_RUN_CHUNK, BULK_RUN_MIN};
pub use larder_object::meta::{Kind, Timestamp};
pub use larder_object::Durability;
use larder_object::{CreationOptions, Store, StoreOptions};
pub use meta_batch::{BatchDone, BatchOp};
pub use path::{split_parent, Resolved, Walked};
pub use rename::RenameFlags;
pub use statfs::StatFs;
pub use xattrs::XattrFlags;

/// Longest name of one directory entry, in bytes (NAME_MAX).
pub const NAME_MAX: usize = 255;
/// Longest path, in bytes, including its terminating NUL (PATH_MAX).
pub const PATH_MAX: usize = 4096;
/// Most names one object may have (ext4's limit).
pub const LINK_MAX: u32 = 65_000;
/// Symbolic links followed while resolving one path before ELOOP.
pub const MAX_SYMLINK_FOLLOWS: usize = 40;

/// How often a file system's changes that nobody fsynced are written and
/// synced: 1 s, against the store's 10 ms for the KV API. POSIX promises
/// nothing without fsync, and ext4 commits every 5 s; a sync every 10 ms
/// under a stream of creates through a mount cost 10-15% of their rate on
/// a disk that flushes for real (docs/design.md, "Durability").
pub const FS_BUFFERED_SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Options of a file system.
#[derive(Clone, Debug)]
pub struct FsOptions {
    /// Run-time options of the store below. The default is the store's,
    /// with the log's `buffered_sync_interval` at
    /// [`FS_BUFFERED_SYNC_INTERVAL`].
    pub store: StoreOptions,
    /// Options fixed when a store is created (ignored by `open`).
    pub creation: CreationOptions,
}

impl Default for FsOptions {
    fn default() -> Self {
        let mut store = StoreOptions::default();
        store.log.buffered_sync_interval = Some(FS_BUFFERED_SYNC_INTERVAL);
        FsOptions { store, creation: CreationOptions::default() }
    }
}

/// An open file system over one store.
pub struct Fs {
    store: Arc<Store>,
    handles: handles::Handles,
    /// Held by renames that move a directory to another parent, across
    /// their cycle check and commit (DESIGN.md, namespace).
    rename_lock: parking_lot::Mutex<()>,
}

impl std::fmt::Debug for Fs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fs").field("store", &self.store.dir()).finish()
    }
}

impl Fs {
    /// Creates a new store in `dir` on the real file system (the directory
    /// may exist but must hold no store), with an empty root directory
    /// owned by uid 0, mode 755 (as a new file system's).
    ///
    /// ```
    /// use larder_fs::{Cred, Fs, FsOptions};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let fs = Fs::create(tmp.path(), FsOptions::default())?;
    /// let cred = Cred::root();
    /// let (attr, fh) = fs.create_file(&cred, fs.root(), b"notes.txt", 0o644, libc::O_RDWR)?;
    /// assert_eq!(fs.write(&cred, fh, 0, b"first line\n")?, 11);
    /// fs.write(&cred, fh, 11, b"second line\n")?;
    /// fs.fsync(fh)?; // the file, its name and every earlier change are durable
    /// assert_eq!(fs.read(fh, 0, 10)?, b"first line");
    /// fs.release(fh)?;
    /// fs.close()?;
    ///
    /// let fs = Fs::open(tmp.path(), FsOptions::default())?;
    /// let found = fs.resolve(&cred, b"/notes.txt", true)?;
    /// assert_eq!(found.attr.map(|a| (a.ino, a.size)), Some((attr.ino, 23)));
    /// # Ok(())
    /// # }
    /// ```
    pub fn create(dir: &Path, options: FsOptions) -> Result<Fs> {
        Self::create_with(Arc::new(larder_io::RealStorage::new()), dir, options)
    }

    /// Opens the store in `dir` on the real file system, recovering from
    /// any crash (and freeing objects that were unlinked while open): every
    /// change made durable (by an fsync, fsyncdir or sync that returned) is
    /// there. Fails when `dir` holds no store
    /// ([`larder_object::ObjectError::NotAStore`] inside [`FsError::Store`],
    /// errno EIO), while another process has it open, or with an error
    /// naming the file when its files fail their checks. See [`Fs::create`]
    /// for an example.
    pub fn open(dir: &Path, options: FsOptions) -> Result<Fs> {
        Self::open_with(Arc::new(larder_io::RealStorage::new()), dir, options)
    }

    /// Creates a new store in `dir` on `storage`.
    pub fn create_with(storage: larder_io::StorageRef, dir: &Path, options: FsOptions) -> Result<Fs> {
        Ok(Self::with_store(Arc::new(Store::create(storage, dir, options.creation, options.store)?)))
    }

    /// Opens the store in `dir` on `storage`.
    pub fn open_with(storage: larder_io::StorageRef, dir: &Path, options: FsOptions) -> Result<Fs> {
        Ok(Self::with_store(Arc::new(Store::open(storage, dir, options.store)?)))
    }

    /// A file system over an open store, which others (a KV API in the
    /// same process) may share.
    pub fn with_store(store: Arc<Store>) -> Fs {
        Fs { store, handles: handles::Handles::new(), rename_lock: parking_lot::Mutex::new(()) }
    }

    /// The store below.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Holds the gates of `objects` until the guard drops (no open of them
    /// begins, no last release of them ends): a change beside the file
    /// system on the same store (the KV API) that may leave one without a
    /// name asks whether it is open, unlinks it as an orphan if so, and
    /// marks it for its last release to free, as [`Fs::unlink`] does.
    pub fn hold_open(&self, objects: &[u64]) -> OpenGates<'_> {
        OpenGates::new(&self.handles, objects)
    }

    /// The root directory's inode number.
    pub fn root(&self) -> u64 {
        larder_object::ROOT_ID
    }

    /// Makes every change so far durable (one log sync).
    pub fn sync(&self) -> Result<()> {
        Ok(self.store.sync()?)
    }

    /// Makes everything durable and closes the store, if this is its last
    /// user; open handles are dropped (their orphans are freed at the next
    /// open).
    pub fn close(self) -> Result<()> {
        self.store.sync()?;
        match Arc::try_unwrap(self.store) {
            Ok(store) => Ok(store.close()?),
            Err(_) => Ok(()),
        }
    }
}
