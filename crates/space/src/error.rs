//! The space layer's error type.

use std::path::PathBuf;

use larder_io::IoError;

use crate::extent::Extent;

/// Result of a space call.
pub type Result<T, E = SpaceError> = std::result::Result<T, E>;

/// What went wrong in the space layer, and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpaceError {
    /// The io layer failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A container file is damaged: its length is wrong while extents in
    /// use point into it.
    #[error("{path}: corrupt at offset {offset}: {what}")]
    Corrupt {
        /// The container file.
        path: PathBuf,
        /// Where the problem starts (the file's length for a short file).
        offset: u64,
        /// What check failed.
        what: String,
    },
    /// An extent is malformed or lies outside every container.
    #[error("invalid extent {extent}: {what}")]
    InvalidExtent {
        /// The extent as given.
        extent: Extent,
        /// What is wrong with it.
        what: &'static str,
    },
    /// Encoded extent bytes have the wrong length.
    #[error("an encoded extent is {expected} bytes; got {len}")]
    BadEncoding {
        /// Bytes given.
        len: usize,
        /// Bytes an encoded extent has.
        expected: usize,
    },
    /// Two extents in use share blocks.
    #[error("extents in use overlap: {first} and {second}")]
    Overlap {
        /// The extent that starts first.
        first: Extent,
        /// The extent overlapping it.
        second: Extent,
    },
    /// A free names space that is not allocated: a double free, a free of
    /// free space, or of space whose free is still pending.
    #[error("invalid free of {extent}: {what}")]
    InvalidFree {
        /// The extent the caller tried to free.
        extent: Extent,
        /// What the space is instead of allocated.
        what: &'static str,
    },
    /// Every container is full and `max_containers` exist.
    #[error("no space: {requested} bytes requested, {free} free in {containers} containers (max_containers = {max_containers})")]
    NoSpace {
        /// Bytes asked for (rounded up to whole blocks).
        requested: u64,
        /// Bytes free and reusable now.
        free: u64,
        /// Containers that exist.
        containers: u64,
        /// The configured limit.
        max_containers: u64,
    },
    /// The file system holding the containers has no room to create or
    /// grow one beyond the space reserved for the store's own writes.
    #[error("no space on the file system holding {path}: {requested} bytes needed, {available} available, {reserve} of them reserved for the store's log, index and deletes")]
    FileSystemFull {
        /// The container directory.
        path: PathBuf,
        /// Bytes the allocation still needed.
        requested: u64,
        /// Bytes the file system had available.
        available: u64,
        /// Bytes kept back ([`crate::Options::reserve_bytes`]).
        reserve: u64,
    },
    /// An allocation request is malformed (zero bytes).
    #[error("invalid allocation of {len} bytes: {what}")]
    InvalidAllocation {
        /// Bytes asked for.
        len: u64,
        /// Why it is refused.
        what: &'static str,
    },
    /// A reader asked to register at a sequence number older than a free
    /// that has already been released, so space it may read is reusable.
    #[error("reader at lsn {lsn} is older than frees already released (up to lsn {released}); register readers before taking their snapshot")]
    ReaderTooOld {
        /// The reader's snapshot LSN.
        lsn: u64,
        /// The newest LSN whose frees were released.
        released: u64,
    },
    /// The options are inconsistent.
    #[error("invalid option {name}: {reason}")]
    InvalidOption {
        /// The option.
        name: &'static str,
        /// Why it is refused.
        reason: String,
    },
    /// An internal invariant of the allocator does not hold (a bug).
    #[error("space allocator invariant broken in container {container:016x}: {what}")]
    Invariant {
        /// The container concerned.
        container: u64,
        /// Which invariant.
        what: String,
    },
    /// A container creation in the background was stopped (the store is
    /// closing); its partial file was removed.
    #[error("container creation stopped")]
    Stopped,
}

impl SpaceError {
    /// Whether this is a lack of space (ENOSPC to a POSIX caller): every
    /// container full, the file system at its reserve, or a write the
    /// file system refused for want of space.
    pub fn is_no_space(&self) -> bool {
        matches!(
            self,
            SpaceError::NoSpace { .. } | SpaceError::FileSystemFull { .. } | SpaceError::Io(IoError::NoSpace { .. })
        )
    }

    /// Builds a [`SpaceError::Corrupt`].
    pub(crate) fn corrupt(path: impl Into<PathBuf>, offset: u64, what: impl Into<String>) -> Self {
        SpaceError::Corrupt { path: path.into(), offset, what: what.into() }
    }

    /// Builds a [`SpaceError::Invariant`].
    pub(crate) fn invariant(container: u64, what: impl Into<String>) -> Self {
        SpaceError::Invariant { container, what: what.into() }
    }
}
