//! Larder's C library, `liblarder.so` (and `.a`): the client API over the
//! Rust client `larder-client` (header `include/larder_client.h`) and the
//! persistent heap over `larder-heap` (header `include/larder_heap.h`,
//! module `heap`).
//!
//! A C program connects to the server of a store (`larder serve STORE`)
//! with `larder_connect`, then calls the file API (`larder_open`,
//! `larder_pread`, `larder_pwrite`, `larder_fsync`, `larder_stat`,
//! `larder_opendir`, `larder_mkdir`, `larder_rename`...), the zero-copy
//! buffers (`larder_buffer_alloc`, `larder_pwrite_buffer`,
//! `larder_pread_buffer`) and the KV API (`larder_kv_put`,
//! `larder_kv_get`, `larder_kv_delete`). Paths are from the store's root.
//!
//! **Errors** are as in libc: a call that fails returns -1 (or NULL) and
//! sets `errno`: the errno the server gives (as ext4 would for this
//! process's user: ENOENT, EEXIST, EACCES...), EBADF for a file number
//! that is not open, EINVAL for a NULL pointer, a length above SSIZE_MAX
//! or a flag not supported, ENOTCONN once the server is gone, EIO for an
//! internal error. `larder_last_error()` gives this thread's last failure
//! as text. As in libc, `errno` means something only after a failure.
//!
//! **Threads**: a client may be used from several threads at once; every
//! call is safe to make concurrently and their requests go to the server
//! side by side. A file number is the client's, not a thread's. A
//! directory stream or a buffer may be shared too: calls on one take
//! turns. What C must not do is end an object (`larder_disconnect`,
//! `larder_closedir`, `larder_buffer_free`) while another thread still
//! uses it, or touch a buffer's bytes during a call that names it.
//!
//! No panic crosses into C: every exported function catches it and fails
//! with EIO.

#![deny(missing_docs)]

mod arguments;
mod buffers;
mod connection;
mod directories;
mod files;
mod heap;
mod kv;
mod metadata;
mod namespace;
mod status;
#[cfg(test)]
mod tests;

pub use buffers::{
    larder_buffer_alloc, larder_buffer_data, larder_buffer_free, larder_buffer_len, larder_pread_buffer,
    larder_pwrite_buffer, LarderBuffer,
};
pub use connection::{larder_connect, larder_disconnect, LarderClient};
pub use directories::{
    larder_closedir, larder_opendir, larder_readdir, LarderDir, LarderDirent, LARDER_DT_BLK, LARDER_DT_CHR,
    LARDER_DT_DIR, LARDER_DT_FIFO, LARDER_DT_LNK, LARDER_DT_REG, LARDER_DT_SOCK, LARDER_NAME_MAX,
};
pub use files::{larder_close, larder_fsync, larder_open, larder_pread, larder_pwrite};
pub use heap::*;
pub use kv::{
    larder_kv_create_bucket, larder_kv_delete, larder_kv_delete_bucket, larder_kv_get, larder_kv_get_buffer,
    larder_kv_put, larder_kv_put_buffer, LARDER_BUFFERED, LARDER_DURABLE,
};
pub use metadata::{larder_fstat, larder_lstat, larder_stat, LarderStat, LarderTimespec};
pub use namespace::{larder_mkdir, larder_rename, larder_rmdir, larder_unlink};
pub use status::larder_last_error;

/// What the documentation promises about threads, checked by the
/// compiler: clients, directory streams and buffers may be shared.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<LarderClient>();
    shareable::<LarderDir>();
    shareable::<LarderBuffer>();
};
