//! Larder, embedded: the one crate a program depends on to keep data in a
//! Larder store.
//!
//! A [`Store`] is a directory on disk holding one store: open it with
//! [`Store::open`] (which creates it when missing) and reach its objects
//! as keys in buckets through [`Store::kv`], or as files and directories
//! through [`Store::fs`]; both see the same objects. [`index::open`] opens
//! the ordered key-value index on its own, outside any store. [`Options`]
//! sets memory budgets and durability for all of them, and every call
//! fails with one [`Error`] that keeps the failing layer's typed error.
//!
//! ```
//! use larder::{Durability, Options, Store};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! let store = Store::open(tmp.path().join("store"), Options::default())?;
//! store.kv().create_bucket("greetings")?;
//! store.kv().put("greetings", "en", b"hello", Durability::Durable)?;
//! assert_eq!(store.kv().get("greetings", "en")?, Some(b"hello".to_vec()));
//! store.close()?;
//! # Ok(())
//! # }
//! ```
//!
//! # Durability
//!
//! A KV call returns once its change is durable when asked with
//! [`Durability::Durable`]; with [`Durability::Buffered`] it returns at
//! once and the change is durable within
//! [`Options::buffered_sync_interval`] (10 ms by default). File system
//! changes are buffered too, and durable when an `fsync` of any file
//! returns. [`Store::sync`] and [`Store::close`] make everything durable.
//! A crash loses at most the latest buffered changes, never a change
//! without those before it, and the next open recovers the rest.
//!
//! # Features
//!
//! | feature | default | what |
//! | --- | --- | --- |
//! | `kv` | yes | [`kv`]: the key-value API and [`Store::kv`] |
//! | `fs` | yes | [`fs`]: the POSIX file system API and [`Store::fs`] |
//! | `index` | yes | [`index`]: the standalone index |
//! | `trees` | yes | [`trees`]: transactional trees and [`Store::trees`] |
//! | `fuse` | no | `fuse`: the FUSE mount over `fs` (needs `fusermount3` at run time) |
//!
//! The layers below ([`object`], [`io`]) are always there.
#![deny(missing_docs)]

mod error;
#[cfg(all(feature = "kv", feature = "fs"))]
mod open_objects;
mod options;
mod store;

#[cfg(feature = "fs")]
pub mod fs;
#[cfg(feature = "fuse")]
pub mod fuse;
#[cfg(feature = "index")]
pub mod index;
pub mod io;
#[cfg(feature = "kv")]
pub mod kv;
pub mod object;
#[cfg(feature = "trees")]
pub mod trees;

pub use error::{Error, ErrorKind, Result};
pub use larder_object::{CreationOptions, Durability};
pub use options::Options;
pub use store::Store;

/// The README's examples, compiled and run as doc tests so they cannot
/// fall behind the API.
#[cfg(all(doctest, feature = "kv", feature = "fs"))]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeExamples;
