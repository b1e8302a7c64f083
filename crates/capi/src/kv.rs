//! The KV API: buckets of keys with values, `larder_kv_put`,
//! `larder_kv_get`, `larder_kv_delete` and buckets.

use std::ffi::{c_char, c_int, c_void};

use client::Durability;

use crate::arguments;
use crate::buffers::LarderBuffer;
use crate::connection::LarderClient;
use crate::status::{boundary, Failure, Outcome};

/// A change returns once it is visible to every client; it is durable at
/// the next sync or within the store's buffered interval.
pub const LARDER_BUFFERED: c_int = 0;
/// A change returns once it is on disk.
pub const LARDER_DURABLE: c_int = 1;

fn durability(value: c_int) -> Outcome<Durability> {
    match value {
        LARDER_BUFFERED => Ok(Durability::Buffered),
        LARDER_DURABLE => Ok(Durability::Durable),
        other => Err(Failure::invalid(format!("durability {other} is neither LARDER_BUFFERED nor LARDER_DURABLE"))),
    }
}

/// Creates the bucket `bucket`. Returns 0, or -1 with errno set (EEXIST,
/// EINVAL for an invalid name or NULL, EACCES...).
///
/// # Safety
/// `client` is NULL or a live client; `bucket` is NULL or a NUL-terminated
/// string.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_kv_create_bucket(client: *const LarderClient, bucket: *const c_char) -> c_int {
    boundary("larder_kv_create_bucket", -1, || {
        // SAFETY: the caller passes NULL or a live client, and NULL or a
        // NUL-terminated string.
        let (client, bucket) = unsafe { (arguments::object(client, "client")?, arguments::string(bucket, "bucket")?) };
        client.client.create_bucket(bucket)?;
        Ok(0)
    })
}

/// Removes the empty bucket `bucket`. Returns 0, or -1 with errno set
/// (ENOENT, ENOTEMPTY, EINVAL for NULL, EACCES...).
///
/// # Safety
/// As for `larder_kv_create_bucket()`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_kv_delete_bucket(client: *const LarderClient, bucket: *const c_char) -> c_int {
    boundary("larder_kv_delete_bucket", -1, || {
        // SAFETY: the caller passes NULL or a live client, and NULL or a
        // NUL-terminated string.
        let (client, bucket) = unsafe { (arguments::object(client, "client")?, arguments::string(bucket, "bucket")?) };
        client.client.delete_bucket(bucket)?;
        Ok(0)
    })
}

/// Stores the `length` bytes at `value` under `key` in `bucket`,
/// replacing any value there, atomically; `durability` is LARDER_DURABLE
/// or LARDER_BUFFERED. Returns 0, or -1 with errno set (ENOENT for no
/// such bucket, EINVAL for an invalid key, NULL or another durability,
/// EACCES, ENOSPC...).
///
/// # Safety
/// `client` is NULL or a live client; `bucket` and `key` are NULL or
/// NUL-terminated strings; `value` is NULL or readable for `length` bytes.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_kv_put(
    client: *const LarderClient,
    bucket: *const c_char,
    key: *const c_char,
    value: *const c_void,
    length: usize,
    durability: c_int,
) -> c_int {
    boundary("larder_kv_put", -1, || {
        // SAFETY: the caller passes NULL or a live client, NULL or
        // NUL-terminated strings, and NULL or `length` readable bytes.
        let (client, bucket, key, value) = unsafe {
            (
                arguments::object(client, "client")?,
                arguments::string(bucket, "bucket")?,
                arguments::string(key, "key")?,
                arguments::bytes(value, length, "value")?,
            )
        };
        client.client.put(bucket, key, value, self::durability(durability)?)?;
        Ok(0)
    })
}

/// Reads the value under `key` in `bucket`: sets `*length` to its length
/// and copies its first `capacity` bytes (all of it if it fits) to `out`.
/// A `*length` above `capacity` means the value was cut; `out` may be
/// NULL when `capacity` is 0, to learn the length. Returns 0, or -1 with
/// errno set (ENOENT for no such key or bucket, EACCES, EINVAL for a NULL
/// argument...).
///
/// # Safety
/// `client` is NULL or a live client; `bucket` and `key` are NULL or
/// NUL-terminated strings; `out` is NULL or writable for `capacity` bytes;
/// `length` is NULL or writable.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_kv_get(
    client: *const LarderClient,
    bucket: *const c_char,
    key: *const c_char,
    out: *mut c_void,
    capacity: usize,
    length: *mut usize,
) -> c_int {
    boundary("larder_kv_get", -1, || {
        // SAFETY: the caller passes NULL or a live client, NULL or
        // NUL-terminated strings, and NULL or writable places.
        let (client, bucket, key, length) = unsafe {
            (
                arguments::object(client, "client")?,
                arguments::string(bucket, "bucket")?,
                arguments::string(key, "key")?,
                arguments::place(length, "length")?,
            )
        };
        let out: &mut [u8] = match (out.is_null(), capacity) {
            (true, 0) => &mut [],
            // SAFETY: the caller passes NULL or `capacity` writable bytes.
            _ => unsafe { arguments::bytes_mut(out, capacity, "out") }?,
        };
        let Some(value) = client.client.get(bucket, key)? else {
            return Err(Failure::new(libc::ENOENT, "no such key"));
        };
        let n = value.len().min(out.len());
        out[..n].copy_from_slice(&value[..n]);
        *length = value.len();
        Ok(0)
    })
}

/// Removes `key` from `bucket`. Returns 0, or -1 with errno set (ENOENT if
/// there was no such key or bucket, EACCES, EINVAL for NULL or another
/// durability...).
///
/// # Safety
/// `client` is NULL or a live client; `bucket` and `key` are NULL or
/// NUL-terminated strings.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_kv_delete(
    client: *const LarderClient,
    bucket: *const c_char,
    key: *const c_char,
    durability: c_int,
) -> c_int {
    boundary("larder_kv_delete", -1, || {
        // SAFETY: the caller passes NULL or a live client, and NULL or
        // NUL-terminated strings.
        let (client, bucket, key) = unsafe {
            (arguments::object(client, "client")?, arguments::string(bucket, "bucket")?, arguments::string(key, "key")?)
        };
        if client.client.delete(bucket, key, self::durability(durability)?)? {
            Ok(0)
        } else {
            Err(Failure::new(libc::ENOENT, "no such key"))
        }
    })
}

/// Stores the first `length` bytes of `buffer` under `key` in `bucket`:
/// the server takes them from the shared buffer, with no copy by the
/// library. Returns 0, or -1 with errno set as for `larder_kv_put()`, and
/// EINVAL for a length beyond the buffer or another client's buffer.
///
/// # Safety
/// `client` is NULL or a live client; `bucket` and `key` are NULL or
/// NUL-terminated strings; `buffer` is NULL or a live buffer.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_kv_put_buffer(
    client: *const LarderClient,
    bucket: *const c_char,
    key: *const c_char,
    buffer: *const LarderBuffer,
    length: usize,
    durability: c_int,
) -> c_int {
    boundary("larder_kv_put_buffer", -1, || {
        // SAFETY: the caller passes NULL or a live client and buffer, and
        // NULL or NUL-terminated strings.
        let (client, bucket, key, buffer) = unsafe {
            (
                arguments::object(client, "client")?,
                arguments::string(bucket, "bucket")?,
                arguments::string(key, "key")?,
                arguments::object(buffer, "buffer")?,
            )
        };
        let durability = self::durability(durability)?;
        let buffer = buffer.for_call(client, length)?;
        client.client.put_buffer_prefix(bucket, key, &buffer, length, durability)?;
        Ok(0)
    })
}

/// Reads the value under `key` in `bucket` into `buffer`: the server puts
/// it there, with no copy by the library. Sets `*length` to the value's
/// length; if that is above the buffer's size, the value did not fit and
/// nothing was written. Returns 0, or -1 with errno set (ENOENT for no
/// such key or bucket, EACCES, EINVAL for NULL or another client's
/// buffer...).
///
/// # Safety
/// `client` is NULL or a live client; `bucket` and `key` are NULL or
/// NUL-terminated strings; `buffer` is NULL or a live buffer; `length` is
/// NULL or writable.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_kv_get_buffer(
    client: *const LarderClient,
    bucket: *const c_char,
    key: *const c_char,
    buffer: *const LarderBuffer,
    length: *mut usize,
) -> c_int {
    boundary("larder_kv_get_buffer", -1, || {
        // SAFETY: the caller passes NULL or a live client and buffer, NULL
        // or NUL-terminated strings, and NULL or a writable length.
        let (client, bucket, key, buffer, length) = unsafe {
            (
                arguments::object(client, "client")?,
                arguments::string(bucket, "bucket")?,
                arguments::string(key, "key")?,
                arguments::object(buffer, "buffer")?,
                arguments::place(length, "length")?,
            )
        };
        let mut buffer = buffer.for_call(client, 0)?;
        let Some(found) = client.client.get_buffer(bucket, key, &mut buffer)? else {
            return Err(Failure::new(libc::ENOENT, "no such key"));
        };
        *length = usize::try_from(found)
            .map_err(|_| Failure::new(libc::EOVERFLOW, format!("a value of {found} bytes does not fit size_t")))?;
        Ok(0)
    })
}
