//! The server: options, start, the listener thread (accepts clients and
//! notices those that hang up), the workers, and shutdown.

use std::io::{Read, Write};
use std::ops::RangeInclusive;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use larder_fs::Fs;
use larder_protocol::doorbell::Doorbell;
use larder_protocol::layout::Layout;
use larder_protocol::message::Request;
use parking_lot::Mutex;
use rustix::event::{poll, PollFd, PollFlags};

use crate::clients::{ConnectedClient, Registry};
use crate::handshakes::Handshakes;
use crate::load::{self, LoadBoard, LoadCounters, LoadPolicy, LoadTally};
use crate::placement::{Placement, PRIMARY};
use crate::worker::{self, WorkerStats};
use crate::{Limits, ServerState};

/// Why a server could not start or stop.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The options are not usable.
    #[error("server options: {0}")]
    Options(String),
    /// Another server listens on the socket.
    #[error("a server already listens on {socket}; stop it first (or give --socket another path)")]
    AlreadyServed {
        /// The socket.
        socket: PathBuf,
    },
    /// The socket could not be made.
    #[error("listening on {socket}: {source}")]
    Bind {
        /// The socket.
        socket: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A shared-memory region or the doorbell could not be made.
    #[error("shared memory: {0}")]
    Transport(#[source] larder_protocol::error::TransportError),
    /// A thread could not be started.
    #[error("starting a server thread: {0}")]
    Thread(#[source] std::io::Error),
    /// A client's socket failed during its handshake.
    #[error("a client's socket: {0}")]
    Client(#[source] std::io::Error),
    /// The listener's wake-up channel could not be made.
    #[error("the listener's wake-up channel: {0}")]
    Wakeup(#[source] std::io::Error),
    /// A client's handshake failed.
    #[error("a client's handshake: {0}")]
    Handshake(#[source] larder_protocol::handshake::HandshakeError),
    /// A client could not get a session.
    #[error("a client's session: {0}")]
    Session(#[source] crate::ServerError),
    /// The store could not be synced at shutdown.
    #[error("syncing the store at shutdown: {0}")]
    Sync(#[source] larder_fs::FsError),
}

/// How often the listener looks at the stop flag when nothing happens.
const LISTEN_TICK: Duration = Duration::from_millis(100);

/// How a server runs.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Where to listen. Default: `STORE/larder.sock`, where clients look.
    pub socket: PathBuf,
    /// Limits, ring sizes and worker counts: the server starts
    /// `min_workers` workers, and every client's region has rings for
    /// `max_workers`.
    pub limits: Limits,
    /// The load manager's policy; none runs the `min_workers` workers
    /// and never moves anything. Default: [`LoadPolicy::default`].
    pub load_policy: Option<LoadPolicy>,
    /// Run after each request, before its answer is sent: a FUSE mount of
    /// the same store (`larder_fuse::Mounted::invalidation_barrier`) waits
    /// there until the kernel dropped its copies of what the request
    /// changed. Default none.
    pub before_answer: Option<AnswerHook>,
}

/// A function run before each answer (see [`ServerOptions::before_answer`]).
#[derive(Clone)]
pub struct AnswerHook(pub Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for AnswerHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnswerHook")
    }
}

impl ServerOptions {
    /// The defaults for the store in `store`.
    pub fn for_store(store: &Path) -> ServerOptions {
        ServerOptions {
            socket: store.join(larder_protocol::SOCKET_NAME),
            limits: Limits::default(),
            load_policy: Some(LoadPolicy::default()),
            before_answer: None,
        }
    }

    /// Sets the worker counts.
    pub fn workers(mut self, workers: RangeInclusive<u32>) -> ServerOptions {
        self.limits.min_workers = *workers.start();
        self.limits.max_workers = *workers.end();
        self
    }
}

/// One worker's counters, as of one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerCounters {
    /// Requests it executed.
    pub requests: u64,
    /// Nanoseconds it spent executing them: without a load manager an
    /// unbiased estimate, quick requests (a few µs each) being timed one
    /// in 8, picked at random; with one, every request is timed.
    pub busy_nanos: u64,
    /// Requests it answered with a redirect to the worker owning their
    /// file.
    pub redirects: u64,
}

/// What the listener, the workers and the load manager share.
pub(crate) struct Shared {
    pub(crate) state: ServerState,
    pub(crate) registry: Registry,
    pub(crate) doorbell: Doorbell,
    pub(crate) stopping: AtomicBool,
    pub(crate) worker_stats: Vec<WorkerStats>,
    pub(crate) placement: Arc<Placement>,
    pub(crate) load: LoadBoard,
    pub(crate) load_policy: LoadPolicy,
    /// What the load manager did.
    pub(crate) load_tally: LoadTally,
    /// Whether a load manager runs (and so whether loads are counted).
    pub(crate) managed: bool,
    /// Run before each answer.
    pub(crate) before_answer: Option<AnswerHook>,
    pub(crate) min_workers: u32,
    /// Worker threads started (workers 0..len), joined at stop.
    threads: Mutex<Vec<JoinHandle<()>>>,
    pub(crate) layout: Layout,
    pub(crate) limits: Limits,
    pub(crate) next_client: AtomicU64,
    /// Handshakes started and not yet ended: a client is welcomed before
    /// its handshake lets go of the descriptors it used (the region's
    /// memfd, a clone of the socket), so these count until it does.
    pub(crate) handshakes_under_way: AtomicUsize,
    /// Written to wake the listener (a client was added, or the server
    /// stops), so it polls the clients as they are now at once.
    listener_wake: UnixStream,
}

impl Shared {
    /// Wakes the listener. A full channel already holds a wake-up.
    pub(crate) fn wake_listener(&self) {
        let _ = (&self.listener_wake).write(&[1]);
    }

    /// The worker that must serve `request` of `client`, and the open
    /// file it is on, if any: the primary for every change to the
    /// namespace, the file's owner for a request on an open file, the
    /// client's home for the rest (and no file for any request when the
    /// server runs one worker at most).
    pub(crate) fn route(&self, client: &ConnectedClient, request: &Request) -> (u32, Option<u64>) {
        // One worker at most: it serves everything, and no load manager
        // or move asks which file a request is on.
        if request.changes_namespace() || self.placement.max() == 1 {
            return (PRIMARY, None);
        }
        let handle = match request {
            Request::Read { handle, .. }
            | Request::ReadBuffer { handle, .. }
            | Request::Write { handle, .. }
            | Request::Fsync { handle }
            | Request::Fallocate { handle, .. }
            | Request::Release { handle }
            | Request::SetAttributes { handle: Some(handle), .. } => Some(*handle),
            _ => None,
        };
        if let Some(ino) = handle.and_then(|h| client.file_of(h)) {
            if let Some(owner) = self.placement.owner(ino) {
                return (owner, Some(ino));
            }
        }
        (client.home(), None)
    }

    /// Starts worker `worker`'s thread unless it runs already; whether it
    /// runs.
    pub(crate) fn start_worker(self: &Arc<Self>, worker: u32) -> bool {
        if worker >= self.placement.max() {
            return false;
        }
        let mut threads = self.threads.lock();
        if (worker as usize) < threads.len() {
            return true;
        }
        while threads.len() <= worker as usize {
            let w = threads.len() as u32;
            let shared = self.clone();
            match std::thread::Builder::new().name(format!("larder-worker-{w}")).spawn(move || worker::run(shared, w)) {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    tracing::warn!("starting worker {w}: {e}");
                    return false;
                }
            }
        }
        true
    }

    /// Worker threads started so far (active or parked).
    pub(crate) fn started_workers(&self) -> usize {
        self.threads.lock().len()
    }

    /// Wakes worker `worker` (to take moves, or a new list of clients).
    pub(crate) fn ring(&self, worker: u32) {
        // Only a worker index beyond the doorbell fails, and none is.
        let _ = self.doorbell.ring(worker);
    }
}

/// A running server.
pub struct Server {
    shared: Arc<Shared>,
    socket: PathBuf,
    listener: Option<JoinHandle<()>>,
    manager: Option<JoinHandle<()>>,
    stopped: bool,
}

impl Server {
    /// Starts serving `fs` on `options.socket`. A socket file left by a
    /// server that died is replaced; one a live server listens on is
    /// refused (the store's LOCK, held through `fs`, already rules that
    /// out for the same store).
    pub fn start(fs: Arc<Fs>, options: ServerOptions) -> Result<Server, ServeError> {
        let (min, max) = (options.limits.min_workers, options.limits.max_workers);
        if min == 0 || min > max {
            return Err(ServeError::Options(format!("workers {min}..{max}: need 1 <= MIN <= MAX")));
        }
        let layout = Layout {
            workers: max,
            request_ring_bytes: options.limits.ring_bytes,
            completion_ring_bytes: options.limits.ring_bytes,
            data_bytes: options.limits.data_area_bytes,
        };
        layout.validate().map_err(|e| ServeError::Options(e.to_string()))?;
        let lease_read = larder_protocol::lease::FULL_READ_BYTES;
        if !options.limits.lease_term.is_zero() && options.limits.max_io_bytes < lease_read {
            return Err(ServeError::Options(format!(
                "max_io_bytes {}: a server that grants leases must answer reads of {lease_read} bytes in full \
                 (or set lease_term to 0)",
                options.limits.max_io_bytes
            )));
        }
        let max_leases = options.limits.max_leases;
        if max_leases > larder_protocol::layout::MAX_LEASE_SLOTS as usize {
            return Err(ServeError::Options(format!(
                "max_leases {max_leases}: a region has {} lease slots",
                larder_protocol::layout::MAX_LEASE_SLOTS
            )));
        }
        let listener = bind(&options.socket)?;
        let (doorbell, doorbell_fd) = Doorbell::create(max).map_err(ServeError::Transport)?;
        let epoch = epoch();
        let (listener_wake, wakeups) = UnixStream::pair().map_err(ServeError::Wakeup)?;
        for end in [&listener_wake, &wakeups] {
            end.set_nonblocking(true).map_err(ServeError::Wakeup)?;
        }
        let shared = Arc::new(Shared {
            state: ServerState::new(fs, options.limits.clone(), epoch),
            registry: Registry::default(),
            doorbell,
            stopping: AtomicBool::new(false),
            worker_stats: (0..max).map(|_| WorkerStats::default()).collect(),
            placement: Arc::new(Placement::new(min, max)),
            load: LoadBoard::new(max),
            load_policy: options.load_policy.clone().unwrap_or_default(),
            load_tally: LoadTally::default(),
            managed: options.load_policy.is_some() && max > min,
            before_answer: options.before_answer.clone(),
            min_workers: min,
            threads: Mutex::new(Vec::new()),
            layout,
            limits: options.limits.clone(),
            next_client: AtomicU64::new(1),
            handshakes_under_way: AtomicUsize::new(0),
            listener_wake,
        });
        for w in 0..min {
            if !shared.start_worker(w) {
                shared.stopping.store(true, Ordering::Release);
                return Err(ServeError::Thread(std::io::Error::other(format!("worker {w} did not start"))));
            }
        }
        let manager = match options.load_policy {
            Some(_) if max > min => {
                let managing = shared.clone();
                Some(
                    std::thread::Builder::new()
                        .name("larder-load".into())
                        .spawn(move || load::run(managing))
                        .map_err(ServeError::Thread)?,
                )
            }
            _ => None,
        };
        let listening = shared.clone();
        let listener = std::thread::Builder::new()
            .name("larder-listener".into())
            .spawn(move || listen(listening, listener, wakeups, doorbell_fd))
            .map_err(ServeError::Thread)?;
        tracing::info!(socket = %options.socket.display(), epoch, workers = min, "serving");
        Ok(Server { shared, socket: options.socket, listener: Some(listener), manager, stopped: false })
    }

    /// Workers taking work now (the load manager moves it within
    /// `min_workers..=max_workers`).
    pub fn active_workers(&self) -> u32 {
        self.shared.placement.active()
    }

    /// Makes `workers` workers active, within 1 and `max_workers`, as the
    /// load manager does: starts the threads it needs, or parks the last
    /// workers after moving their clients and files to the others (a
    /// parked worker only redirects what still reaches it). Returns the
    /// workers active.
    pub fn set_active_workers(&self, workers: u32) -> u32 {
        load::resize(&self.shared, workers)
    }

    /// Asks the worker that owns open file `ino` to hand it to worker
    /// `to`, as the load manager does to move a hot file; it does so
    /// between two requests. False if the file is not placed (no client
    /// holds it open) or `to` is not an active worker.
    pub fn move_file(&self, ino: u64, to: u32) -> bool {
        let placement = &self.shared.placement;
        let Some(from) = placement.owner(ino) else { return false };
        if !placement.is_active(to) {
            return false;
        }
        placement.request_move(ino, to);
        self.shared.ring(from);
        true
    }

    /// What the load manager did so far (all zero when none runs).
    pub fn load_counters(&self) -> LoadCounters {
        self.shared.load_tally.get()
    }

    /// The worker that owns open file `ino` now, if it is placed.
    pub fn file_owner(&self, ino: u64) -> Option<u32> {
        self.shared.placement.owner(ino)
    }

    /// Files placed on a worker now (those some client holds open).
    pub fn placed_files(&self) -> usize {
        self.shared.placement.placed_files()
    }

    /// Requests each worker executed so far, and how many it redirected.
    pub fn worker_requests(&self) -> Vec<(u64, u64)> {
        self.shared
            .worker_stats
            .iter()
            .map(|s| (s.requests.load(Ordering::Relaxed), s.redirects.load(Ordering::Relaxed)))
            .collect()
    }

    /// The server's epoch.
    pub fn epoch(&self) -> u64 {
        self.shared.state.epoch()
    }

    /// Clients connected now.
    pub fn clients(&self) -> usize {
        self.shared.state.clients()
    }

    /// Waits until at most `n` clients' sessions are open (those gone are
    /// reclaimed), or `timeout` passes; returns whether they are.
    pub fn wait_for_clients(&self, n: usize, timeout: Duration) -> bool {
        self.shared.state.wait_for_clients(n, timeout)
    }

    /// Each started worker's counters so far (the primary first; parked
    /// workers included).
    pub fn worker_counters(&self) -> Vec<WorkerCounters> {
        self.shared.worker_stats[..self.shared.started_workers()]
            .iter()
            .map(|stats| WorkerCounters {
                requests: stats.requests.load(Ordering::Relaxed),
                busy_nanos: stats.busy_nanos.load(Ordering::Relaxed),
                redirects: stats.redirects.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Requests executed so far by all workers (a cached call of a
    /// client executes none).
    pub fn requests(&self) -> u64 {
        self.shared.worker_stats.iter().map(|s| s.requests.load(Ordering::Relaxed)).sum()
    }

    /// Leases held now by all clients together.
    pub fn leases_held(&self) -> usize {
        self.shared.state.leases_held()
    }

    /// The socket it listens on.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Stops: no new clients; requests queued in rings are answered with
    /// ESHUTDOWN, the one each worker is executing finishes; then the
    /// store is synced (everything acknowledged is durable), every client
    /// is dropped and the socket file removed.
    pub fn shutdown(mut self) -> Result<(), ServeError> {
        self.stop()
    }

    fn stop(&mut self) -> Result<(), ServeError> {
        self.stopped = true;
        self.shared.stopping.store(true, Ordering::Release);
        self.shared.wake_listener();
        if let Some(manager) = self.manager.take() {
            manager.thread().unpark();
            let _ = manager.join();
        }
        let workers = std::mem::take(&mut *self.shared.threads.lock());
        for w in 0..workers.len() as u32 {
            self.shared.ring(w);
        }
        for worker in workers {
            let _ = worker.join();
        }
        if let Some(listener) = self.listener.take() {
            let _ = listener.join();
        }
        for client in self.shared.registry.snapshot() {
            client.close("the server is stopping");
        }
        self.shared.registry.remove_closed();
        let _ = std::fs::remove_file(&self.socket);
        self.shared.state.fs().sync().map_err(ServeError::Sync)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.stop();
        }
    }
}

/// A number that differs between any two server starts: the clock in
/// nanoseconds, mixed with the process id.
fn epoch() -> u64 {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 48)
}

/// Binds the socket, replacing a stale socket file nobody listens on.
fn bind(path: &Path) -> Result<UnixListener, ServeError> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(ServeError::AlreadyServed { socket: path.to_path_buf() });
        }
        std::fs::remove_file(path).map_err(|source| ServeError::Bind { socket: path.to_path_buf(), source })?;
    }
    let listener =
        UnixListener::bind(path).map_err(|source| ServeError::Bind { socket: path.to_path_buf(), source })?;
    // Anyone may connect: what a client may do is decided per request by
    // its credentials.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
        .map_err(|source| ServeError::Bind { socket: path.to_path_buf(), source })?;
    listener.set_nonblocking(true).map_err(|source| ServeError::Bind { socket: path.to_path_buf(), source })?;
    Ok(listener)
}

/// The listener thread: accepts clients, and drops those whose socket
/// hangs up (a client that exits or is killed), until the server stops.
fn listen(shared: Arc<Shared>, listener: UnixListener, wakeups: UnixStream, doorbell_fd: std::os::fd::OwnedFd) {
    let mut handshakes = Handshakes::new(doorbell_fd);
    while !shared.stopping.load(Ordering::Acquire) {
        let clients = shared.registry.snapshot();
        let mut fds = Vec::with_capacity(clients.len() + 2);
        // With no room for another handshake, new connections wait in the
        // socket's backlog (the tick looks again).
        let listening = if handshakes.has_room() { PollFlags::IN } else { PollFlags::empty() };
        fds.push(PollFd::new(&listener, listening));
        fds.push(PollFd::new(&wakeups, PollFlags::IN));
        for client in &clients {
            fds.push(PollFd::new(&client.stream, PollFlags::IN | PollFlags::RDHUP));
        }
        let timeout = rustix::event::Timespec { tv_sec: 0, tv_nsec: LISTEN_TICK.as_nanos() as i64 };
        if poll(&mut fds, Some(&timeout)).is_err() {
            continue;
        }
        let accept = !fds[0].revents().is_empty();
        if !fds[1].revents().is_empty() {
            // Woken: the loop takes a new snapshot.
            let mut drained = [0u8; 64];
            while matches!((&wakeups).read(&mut drained), Ok(n) if n > 0) {}
        }
        let mut gone = false;
        for (client, fd) in clients.iter().zip(&fds[2..]) {
            let events = fd.revents();
            if !events.is_empty() {
                // After the handshake a client sends nothing on its socket:
                // readable means hung up (or misbehaving).
                client.close(if events.contains(PollFlags::IN) && !events.contains(PollFlags::HUP) {
                    "sent bytes on its socket after the handshake, or hung up"
                } else {
                    "hung up"
                });
                gone = true;
            }
        }
        drop(fds);
        if gone {
            shared.registry.remove_closed();
            ring_all(&shared);
        }
        if accept {
            while handshakes.has_room() {
                let Ok((stream, _)) = listener.accept() else { break };
                handshakes.start(&shared, stream);
            }
        }
    }
    handshakes.stop();
}

/// Wakes every worker started, so that each takes a new snapshot of the
/// clients.
pub(crate) fn ring_all(shared: &Shared) {
    let started = shared.threads.lock().len() as u32;
    for w in 0..started {
        shared.ring(w);
    }
}
