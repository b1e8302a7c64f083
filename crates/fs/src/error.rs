//! The file system layer's errors: each maps to the errno POSIX gives for
//! it, and carries enough to say what failed.

use larder_namespace::NamespaceError;
use larder_object::ObjectError;

/// Why a file system call failed.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The engine below failed (I/O, corruption, a stopped store): EIO;
    /// ENOSPC when any layer ran out of space, EFBIG when an object would
    /// pass the largest size.
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
        ObjectError::NoSuchObject { .. } => libc::ENOENT,
        ObjectError::InvalidName { .. } => libc::EINVAL,
        // Heap objects never shrink (docs/heap.md): not permitted.
        ObjectError::HeapShrink { .. } => libc::EPERM,
        _ => cause_errno(e).unwrap_or(libc::EIO),
    }
}

/// The errno a cause of `e` (it, or an error it wraps, at any depth and in
/// any layer) calls for: ENOSPC when some layer ran out of space (a full
/// file system below any file of the store, the space manager's container
/// limit, a log no checkpoint could free), EFBIG when an object would pass
/// the largest size, EDQUOT for a quota. `None`: nothing but EIO fits.
fn cause_errno(e: &(dyn std::error::Error + 'static)) -> Option<i32> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(errno) = layer_errno(e) {
            return Some(errno);
        }
        next = e.source();
    }
    None
}

/// [`cause_errno`] for one error. The layers' transparent variants pass
/// `source()` through to their inner error's source, so the walk above
/// would skip the inner error itself: they are followed here by hand.
fn layer_errno(e: &(dyn std::error::Error + 'static)) -> Option<i32> {
    use larder_index::IndexError;
    use larder_io::IoError;
    use larder_log::LogError;
    use larder_space::SpaceError;
    if let Some(e) = e.downcast_ref::<ObjectError>() {
        return match e {
            ObjectError::TooLarge { .. } => Some(libc::EFBIG),
            ObjectError::Io(e) => cause_errno(e),
            ObjectError::Index(e) => cause_errno(e),
            ObjectError::Log(e) => cause_errno(e),
            ObjectError::Space(e) => cause_errno(e),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<IoError>() {
        return match e {
            IoError::NoSpace { .. } => Some(libc::ENOSPC),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<SpaceError>() {
        return match e {
            // The space manager's own limits and a full file system.
            _ if e.is_no_space() => Some(libc::ENOSPC),
            SpaceError::Io(e) => cause_errno(e),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<LogError>() {
        return match e {
            LogError::Full { .. } => Some(libc::ENOSPC),
            LogError::Io(e) => cause_errno(e),
            _ => None,
        };
    }
    if let Some(IndexError::Io(e)) = e.downcast_ref::<IndexError>() {
        return cause_errno(e);
    }
    if let Some(e) = e.downcast_ref::<std::io::Error>() {
        return match e.raw_os_error() {
            Some(n @ (libc::ENOSPC | libc::EDQUOT | libc::EFBIG)) => Some(n),
            _ => None,
        };
    }
    None
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

#[cfg(test)]
mod tests {
    use super::*;
    use larder_index::IndexError;
    use larder_io::IoError;
    use larder_log::LogError;
    use larder_space::SpaceError;
    use std::path::PathBuf;

    fn full() -> IoError {
        IoError::NoSpace { path: PathBuf::from("f") }
    }

    fn os(errno: i32) -> IoError {
        IoError::Os { op: "write", path: PathBuf::from("f"), source: std::io::Error::from_raw_os_error(errno) }
    }

    fn errno_of(e: ObjectError) -> i32 {
        FsError::Store(e).errno()
    }

    #[test]
    fn a_full_disk_in_any_layer_is_enospc() {
        let no_space = SpaceError::NoSpace { requested: 4096, free: 0, containers: 1, max_containers: 1 };
        let log_full = LogError::Full { dir: PathBuf::from("log"), segments: 2, waited_ms: 10 };
        for e in [
            ObjectError::Io(full()),
            ObjectError::Space(SpaceError::Io(full())),
            ObjectError::Space(no_space),
            ObjectError::Log(LogError::Io(full())),
            ObjectError::Log(log_full),
            ObjectError::Index(IndexError::Io(full())),
            ObjectError::Index(IndexError::Io(os(libc::ENOSPC))),
            ObjectError::Io(os(libc::ENOSPC)),
        ] {
            assert_eq!(errno_of(e), libc::ENOSPC);
        }
        assert_eq!(errno_of(ObjectError::Log(LogError::Io(os(libc::EDQUOT)))), libc::EDQUOT);
        let from_namespace: FsError = NamespaceError::Object(ObjectError::Log(LogError::Io(full()))).into();
        assert_eq!(from_namespace.errno(), libc::ENOSPC);
        let from_index: FsError = IndexError::Io(full()).into();
        assert_eq!(from_index.errno(), libc::ENOSPC);
    }

    #[test]
    fn an_object_past_the_largest_size_is_efbig_and_other_failures_eio() {
        assert_eq!(errno_of(ObjectError::TooLarge { object: 9, end: u64::MAX, max: 1 << 62 }), libc::EFBIG);
        assert_eq!(errno_of(ObjectError::Io(os(libc::EIO))), libc::EIO);
        assert_eq!(errno_of(ObjectError::Log(LogError::Io(os(libc::EIO)))), libc::EIO);
        assert_eq!(errno_of(ObjectError::Stopped { why: "a sync failed".into() }), libc::EIO);
    }
}
