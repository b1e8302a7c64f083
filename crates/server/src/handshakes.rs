//! Handshakes with connecting clients, each on a thread of its own, so
//! that a client slow to say hello (or silent) holds up neither the
//! listener nor anyone else connecting: the listener accepts and hands
//! the socket over at once.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use larder_protocol::credentials::peer_credentials;
use larder_protocol::handshake::{read_hello, send_refusal, send_welcome, Welcome};
use larder_protocol::region::Region;
use parking_lot::{Condvar, Mutex};

use crate::clients::ConnectedClient;
use crate::server::{ring_all, ServeError, Shared};

/// How long a connecting client has to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(1);

/// Handshakes under way at once; past this the listener leaves new
/// connections in the socket's backlog until one ends (each ends within
/// `HELLO_TIMEOUT` of its start, or at once when the server stops).
pub(crate) const MAX_HANDSHAKES: usize = 64;

/// The sockets of the handshakes under way (each a clone of its
/// thread's, to cut it short when the server stops), by number. A thread
/// takes its entry out when it ends, so nothing of a finished handshake
/// outlives it.
#[derive(Default)]
struct Pending {
    streams: Mutex<HashMap<u64, UnixStream>>,
    ended: Condvar,
}

impl Pending {
    fn end(&self, number: u64) {
        self.streams.lock().remove(&number);
        self.ended.notify_all();
    }
}

/// The handshakes under way.
pub(crate) struct Handshakes {
    pending: Arc<Pending>,
    doorbell_fd: Arc<OwnedFd>,
    next: u64,
}

impl Handshakes {
    /// None yet; `doorbell_fd` goes to every client admitted.
    pub(crate) fn new(doorbell_fd: OwnedFd) -> Handshakes {
        Handshakes { pending: Arc::default(), doorbell_fd: Arc::new(doorbell_fd), next: 0 }
    }

    /// Whether another handshake may start.
    pub(crate) fn has_room(&self) -> bool {
        self.pending.streams.lock().len() < MAX_HANDSHAKES
    }

    /// Starts the handshake with a client that just connected.
    pub(crate) fn start(&mut self, shared: &Arc<Shared>, stream: UnixStream) {
        let kept = match stream.try_clone() {
            Ok(kept) => kept,
            Err(e) => {
                tracing::warn!("a client was not admitted: its socket: {e}");
                return;
            }
        };
        self.next += 1;
        let number = self.next;
        self.pending.streams.lock().insert(number, kept);
        shared.handshakes_under_way.fetch_add(1, Ordering::AcqRel);
        let (thread_shared, doorbell_fd, pending) = (shared.clone(), self.doorbell_fd.clone(), self.pending.clone());
        let spawned = std::thread::Builder::new().name("larder-handshake".into()).spawn(move || {
            if let Err(e) = admit(&thread_shared, stream, &doorbell_fd) {
                tracing::warn!("a client was not admitted: {e}");
            }
            pending.end(number);
            thread_shared.handshakes_under_way.fetch_sub(1, Ordering::AcqRel);
        });
        if let Err(e) = spawned {
            tracing::warn!("a client was not admitted: no thread for its handshake: {e}");
            self.pending.end(number);
            shared.handshakes_under_way.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Cuts every handshake under way short and waits for it to end: a
    /// client admitted meanwhile is in the registry when this returns.
    pub(crate) fn stop(self) {
        let mut streams = self.pending.streams.lock();
        for stream in streams.values() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        // Each ends at once on its cut socket; the bound only keeps a
        // stuck one from holding the shutdown forever.
        let deadline = std::time::Instant::now() + 2 * HELLO_TIMEOUT;
        while !streams.is_empty() {
            if self.pending.ended.wait_until(&mut streams, deadline).timed_out() {
                tracing::warn!(pending = streams.len(), "handshakes still under way at shutdown");
                break;
            }
        }
    }
}

/// Handshake with a new client: its credentials from the kernel, its
/// region, the welcome.
fn admit(shared: &Shared, stream: UnixStream, doorbell_fd: &OwnedFd) -> Result<(), ServeError> {
    stream.set_nonblocking(false).map_err(ServeError::Client)?;
    let credentials = peer_credentials(&stream).map_err(ServeError::Client)?;
    let hello = read_hello(&stream, HELLO_TIMEOUT).map_err(ServeError::Handshake)?;
    if !hello.is_supported() {
        let message =
            format!("protocol version {} is not this server's ({})", hello.version, larder_protocol::PROTOCOL_VERSION);
        let _ = send_refusal(&stream, libc::EPROTONOSUPPORT, &message);
        return Err(ServeError::Options(message));
    }
    let session = match shared.state.open_session(credentials.uid, credentials.gid, credentials.groups.clone()) {
        Ok(session) => session,
        Err(e) => {
            let _ = send_refusal(&stream, e.errno(), &e.to_string());
            return Err(ServeError::Session(e));
        }
    };
    match stream.try_clone() {
        Ok(socket) => session.set_descriptor_socket(socket),
        Err(e) => {
            let _ = send_refusal(&stream, libc::EMFILE, &format!("no descriptor for the client's socket: {e}"));
            return Err(ServeError::Client(e));
        }
    }
    let (region, region_fd) = match Region::create(shared.layout) {
        Ok((region, fd)) => (Arc::new(region), fd),
        Err(e) => {
            let _ = send_refusal(&stream, libc::ENOMEM, &format!("no region for the client: {e}"));
            return Err(ServeError::Transport(e));
        }
    };
    // Workers may be asleep already: the client must ring them.
    for w in 0..shared.layout.workers {
        if let Ok(rings) = region.server_rings(w) {
            rings.set_sleeping(true);
        }
    }
    if let Some(holder) = session.lease_holder() {
        holder.attach(region.clone());
    }
    let id = shared.next_client.fetch_add(1, Ordering::Relaxed);
    let welcome = Welcome {
        epoch: shared.state.epoch(),
        client_id: id,
        layout: shared.layout,
        primary_worker: 0,
        max_open_handles: u32::try_from(shared.limits.max_open_handles).unwrap_or(u32::MAX),
        max_in_flight: shared.limits.max_in_flight,
    };
    // Known to the workers before it is welcomed: every request a
    // welcomed client publishes is in a ring some worker serves (until the
    // workers stop, after which it is told the server is gone).
    let client = Arc::new(ConnectedClient {
        id,
        stream,
        region,
        session,
        backlog: (0..shared.layout.workers).map(|_| Default::default()).collect(),
        closed: AtomicBool::new(false),
        home: AtomicU32::new(shared.placement.home_for_new_client()),
        files: Mutex::new(Default::default()),
        placement: shared.placement.clone(),
    });
    shared.registry.add(client.clone());
    ring_all(shared);
    let welcomed = send_welcome(&client.stream, &welcome, region_fd.as_fd(), doorbell_fd.as_fd())
        .map_err(ServeError::Handshake)
        .and_then(|()| client.stream.set_nonblocking(true).map_err(ServeError::Client));
    // The client has its copy; the server needs only the mapping.
    drop(region_fd);
    if let Err(e) = welcomed {
        client.close("its welcome could not be sent");
        shared.registry.remove_closed();
        ring_all(shared);
        return Err(e);
    }
    tracing::info!(client = id, pid = credentials.pid, uid = credentials.uid, "client connected");
    shared.wake_listener();
    Ok(())
}
