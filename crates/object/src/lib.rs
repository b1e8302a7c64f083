//! Larder's object engine: the store on disk and the objects in it.
//!
//! This crate is being built up layer by layer (see the project's issues).
//! It holds so far the superblock (the store's identity, format version,
//! feature flags and the options fixed at creation, in two checksummed
//! copies) and the [`Store`]: opening and recovering the index and the
//! intent log as one, and committing transactions through the log; and
//! objects with u64 ids whose bytes live inline in their onode or in
//! container extents (`Store::create_object`, `write`, `read`, `truncate`,
//! `delete_object`, `stat`).
#![deny(missing_docs)]

mod error;
pub mod meta;
mod objects;
pub mod store;
pub mod superblock;
mod txn;

pub use error::{CheckpointError, ObjectError, Result};
pub use objects::{FetchedOnodes, FreedHeapObject, HeapRecovery, SpareFill, HEAP_DIR};
pub use store::{
    unobserved_thread, ChangeObserver, Durability, IndexView, MetaChange, Store, StoreHealth, StoreOptions,
    ThreadHealth, ThreadState, ROOT_ID,
};
pub use superblock::{CreationOptions, Superblock};
pub use txn::{LockRequest, Transaction};
