//! Why fsck stopped without a report.
//!
//! Damage is never an error here: it is a [`crate::Problem`] in the
//! report. Only a failure that makes going on pointless is one: the
//! storage failing a read (an I/O error says nothing about the bytes, so
//! nothing can be concluded from them), or the space manager refusing the
//! snapshot.

use larder_index::IndexError;
use larder_io::IoError;
use larder_object::ObjectError;
use larder_space::SpaceError;

/// Result of an fsck call.
pub type Result<T, E = FsckError> = std::result::Result<T, E>;

/// Why fsck could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsckError {
    /// Reading the index failed for a reason other than damaged bytes
    /// (an I/O error, a closed or poisoned index).
    #[error("fsck could not read the index: {0}")]
    Index(IndexError),
    /// Reading or rewriting the superblock failed.
    #[error("fsck could not read or repair the superblock: {0}")]
    Superblock(#[source] ObjectError),
    /// Reading a container failed.
    #[error("fsck could not read object data: {0}")]
    Io(#[from] IoError),
    /// Listing the heap files or reading a heap file's length failed.
    #[error("fsck could not read the heap files: {0}")]
    Heap(#[source] ObjectError),
    /// The space manager refused the check (a reader registration or
    /// the comparison of free space).
    #[error("fsck could not check space: {0}")]
    Space(#[from] SpaceError),
}
