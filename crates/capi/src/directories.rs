//! Directory streams: `larder_opendir`, `larder_readdir`,
//! `larder_closedir`.

use std::ffi::{c_char, c_int};

use client::{DirEntries, FileKind};
use parking_lot::Mutex;

use crate::arguments;
use crate::connection::LarderClient;
use crate::status::{boundary, Failure};

/// The longest name an entry holds, in bytes (the store's NAME_MAX).
pub const LARDER_NAME_MAX: usize = 255;

/// `larder_dirent.kind` of a regular file (as DT_REG of `<dirent.h>`).
pub const LARDER_DT_REG: u8 = 8;
/// `larder_dirent.kind` of a directory (as DT_DIR).
pub const LARDER_DT_DIR: u8 = 4;
/// `larder_dirent.kind` of a symbolic link (as DT_LNK).
pub const LARDER_DT_LNK: u8 = 10;
/// `larder_dirent.kind` of a named pipe (as DT_FIFO).
pub const LARDER_DT_FIFO: u8 = 1;
/// `larder_dirent.kind` of a Unix socket (as DT_SOCK).
pub const LARDER_DT_SOCK: u8 = 12;
/// `larder_dirent.kind` of a character device (as DT_CHR).
pub const LARDER_DT_CHR: u8 = 2;
/// `larder_dirent.kind` of a block device (as DT_BLK).
pub const LARDER_DT_BLK: u8 = 6;

/// An open directory stream (opaque). Made by `larder_opendir()`, ended
/// by `larder_closedir()`. Calls on one stream from several threads are
/// safe (each gets other entries); it keeps its client's connection while
/// open.
pub struct LarderDir {
    entries: Mutex<DirEntries>,
}

/// One directory entry, as `struct dirent` holds it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LarderDirent {
    /// The entry's inode number.
    pub ino: u64,
    /// What it is: one of the LARDER_DT_ values (equal to DT_REG, DT_DIR...
    /// of `<dirent.h>`).
    pub kind: u8,
    /// Its name, NUL-terminated (LARDER_NAME_MAX bytes at most, then the
    /// NUL).
    pub name: [c_char; 256],
}

/// The DT_ value of `kind`.
fn dirent_type(kind: FileKind) -> u8 {
    match kind {
        FileKind::File => LARDER_DT_REG,
        FileKind::Directory => LARDER_DT_DIR,
        FileKind::Symlink => LARDER_DT_LNK,
        FileKind::Fifo => LARDER_DT_FIFO,
        FileKind::Socket => LARDER_DT_SOCK,
        FileKind::CharDevice => LARDER_DT_CHR,
        FileKind::BlockDevice => LARDER_DT_BLK,
    }
}

/// Opens the directory `path` to list it, as `opendir(3)`. Returns the
/// stream, or NULL with errno set (ENOENT, ENOTDIR, EACCES..., EINVAL for
/// NULL).
///
/// # Safety
/// `client` is NULL or a live client; `path` is NULL or a NUL-terminated
/// string.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_opendir(client: *const LarderClient, path: *const c_char) -> *mut LarderDir {
    boundary("larder_opendir", std::ptr::null_mut(), || {
        // SAFETY: the caller passes NULL or a live client, and NULL or a
        // NUL-terminated string.
        let (client, path) = unsafe { (arguments::object(client, "client")?, arguments::path(path, "path")?) };
        let entries = client.client.read_dir(path)?;
        Ok(Box::into_raw(Box::new(LarderDir { entries: Mutex::new(entries) })))
    })
}

/// Fills `*entry` with the stream's next entry (`.` and `..` are left
/// out). Returns 1 for an entry, 0 at the end (`*entry` untouched), or -1
/// with errno set (the server's errno, EINVAL for NULL).
///
/// # Safety
/// `dir` is NULL or a stream from `larder_opendir()` not yet closed;
/// `entry` is NULL or writable.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_readdir(dir: *const LarderDir, entry: *mut LarderDirent) -> c_int {
    boundary("larder_readdir", -1, || {
        // SAFETY: the caller passes NULL or an open stream, and NULL or a
        // writable `struct larder_dirent`.
        let (dir, entry) = unsafe { (arguments::object(dir, "dir")?, arguments::place(entry, "entry")?) };
        let Some(next) = dir.entries.lock().next() else { return Ok(0) };
        let next = next?;
        if next.name.len() > LARDER_NAME_MAX || next.name.contains(&0) {
            return Err(Failure::new(
                libc::ENAMETOOLONG,
                format!("an entry's name of {} bytes does not fit struct larder_dirent", next.name.len()),
            ));
        }
        let mut name = [0; LARDER_NAME_MAX + 1];
        for (to, &from) in name.iter_mut().zip(&next.name) {
            *to = from as c_char;
        }
        *entry = LarderDirent { ino: next.ino, kind: dirent_type(next.kind), name };
        Ok(1)
    })
}

/// Closes a directory stream. Returns 0, or -1 with errno EINVAL for
/// NULL. The stream must not be used again, nor by another thread during
/// this call.
///
/// # Safety
/// `dir` is NULL or a stream from `larder_opendir()` not yet closed.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_closedir(dir: *mut LarderDir) -> c_int {
    boundary("larder_closedir", -1, || {
        if dir.is_null() {
            return Err(Failure::invalid("dir is NULL"));
        }
        // SAFETY: not NULL, so it came from `larder_opendir`'s
        // `Box::into_raw` and (by the contract) is not used again.
        drop(unsafe { Box::from_raw(dir) });
        Ok(0)
    })
}
