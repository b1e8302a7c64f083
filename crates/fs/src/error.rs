//! The file system layer's errors: each maps to the errno POSIX gives for
//! it, and carries enough to say what failed.

use larder_namespace::NamespaceError;
use larder_object::ObjectError;

/// Why a file system call failed.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The engine below failed (I/O, corruption, a stopped store): EIO,
    /// or ENOSPC when the store is full.
    #[error(transparent)]
    Store(#[from] ObjectError),
    /// A POSIX error, with what it concerns.
    #[error("{what}: {}", std::io::Error::from_raw_os_error(*errno))]
    Posix {
        /// The errno (`libc::ENOENT`, ...).
        errno: i32,
        /// What the call was doing, and on what.
        what: String,
    },
    /// No entry `name` in directory `parent` (ENOENT). Apart from `Posix`
    /// so that a negative lookup, which a mount answers before every
    /// create, formats no message that nobody reads.
    #[error(
        "{:?} in directory {parent}: {}",
        String::from_utf8_lossy(name),
        std::io::Error::from_raw_os_error(libc::ENOENT)
    )]
    NoEntry {
        /// The name looked for.
        name: Vec<u8>,
        /// The directory it was looked for in.
        parent: u64,
    },
}

impl FsError {
    /// A POSIX error `errno` about `what`.
    pub fn posix(errno: i32, what: impl Into<String>) -> FsError {
        FsError::Posix { errno, what: what.into() }
    }

    /// ENOENT: no entry `name` in directory `parent`.
    pub fn no_entry(parent: u64, name: &[u8]) -> FsError {
        FsError::NoEntry { name: name.to_vec(), parent }
    }

    /// The errno a system call returns for this error.
    pub fn errno(&self) -> i32 {
        match self {
            FsError::Posix { errno, .. } => *errno,
            FsError::NoEntry { .. } => libc::ENOENT,
            FsError::Store(e) => store_errno(e),
        }
    }
}

fn store_errno(e: &ObjectError) -> i32 {
    match e {
        _ if e.is_no_space() => libc::ENOSPC,
        ObjectError::NoSuchObject { .. } => libc::ENOENT,
        ObjectError::InvalidName { .. } => libc::EINVAL,
        _ => libc::EIO,
    }
}

impl From<NamespaceError> for FsError {
    fn from(e: NamespaceError) -> Self {
        let errno = match &e {
            NamespaceError::Exists { .. } => libc::EEXIST,
            NamespaceError::NotFound { .. } => libc::ENOENT,
            NamespaceError::NotADirectory { .. } => libc::ENOTDIR,
            NamespaceError::NotEmpty { .. } => libc::ENOTEMPTY,
            NamespaceError::DirectoryLink { .. } => libc::EPERM,
            NamespaceError::LinkCount { .. } => libc::EMLINK,
            NamespaceError::Object(_) => 0,
        };
        match e {
            NamespaceError::Object(o) => FsError::Store(o),
            other => FsError::posix(errno, other.to_string()),
        }
    }
}

impl From<larder_index::IndexError> for FsError {
    fn from(e: larder_index::IndexError) -> Self {
        FsError::Store(e.into())
    }
}

/// Results of this layer.
pub type Result<T> = std::result::Result<T, FsError>;
