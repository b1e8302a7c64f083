//! Larder's server (docs/server.md): [`Server`] listens on a store's
//! socket, hands each client a region of rings, and runs the workers and
//! the load manager; the sessions of connected clients and the executor
//! turn each request into calls of the fs and KV layers, checked against
//! the client's credentials.
//!
//! The listener accepts a client, reads its uid, gid and groups from the
//! kernel and opens a [`Session`] with [`ServerState::open_session`]
//! (on a handshake thread of its own). A worker that takes a decoded
//! [`Request`](larder_protocol::message::Request) of that client calls
//! [`execute`] with the client's data area as [`ClientMemory`], and sends
//! back the [`Response`](larder_protocol::message::Response); an
//! `Err(Violation)` ends the client's session instead. Closing the
//! connection closes the session ([`Session::close`]), which releases all
//! it holds.
//!
//! A session is `Sync`: requests of one client may execute on several
//! workers at once.
#![warn(missing_docs)]

mod client_count;
mod clients;
mod conflicts;
pub mod convert;
mod deferred;
mod error;
mod execute;
mod handshakes;
mod heaps;
mod leases;
mod limits;
mod load;
mod memory;
mod open_objects;
mod path_cache;
mod placement;
mod read_buffer;
mod region_memory;
mod server;
mod server_stats;
mod session;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use client_count::ClientCount;

use larder_fs::Fs;

pub use error::{ServerError, Violation};
pub use execute::{execute, execute_admitted, execute_batch, BatchOutcome};
pub use limits::Limits;
pub use load::{LoadCounters, LoadPolicy};
pub use memory::{slice_range, ClientMemory, VecMemory};
pub use server::{AnswerHook, ServeError, Server, ServerOptions, WorkerCounters};
pub use session::{HandleKind, InFlight, Session, SessionCounters};

/// What every session and worker of one server shares: the file system
/// over the store, the epoch, the limits, and the count of clients.
#[derive(Debug)]
pub struct ServerState {
    fs: Arc<Fs>,
    leases: Arc<leases::LeaseTable>,
    limits: Limits,
    epoch: u64,
    clients: Arc<ClientCount>,
    path_changes: path_cache::PathChanges,
}

impl ServerState {
    /// A server over `fs` with `limits`. `epoch` is this start's number,
    /// different at every start (leases of an earlier one are void).
    pub fn new(fs: Arc<Fs>, limits: Limits, epoch: u64) -> ServerState {
        let leases = leases::LeaseTable::new(limits.lease_term);
        let path_changes = path_cache::PathChanges::default();
        ServerState { fs, leases, limits, epoch, clients: Arc::new(ClientCount::default()), path_changes }
    }

    /// The file system.
    pub fn fs(&self) -> &Arc<Fs> {
        &self.fs
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The path generation the sessions' directory caches go by.
    pub(crate) fn path_changes(&self) -> &path_cache::PathChanges {
        &self.path_changes
    }

    /// The leases of every session.
    pub(crate) fn leases(&self) -> &Arc<leases::LeaseTable> {
        &self.leases
    }

    /// Leases held by all sessions together.
    pub fn leases_held(&self) -> usize {
        self.leases.held()
    }

    /// This start's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Sessions open now. A session counts until it is dropped, after
    /// it released every handle it held.
    pub fn clients(&self) -> usize {
        self.clients.get()
    }

    /// Waits until at most `n` sessions are open, or `timeout` passes;
    /// returns whether they are.
    pub fn wait_for_clients(&self, n: usize, timeout: Duration) -> bool {
        self.clients.wait_at_most(n, timeout)
    }

    /// Opens the session of a client whose user, group and supplementary
    /// groups the kernel reported (SO_PEERCRED, SO_PEERGROUPS): every
    /// request of the session is checked against them. Refused with
    /// [`ServerError::TooManyClients`] when `max_clients` are open.
    pub fn open_session(&self, uid: u32, gid: u32, groups: Vec<u32>) -> Result<Session, ServerError> {
        let max = self.limits.max_clients;
        if !self.clients.try_add(max) {
            return Err(ServerError::TooManyClients { max });
        }
        let mut session =
            Session::new(Arc::clone(&self.fs), self.limits.clone(), (uid, gid, groups), Arc::clone(&self.clients));
        session.hold_leases(Arc::clone(&self.leases));
        Ok(session)
    }
}
