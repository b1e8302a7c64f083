//! One error type for every layer a program reaches through this crate.

use larder_io::IoError;
use larder_object::ObjectError;

/// Results of this crate's calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a call failed: the typed error of the layer that failed, kept whole.
///
/// Each variant holds that layer's own error, so a program can match on it
/// for details; [`Error::kind`] sorts every error into the few cases a
/// program reacts to, and [`Error::errno`] gives the POSIX errno where one
/// fits. `Display` is the layer error's message and
/// [`source`](std::error::Error::source) continues its chain (down to the
/// operating system's error, where there is one). A call refused for bad
/// input changes nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store below every interface failed: I/O, corruption, a store
    /// that stopped at its first failure, no store where one was expected.
    #[error(transparent)]
    Store(#[from] ObjectError),
    /// The storage layer failed outside any store call (reading a file
    /// system's free space before creating a store).
    #[error(transparent)]
    Storage(#[from] IoError),
    /// A `std::io` call failed: reading or writing a value in pieces
    /// ([`KvReader`](larder_kv::KvReader) and
    /// [`KvWriter`](larder_kv::KvWriter) are `std::io::Read` and `Write`,
    /// whose errors wrap the KV error, which [`Error::kind`] looks
    /// into), or the program's own files.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A call of the key-value API failed.
    #[cfg(feature = "kv")]
    #[error(transparent)]
    Kv(#[from] larder_kv::KvError),
    /// A call of the file system API failed; its
    /// [`errno`](larder_fs::FsError::errno) is the one POSIX gives.
    #[cfg(feature = "fs")]
    #[error(transparent)]
    Fs(#[from] larder_fs::FsError),
    /// A call of the transactional trees failed.
    #[cfg(feature = "trees")]
    #[error(transparent)]
    Trees(#[from] larder_trees::TreesError),
    /// A call of the standalone index failed.
    #[cfg(feature = "index")]
    #[error(transparent)]
    Index(#[from] larder_index::IndexError),
    /// Mounting or serving a FUSE mount failed.
    #[cfg(feature = "fuse")]
    #[error(transparent)]
    Mount(#[from] larder_fuse::MountError),
}

/// The cases a program tells apart, whichever layer failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Not there: no store in the directory, no such bucket, no such file
    /// or directory (ENOENT).
    NotFound,
    /// Already there: a store where one was to be created, a bucket, a
    /// name (EEXIST).
    AlreadyExists,
    /// Refused input (a key, bucket or file name breaking the rules, a
    /// value or batch over a limit, an invalid option or argument);
    /// nothing was changed.
    InvalidInput,
    /// The caller's credentials do not allow it (EACCES, EPERM).
    PermissionDenied,
    /// Some layer ran out of space (ENOSPC); nothing was changed, and
    /// deletes still work and give space back.
    NoSpace,
    /// Bytes read back fail their checks, or were written by a newer
    /// format version or with features this build does not know; the
    /// message names the file.
    Corrupt,
    /// The store (or index) stopped taking writes at its first failure (a
    /// failed sync, a background thread that failed), or was closed:
    /// reads still work; reopening recovers from what is on disk.
    Stopped,
    /// Another process has the store open (it holds the store's lock).
    Locked,
    /// Any other failure of the operating system's I/O (EIO, ...).
    Io,
    /// Anything else (a key conflicting with a directory level, a
    /// directory that is not empty, another errno of the file system API);
    /// the layer's error says which.
    Other,
}

impl Error {
    /// Which of the [`ErrorKind`] cases this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Store(e) => object_kind(e),
            Error::Storage(e) => io_kind(e),
            Error::Io(e) => std_io_kind(e),
            #[cfg(feature = "kv")]
            Error::Kv(e) => kv_kind(e),
            #[cfg(feature = "fs")]
            Error::Fs(e) => match e {
                larder_fs::FsError::Store(inner) => object_kind(inner),
                other => errno_kind(other.errno()),
            },
            #[cfg(feature = "index")]
            Error::Index(e) => index_kind(e),
            #[cfg(feature = "trees")]
            Error::Trees(e) => trees_kind(e),
            #[cfg(feature = "fuse")]
            Error::Mount(_) => ErrorKind::Io,
        }
    }

    /// The errno a POSIX call would fail with: the file system API's own
    /// mapping for its errors; for the other layers, ENOSPC for a lack of
    /// space, else the operating system's errno where one caused the
    /// error, else `None`.
    pub fn errno(&self) -> Option<i32> {
        #[cfg(feature = "fs")]
        if let Error::Fs(e) = self {
            return Some(e.errno());
        }
        if self.is_no_space() {
            return Some(libc::ENOSPC);
        }
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = next {
            if let Some(errno) = e.downcast_ref::<std::io::Error>().and_then(std::io::Error::raw_os_error) {
                return Some(errno);
            }
            next = e.source();
        }
        None
    }

    /// Whether some layer ran out of space: nothing was changed, and the
    /// same call may succeed once space is freed (deletes still work).
    pub fn is_no_space(&self) -> bool {
        self.kind() == ErrorKind::NoSpace
    }
}

fn std_io_kind(e: &std::io::Error) -> ErrorKind {
    #[cfg(feature = "kv")]
    if let Some(kv) = e.get_ref().and_then(|inner| inner.downcast_ref::<larder_kv::KvError>()) {
        return kv_kind(kv);
    }
    if let Some(object) = e.get_ref().and_then(|inner| inner.downcast_ref::<ObjectError>()) {
        return object_kind(object);
    }
    match e.kind() {
        std::io::ErrorKind::NotFound => ErrorKind::NotFound,
        std::io::ErrorKind::AlreadyExists => ErrorKind::AlreadyExists,
        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData => ErrorKind::InvalidInput,
        std::io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => ErrorKind::NoSpace,
        _ => ErrorKind::Io,
    }
}

fn io_kind(e: &IoError) -> ErrorKind {
    match e {
        IoError::NoSpace { .. } => ErrorKind::NoSpace,
        IoError::NotFound { .. } => ErrorKind::NotFound,
        IoError::AlreadyExists { .. } => ErrorKind::AlreadyExists,
        IoError::Locked { .. } => ErrorKind::Locked,
        IoError::Poisoned { .. } | IoError::Crashed => ErrorKind::Stopped,
        IoError::InvalidInput { .. } => ErrorKind::InvalidInput,
        IoError::UnexpectedEof { .. } => ErrorKind::Corrupt,
        _ => ErrorKind::Io,
    }
}

#[cfg(feature = "trees")]
fn trees_kind(e: &larder_trees::TreesError) -> ErrorKind {
    use larder_trees::TreesError;
    match e {
        TreesError::KeyTooLarge { .. } | TreesError::ValueTooLarge { .. } | TreesError::TransactionTooLarge { .. } => {
            ErrorKind::InvalidInput
        }
        TreesError::NoSuchTree { .. } => ErrorKind::NotFound,
        TreesError::SnapshotExists { .. } => ErrorKind::AlreadyExists,
        TreesError::Store(e) => object_kind(e),
        TreesError::Index(e) => index_kind(e),
        TreesError::Io(e) => io_kind(e),
        _ => ErrorKind::Other,
    }
}

fn object_kind(e: &ObjectError) -> ErrorKind {
    if e.is_no_space() {
        return ErrorKind::NoSpace;
    }
    match e {
        ObjectError::Io(e) => io_kind(e),
        ObjectError::Index(e) => index_kind(e),
        ObjectError::Log(e) => log_kind(e),
        ObjectError::NotAStore { .. } | ObjectError::NoSuchObject { .. } => ErrorKind::NotFound,
        ObjectError::AlreadyExists { .. } => ErrorKind::AlreadyExists,
        ObjectError::InvalidOption { .. }
        | ObjectError::InvalidName { .. }
        | ObjectError::InvalidRecord { .. }
        | ObjectError::TooLarge { .. }
        | ObjectError::NoData { .. }
        | ObjectError::NotInHeap { .. } => ErrorKind::InvalidInput,
        // Heap objects never shrink.
        ObjectError::HeapShrink { .. } => ErrorKind::PermissionDenied,
        ObjectError::Corrupt { .. }
        | ObjectError::BadRecord { .. }
        | ObjectError::NewerVersion { .. }
        | ObjectError::NewerRecord { .. }
        | ObjectError::UnknownFeature { .. } => ErrorKind::Corrupt,
        ObjectError::Poisoned { .. } | ObjectError::Stopped { .. } | ObjectError::ApplyFailed { .. } => {
            ErrorKind::Stopped
        }
        _ => ErrorKind::Other,
    }
}

/// The index's errors, as the store or the standalone index reports them.
fn index_kind(e: &larder_index::IndexError) -> ErrorKind {
    use larder_index::IndexError;
    match e {
        IndexError::Io(e) => io_kind(e),
        IndexError::Corrupt { .. }
        | IndexError::NewerVersion { .. }
        | IndexError::UnknownFeature { .. }
        | IndexError::UnknownMergeOperator { .. } => ErrorKind::Corrupt,
        IndexError::TooLarge { .. }
        | IndexError::InvalidOption { .. }
        | IndexError::SequenceNotIncreasing { .. }
        | IndexError::MergeOperatorNotRegistered(_) => ErrorKind::InvalidInput,
        IndexError::Poisoned(_) | IndexError::Closed => ErrorKind::Stopped,
        _ => ErrorKind::Other,
    }
}

fn log_kind(e: &larder_log::LogError) -> ErrorKind {
    use larder_log::LogError;
    match e {
        LogError::Io(e) => io_kind(e),
        LogError::Full { .. } => ErrorKind::NoSpace,
        LogError::Corrupt { .. }
        | LogError::CorruptRecord { .. }
        | LogError::NewerVersion { .. }
        | LogError::UnknownFeature { .. } => ErrorKind::Corrupt,
        LogError::TooLarge { .. } | LogError::InvalidOption { .. } => ErrorKind::InvalidInput,
        LogError::Closed => ErrorKind::Stopped,
        _ => ErrorKind::Other,
    }
}

#[cfg(feature = "kv")]
fn kv_kind(e: &larder_kv::KvError) -> ErrorKind {
    use larder_kv::KvError;
    match e {
        KvError::Object(e) => object_kind(e),
        KvError::Namespace(e) => namespace_kind(e),
        KvError::InvalidKey { .. } | KvError::InvalidBucket { .. } => ErrorKind::InvalidInput,
        KvError::NoSuchBucket { .. } => ErrorKind::NotFound,
        KvError::BucketExists { .. } => ErrorKind::AlreadyExists,
        KvError::BucketNotEmpty { .. } | KvError::KeyConflict { .. } | KvError::Contended { .. } => ErrorKind::Other,
        // A heap's names change only through the heap.
        KvError::InHeap { .. } => ErrorKind::PermissionDenied,
    }
}

#[cfg(feature = "kv")]
fn namespace_kind(e: &larder_namespace::NamespaceError) -> ErrorKind {
    use larder_namespace::NamespaceError;
    match e {
        NamespaceError::Object(e) => object_kind(e),
        NamespaceError::Exists { .. } => ErrorKind::AlreadyExists,
        NamespaceError::NotFound { .. } => ErrorKind::NotFound,
        NamespaceError::DirectoryLink { .. } => ErrorKind::PermissionDenied,
        NamespaceError::NotADirectory { .. } | NamespaceError::NotEmpty { .. } | NamespaceError::LinkCount { .. } => {
            ErrorKind::Other
        }
    }
}

/// The kind of a file system errno.
#[cfg(feature = "fs")]
fn errno_kind(errno: i32) -> ErrorKind {
    match errno {
        libc::ENOENT => ErrorKind::NotFound,
        libc::EEXIST => ErrorKind::AlreadyExists,
        libc::EINVAL | libc::ENAMETOOLONG | libc::EFBIG | libc::E2BIG | libc::ERANGE => ErrorKind::InvalidInput,
        libc::EACCES | libc::EPERM => ErrorKind::PermissionDenied,
        libc::ENOSPC | libc::EDQUOT => ErrorKind::NoSpace,
        libc::EIO => ErrorKind::Io,
        _ => ErrorKind::Other,
    }
}
