//! The trees' error type.

use std::path::PathBuf;

/// A result of the trees API.
pub type Result<T> = std::result::Result<T, TreesError>;

/// Why a trees call failed. A refused call (a limit, a missing tree)
/// changed nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TreesError {
    /// A key longer than [`crate::MAX_KEY_BYTES`].
    #[error("key of {len} bytes is over the limit of {limit} bytes")]
    KeyTooLarge {
        /// The key's length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A value longer than [`crate::MAX_VALUE_BYTES`].
    #[error("value of {len} bytes is over the limit of {limit} bytes")]
    ValueTooLarge {
        /// The value's length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A transaction whose writes do not fit one intent-log record of the
    /// store (the log segment size, fixed when the store was created).
    #[error("transaction of {bytes} bytes is over the limit of {limit} bytes for one commit")]
    TransactionTooLarge {
        /// The transaction's bytes as committed.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// The tree does not exist (never created, or deleted since the handle
    /// was taken).
    #[error("no tree named {name:?}")]
    NoSuchTree {
        /// The tree's name.
        name: String,
    },
    /// The snapshot's destination already exists.
    #[error("snapshot destination {path} already exists")]
    SnapshotExists {
        /// The destination.
        path: PathBuf,
    },
    /// The object layer below failed (I/O, corruption, a poisoned store,
    /// an invalid tree name).
    #[error(transparent)]
    Store(#[from] larder_object::ObjectError),
    /// The index failed a read.
    #[error(transparent)]
    Index(#[from] larder_index::IndexError),
    /// A file operation of a snapshot failed.
    #[error(transparent)]
    Io(#[from] larder_io::IoError),
}

/// Why [`crate::Trees::transaction`] did not commit.
#[derive(Debug, thiserror::Error)]
pub enum TransactionError<E> {
    /// The closure returned this error: the transaction was aborted and
    /// wrote nothing.
    #[error("transaction aborted: {0}")]
    Aborted(E),
    /// The trees failed (the closure's own calls or the commit).
    #[error(transparent)]
    Store(#[from] TreesError),
}
