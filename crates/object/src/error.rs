//! The object layer's error type.

use std::path::PathBuf;

use larder_io::IoError;

/// Result of an object-layer call.
pub type Result<T, E = ObjectError> = std::result::Result<T, E>;

impl ObjectError {
    /// Whether this is a lack of space (ENOSPC to a POSIX caller) from
    /// any layer: the file system full at the store's reserve or for a
    /// write, every container full. Nothing was changed; the same call
    /// may succeed once space is freed.
    pub fn is_no_space(&self) -> bool {
        match self {
            ObjectError::Io(IoError::NoSpace { .. }) => true,
            ObjectError::Index(e) => e.is_no_space(),
            ObjectError::Log(larder_log::LogError::Io(IoError::NoSpace { .. })) => true,
            ObjectError::Space(e) => e.is_no_space(),
            _ => false,
        }
    }

    /// Whether stored bytes failed their check (a checksum, magic, length
    /// or structure) in a data container, the index or a record: the bytes
    /// asked for are damaged on disk, and reading them again gives the same
    /// error. A caller holding another copy (a replica) replaces them.
    pub fn is_corrupt(&self) -> bool {
        matches!(
            self,
            ObjectError::Corrupt { .. }
                | ObjectError::BadRecord { .. }
                | ObjectError::Index(larder_index::IndexError::Corrupt { .. })
        )
    }
}

/// What went wrong in the object layer, and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectError {
    /// The io layer failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The index failed.
    #[error(transparent)]
    Index(#[from] larder_index::IndexError),
    /// The intent log failed.
    #[error(transparent)]
    Log(#[from] larder_log::LogError),
    /// Space management failed.
    #[error(transparent)]
    Space(#[from] larder_space::SpaceError),
    /// A committed batch could not enter the index; the store accepts no
    /// more writes until it is reopened (which replays the log).
    #[error("record {lsn} was logged but not applied, so the store stopped; reopen it to recover: {why}")]
    ApplyFailed {
        /// The record's LSN.
        lsn: u64,
        /// Why.
        why: String,
    },
    /// The store stopped accepting writes (a thread failed while it
    /// committed other threads' transactions with its own); reopening
    /// replays the log.
    #[error("the store stopped accepting writes; reopen it to recover: {why}")]
    Stopped {
        /// Why.
        why: String,
    },
    /// The store stopped writing at its first failure (a failed sync or
    /// write-back of any of its files, a background thread that failed for
    /// good or panicked, a record that could not be applied): every later
    /// write is refused with that first cause, reads keep working, and
    /// reopening recovers from what is on disk.
    #[error("the store is poisoned: it refuses writes since its first failure ({cause}); reads still work; reopen it to recover")]
    Poisoned {
        /// The first failure: the call, the file and the errno, or the
        /// thread that failed.
        cause: String,
    },
    /// A checkpoint (the index flushed and the log told what it covers)
    /// failed; `during` says which one.
    #[error("{during} could not checkpoint: {source}")]
    Checkpoint {
        /// "recovery", "a checkpoint", ...
        during: &'static str,
        /// What failed.
        #[source]
        source: CheckpointError,
    },
    /// Bytes read from a file fail a check.
    #[error("{path}: corrupt at offset {offset}: {what}")]
    Corrupt {
        /// The file holding the bad bytes.
        path: PathBuf,
        /// Where the bad structure starts.
        offset: u64,
        /// What check failed.
        what: String,
    },
    /// The store was written by a newer format version.
    #[error("{path}: format version {found} is newer than the newest this build reads ({supported}); upgrade larder")]
    NewerVersion {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// The store uses a feature this build does not know and may not ignore.
    #[error("{path}: unknown {class} feature flags {flags:#x}; upgrade larder")]
    UnknownFeature {
        /// The file.
        path: PathBuf,
        /// "incompatible" or "read-only compatible".
        class: &'static str,
        /// The unknown bits.
        flags: u64,
    },
    /// An option is invalid.
    #[error("invalid option {name}: {reason}")]
    InvalidOption {
        /// The option.
        name: &'static str,
        /// Why it is refused.
        reason: String,
    },
    /// A store already exists where a new one was to be created.
    #[error("{path}: a store already exists here")]
    AlreadyExists {
        /// The store directory.
        path: PathBuf,
    },
    /// A transaction touched an object it did not lock.
    #[error("object {object} is not locked by this transaction; name it in transact()")]
    NotLocked {
        /// The object.
        object: u64,
    },
    /// A transaction changed a dentry whose name it did not lock.
    #[error("name {name:?} in directory {dir} is not locked by this transaction; lock the name or the directory")]
    NameNotLocked {
        /// The directory.
        dir: u64,
        /// The name (lossily as UTF-8).
        name: String,
    },
    /// Freeing was asked of an object that still has names or no orphan
    /// record.
    #[error("object {object} is not an orphan (nlink {nlink}, or no orphan record); unlink it first")]
    NotAnOrphan {
        /// The object.
        object: u64,
        /// Its link count.
        nlink: u32,
    },
    /// No store exists at the path.
    #[error("{path}: no store here (no SUPERBLOCK); create one with `larder init`")]
    NotAStore {
        /// The store directory.
        path: PathBuf,
    },
    /// A metadata record (an index key or value of the object layer) read
    /// back fails a check. It names no file: the index has already checked
    /// the block holding it, so the caller, which knows the key, adds it.
    #[error("corrupt {record}: {what}")]
    BadRecord {
        /// Which record: "onode", "fmap entry", "dmap key", ...
        record: &'static str,
        /// What check failed.
        what: String,
    },
    /// A metadata record was written by a newer record format version.
    #[error("{record} format version {found} is newer than the newest this build reads ({supported}); upgrade larder")]
    NewerRecord {
        /// Which record.
        record: &'static str,
        /// The version found.
        found: u8,
        /// The newest version this build reads.
        supported: u8,
    },
    /// A metadata record about to be written is invalid (a caller's bug):
    /// it is refused rather than stored in a form no reader would accept.
    #[error("invalid {record}, not written: {what}")]
    InvalidRecord {
        /// Which record.
        record: &'static str,
        /// What check failed.
        what: String,
    },
    /// A name (file name, extended attribute name, store metadata name) is
    /// not allowed.
    #[error("invalid {class} \"{name}\": {reason}")]
    InvalidName {
        /// "file name", "xattr name" or "store metadata name".
        class: &'static str,
        /// The name, non-printable bytes escaped, cut after 64 bytes.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// No object has this id.
    #[error("object {object} does not exist")]
    NoSuchObject {
        /// The object.
        object: u64,
    },
    /// The object's kind has no bytes to read or write (a directory, a
    /// device, a fifo or a socket), or it keeps them where this call does
    /// not reach (a heap object's own file).
    #[error("object {object} ({what}) has no bytes this call can reach")]
    NoData {
        /// The object.
        object: u64,
        /// Its kind or data location.
        what: String,
    },
    /// A truncate would shrink a heap object: heap objects never shrink
    /// (a mapping's pointers into them stay in bounds), docs/heap.md.
    #[error("object {object} is a heap object of {size} bytes: heap objects never shrink (asked for {asked}); free it through its heap instead")]
    HeapShrink {
        /// The object.
        object: u64,
        /// Its size.
        size: u64,
        /// The size asked for.
        asked: u64,
    },
    /// A heap operation named an object or heap that is not one.
    #[error("object {object} in heap {heap}: {what}")]
    NotInHeap {
        /// The object.
        object: u64,
        /// The heap's root directory.
        heap: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// A write or truncate would pass the largest object size.
    #[error("object {object}: end {end} passes the largest object size ({max} bytes)")]
    TooLarge {
        /// The object.
        object: u64,
        /// The end asked for (saturated on overflow).
        end: u64,
        /// The largest size allowed.
        max: u64,
    },
}

/// Why a checkpoint failed, with the lower layer's error as its source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// The index could not be flushed.
    #[error("index flush failed: {0}")]
    IndexFlush(#[source] larder_index::IndexError),
    /// The log refused the checkpoint (it could not free its segments).
    #[error("log checkpoint failed: {0}")]
    Log(#[source] larder_log::LogError),
}
