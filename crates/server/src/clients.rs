//! The connected clients: each with its socket, its region, its session
//! and, per worker, the completions its ring had no room for.
//!
//! The registry is a list behind a lock with a generation number: workers
//! keep a snapshot and take a new one only when the generation moves, so
//! serving a request takes no lock shared between workers.

use std::collections::VecDeque;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use larder_protocol::region::Region;
use parking_lot::{Mutex, RwLock};

use crate::session::Session;

/// One connected client.
pub(crate) struct ConnectedClient {
    /// The server's number for it (in logs and the welcome).
    pub(crate) id: u64,
    /// Its socket: open while it is connected; shut down to drop it.
    pub(crate) stream: UnixStream,
    /// Its region: rings and data area.
    pub(crate) region: Region,
    /// Its credentials, handles and limits.
    pub(crate) session: Session,
    /// Per worker, encoded completions waiting for room in its ring.
    pub(crate) backlog: Vec<Mutex<VecDeque<Vec<u8>>>>,
    /// Set once it is gone (hung up, or broke the protocol): workers stop
    /// taking its requests; its state goes when the last worker lets go.
    pub(crate) closed: AtomicBool,
}

impl ConnectedClient {
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
