//! The io layer's error type.

use std::path::PathBuf;

/// Result of an io-layer call.
pub type IoResult<T> = Result<T, IoError>;

/// What went wrong in the io layer, and on which file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    /// The operating system (or the simulation) reported an error.
    #[error("{op} {path}: {source}")]
    Os {
        /// The operation that failed (`read`, `write`, `sync`, ...).
        op: &'static str,
        /// The file or directory it was applied to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The device is full.
    #[error("no space left on device writing {path}")]
    NoSpace {
        /// The file being written.
        path: PathBuf,
    },
    /// A read ended before the requested bytes.
    #[error("unexpected end of file in {path} at offset {offset}")]
    UnexpectedEof {
        /// The file being read.
        path: PathBuf,
        /// Where the missing bytes start.
        offset: u64,
    },
    /// The file does not exist.
    #[error("{path}: no such file or directory")]
    NotFound {
        /// The missing path.
        path: PathBuf,
    },
    /// The file exists and the caller asked for a new one.
    #[error("{path}: already exists")]
    AlreadyExists {
        /// The existing path.
        path: PathBuf,
    },
    /// Another owner holds the lock.
    #[error("{path} is locked by another process; close that process or open another store")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// An earlier failure latched (a failed sync or write-back, after which
    /// the kernel may have dropped written pages, or an engine thread that
    /// failed for good): nothing more is written until the store is
    /// reopened.
    #[error("storage is poisoned by an earlier failure ({cause}); reopen to recover from what is on disk")]
    Poisoned {
        /// What failed first.
        cause: String,
    },
    /// The simulated machine has crashed; every call fails until the test
    /// takes the crash image.
    #[error("simulated crash")]
    Crashed,
    /// An argument was invalid.
    #[error("invalid argument for {path}: {reason}")]
    InvalidInput {
        /// The file concerned.
        path: PathBuf,
        /// What was wrong.
        reason: &'static str,
    },
}

impl IoError {
    /// Wraps an OS error, mapping the kinds the engine reacts to.
    pub fn os(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> IoError {
        let path = path.into();
        match source.kind() {
            std::io::ErrorKind::NotFound => IoError::NotFound { path },
            std::io::ErrorKind::AlreadyExists => IoError::AlreadyExists { path },
            _ if source.raw_os_error() == Some(28) => IoError::NoSpace { path },
            _ => IoError::Os { op, path, source },
        }
    }

    /// The errno the failure carries, if any: the operating system's, or
    /// ENOSPC (28) for [`IoError::NoSpace`].
    pub fn errno(&self) -> Option<i32> {
        match self {
            IoError::Os { source, .. } => source.raw_os_error(),
            IoError::NoSpace { .. } => Some(28),
            _ => None,
        }
    }

    /// True for errors that mean the file is absent.
    pub fn is_not_found(&self) -> bool {
        matches!(self, IoError::NotFound { .. })
    }
}
