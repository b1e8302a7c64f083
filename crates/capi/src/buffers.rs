//! Zero-copy buffers: memory shared with the server, which reads a write's
//! bytes from it and puts a read's bytes into it, with no copy through the
//! library: `larder_buffer_alloc`, `larder_pwrite_buffer`,
//! `larder_pread_buffer`...

use std::ffi::{c_int, c_void};

use client::Buffer;
use parking_lot::Mutex;

use crate::arguments;
use crate::connection::LarderClient;
use crate::status::{boundary, Failure, Outcome};

/// A buffer in the data area a client shares with its server (opaque).
/// Made by `larder_buffer_alloc()`, given back by `larder_buffer_free()`.
/// It belongs to the client that allocated it and keeps that client's
/// connection while it lives.
pub struct LarderBuffer {
    /// Held during a call that names the buffer, so two such calls on it
    /// from different threads take turns.
    buffer: Mutex<Buffer>,
    /// Its first byte, for the C caller to fill and read.
    data: BufferAddress,
    length: usize,
    /// [`LarderClient::identity`] of its client.
    client: u64,
}

/// The address of a buffer's bytes, as handed to C.
#[derive(Clone, Copy)]
struct BufferAddress(*mut u8);

#[allow(unsafe_code)]
// SAFETY: the library never reads or writes through the address; it only
// hands it to C (`larder_buffer_data`). Moving or sharing the value between
// threads is as safe as moving an integer.
unsafe impl Send for BufferAddress {}

#[allow(unsafe_code)]
// SAFETY: as for `Send`: no access through a shared `BufferAddress`
// exists.
unsafe impl Sync for BufferAddress {}

impl LarderBuffer {
    /// The buffer, for a call of `client` (EINVAL if it is another
    /// client's), checked to hold `count` bytes.
    pub(crate) fn for_call(&self, client: &LarderClient, count: usize) -> Outcome<parking_lot::MutexGuard<'_, Buffer>> {
        if self.client != client.identity() {
            return Err(Failure::invalid("the buffer belongs to another client"));
        }
        if count > self.length {
            return Err(Failure::invalid(format!("{count} bytes of a buffer of {} bytes", self.length)));
        }
        Ok(self.buffer.lock())
    }
}

/// Allocates a buffer of `size` bytes in the client's data area (16 MiB by
/// default, shared by all its buffers). Returns it, or NULL with errno set:
/// ENOMEM when the area has no room left, EINVAL for a NULL client or a
/// size above 4 GiB - 1.
///
/// # Safety
/// `client` is NULL or a live client.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_buffer_alloc(client: *const LarderClient, size: usize) -> *mut LarderBuffer {
    boundary("larder_buffer_alloc", std::ptr::null_mut(), || {
        // SAFETY: the caller passes NULL or a live client.
        let client = unsafe { arguments::object(client, "client") }?;
        let mut buffer = client.client.alloc_buffer(size)?;
        let data = BufferAddress(buffer.as_mut_slice().as_mut_ptr());
        let buffer = LarderBuffer { buffer: Mutex::new(buffer), data, length: size, client: client.identity() };
        Ok(Box::into_raw(Box::new(buffer)))
    })
}

/// The buffer's first byte: fill it before `larder_pwrite_buffer()`, read
/// it after `larder_pread_buffer()`. Valid until the buffer is freed. Do
/// not touch the bytes while a call naming the buffer runs. NULL with
/// errno EINVAL for a NULL buffer.
///
/// # Safety
/// `buffer` is NULL or a live buffer.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_buffer_data(buffer: *const LarderBuffer) -> *mut c_void {
    boundary("larder_buffer_data", std::ptr::null_mut(), || {
        // SAFETY: the caller passes NULL or a live buffer.
        let buffer = unsafe { arguments::object(buffer, "buffer") }?;
        Ok(buffer.data.0.cast::<c_void>())
    })
}

/// The buffer's size in bytes, as allocated; 0 with errno EINVAL for a
/// NULL buffer.
///
/// # Safety
/// `buffer` is NULL or a live buffer.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_buffer_len(buffer: *const LarderBuffer) -> usize {
    boundary("larder_buffer_len", 0, || {
        // SAFETY: the caller passes NULL or a live buffer.
        let buffer = unsafe { arguments::object(buffer, "buffer") }?;
        Ok(buffer.length)
    })
}

/// Gives the buffer back to its client's data area. Returns 0, or -1 with
/// errno EINVAL for NULL. The buffer and its bytes must not be used again.
///
/// # Safety
/// `buffer` is NULL or a buffer from `larder_buffer_alloc()` not yet
/// freed, which no call uses during this one.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_buffer_free(buffer: *mut LarderBuffer) -> c_int {
    boundary("larder_buffer_free", -1, || {
        if buffer.is_null() {
            return Err(Failure::invalid("buffer is NULL"));
        }
        // SAFETY: not NULL, so it came from `larder_buffer_alloc`'s
        // `Box::into_raw` and (by the contract) is not used again.
        drop(unsafe { Box::from_raw(buffer) });
        Ok(0)
    })
}

/// Writes the first `count` bytes of `buffer` to file `fd` at `offset`:
/// the server takes them from the shared buffer, with no copy by the
/// library. Returns the bytes written, or -1 with errno set (EBADF, EINVAL
/// for NULL, a negative offset, `count` beyond the buffer or another
/// client's buffer, the server's errno).
///
/// # Safety
/// `client` is NULL or a live client; `buffer` is NULL or a live buffer.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_pwrite_buffer(
    client: *const LarderClient,
    fd: c_int,
    buffer: *const LarderBuffer,
    count: usize,
    offset: i64,
) -> i64 {
    boundary("larder_pwrite_buffer", -1, || {
        // SAFETY: the caller passes NULL or a live client and buffer.
        let (client, buffer) = unsafe { (arguments::object(client, "client")?, arguments::object(buffer, "buffer")?) };
        let offset = arguments::offset(offset)?;
        let file = client.file(fd)?;
        let buffer = buffer.for_call(client, count)?;
        // At most the buffer's length, which is below 4 GiB.
        Ok(file.write_buffer_prefix(&buffer, count, offset)? as i64)
    })
}

/// Reads up to `count` bytes of file `fd` from `offset` into the start of
/// `buffer`: the server puts them there, with no copy by the library.
/// Returns the bytes read (fewer at the end of the file), or -1 with errno
/// set as for `larder_pwrite_buffer()`.
///
/// # Safety
/// `client` is NULL or a live client; `buffer` is NULL or a live buffer.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_pread_buffer(
    client: *const LarderClient,
    fd: c_int,
    buffer: *const LarderBuffer,
    count: usize,
    offset: i64,
) -> i64 {
    boundary("larder_pread_buffer", -1, || {
        // SAFETY: the caller passes NULL or a live client and buffer.
        let (client, buffer) = unsafe { (arguments::object(client, "client")?, arguments::object(buffer, "buffer")?) };
        let offset = arguments::offset(offset)?;
        let file = client.file(fd)?;
        let mut buffer = buffer.for_call(client, count)?;
        // At most the buffer's length, which is below 4 GiB.
        Ok(file.read_buffer_prefix(&mut buffer, count, offset)? as i64)
    })
}
