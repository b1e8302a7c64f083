//! Larder's object engine: the store on disk and the objects in it.
//!
//! This crate is being built up layer by layer (see the project's issues).
//! It holds so far the superblock (the store's identity, format version,
//! feature flags and the options fixed at creation, in two checksummed
//! copies) and the [`Store`]: opening and recovering the index and the
//! intent log as one, and committing transactions through the log.

mod error;
pub mod meta;
pub mod store;
pub mod superblock;
mod txn;

pub use error::{ObjectError, Result};
pub use store::{Durability, Store, StoreOptions};
pub use superblock::{CreationOptions, Superblock};
pub use txn::Transaction;
