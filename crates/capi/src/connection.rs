//! `larder_client`: a connection to a server and its table of open files.

use std::collections::BTreeSet;
use std::ffi::{c_char, c_int};
use std::os::unix::fs::FileTypeExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use client::{Client, File};
use parking_lot::Mutex;

use crate::arguments;
use crate::status::{boundary, Failure, Outcome};

/// A connection to a Larder server (opaque). Made by `larder_connect()`,
/// ended by `larder_disconnect()`. One client may be used from several
/// threads at once: every call on it is safe to make concurrently, and
/// calls of different threads go to the server side by side.
pub struct LarderClient {
    pub(crate) client: Client,
    files: Mutex<FileTable>,
    /// Unique among the clients of this process, ever: a buffer names its
    /// client by it (an address could be reused after a disconnect).
    identity: u64,
}

/// The identity of the next client.
static NEXT_IDENTITY: AtomicU64 = AtomicU64::new(1);

/// Open files by the number the C caller holds: the lowest free number is
/// handed out first, as `open(2)` does.
#[derive(Default)]
struct FileTable {
    slots: Vec<Option<Arc<File>>>,
    free: BTreeSet<usize>,
}

impl LarderClient {
    /// Its identity, unique among this process's clients.
    pub(crate) fn identity(&self) -> u64 {
        self.identity
    }

    /// Adds an open file; returns its number.
    pub(crate) fn insert(&self, file: File) -> Outcome<c_int> {
        let mut table = self.files.lock();
        let slot = match table.free.pop_first() {
            Some(slot) => slot,
            None => {
                table.slots.push(None);
                table.slots.len() - 1
            }
        };
        let Ok(number) = c_int::try_from(slot) else {
            table.free.insert(slot);
            return Err(Failure::new(libc::EMFILE, "no file number left"));
        };
        table.slots[slot] = Some(Arc::new(file));
        Ok(number)
    }

    /// The open file `number` names (EBADF if none). The table's lock is
    /// not held while the caller uses it, so other threads' calls go on.
    pub(crate) fn file(&self, number: c_int) -> Outcome<Arc<File>> {
        let table = self.files.lock();
        usize::try_from(number)
            .ok()
            .and_then(|slot| table.slots.get(slot))
            .and_then(Option::clone)
            .ok_or_else(|| Failure::new(libc::EBADF, format!("{number} is not an open file of this client")))
    }

    /// Takes file `number` out of the table (EBADF if none). The file is
    /// released on the server when the last call using it returns.
    pub(crate) fn remove(&self, number: c_int) -> Outcome<Arc<File>> {
        let mut table = self.files.lock();
        let slot = usize::try_from(number).ok().filter(|&slot| slot < table.slots.len());
        match slot.and_then(|slot| table.slots[slot].take().map(|file| (slot, file))) {
            Some((slot, file)) => {
                table.free.insert(slot);
                Ok(file)
            }
            None => Err(Failure::new(libc::EBADF, format!("{number} is not an open file of this client"))),
        }
    }
}

/// Connects to the server of a store. `store_or_socket` is the store's
/// directory (the server listens on `STORE/larder.sock`) or the socket
/// itself (`larder serve --socket PATH`). Returns the client, or NULL with
/// errno set: ENOENT or ECONNREFUSED when no server listens there, EINVAL
/// for a NULL path.
///
/// # Safety
/// `store_or_socket` is NULL or a NUL-terminated string.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_connect(store_or_socket: *const c_char) -> *mut LarderClient {
    boundary("larder_connect", std::ptr::null_mut(), || {
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let path = unsafe { arguments::path(store_or_socket, "store_or_socket") }?;
        let is_socket = std::fs::metadata(path).map(|m| m.file_type().is_socket()).unwrap_or(false);
        let client = if is_socket { Client::connect_socket(path) } else { Client::connect(path) }?;
        let files = Mutex::new(FileTable::default());
        let identity = NEXT_IDENTITY.fetch_add(1, Ordering::Relaxed);
        Ok(Box::into_raw(Box::new(LarderClient { client, files, identity })))
    })
}

/// Ends a client: closes its open files and its connection. Buffers and
/// directory streams still allocated keep the connection until they are
/// freed. Returns 0, or -1 with errno EINVAL for NULL. The client must not
/// be used again, nor by another thread during this call.
///
/// # Safety
/// `client` is NULL or a client from `larder_connect()` not yet
/// disconnected.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_disconnect(client: *mut LarderClient) -> c_int {
    boundary("larder_disconnect", -1, || {
        if client.is_null() {
            return Err(Failure::invalid("client is NULL"));
        }
        // SAFETY: not NULL, so it came from `larder_connect`'s
        // `Box::into_raw` and (by the contract) is not used again.
        drop(unsafe { Box::from_raw(client) });
        Ok(0)
    })
}
