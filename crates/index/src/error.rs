//! The index layer's error type.

use std::path::PathBuf;

use larder_io::IoError;

/// Result of an index call.
pub type Result<T, E = IndexError> = std::result::Result<T, E>;

impl IndexError {
    /// Whether the file system had no room for a write (ENOSPC): a flush
    /// or merge failing so is retried once space returns, not a poison.
    pub fn is_no_space(&self) -> bool {
        matches!(self, IndexError::Io(IoError::NoSpace { .. }))
    }
}

/// What went wrong in the index, and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// The io layer failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Bytes read from a file fail a check: checksum, magic, length or structure.
    #[error("{path}: corrupt at offset {offset}: {what}")]
    Corrupt {
        /// The file holding the bad bytes.
        path: PathBuf,
        /// Where in the file the bad structure starts.
        offset: u64,
        /// What check failed.
        what: String,
    },
    /// A file was written by a newer format version than this build reads.
    #[error("{path}: format version {found} is newer than the newest this build reads ({supported}); upgrade larder")]
    NewerVersion {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// A file uses an incompatible feature this build does not know.
    #[error("{path}: unknown incompatible feature flags {flags:#x}; upgrade larder")]
    UnknownFeature {
        /// The file.
        path: PathBuf,
        /// The unknown flag bits.
        flags: u64,
    },
    /// Runs hold merge operands of an operator the caller did not register.
    #[error("{path}: holds operands of merge operator {name:?}, which is not registered; register it in Options::merge_operators")]
    UnknownMergeOperator {
        /// The manifest or run naming it.
        path: PathBuf,
        /// The operator's name.
        name: String,
    },
    /// A batch's sequence number is not above the last one written.
    #[error("sequence number {given} is not greater than the last written ({last})")]
    SequenceNotIncreasing {
        /// The sequence number the caller gave.
        given: u64,
        /// The last sequence number written.
        last: u64,
    },
    /// A prepared ingest holds the next sequence number: install or drop
    /// it first.
    #[error("an ingest prepared at sequence number {seq} is not yet installed")]
    IngestPending {
        /// The ingest's sequence number.
        seq: u64,
    },
    /// A key, value or batch breaks a documented limit.
    #[error("{what} is {len} bytes; the limit is {limit}")]
    TooLarge {
        /// Which item.
        what: &'static str,
        /// Its size.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// A merge names an operator that is not registered.
    #[error("merge operator {0:?} is not registered")]
    MergeOperatorNotRegistered(String),
    /// A merge operator refused its operands.
    #[error("merge operator {name:?} failed on key {key:?}: {reason}")]
    MergeFailed {
        /// The operator.
        name: String,
        /// The key (lossy).
        key: String,
        /// The operator's explanation.
        reason: String,
    },
    /// The options are inconsistent.
    #[error("invalid option {name}: {reason}")]
    InvalidOption {
        /// The option.
        name: &'static str,
        /// Why it is refused.
        reason: String,
    },
    /// An earlier failure (a failed sync, a dead background worker) stopped
    /// all writes; reopen the index to recover from what is on disk.
    #[error("index is poisoned: {0}; reopen it to recover from what is on disk")]
    Poisoned(String),
    /// The index was closed.
    #[error("index is closed")]
    Closed,
}

impl IndexError {
    /// Builds a [`IndexError::Corrupt`].
    pub(crate) fn corrupt(path: impl Into<PathBuf>, offset: u64, what: impl Into<String>) -> Self {
        IndexError::Corrupt { path: path.into(), offset, what: what.into() }
    }
}
