//! `struct larder_stat` and the calls that fill it: `larder_stat`,
//! `larder_lstat`, `larder_fstat`.

use std::ffi::{c_char, c_int};

use client::{Attributes, Metadata, Timestamp};

use crate::arguments;
use crate::connection::LarderClient;
use crate::status::{boundary, Outcome};

/// A point in time: seconds since 1970-01-01T00:00:00Z and nanoseconds.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LarderTimespec {
    /// Whole seconds since the epoch (negative before it).
    pub sec: i64,
    /// Nanoseconds, below 1,000,000,000.
    pub nsec: u32,
}

/// An object's attributes, as `struct stat` holds them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LarderStat {
    /// Inode number.
    pub ino: u64,
    /// Type and permission bits, as `st_mode` (S_ISDIR() and the others
    /// apply).
    pub mode: u32,
    /// Number of names (for a directory, as Unix counts them).
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number of a device node.
    pub rdev: u64,
    /// Size in bytes.
    pub size: u64,
    /// 512-byte sectors allocated.
    pub blocks: u64,
    /// Last access.
    pub atime: LarderTimespec,
    /// Last change of the bytes.
    pub mtime: LarderTimespec,
    /// Last change of the attributes.
    pub ctime: LarderTimespec,
    /// Creation.
    pub btime: LarderTimespec,
}

fn timespec(t: Timestamp) -> LarderTimespec {
    LarderTimespec { sec: t.seconds, nsec: t.nanoseconds }
}

impl From<&Attributes> for LarderStat {
    fn from(a: &Attributes) -> LarderStat {
        LarderStat {
            ino: a.ino,
            mode: a.mode,
            nlink: a.nlink,
            uid: a.uid,
            gid: a.gid,
            rdev: a.rdev,
            size: a.size,
            blocks: a.blocks,
            atime: timespec(a.atime),
            mtime: timespec(a.mtime),
            ctime: timespec(a.ctime),
            btime: timespec(a.btime),
        }
    }
}

/// Fills `out` with `metadata`.
fn fill(out: &mut LarderStat, metadata: &Metadata) -> Outcome<c_int> {
    *out = LarderStat::from(&metadata.attributes);
    Ok(0)
}

/// Fills `*out` with the attributes of what `path` names, following
/// symbolic links, as `stat(2)`. Returns 0, or -1 with errno set (ENOENT,
/// EACCES, ENOTDIR..., EINVAL for a NULL argument).
///
/// # Safety
/// `client` is NULL or a live client; `path` is NULL or a NUL-terminated
/// string; `out` is NULL or writable.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_stat(client: *const LarderClient, path: *const c_char, out: *mut LarderStat) -> c_int {
    boundary("larder_stat", -1, || {
        // SAFETY: the caller passes NULL or a live client, a string and a
        // writable `struct larder_stat`.
        let (client, path, out) = unsafe {
            (arguments::object(client, "client")?, arguments::path(path, "path")?, arguments::place(out, "out")?)
        };
        fill(out, &client.client.metadata(path)?)
    })
}

/// As `larder_stat()`, but a final symbolic link is not followed: `*out`
/// describes the link itself, as `lstat(2)`.
///
/// # Safety
/// As for `larder_stat()`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_lstat(client: *const LarderClient, path: *const c_char, out: *mut LarderStat) -> c_int {
    boundary("larder_lstat", -1, || {
        // SAFETY: the caller passes NULL or a live client, a string and a
        // writable `struct larder_stat`.
        let (client, path, out) = unsafe {
            (arguments::object(client, "client")?, arguments::path(path, "path")?, arguments::place(out, "out")?)
        };
        fill(out, &client.client.symlink_metadata(path)?)
    })
}

/// Fills `*out` with the attributes of the open file `fd`, as `fstat(2)`.
/// Returns 0, or -1 with errno set (EBADF, EINVAL for NULL).
///
/// # Safety
/// `client` is NULL or a live client; `out` is NULL or writable.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_fstat(client: *const LarderClient, fd: c_int, out: *mut LarderStat) -> c_int {
    boundary("larder_fstat", -1, || {
        // SAFETY: the caller passes NULL or a live client, and NULL or a
        // writable `struct larder_stat`.
        let (client, out) = unsafe { (arguments::object(client, "client")?, arguments::place(out, "out")?) };
        fill(out, &client.file(fd)?.metadata()?)
    })
}
