//! The namespace layer's errors.

use larder_object::ObjectError;

/// Why a namespace operation failed. Every variant that concerns a name
/// carries the directory and the name, so a caller can say which.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    /// The object layer failed (I/O, corruption, a poisoned store...).
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// The name is taken (EEXIST).
    #[error("{name:?} already exists in directory {dir}")]
    Exists {
        /// The directory.
        dir: u64,
        /// The name.
        name: String,
    },
    /// No such name (ENOENT).
    #[error("no {name:?} in directory {dir}")]
    NotFound {
        /// The directory.
        dir: u64,
        /// The name.
        name: String,
    },
    /// An object that must be a directory is not (ENOTDIR).
    #[error("object {object} is not a directory")]
    NotADirectory {
        /// The object.
        object: u64,
    },
    /// A directory that must be empty is not (ENOTEMPTY).
    #[error("directory {dir} is not empty ({entries} entries)")]
    NotEmpty {
        /// The directory.
        dir: u64,
        /// Its entry count.
        entries: u64,
    },
    /// A directory cannot get a second name (EPERM for `link`), and the root
    /// none.
    #[error("directory {dir} already has a name; directories have exactly one")]
    DirectoryLink {
        /// The directory.
        dir: u64,
    },
    /// An object's link count would leave its range (a damaged store).
    #[error("object {object}: link count {nlink} cannot change by {delta:+}")]
    LinkCount {
        /// The object.
        object: u64,
        /// Its link count.
        nlink: u32,
        /// The change asked for.
        delta: i64,
    },
}

impl From<larder_index::IndexError> for NamespaceError {
    fn from(e: larder_index::IndexError) -> Self {
        NamespaceError::Object(e.into())
    }
}

/// Results of this layer.
pub type Result<T> = std::result::Result<T, NamespaceError>;

pub(crate) fn lossy(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}
