//! Larder's key-value API (DESIGN.md, layer 7): buckets of objects whose
//! keys are paths, embedded in the calling process.
//!
//! A bucket is a directory under the store's root; a key is a path
//! relative to it whose `/` separates directory levels (created on put,
//! removed when a delete empties them), each level a valid file name, so
//! the same objects appear unchanged in the file system. Keys breaking the
//! rules are refused with [`KvError::InvalidKey`] ([`key`] module). Scans
//! return keys in byte order of the whole key.
//!
//! Every change is one transaction of the object engine, committed with
//! the [`Durability`] the call asks for: `Durable` returns once the change
//! and everything before it is on disk; `Buffered` returns at once and is
//! durable within the log's buffered interval (a crash loses at most a
//! suffix of buffered changes).
#![deny(missing_docs)]

mod batch;
mod bucket;
mod bulk;
mod error;
mod find;
pub mod key;
mod open;
mod ops;
mod plan;
mod scan;
pub mod stats;
mod stream;

use std::path::Path;
use std::sync::Arc;

pub use batch::KvBatch;
pub use bulk::KvCreated;
pub use error::{KvError, Result};
pub use larder_object::Durability;
use larder_object::{CreationOptions, Store, StoreOptions};
pub use open::{HeldObjects, OpenObjects};
pub use ops::Head;
pub use scan::{Scan, ScanEntry, ScanValues};
pub use stream::{KvReader, KvWriter};

/// Options of a KV store.
#[derive(Clone, Debug)]
pub struct KvOptions {
    /// Run-time options of the store below (index, log, space).
    pub store: StoreOptions,
    /// Options fixed when a store is created (ignored by `open`).
    pub creation: CreationOptions,
    /// Owner of objects and levels the KV API creates (uid, gid): by
    /// default the process's effective ids.
    pub owner: (u32, u32),
}

impl Default for KvOptions {
    fn default() -> Self {
        KvOptions {
            store: StoreOptions::default(),
            creation: CreationOptions::default(),
            owner: (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw()),
        }
    }
}

impl KvOptions {
    /// Sets the index's memtable and block cache budgets, in bytes.
    pub fn with_budgets(mut self, memtable_bytes: usize, cache_bytes: usize) -> Self {
        self.store.index.memtable_size_bytes = memtable_bytes;
        self.store.index.block_cache_bytes = cache_bytes;
        self
    }
}

/// An open KV store.
pub struct Kv {
    store: Arc<Store>,
    owner: (u32, u32),
    /// The open objects of a file system sharing the store, if one does.
    open: Option<Arc<dyn OpenObjects>>,
    /// The last bucket a change found not to be a heap's directory (0:
    /// none yet). A directory's heap flag never changes and object ids are
    /// never reused, so the answer holds for good: a plan skips the
    /// bucket's check (an onode read, in a busy bucket a fold of its entry
    /// count operands).
    plain_bucket: std::sync::atomic::AtomicU64,
    /// The last directory level under a bucket a put's plan found not to
    /// be a heap's (0: none yet); it holds for good for the same reasons.
    /// A put to keys under one level skips that level's check.
    plain_level: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Kv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kv").field("owner", &self.owner).field("shares_opens", &self.open.is_some()).finish()
    }
}

impl Kv {
    /// Creates a new store in `dir` on the real file system (the directory
    /// may exist but must hold no store: else
    /// [`larder_object::ObjectError::AlreadyExists`]). Everything created
    /// is durable when it returns.
    ///
    /// ```
    /// use larder_kv::{Durability, Kv, KvOptions};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let kv = Kv::create(tmp.path(), KvOptions::default())?;
    /// kv.create_bucket("b")?;
    /// kv.put("b", "k", b"v", Durability::Durable)?;
    /// kv.close()?;
    ///
    /// let kv = Kv::open(tmp.path(), KvOptions::default())?;
    /// assert_eq!(kv.get("b", "k")?, Some(b"v".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn create(dir: &Path, options: KvOptions) -> Result<Kv> {
        Self::create_with(Arc::new(larder_io::RealStorage::new()), dir, options)
    }

    /// Opens the store in `dir` on the real file system, recovering from
    /// any crash: every change acknowledged durable before it is there,
    /// and of the buffered ones a prefix. Fails with
    /// [`larder_object::ObjectError::NotAStore`] when `dir` holds no store,
    /// with [`larder_io::IoError::Locked`] (inside [`KvError::Object`])
    /// while another process has it open, and with a corruption or
    /// newer-version error naming the file when its files fail their
    /// checks. See [`Kv::create`] for an example.
    pub fn open(dir: &Path, options: KvOptions) -> Result<Kv> {
        Self::open_with(Arc::new(larder_io::RealStorage::new()), dir, options)
    }

    /// Creates a new store in `dir` on `storage`.
    pub fn create_with(storage: larder_io::StorageRef, dir: &Path, options: KvOptions) -> Result<Kv> {
        let store = Store::create(storage, dir, options.creation, options.store)?;
        Ok(Kv::with_store(Arc::new(store), options.owner))
    }

    /// Opens the store in `dir` on `storage`.
    pub fn open_with(storage: larder_io::StorageRef, dir: &Path, options: KvOptions) -> Result<Kv> {
        let store = Store::open(storage, dir, options.store)?;
        Ok(Kv::with_store(Arc::new(store), options.owner))
    }

    /// A KV API over an open store that others share (a file system and
    /// its mount in the same process); objects it creates belong to
    /// `owner` (uid, gid).
    pub fn with_store(store: Arc<Store>, owner: (u32, u32)) -> Kv {
        Kv { store, owner, open: None, plain_bucket: Default::default(), plain_level: Default::default() }
    }

    /// This API over a store whose file system has `open` objects open: a
    /// delete or replace that leaves one without a name keeps it until the
    /// file system's last close of it.
    pub fn sharing_opens(mut self, open: Arc<dyn OpenObjects>) -> Kv {
        self.open = Some(open);
        self
    }

    /// The open objects of the file system sharing the store, if any.
    pub(crate) fn open_objects(&self) -> Option<&dyn OpenObjects> {
        self.open.as_deref()
    }

    /// The object store below, for what this API does not cover (stats,
    /// fsck).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Makes every change so far durable (buffered ones included): one log
    /// sync, shared with concurrent callers.
    pub fn sync(&self) -> Result<()> {
        Ok(self.store.sync()?)
    }

    /// Makes everything durable and closes the store cleanly, if this is
    /// its last user (else only makes everything durable).
    pub fn close(self) -> Result<()> {
        match Arc::try_unwrap(self.store) {
            Ok(store) => Ok(store.close()?),
            Err(shared) => Ok(shared.sync()?),
        }
    }
}
