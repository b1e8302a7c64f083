//! Transactional trees ([`larder_trees`]): named, ordered maps of byte
//! keys to byte values, reached through [`Store::trees`](crate::Store::trees).
//!
//! A [`WriteTransaction`] sees its own writes (point reads and scans in
//! both directions), commits all of them atomically with the
//! [`Durability`] it was started with, or nothing (aborted, dropped, or
//! its closure in [`Trees::transaction`] failed), and is serializable
//! against every other. A [`ReadTransaction`] and every iterator read one
//! stable snapshot while writes go on. [`Trees::snapshot`] writes a
//! consistent copy as a new store.
//!
//! ```
//! use larder::{Durability, Options, Store};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! let store = Store::open(tmp.path().join("store"), Options::default())?;
//! let trees = store.trees()?;
//! let users = trees.open_tree("users")?;
//! let mut tx = trees.write(Durability::Durable)?;
//! tx.insert(&users, b"ada", b"admin")?;
//! assert_eq!(tx.get(&users, b"ada")?, Some(b"admin".to_vec()));
//! tx.commit()?;
//! assert_eq!(users.approximate_len()?, 1);
//! # drop(users);
//! store.close()?;
//! # Ok(())
//! # }
//! ```

pub use larder_trees::{
    Durability, KeyRange, ReadTransaction, TransactionError, Tree, TreeIter, Trees, TreesError, TreesOptions, TxIter,
    WriteTransaction, MAX_KEY_BYTES, MAX_TREE_NAME_BYTES, MAX_VALUE_BYTES,
};
