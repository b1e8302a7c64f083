//! A session's heaps: the heaps it opened (`HeapOpen`), each a
//! `larder_heap::Heap` acting with the session's credentials, and the
//! socket on which its attaches send their descriptors.
//!
//! One `Heap` per (session, heap opened): the heap then checks every call
//! against the client's uid and groups with the rules the embedded heap
//! uses, and objects the client allocates are the client's. The heaps of
//! several sessions over one path share nothing but the store: every
//! metadata change is one object-layer transaction taking the store's
//! locks, so racing sessions are serialised there and logged.

use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use larder_fs::FsError;
use larder_heap::Heap;
use parking_lot::Mutex;

/// The heaps a session opened, by handle.
#[derive(Default)]
struct Table {
    next: u64,
    open: HashMap<u64, Arc<Heap>>,
    /// Slots taken by opens in progress (counted against the limit).
    reserved: usize,
}

/// A session's heaps and its descriptor socket.
#[derive(Default)]
pub(crate) struct SessionHeaps {
    table: Mutex<Table>,
    /// The client's socket (a duplicate of the connection's), on which
    /// descriptor frames go; none for a session without a connection.
    socket: Mutex<Option<UnixStream>>,
    /// Descriptor frames sent on the socket.
    sent: AtomicU64,
}

impl SessionHeaps {
    /// Sets the socket descriptor frames go on.
    pub(crate) fn set_socket(&self, socket: UnixStream) {
        *self.socket.lock() = Some(socket);
    }

    /// Takes a slot for a heap about to be opened: EMFILE when the
    /// session holds `max` heaps (or opens that many) already.
    pub(crate) fn reserve(&self, max: usize) -> Result<(), FsError> {
        let mut table = self.table.lock();
        if table.open.len() + table.reserved >= max {
            return Err(FsError::posix(
                libc::EMFILE,
                format!("{max} heaps open in this session, the limit (max_open_heaps)"),
            ));
        }
        table.reserved += 1;
        Ok(())
    }

    /// Fills a slot [`SessionHeaps::reserve`] took (`Some`) or gives it
    /// back (`None`); the heap's handle.
    pub(crate) fn fill(&self, heap: Option<Heap>) -> Option<u64> {
        let mut table = self.table.lock();
        table.reserved -= 1;
        let heap = heap?;
        table.next += 1;
        let handle = table.next;
        table.open.insert(handle, Arc::new(heap));
        Some(handle)
    }

    /// The open heap `handle`: EBADF if there is none.
    pub(crate) fn get(&self, handle: u64) -> Result<Arc<Heap>, FsError> {
        self.table.lock().open.get(&handle).cloned().ok_or_else(|| not_open(handle))
    }

    /// Removes heap `handle` from the table: EBADF if there is none.
    pub(crate) fn remove(&self, handle: u64) -> Result<Arc<Heap>, FsError> {
        self.table.lock().open.remove(&handle).ok_or_else(|| not_open(handle))
    }

    /// Heaps open.
    pub(crate) fn count(&self) -> usize {
        self.table.lock().open.len()
    }

    /// Drops every heap (the session ends; a heap not closed is not
    /// synced, as an embedded heap dropped without `close`).
    pub(crate) fn release_all(&self) {
        self.table.lock().open.clear();
        *self.socket.lock() = None;
    }

    /// Frames sent so far.
    pub(crate) fn sent(&self) -> u64 {
        self.sent.load(Ordering::Acquire)
    }

    /// Sends `descriptor` to the client in a frame carrying `tag`.
    pub(crate) fn send(&self, tag: u64, descriptor: std::os::fd::BorrowedFd<'_>) -> Result<(), FsError> {
        let socket = self.socket.lock();
        let Some(socket) = socket.as_ref() else {
            return Err(FsError::posix(libc::EOPNOTSUPP, "this session has no socket to pass a descriptor on"));
        };
        match larder_protocol::descriptor::send_descriptor(socket, tag, descriptor) {
            Ok(()) => {
                self.sent.fetch_add(1, Ordering::AcqRel);
                Ok(())
            }
            Err(larder_protocol::descriptor::DescriptorError::Full) => {
                Err(FsError::posix(libc::EAGAIN, "the client's socket is full of descriptors it has not taken"))
            }
            Err(e) => Err(FsError::posix(libc::EPIPE, format!("the descriptor could not be sent: {e}"))),
        }
    }
}

fn not_open(handle: u64) -> FsError {
    FsError::posix(libc::EBADF, format!("heap handle {handle} is not open in this session"))
}
