//! Larder's namespace core (DESIGN.md, layer 6): directories as objects
//! whose (directory, name) entries live in the index's dmap, each
//! directory's parent and entry count in its onode, link counts in every
//! onode, and orphan records for objects that are in use but have no name.
//!
//! Changes are made inside object-layer transactions ([`NamespaceTxn`] on
//! `larder_object::Transaction`), so a name and the object it names change
//! in one intent-log record; reads outside transactions are in [`list`].
//! The KV API and the file system are built on these.
#![deny(missing_docs)]

pub mod bulk;
mod error;
pub mod list;
mod ops;

pub use error::{NamespaceError, Result};
pub use ops::{subdir, NamespaceTxn, Unlinked, FREE_LATER_BYTES};
