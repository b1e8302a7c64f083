//! Changes to names: `larder_mkdir`, `larder_unlink`, `larder_rmdir`,
//! `larder_rename`.

use std::ffi::{c_char, c_int, c_uint};

use crate::arguments;
use crate::connection::LarderClient;
use crate::status::{boundary, Failure};

/// Makes the directory `path` with the permission bits `mode` (no umask
/// applies), as `mkdir(2)`. Returns 0, or -1 with errno set (EEXIST,
/// ENOENT, EACCES..., EINVAL for NULL or mode bits beyond 07777).
///
/// # Safety
/// `client` is NULL or a live client; `path` is NULL or a NUL-terminated
/// string.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_mkdir(client: *const LarderClient, path: *const c_char, mode: c_uint) -> c_int {
    boundary("larder_mkdir", -1, || {
        // SAFETY: the caller passes NULL or a live client, and NULL or a
        // NUL-terminated string.
        let (client, path) = unsafe { (arguments::object(client, "client")?, arguments::path(path, "path")?) };
        if mode & !0o7777 != 0 {
            return Err(Failure::invalid(format!("mode {mode:#o} has bits beyond the permission bits (07777)")));
        }
        client.client.create_dir(path, mode)?;
        Ok(0)
    })
}

/// Removes the name `path` of a file (or symbolic link), as `unlink(2)`;
/// a file still open somewhere is freed at its last close. Returns 0, or
/// -1 with errno set (ENOENT, EISDIR, EACCES..., EINVAL for NULL).
///
/// # Safety
/// `client` is NULL or a live client; `path` is NULL or a NUL-terminated
/// string.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_unlink(client: *const LarderClient, path: *const c_char) -> c_int {
    boundary("larder_unlink", -1, || {
        // SAFETY: the caller passes NULL or a live client, and NULL or a
        // NUL-terminated string.
        let (client, path) = unsafe { (arguments::object(client, "client")?, arguments::path(path, "path")?) };
        client.client.remove_file(path)?;
        Ok(0)
    })
}

/// Removes the empty directory `path`, as `rmdir(2)`. Returns 0, or -1
/// with errno set (ENOENT, ENOTEMPTY, ENOTDIR, EACCES..., EINVAL for
/// NULL).
///
/// # Safety
/// `client` is NULL or a live client; `path` is NULL or a NUL-terminated
/// string.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_rmdir(client: *const LarderClient, path: *const c_char) -> c_int {
    boundary("larder_rmdir", -1, || {
        // SAFETY: the caller passes NULL or a live client, and NULL or a
        // NUL-terminated string.
        let (client, path) = unsafe { (arguments::object(client, "client")?, arguments::path(path, "path")?) };
        client.client.remove_dir(path)?;
        Ok(0)
    })
}

/// Moves `from` to `to` atomically, replacing what `to` names, as
/// `rename(2)`. Returns 0, or -1 with errno set (ENOENT, EISDIR,
/// ENOTEMPTY, EINVAL (a directory into itself, or a NULL argument),
/// EACCES...).
///
/// # Safety
/// `client` is NULL or a live client; `from` and `to` are NULL or
/// NUL-terminated strings.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_rename(client: *const LarderClient, from: *const c_char, to: *const c_char) -> c_int {
    boundary("larder_rename", -1, || {
        // SAFETY: the caller passes NULL or a live client, and NULL or
        // NUL-terminated strings.
        let (client, from, to) = unsafe {
            (arguments::object(client, "client")?, arguments::path(from, "from")?, arguments::path(to, "to")?)
        };
        client.client.rename(from, to)?;
        Ok(0)
    })
}
