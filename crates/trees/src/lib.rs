//! Larder's transactional trees: named, ordered maps of byte keys to byte
//! values in one store, changed by serializable transactions that commit
//! through the store's intent log (with its group commit), like redb or
//! LMDB embedded in the calling process. Design: docs/trees.md; records:
//! docs/format.md, section 19.
//!
//! * [`Trees`] holds every tree of one store: open or create trees, run
//!   transactions, take snapshots.
//! * A [`WriteTransaction`] sees its own writes (point reads and scans in
//!   both directions), commits all of them atomically or none, and is
//!   serializable against every other: one runs at a time, from its start
//!   until its record is ordered in the log; waiting for durability happens
//!   after that, so concurrent durable transactions share one log sync.
//! * A [`ReadTransaction`] and every iterator read one stable snapshot
//!   while writes go on.
//! * [`Tree`] runs one-operation transactions with the default durability
//!   of [`TreesOptions`].
//!
//! ```
//! use larder_trees::{Durability, Trees};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! let trees = Trees::open_dir(&tmp.path().join("store"))?;
//! let accounts = trees.open_tree("accounts")?;
//! trees.transaction(Durability::Durable, |tx| {
//!     tx.insert(&accounts, b"alice", b"10")?;
//!     tx.insert(&accounts, b"bob", b"5")?;
//!     Ok::<_, larder_trees::TreesError>(())
//! })?;
//! assert_eq!(accounts.get(b"bob")?, Some(b"5".to_vec()));
//! let keys: Vec<Vec<u8>> = accounts.iter_rev()?.map(|kv| kv.map(|(k, _)| k)).collect::<Result<_, _>>()?;
//! assert_eq!(keys, vec![b"bob".to_vec(), b"alice".to_vec()]);
//! trees.close()?;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod catalog;
mod counts;
mod error;
mod iter;
mod read;
mod registry;
mod snapshot;
mod start_hint;
mod tree;
mod write;
mod writer;

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

pub use error::{Result, TransactionError, TreesError};
pub use iter::{TreeIter, TxIter};
pub use larder_object::Durability;
use larder_object::{CreationOptions, Store, StoreOptions};
pub use read::ReadTransaction;
pub use tree::Tree;
pub use write::WriteTransaction;

/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = larder_object::meta::MAX_TREE_KEY_BYTES;
/// Longest value, in bytes. A transaction as a whole must also fit one
/// intent-log record ([`TreesError::TransactionTooLarge`]).
pub const MAX_VALUE_BYTES: usize = 1 << 20;
/// Longest tree name, in bytes of UTF-8.
pub const MAX_TREE_NAME_BYTES: usize = larder_object::meta::MAX_TREE_NAME_BYTES;

/// A range of keys: the start and end bounds.
pub type KeyRange<'k> = (Bound<&'k [u8]>, Bound<&'k [u8]>);

/// Options of a [`Trees`].
#[derive(Clone, Debug)]
pub struct TreesOptions {
    /// Durability of the one-operation writes of [`Tree`] (`insert`,
    /// `remove`, `clear`). Default [`Durability::Durable`].
    pub durability: Durability,
    /// Run-time options of a store [`Trees::open_dir`] opens.
    pub store: StoreOptions,
    /// Options of a store [`Trees::open_dir`] or [`Trees::create_dir`]
    /// creates.
    pub creation: CreationOptions,
}

impl Default for TreesOptions {
    fn default() -> Self {
        TreesOptions {
            durability: Durability::Durable,
            store: StoreOptions::default(),
            creation: CreationOptions::default(),
        }
    }
}

/// What every handle of one [`Trees`] shares.
pub(crate) struct Shared {
    pub(crate) store: Arc<Store>,
    pub(crate) durability: Durability,
    /// The writer lock and the catalog, shared by every `Trees` of the
    /// store in this process.
    pub(crate) serial: Arc<registry::Serial>,
    /// Largest batch one commit may carry (the log's record limit).
    pub(crate) max_commit_bytes: u64,
}

/// Every tree of one store. Cheap to clone, `Send` and `Sync`. Every
/// `Trees` opened on one `Arc<Store>` in a process shares one writer lock
/// and one catalog, so their write transactions are serialized against
/// each other.
#[derive(Clone)]
pub struct Trees {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Trees {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trees").field("store", &self.shared.store.dir()).finish()
    }
}

impl Trees {
    /// The trees of an open store, with the default [`TreesOptions`].
    pub fn open(store: Arc<Store>) -> Result<Trees> {
        Self::open_with(store, &TreesOptions::default())
    }

    /// The trees of an open store (only `options.durability` applies).
    pub fn open_with(store: Arc<Store>, options: &TreesOptions) -> Result<Trees> {
        let serial = registry::serial_for(&store)?;
        // Room for the record's framing and the payload's own header in
        // the log's largest payload (a segment less its header block).
        let segment = store.superblock().options.log_segment_bytes;
        let max_commit_bytes = segment.saturating_sub(8 << 10);
        Ok(Trees { shared: Arc::new(Shared { store, durability: options.durability, serial, max_commit_bytes }) })
    }

    /// Creates a new store at `dir` (which must hold none) on the real file
    /// system and opens its trees.
    pub fn create_dir(dir: &Path) -> Result<Trees> {
        Self::create_dir_with(dir, &TreesOptions::default())
    }

    /// [`Trees::create_dir`] with options.
    pub fn create_dir_with(dir: &Path, options: &TreesOptions) -> Result<Trees> {
        let storage = Arc::new(larder_io::RealStorage::new());
        let store = Store::create(storage, dir, options.creation, options.store.clone())?;
        Self::open_with(Arc::new(store), options)
    }

    /// Opens the store at `dir` on the real file system (creating it if
    /// there is none) and its trees. Fails with
    /// [`larder_io::IoError::Locked`] (inside [`TreesError::Store`]) while
    /// another process has the store open.
    pub fn open_dir(dir: &Path) -> Result<Trees> {
        Self::open_dir_with(dir, &TreesOptions::default())
    }

    /// [`Trees::open_dir`] with options.
    pub fn open_dir_with(dir: &Path, options: &TreesOptions) -> Result<Trees> {
        let storage: larder_io::StorageRef = Arc::new(larder_io::RealStorage::new());
        let store = match Store::open(storage.clone(), dir, options.store.clone()) {
            Err(larder_object::ObjectError::NotAStore { .. }) => {
                Store::create(storage, dir, options.creation, options.store.clone())?
            }
            other => other?,
        };
        Self::open_with(Arc::new(store), options)
    }

    /// The store below.
    pub fn store(&self) -> &Arc<Store> {
        &self.shared.store
    }

    /// The tree named `name`, created (durably) if it does not exist.
    /// Names are 1 to 255 bytes of UTF-8.
    pub fn open_tree(&self, name: &str) -> Result<Tree> {
        if let Some(t) = self.tree(name)? {
            return Ok(t);
        }
        let id = catalog::create(&self.shared, name)?;
        Ok(Tree::new(self.shared.clone(), name, id))
    }

    /// The tree named `name`, if it exists.
    pub fn tree(&self, name: &str) -> Result<Option<Tree>> {
        larder_object::meta::check_tree_name(name.as_bytes())?;
        let id = self.shared.serial.catalog.read().id(name);
        Ok(id.map(|id| Tree::new(self.shared.clone(), name, id)))
    }

    /// Every tree's name, in byte order.
    pub fn list_trees(&self) -> Result<Vec<String>> {
        Ok(self.shared.serial.catalog.read().names())
    }

    /// Deletes the tree named `name` and every entry in it, durably.
    /// False if there was none. Handles on it fail later writes with
    /// [`TreesError::NoSuchTree`]; its id is never used again.
    pub fn delete_tree(&self, name: &str) -> Result<bool> {
        larder_object::meta::check_tree_name(name.as_bytes())?;
        catalog::delete(&self.shared, name)
    }

    /// A read transaction: one stable snapshot of every tree as of now.
    pub fn read(&self) -> ReadTransaction {
        ReadTransaction::new(self.shared.clone())
    }

    /// Starts a write transaction, waiting for the one running, if any, to
    /// commit or abort. Refused with [`TreesError::NestedWrite`] on a thread
    /// that holds a write transaction already (it would wait for itself);
    /// the same goes for [`Tree`]'s writes, creating a tree and deleting
    /// one. It commits with `durability` when
    /// [`WriteTransaction::commit`] is called, and is aborted (writing
    /// nothing) when dropped without.
    pub fn write(&self, durability: Durability) -> Result<WriteTransaction<'_>> {
        WriteTransaction::begin(&self.shared, durability)
    }

    /// Returns when every commit up to log position `lsn` (as
    /// [`WriteTransaction::commit_unsynced`] returns it) is on disk,
    /// writing the log's pending records if needed. Concurrent callers
    /// share one sync.
    pub fn sync_to(&self, lsn: u64) -> Result<()> {
        Ok(self.shared.store.sync_to(lsn)?)
    }

    /// The highest log position up to which every commit is on disk.
    pub fn durable_lsn(&self) -> u64 {
        self.shared.store.durable_lsn()
    }

    /// Runs `f` in a write transaction: commits what it wrote if it returns
    /// `Ok`, writes nothing if it returns `Err` ([`TransactionError::Aborted`]).
    pub fn transaction<R, E>(
        &self,
        durability: Durability,
        f: impl FnOnce(&mut WriteTransaction<'_>) -> std::result::Result<R, E>,
    ) -> std::result::Result<R, TransactionError<E>> {
        let mut tx = self.write(durability)?;
        match f(&mut tx) {
            Ok(r) => {
                tx.commit()?;
                Ok(r)
            }
            Err(e) => {
                tx.abort();
                Err(TransactionError::Aborted(e))
            }
        }
    }

    /// Writes a consistent copy of every tree (one snapshot) as a new store
    /// at `path`, which must not exist; it opens with [`Trees::open_dir`].
    /// The copy appears at `path` whole or not at all.
    pub fn snapshot(&self, path: &Path) -> Result<()> {
        snapshot::write(self, path)
    }

    /// Makes every transaction committed so far durable (buffered ones
    /// included): one log sync, shared with concurrent callers.
    pub fn sync(&self) -> Result<()> {
        Ok(self.shared.store.sync()?)
    }

    /// Makes everything durable and closes the store if this is its last
    /// user (no other `Trees` clone, [`Tree`] handle or holder of the
    /// store's `Arc`); else only makes everything durable.
    pub fn close(self) -> Result<()> {
        let shared = match Arc::try_unwrap(self.shared) {
            Ok(s) => s,
            Err(shared) => return Ok(shared.store.sync()?),
        };
        match Arc::try_unwrap(shared.store) {
            Ok(store) => Ok(store.close()?),
            Err(store) => Ok(store.sync()?),
        }
    }
}

#[cfg(test)]
mod tests {
    fn send_sync<T: Send + Sync>() {}
    fn send_static<T: Send + 'static>() {}

    #[test]
    fn handles_and_iterators_cross_threads() {
        send_sync::<super::Trees>();
        send_sync::<super::Tree>();
        send_static::<super::TreeIter>();
        send_static::<super::ReadTransaction>();
    }
}
