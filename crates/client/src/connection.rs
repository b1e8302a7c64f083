//! One connection to a server: the socket, the region with its rings, the
//! doorbell, and the round trip of a request.
//!
//! A call holds its worker's channel from sending the request to reading
//! its completion, so each ring has at most one request of this client in
//! flight; threads that share a client queue on the channel, and a program
//! that wants requests in flight at once on one worker opens more clients.

use std::collections::VecDeque;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use std::os::fd::OwnedFd;

use larder_protocol::backoff::Spinner;
use larder_protocol::codec::{data_answer, decode_response, encode_request, DATA_PREFIX_BYTES};
use larder_protocol::descriptor::{receive_descriptor, DescriptorError};
use larder_protocol::doorbell::Doorbell;
use larder_protocol::error::SendError;
use larder_protocol::futex::Wake;
use larder_protocol::handshake::{client_handshake, Welcome};
use larder_protocol::message::{Request, Response};
use larder_protocol::region::Region;
use larder_protocol::ring::Received;
use parking_lot::{Condvar, Mutex};
use rustix::net::RecvFlags;

use crate::error::{ClientError, Result};
use larder_protocol::id_hash::IdMap;

#[path = "posted.rs"]
mod posted;

use posted::{Posted, Redirected};

/// How long one wait for a completion lasts before the client checks that
/// the server is still there: a dead server is noticed within this.
const WAIT_SLICE: Duration = Duration::from_millis(100);

/// How long a descriptor frame may take to arrive once its attach was
/// answered (it is sent before the answer, so it is there already unless
/// the server broke).
const DESCRIPTOR_WAIT: Duration = Duration::from_secs(5);

/// How long the handshake may take before the client gives up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Most checks a waiting client spins on its completion ring before it
/// sleeps on the futex; each ring's spinner adapts below this to how its
/// answers arrive (`larder_protocol::backoff`).
const MAX_SPINS: u32 = 2_000;

/// Most redirects one request follows. A file that moves while its
/// request travels redirects it again; only a server that never settles
/// would redirect this often.
const MAX_REDIRECTS: usize = 1024;

/// Redirects in a row after which the client yields before following the
/// next, letting a file that is moving land.
const REDIRECTS_BEFORE_YIELD: usize = 8;

/// Scratch buffers of one worker's ring pair.
struct Channel {
    record: Vec<u8>,
    reply: Vec<u8>,
    /// How long a wait for this ring's completions spins.
    spinner: Spinner,
    /// Requests posted on this ring whose completions were not read yet,
    /// in order, by request id.
    posted: VecDeque<(u64, Posted)>,
    /// Bytes of the requests in `posted`, as sent.
    posted_bytes: usize,
}

/// An answer as a call that may read into the caller's buffer takes it.
// Moved once per call, as a `Response` alone is; boxing the response would
// allocate for every answer.
#[allow(clippy::large_enum_variant)]
enum Answer {
    /// Any answer, decoded.
    Response(Response),
    /// A `Data` answer to the call itself whose bytes went straight from
    /// the ring into the call's buffer: their count.
    Read(usize),
}

/// A live connection to a server.
pub(crate) struct Connection {
    socket: PathBuf,
    stream: UnixStream,
    /// Shared with the lease thread, which waits on the lease area
    /// without keeping the connection open.
    region: std::sync::Arc<Region>,
    doorbell: Doorbell,
    welcome: Welcome,
    channels: Vec<Mutex<Channel>>,
    /// Which worker owns the file behind a handle, as redirects said.
    handle_workers: Mutex<IdMap<u32>>,
    /// The worker that serves this client's other requests, as redirects
    /// said (the server's load manager moves it).
    home: AtomicU32,
    next_id: AtomicU64,
    gone: AtomicBool,
    /// The first protocol violation seen on a ring (a bad position, a
    /// record whose crc32c does not match, a message that does not
    /// decode): the connection is dropped then, since the ring's state
    /// can no longer be trusted, and every later call fails with it.
    broken: OnceLock<String>,
    /// What the client caches under leases.
    cache: std::sync::Arc<crate::cache::Cache>,
    /// Descriptors taken from the socket whose attach has not claimed
    /// them (an attach abandoned midway), by tag; held through each
    /// attach, so one attach at a time reads the socket.
    descriptors: Mutex<IdMap<OwnedFd>>,
    /// Descriptor frames taken from the socket (each attach tells the
    /// server, which bounds those in flight).
    descriptors_received: AtomicU64,
    next_tag: AtomicU64,
    /// Requests posted and not yet answered, over all rings.
    posted: AtomicUsize,
    /// Posted writes not yet answered, over all rings, with those being
    /// sent again after a redirect (answered once sent again).
    posted_writes: AtomicUsize,
    /// Posted requests answered with a redirect (their file moved), to
    /// send again there before the next call, and how many a thread is
    /// sending again now.
    redirected_posts: Mutex<Redirected>,
    /// Signalled when a thread has sent again the redirected posts it
    /// took: a call waits for those another thread is sending.
    resent: Condvar,
    /// The first write posted through a handle that the client refused
    /// itself (as the server would: not open for writing, too large), by
    /// handle, until a call on that handle returns it.
    post_failures: Mutex<IdMap<ClientError>>,
    /// Failures of posted writes, by file (errseq: see `posted`).
    write_errors: Mutex<IdMap<posted::WriteErrors>>,
    /// Posted writes not yet answered, by file.
    posted_files: Mutex<IdMap<usize>>,
    /// What tests hook into.
    #[cfg(feature = "test-hooks")]
    pub(crate) hooks: crate::hooks::Hooks,
}

impl Connection {
    /// Connects to the server listening at `socket`.
    pub(crate) fn connect(socket: &Path, options: &crate::ClientOptions) -> Result<Connection> {
        let stream = UnixStream::connect(socket)
            .map_err(|source| ClientError::Connect { path: socket.to_path_buf(), source })?;
        let connected = client_handshake(&stream, HANDSHAKE_TIMEOUT)
            .map_err(|source| ClientError::Handshake { path: socket.to_path_buf(), source })?;
        let workers = connected.welcome.layout.workers as usize;
        let channels = (0..workers)
            .map(|_| {
                Mutex::new(Channel {
                    record: Vec::new(),
                    reply: Vec::new(),
                    spinner: Spinner::adaptive(MAX_SPINS),
                    posted: VecDeque::new(),
                    posted_bytes: 0,
                })
            })
            .collect();
        Ok(Connection {
            socket: socket.to_path_buf(),
            stream,
            region: std::sync::Arc::new(connected.region),
            doorbell: connected.doorbell,
            welcome: connected.welcome,
            channels,
            handle_workers: Mutex::new(IdMap::default()),
            home: AtomicU32::new(connected.welcome.primary_worker),
            next_id: AtomicU64::new(1),
            gone: AtomicBool::new(false),
            broken: OnceLock::new(),
            cache: std::sync::Arc::new(crate::cache::Cache::new(
                options.leases,
                crate::cache::max_kept_handles(connected.welcome.max_open_handles),
                options.cache_page_bytes,
            )),
            descriptors: Mutex::new(IdMap::default()),
            descriptors_received: AtomicU64::new(0),
            next_tag: AtomicU64::new(1),
            posted: AtomicUsize::new(0),
            posted_writes: AtomicUsize::new(0),
            redirected_posts: Mutex::new(Redirected::default()),
            resent: Condvar::new(),
            post_failures: Mutex::new(IdMap::default()),
            write_errors: Mutex::new(IdMap::default()),
            posted_files: Mutex::new(IdMap::default()),
            #[cfg(feature = "test-hooks")]
            hooks: crate::hooks::Hooks::default(),
        })
    }

    /// The lease cache.
    pub(crate) fn cache(&self) -> &std::sync::Arc<crate::cache::Cache> {
        &self.cache
    }

    /// Whether the server was seen gone.
    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Relaxed)
    }

    /// Rings every worker's doorbell (after acknowledging revocations, so
    /// that a worker holding a change back looks again at once).
    pub(crate) fn ring_all_workers(&self) {
        for worker in 0..self.channels.len() as u32 {
            self.ring_doorbell(worker);
        }
    }

    /// The server's welcome: epoch, layout, limits.
    pub(crate) fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// The socket this connection went to.
    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }

    /// Most bytes of data one request carries inline: what fits a record
    /// of the request ring with room for the message's other fields.
    pub(crate) fn inline_request_bytes(&self) -> usize {
        inline_limit(self.welcome.layout.request_ring_bytes)
    }

    /// Most bytes of data one response carries inline.
    pub(crate) fn inline_response_bytes(&self) -> usize {
        inline_limit(self.welcome.layout.completion_ring_bytes)
    }

    /// The region, for the data area.
    pub(crate) fn region(&self) -> &Region {
        &self.region
    }

    /// The region, to share.
    pub(crate) fn shared_region(&self) -> std::sync::Arc<Region> {
        self.region.clone()
    }

    /// Sends `request` and returns the server's answer, following
    /// redirects. An error answer is returned as `Err(ClientError::Server)`.
    pub(crate) fn call(&self, request: &Request) -> Result<Response> {
        // A write's answer may be kept in the cached pages only if no other
        // change of this client came between its sending and its answer.
        let stamp = (self.cache.enabled() && matches!(request, Request::Write { .. })).then(|| self.cache.stamp());
        let answer = self.call_uncounted(request, true);
        // A posted release whose redirect was read during this call (its
        // file lives on another worker than the one the client knew) takes
        // effect before this call returns.
        let resent = self.resend_redirected_posts(true);
        let answer = match (answer, resent) {
            (Ok(_), Err(e)) => Err(e),
            (answer, _) => answer,
        };
        let unusable = self.cache.after_own(request, &answer, stamp);
        crate::cache::release_all(self, &unusable);
        answer
    }

    /// Sends `request`, a `Read`, and puts the bytes of its answer
    /// straight from the ring into `out` (one copy, its crc32c checked over
    /// the copy); returns their count. An answer longer than `out` is
    /// refused, and nothing is written past `out`; on an error `out`'s
    /// contents are unspecified. As [`Connection::call`]
    /// otherwise, but for the cache's bookkeeping: a read changes nothing
    /// the cache keeps.
    pub(crate) fn call_read(&self, request: &Request, out: &mut [u8]) -> Result<usize> {
        let answer = self.call_uncounted_into(request, true, Some(&mut *out));
        // As in `call`: a posted release redirected meanwhile takes effect
        // before this call returns.
        let resent = self.resend_redirected_posts(true);
        let answer = match (answer, resent) {
            (Ok(_), Err(e)) => Err(e),
            (answer, _) => answer,
        };
        match answer? {
            Answer::Read(n) => Ok(n),
            // A `Data` answer that could not go straight into `out`: one
            // longer than asked for, or a server's bytes that did not
            // decode as a `Data` answer before the whole message did.
            Answer::Response(Response::Data(bytes)) if bytes.len() <= out.len() => {
                out[..bytes.len()].copy_from_slice(&bytes);
                Ok(bytes.len())
            }
            Answer::Response(Response::Data(bytes)) => Err(ClientError::Protocol(format!(
                "a read of at most {} bytes answered with {}",
                out.len(),
                bytes.len()
            ))),
            Answer::Response(other) => Err(crate::unexpected("read", &other)),
        }
    }

    /// As [`Connection::call`], without the cache's bookkeeping; waits
    /// for posts another thread is sending again after a redirect only
    /// with `wait_resends` (false for a post sent again itself, whose
    /// sender must not wait for itself).
    fn call_uncounted(&self, request: &Request, wait_resends: bool) -> Result<Response> {
        match self.call_uncounted_into(request, wait_resends, None)? {
            Answer::Response(response) => Ok(response),
            // Only a call with a buffer gets its bytes put there.
            Answer::Read(_) => Err(ClientError::Protocol("a read's bytes with no buffer to take them".into())),
        }
    }

    /// As [`Connection::call_uncounted`], with the bytes of a `Data`
    /// answer put straight into `target` where they fit.
    fn call_uncounted_into(
        &self,
        request: &Request,
        wait_resends: bool,
        mut target: Option<&mut [u8]>,
    ) -> Result<Answer> {
        let namespace = request.changes_namespace();
        let handle = handle_of(request);
        let home = self.home.load(Ordering::Relaxed);
        let mut worker = if namespace {
            self.welcome.primary_worker
        } else {
            handle.and_then(|h| self.handle_workers.lock().get(&h).copied()).unwrap_or(home)
        };
        self.settle_posted(worker, wait_resends)?;
        for redirects in 0..MAX_REDIRECTS {
            if redirects >= REDIRECTS_BEFORE_YIELD {
                std::thread::yield_now();
            }
            match self.round_trip(worker, request, target.as_deref_mut())? {
                Answer::Read(n) => return Ok(Answer::Read(n)),
                Answer::Response(Response::Redirect { worker: to }) => {
                    if to as usize >= self.channels.len() {
                        return Err(ClientError::Protocol(format!("redirect to worker {to}, beyond the layout")));
                    }
                    worker = to;
                    match handle {
                        Some(h) => {
                            self.handle_workers.lock().insert(h, to);
                        }
                        None if !namespace => self.home.store(to, Ordering::Relaxed),
                        None => {}
                    }
                }
                Answer::Response(Response::Error { errno, message }) => {
                    return Err(ClientError::Server { errno, message })
                }
                other => return Ok(other),
            }
        }
        Err(ClientError::Protocol(format!("more than {MAX_REDIRECTS} redirects for one request")))
    }

    /// Forgets where a closed handle's file lived.
    pub(crate) fn forget_handle(&self, handle: u64) {
        self.handle_workers.lock().remove(&handle);
    }

    /// The ring pair of `worker`, unless the server is gone.
    fn live_channel(&self, worker: u32) -> Result<&Mutex<Channel>> {
        if let Some(first) = self.broken.get() {
            return Err(ClientError::Protocol(format!(
                "the connection was dropped after a protocol violation: {first}"
            )));
        }
        if self.gone.load(Ordering::Relaxed) {
            return Err(ClientError::ServerGone);
        }
        self.channels
            .get(worker as usize)
            .ok_or_else(|| ClientError::Protocol(format!("worker {worker} is beyond the layout")))
    }

    /// Sends `request` to `worker` and waits for its answer, the bytes of
    /// a `Data` answer put into `target` where they fit.
    fn round_trip(&self, worker: u32, request: &Request, mut target: Option<&mut [u8]>) -> Result<Answer> {
        let mut channel = self.live_channel(worker)?.lock();
        let id = self.send(worker, &mut channel, request)?;
        loop {
            let into = target.as_deref_mut().map(|t| (id, t));
            if let Some((reply_id, answer)) = self.next_completion_into(worker, &mut channel, into)? {
                if reply_id == id {
                    return Ok(answer);
                }
            }
        }
    }

    /// Sends `request` on `worker`'s ring (its lock held as `channel`),
    /// ringing the worker if it sleeps; returns the request's id.
    fn send(&self, worker: u32, channel: &mut Channel, request: &Request) -> Result<u64> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        channel.record.clear();
        encode_request(id, request, &mut channel.record);
        let rings = self.region.client_rings(worker).map_err(|e| ClientError::Protocol(e.to_string()))?;
        loop {
            match rings.send(&channel.record) {
                Ok(true) => break,
                // Full: the server has not taken earlier requests yet
                // (posted releases, or calls abandoned when the server
                // looked gone). Reading their completions makes room for
                // a back-pressured client.
                Ok(false) => {
                    self.ring_doorbell(worker);
                    if rings.has_completion() {
                        self.next_completion(worker, channel)?;
                    } else {
                        std::thread::yield_now();
                        self.check_alive()?;
                    }
                }
                Err(SendError::TooLarge { length, max }) => {
                    return Err(ClientError::Invalid(format!(
                        "a request of {length} bytes; the ring takes at most {max} (use a buffer for bulk data)"
                    )))
                }
                Err(SendError::Violation(v)) => return Err(self.violation(v.to_string())),
            }
        }
        if rings.server_sleeping() {
            self.ring_doorbell(worker);
        }
        Ok(id)
    }

    /// Waits for the next completion on `worker`'s ring (its lock held as
    /// `channel`) and returns it, or `None` when it was the answer to a
    /// posted release (recorded here) or to a call abandoned when its
    /// thread saw the server gone (nobody waits for it).
    fn next_completion(&self, worker: u32, channel: &mut Channel) -> Result<Option<(u64, Response)>> {
        match self.next_completion_into(worker, channel, None)? {
            Some((reply_id, Answer::Response(response))) => Ok(Some((reply_id, response))),
            // Only a wait with a buffer gets bytes put there.
            Some((_, Answer::Read(_))) => {
                Err(ClientError::Protocol("a read's bytes with no buffer to take them".into()))
            }
            None => Ok(None),
        }
    }

    /// As [`Connection::next_completion`]; with `target`, a request id and
    /// a buffer, the bytes of a well-formed `Data` answer to that request
    /// that fit the buffer go straight from the ring into it
    /// (`Answer::Read`), their crc32c checked over what was copied.
    fn next_completion_into(
        &self,
        worker: u32,
        channel: &mut Channel,
        mut target: Option<(u64, &mut [u8])>,
    ) -> Result<Option<(u64, Answer)>> {
        let rings = self.region.client_rings(worker).map_err(|e| ClientError::Protocol(e.to_string()))?;
        loop {
            let received = match &mut target {
                Some((id, into)) => {
                    let id = *id;
                    rings.receive_split(&mut channel.reply, DATA_PREFIX_BYTES, into, |prefix, length| {
                        data_answer(prefix, length).is_some_and(|(reply_id, _)| reply_id == id)
                    })
                }
                None => {
                    rings.receive(&mut channel.reply).map(|got| if got { Received::Whole } else { Received::Nothing })
                }
            }
            .map_err(|e| self.violation(e.to_string()))?;
            if let (Received::Split(n), Some((id, _))) = (received, &target) {
                return Ok(Some((*id, Answer::Read(n))));
            }
            if received != Received::Nothing {
                let (reply_id, response) =
                    decode_response(&channel.reply).map_err(|e| self.violation(format!("a completion: {e}")))?;
                if channel.posted.front().is_some_and(|(posted_id, _)| *posted_id == reply_id) {
                    if let Some((_, posted)) = channel.posted.pop_front() {
                        channel.posted_bytes = channel.posted_bytes.saturating_sub(posted.bytes());
                        self.posted_answered(posted, response);
                    }
                    return Ok(None);
                }
                return Ok(Some((reply_id, Answer::Response(response))));
            }
            match rings.wait_for_completion(&mut channel.spinner, WAIT_SLICE) {
                Ok(Wake::TimedOut) | Err(_) => self.check_alive()?,
                Ok(Wake::Ready | Wake::Woken) => {}
            }
        }
    }

    fn ring_doorbell(&self, worker: u32) {
        // The worker index was checked against the layout, which the
        // doorbell was sized for; a failed wake-up only delays the worker
        // until its timed sleep ends.
        let _ = self.doorbell.ring(worker);
    }

    /// Whether the server shut its end of the socket (seen even with
    /// unread bytes before the end).
    fn peer_hung_up(&self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let mut fds = [PollFd::new(&self.stream, PollFlags::RDHUP)];
        let now = Timespec { tv_sec: 0, tv_nsec: 0 };
        match poll(&mut fds, Some(&now)) {
            Ok(n) if n > 0 => fds[0].revents().intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR),
            _ => false,
        }
    }

    /// Sends the attach request `build(tag, received)` makes, and returns
    /// its answer with the descriptor the server sent for it (none for an
    /// answer that is not `HeapAttached`). One attach of this connection
    /// at a time, reading the socket meanwhile: `received`, the frames
    /// taken so far, is then exact when the server reads it, so the
    /// server's bound on frames in flight never counts this client's own
    /// attaches waiting their turn. The server sends a frame before its
    /// answer, so once the answer came the frame is in the socket; a frame
    /// of an abandoned attach read on the way is kept by tag.
    pub(crate) fn attach(&self, build: impl FnOnce(u64, u64) -> Request) -> Result<(Response, Option<OwnedFd>)> {
        let mut stash = self.descriptors.lock();
        let tag = self.next_tag.fetch_add(1, Ordering::Relaxed);
        let received = self.descriptors_received.load(Ordering::Acquire);
        let response = self.call(&build(tag, received))?;
        if !matches!(response, Response::HeapAttached { .. }) {
            return Ok((response, None));
        }
        loop {
            if let Some(fd) = stash.remove(&tag) {
                return Ok((response, Some(fd)));
            }
            match receive_descriptor(&self.stream, DESCRIPTOR_WAIT) {
                Ok((got, fd)) => {
                    self.descriptors_received.fetch_add(1, Ordering::AcqRel);
                    stash.insert(got, fd);
                }
                Err(DescriptorError::Closed) => {
                    self.gone.store(true, Ordering::Relaxed);
                    return Err(ClientError::ServerGone);
                }
                Err(e) => return Err(ClientError::Protocol(format!("the descriptor of attach {tag}: {e}"))),
            }
        }
    }

    /// Records a protocol violation on a ring and drops the connection:
    /// the socket is shut, so the server reclaims this client's rings,
    /// handles and leases, and every later call fails with the first
    /// violation instead of reading a ring whose state is unknown.
    fn violation(&self, what: String) -> ClientError {
        let _ = self.broken.set(what.clone());
        // Shut already (a second violation) or the peer gone: either way
        // nothing more is to be done with the socket.
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        ClientError::Protocol(what)
    }

    /// Fails with `ServerGone` once the server's end of the socket is closed.
    pub(crate) fn check_alive(&self) -> Result<()> {
        let mut byte = [0u8; 1];
        match rustix::net::recv(&self.stream, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT) {
            Ok((0, _)) => {
                self.gone.store(true, Ordering::Relaxed);
                Err(ClientError::ServerGone)
            }
            // Descriptor frames waiting: the peer may still have hung up
            // behind them.
            Ok(_) if self.peer_hung_up() => {
                self.gone.store(true, Ordering::Relaxed);
                Err(ClientError::ServerGone)
            }
            Ok(_) => Ok(()),
            Err(e) if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::INTR => Ok(()),
            Err(_) => {
                self.gone.store(true, Ordering::Relaxed);
                Err(ClientError::ServerGone)
            }
        }
    }
}

/// Room left in a ring's largest record for a message's data after its
/// header and other fields (a name or key, offsets).
const FIELD_ROOM: usize = 16 << 10;

/// Data bytes that fit a message in a ring of `ring_bytes`: a record less
/// room for the other fields, and in a ring too small for that room a
/// quarter of a record (a key or path longer than the rest of the record
/// is refused before it is sent).
fn inline_limit(ring_bytes: u32) -> usize {
    let record = larder_protocol::ring::max_record(ring_bytes) as usize;
    record.saturating_sub(FIELD_ROOM).max(record / 4).min(larder_protocol::codec::MAX_DATA_BYTES)
}

/// The handle a request works on, if it is handle-based (it goes to the
/// worker that owns the handle's file).
fn handle_of(request: &Request) -> Option<u64> {
    match request {
        Request::Read { handle, .. }
        | Request::ReadBuffer { handle, .. }
        | Request::Write { handle, .. }
        | Request::Fsync { handle }
        | Request::Fallocate { handle, .. }
        | Request::Release { handle }
        | Request::KvWriterFinish { handle } => Some(*handle),
        Request::SetAttributes { handle, .. } => *handle,
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::inline_limit;

    #[test]
    fn inline_data_leaves_room_in_a_record() {
        assert_eq!(inline_limit(256 << 10), (64 << 10) - (16 << 10), "the default rings");
        assert_eq!(inline_limit(4096), 256, "the smallest: a quarter of a 1 KiB record");
        assert_eq!(inline_limit(16 << 20), larder_protocol::codec::MAX_DATA_BYTES, "at most what a message carries");
        for shift in 12..=24 {
            assert!(inline_limit(1 << shift) < larder_protocol::ring::max_record(1 << shift) as usize);
        }
    }
}
