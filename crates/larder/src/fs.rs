//! The POSIX file system API ([`larder_fs`]), embedded in the calling
//! process, reached through [`Store::fs`](crate::Store::fs); the `fuse`
//! feature mounts it for other processes (`larder::fuse`).
//!
//! Calls are made on inode numbers as the kernel makes them
//! ([`Fs::root`] is the root directory), each with the caller's
//! [`Cred`], and check permissions as Linux does; [`Fs::resolve`] turns a
//! path into its parent directory, name and attributes. Open files and
//! directories are handles (`u64`) released with [`Fs::release`] and
//! [`Fs::releasedir`]. Flags and modes are Linux's ([`flags`]). An error
//! carries the errno the system call would return ([`FsError::errno`],
//! constants in [`errno`]).
//!
//! Durability: every change is visible at once and durable at the next
//! [`Fs::fsync`] of any file, [`Fs::fsyncdir`] or [`Fs::sync`] (each
//! makes every earlier change of the store durable), or within the store's
//! buffered sync interval. Closing a file does not sync it.

pub use larder_fs::{
    perm, Attr, BulkCreated, Cred, DirEntry, Fs, FsError, FsOptions, Kind, RenameFlags, Resolved, SetAttr, SetTime,
    StatFs, Timestamp, XattrFlags, BLOCK_BYTES, FS_BUFFERED_SYNC_INTERVAL, LINK_MAX, MAX_SYMLINK_FOLLOWS, NAME_MAX,
    PATH_MAX,
};

/// The `open(2)` flags [`Fs::open_file`] and [`Fs::create_file`] take
/// (Linux's values).
pub mod flags {
    pub use libc::{O_APPEND, O_CREAT, O_EXCL, O_RDONLY, O_RDWR, O_TRUNC, O_WRONLY};
}

/// The errno values [`FsError::errno`] returns most often (Linux's
/// values), to compare with.
pub mod errno {
    pub use libc::{
        EACCES, EBADF, EEXIST, EFBIG, EINVAL, EIO, EISDIR, ELOOP, ENAMETOOLONG, ENOENT, ENOSPC, ENOTDIR, ENOTEMPTY,
        EPERM, EXDEV,
    };
}
