//! The connected clients: each with its socket, its region, its session
//! and, per worker, the completions its ring had no room for.
//!
//! The registry is a list behind a lock with a generation number: workers
//! keep a snapshot and take a new one only when the generation moves, so
//! serving a request takes no lock shared between workers.

use std::collections::VecDeque;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use larder_protocol::region::Region;
use parking_lot::{Mutex, RwLock};

use crate::placement::Placement;
use crate::session::Session;
use larder_protocol::id_hash::IdMap;

/// One connected client.
pub(crate) struct ConnectedClient {
    /// The server's number for it (in logs and the welcome).
    pub(crate) id: u64,
    /// Its socket: open while it is connected; shut down to drop it.
    pub(crate) stream: UnixStream,
    /// Its region: rings, data area and lease area (shared with its
    /// session's lease holder, which writes revocation notices there).
    pub(crate) region: Arc<Region>,
    /// Its credentials, handles and limits.
    pub(crate) session: Session,
    /// Per worker, encoded completions waiting for room in its ring.
    pub(crate) backlog: Vec<Mutex<VecDeque<Vec<u8>>>>,
    /// Set once it is gone (hung up, or broke the protocol): workers stop
    /// taking its requests; its state goes when the last worker lets go.
    pub(crate) closed: AtomicBool,
    /// The worker that serves its requests that are neither namespace
    /// changes nor on an open file.
    pub(crate) home: AtomicU32,
    /// Its open files: handle to inode number, for placement.
    pub(crate) files: Mutex<IdMap<u64>>,
    /// Where its files are placed; they are unplaced when it goes.
    pub(crate) placement: Arc<Placement>,
}

impl Drop for ConnectedClient {
    fn drop(&mut self) {
        // No worker holds it any more: its session closes with it, and
        // the files it held open no longer keep a placement.
        for (_, ino) in self.files.get_mut().drain() {
            self.placement.closed(ino);
        }
    }
}

impl ConnectedClient {
    /// Its home worker.
    pub(crate) fn home(&self) -> u32 {
        self.home.load(Ordering::Acquire)
    }

    /// Moves its home (the load manager's call).
    pub(crate) fn set_home(&self, worker: u32) {
        self.home.store(worker, Ordering::Release);
    }

    /// The inode of its open file `handle`, if that is one.
    pub(crate) fn file_of(&self, handle: u64) -> Option<u64> {
        self.files.lock().get(&handle).copied()
    }

    /// Notes that it opened `handle` on file `ino`.
    pub(crate) fn opened(&self, handle: u64, ino: u64) {
        if self.files.lock().insert(handle, ino).is_none() {
            self.placement.opened(ino, self.home());
        }
    }

    /// Notes that it closed `handle`.
    pub(crate) fn closed(&self, handle: u64) {
        if let Some(ino) = self.files.lock().remove(&handle) {
            self.placement.closed(ino);
        }
    }

    /// Marks it gone and shuts its socket, so it sees the server drop it.
    pub(crate) fn close(&self, why: &str) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            tracing::info!(client = self.id, "dropping client: {why}");
            let _ = self.stream.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Whether it is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// The connected clients.
#[derive(Default)]
pub(crate) struct Registry {
    clients: RwLock<Vec<Arc<ConnectedClient>>>,
    generation: AtomicU64,
}

impl Registry {
    /// Adds a client.
    pub(crate) fn add(&self, client: Arc<ConnectedClient>) {
        self.clients.write().push(client);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Removes the clients that are gone.
    pub(crate) fn remove_closed(&self) -> usize {
        let mut clients = self.clients.write();
        let before = clients.len();
        clients.retain(|c| !c.is_closed());
        let removed = before - clients.len();
        if removed > 0 {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        removed
    }

    /// Every connected client.
    pub(crate) fn snapshot(&self) -> Vec<Arc<ConnectedClient>> {
        self.clients.read().clone()
    }

    /// Moves whenever a client comes or goes.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}
