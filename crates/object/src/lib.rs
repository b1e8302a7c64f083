//! Larder's object engine: the store on disk and the objects in it.
//!
//! This crate is being built up layer by layer (see the project's issues).
//! It holds so far the superblock: the store's identity, format version,
//! feature flags and the options fixed at creation, kept in two checksummed
//! copies so a torn update never loses the store.

mod error;
pub mod superblock;

pub use error::{ObjectError, Result};
pub use superblock::{CreationOptions, Superblock};
