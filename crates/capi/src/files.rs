//! Open files by number: `larder_open`, `larder_pread`, `larder_pwrite`,
//! `larder_fsync`, `larder_close`.

use std::ffi::{c_char, c_int, c_uint, c_void};

use client::{File, OpenOptions};

use crate::arguments;
use crate::connection::LarderClient;
use crate::status::{boundary, Failure, Outcome};

/// The `open(2)` flags `larder_open` takes; O_CLOEXEC means nothing here
/// (no descriptor is made) and is accepted for code that always passes it.
const KNOWN_FLAGS: c_int =
    libc::O_ACCMODE | libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_APPEND | libc::O_CLOEXEC;

/// The options `flags` and `mode` stand for.
fn options(flags: c_int, mode: c_uint) -> Outcome<OpenOptions> {
    if flags & !KNOWN_FLAGS != 0 {
        return Err(Failure::invalid(format!(
            "flags {:#o} hold some not supported (only O_RDONLY, O_WRONLY, O_RDWR, O_CREAT, O_EXCL, O_TRUNC, \
             O_APPEND, O_CLOEXEC)",
            flags & !KNOWN_FLAGS
        )));
    }
    if mode & !0o7777 != 0 {
        return Err(Failure::invalid(format!("mode {mode:#o} has bits beyond the permission bits (07777)")));
    }
    let mut options = OpenOptions::new();
    match flags & libc::O_ACCMODE {
        libc::O_RDONLY => options.read(true),
        libc::O_WRONLY => options.write(true),
        libc::O_RDWR => options.read(true).write(true),
        _ => return Err(Failure::invalid("the access mode is none of O_RDONLY, O_WRONLY, O_RDWR")),
    };
    let create = flags & libc::O_CREAT != 0;
    options
        .append(flags & libc::O_APPEND != 0)
        .truncate(flags & libc::O_TRUNC != 0)
        .create(create)
        .create_new(create && flags & libc::O_EXCL != 0)
        .mode(mode);
    Ok(options)
}

/// Opens the file at `path` as `open(2)` would, with `flags` (O_RDONLY,
/// O_WRONLY or O_RDWR, and any of O_CREAT, O_EXCL, O_TRUNC, O_APPEND,
/// O_CLOEXEC) and, for a file it creates, the permission bits `mode` (no
/// umask applies). Returns a file number (>= 0, the lowest free one), or
/// -1 with errno set: ENOENT, EEXIST, EACCES, EISDIR, EMFILE... as the
/// server answers, EINVAL for a NULL argument, other flags or mode bits.
///
/// # Safety
/// `client` is NULL or a live client; `path` is NULL or a NUL-terminated
/// string.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_open(
    client: *const LarderClient,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    boundary("larder_open", -1, || {
        // SAFETY: the caller passes NULL or a live client, and NULL or a
        // NUL-terminated string.
        let (client, path) = unsafe { (arguments::object(client, "client")?, arguments::path(path, "path")?) };
        let file = options(flags, mode)?.open(&client.client, path)?;
        client.insert(file)
    })
}

/// Closes file `fd`. Returns 0, or -1 with errno EBADF if `fd` is not an
/// open file of this client (EINVAL for a NULL client). A call on `fd`
/// still running in another thread finishes first; the number may be
/// handed out again at once.
///
/// # Safety
/// `client` is NULL or a live client.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_close(client: *const LarderClient, fd: c_int) -> c_int {
    boundary("larder_close", -1, || {
        // SAFETY: the caller passes NULL or a live client.
        let client = unsafe { arguments::object(client, "client") }?;
        client.remove(fd).map(|_| 0)
    })
}

/// Reads up to `count` bytes of file `fd` from `offset` into `buf`, as
/// `pread(2)`: returns the bytes read (fewer than `count` only at the end
/// of the file, 0 there), or -1 with errno set (EBADF, EINVAL for NULL or
/// a negative offset, the server's errno). Large reads take several round
/// trips; if one fails after some bytes arrived, their count is returned.
///
/// # Safety
/// `client` is NULL or a live client; `buf` is NULL or writable for
/// `count` bytes.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_pread(
    client: *const LarderClient,
    fd: c_int,
    buf: *mut c_void,
    count: usize,
    offset: i64,
) -> i64 {
    boundary("larder_pread", -1, || {
        // SAFETY: the caller passes NULL or a live client, and NULL or
        // `count` writable bytes.
        let (client, out) = unsafe { (arguments::object(client, "client")?, arguments::bytes_mut(buf, count, "buf")?) };
        let offset = arguments::offset(offset)?;
        let file = client.file(fd)?;
        read(client, &file, out, offset)
    })
}

/// Reads above this size go through a buffer of the data area: one round
/// trip per `BUFFERED_READ_BYTES` and one copy, rather than a round trip
/// per completion record's worth of bytes.
const INLINE_READ_BYTES: usize = 16 << 10;

/// The most one buffered read of `larder_pread` takes of the data area.
const BUFFERED_READ_BYTES: usize = 1 << 20;

/// Fills `out` from `offset`, as `larder_pread` does.
fn read(client: &LarderClient, file: &File, out: &mut [u8], offset: u64) -> Outcome<i64> {
    if out.len() > INLINE_READ_BYTES {
        // The data area may be full of the program's own buffers: then the
        // read goes inline.
        if let Ok(mut buffer) = client.client.alloc_buffer(out.len().min(BUFFERED_READ_BYTES)) {
            let chunk = buffer.len();
            return transfer(out.len(), |done| {
                let want = (out.len() - done).min(chunk);
                let n = file.read_buffer_prefix(&mut buffer, want, offset + done as u64)?.min(want);
                out[done..done + n].copy_from_slice(&buffer.as_slice()[..n]);
                Ok(n)
            });
        }
    }
    transfer(out.len(), |done| file.read_at(&mut out[done..], offset + done as u64))
}

/// Writes `count` bytes of `buf` to file `fd` at `offset` (at the end for
/// a file opened with O_APPEND), as `pwrite(2)`: returns `count`, or -1
/// with errno set (EBADF, EINVAL for NULL or a negative offset, ENOSPC,
/// EFBIG... from the server). If a round trip of a large write fails after
/// some bytes were written, their count is returned.
///
/// # Safety
/// `client` is NULL or a live client; `buf` is NULL or readable for
/// `count` bytes.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_pwrite(
    client: *const LarderClient,
    fd: c_int,
    buf: *const c_void,
    count: usize,
    offset: i64,
) -> i64 {
    boundary("larder_pwrite", -1, || {
        // SAFETY: the caller passes NULL or a live client, and NULL or
        // `count` readable bytes.
        let (client, data) = unsafe { (arguments::object(client, "client")?, arguments::bytes(buf, count, "buf")?) };
        let offset = arguments::offset(offset)?;
        let file = client.file(fd)?;
        transfer(data.len(), |done| file.write_at(&data[done..], offset + done as u64))
    })
}

/// Repeats `step(bytes done so far)` until `count` bytes are done or a
/// step does none; a failure after some bytes gives their count.
fn transfer(count: usize, mut step: impl FnMut(usize) -> client::Result<usize>) -> Outcome<i64> {
    let mut done = 0;
    while done < count {
        match step(done) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if done == 0 => return Err(e.into()),
            Err(_) => break,
        }
    }
    // `count` was checked to be at most isize::MAX.
    Ok(done as i64)
}

/// Makes file `fd`'s changes, and every earlier change, durable. Returns
/// 0, or -1 with errno set (EBADF, EIO...).
///
/// # Safety
/// `client` is NULL or a live client.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_fsync(client: *const LarderClient, fd: c_int) -> c_int {
    boundary("larder_fsync", -1, || {
        // SAFETY: the caller passes NULL or a live client.
        let client = unsafe { arguments::object(client, "client") }?;
        client.file(fd)?.sync_all()?;
        Ok(0)
    })
}
