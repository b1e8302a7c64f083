//! A worker: serves its ring in every client's region.
//!
//! Each round takes up to `BATCH` requests from each client's request ring
//! (so one busy client cannot starve the others), executes them, and
//! writes each completion to the client's completion ring, or, when that
//! is full, to the client's backlog for this worker. A client whose
//! backlog reaches its in-flight limit is not read from until it reaps
//! completions: the server never waits for a client. After as many empty
//! rounds as its spinner allows (`larder_protocol::backoff`: it adapts to
//! whether requests came while it spun) the worker sleeps on its doorbell
//! (timed), having set the sleeping flag in every ring it serves so that
//! clients ring it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use larder_protocol::backoff::Spinner;
use larder_protocol::codec::{decode_request, encode_response, encode_response_split};
use larder_protocol::error::SendError;
use larder_protocol::message::{Request, Response};
use larder_protocol::region::ServerRings;

use crate::clients::ConnectedClient;
use crate::deferred::Deferred;
use crate::server::Shared;

/// Requests taken from one client's ring per round.
const BATCH: usize = 16;

/// Most empty rounds before a worker sleeps (each a pass over every
/// ring); its spinner adapts below this.
const MAX_SPIN_ROUNDS: u32 = 2_000;

/// Longest sleep: the worker looks at the registry and the stop flag at
/// least this often.
const SLEEP: Duration = Duration::from_millis(100);

/// Per-worker counters the load manager and `stats` read.
#[derive(Default)]
pub(crate) struct WorkerStats {
    /// Requests executed.
    pub(crate) requests: std::sync::atomic::AtomicU64,
    /// Nanoseconds spent executing requests: without a load manager an
    /// estimate, quick requests being timed one in [`QUICK_SAMPLE`]
    /// (`sample_weight`).
    pub(crate) busy_nanos: std::sync::atomic::AtomicU64,
    /// Requests redirected to another worker.
    pub(crate) redirects: std::sync::atomic::AtomicU64,
    /// State of the generator that picks which quick requests are timed
    /// (`sample_weight`); only the worker's own thread moves it.
    sampler: std::sync::atomic::AtomicU64,
}

/// One quick request in this many is timed, at random, its time counted
/// this many times over.
pub(crate) const QUICK_SAMPLE: u64 = 8;

impl WorkerStats {
    /// Counts a request executed in `nanos`. Only the worker's own thread
    /// writes its counters (others read them), so a load and a store
    /// do, without a locked add.
    fn count(&self, nanos: u64) {
        let requests = self.requests.load(Ordering::Relaxed);
        self.requests.store(requests + 1, Ordering::Relaxed);
        let busy = self.busy_nanos.load(Ordering::Relaxed);
        self.busy_nanos.store(busy + nanos, Ordering::Relaxed);
    }

    /// How many times the next request's time counts: 1 for one not to
    /// be sampled (one that may take long, or any while a load manager
    /// runs); for one to be sampled (a quick one, [`quick`], taking a few
    /// µs), [`QUICK_SAMPLE`] for one in that many picked at random, else 0
    /// (not timed). Two clock reads cost about a tenth of a quick request
    /// on a VM; sampled, busy time stays an unbiased estimate, and the
    /// random pick keeps a client that alternates two kinds of request
    /// (an open and a release) from having only one kind timed.
    pub(crate) fn sample_weight(&self, sampled: bool) -> u64 {
        if !sampled {
            return 1;
        }
        // splitmix64: any state, zero included, moves on to a fresh value.
        let state = self.sampler.load(Ordering::Relaxed).wrapping_add(0x9E37_79B9_7F4A_7C15);
        self.sampler.store(state, Ordering::Relaxed);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        if z.is_multiple_of(QUICK_SAMPLE) {
            QUICK_SAMPLE
        } else {
            0
        }
    }
}

/// Runs worker `worker` until the server stops.
pub(crate) fn run(shared: Arc<Shared>, worker: u32) {
    let mut clients: Vec<Arc<ConnectedClient>> = Vec::new();
    let mut generation = u64::MAX;
    let mut spinner = Spinner::adaptive(MAX_SPIN_ROUNDS);
    // Empty rounds so far, and how many the spinner allows this time.
    let mut idle_rounds = 0u32;
    let mut spin_limit = 0u32;
    let mut record = Vec::new();
    let mut reply = Vec::new();
    // Requests waiting for the leases they revoke to be settled.
    let mut deferred: Vec<Deferred> = Vec::new();
    loop {
        let stopping = shared.stopping.load(Ordering::Acquire);
        if shared.registry.generation() != generation {
            generation = shared.registry.generation();
            clients = shared.registry.snapshot();
        }
        // Files with a request deferred here are not handed over until it
        // has run, so no other worker runs that file's next request first.
        // Both looked at only when there is something to do: an idle round
        // is what a request waits on before it is seen.
        let mut served = 0;
        if shared.placement.has_moves(worker) {
            let held: Vec<u64> = deferred.iter().filter_map(|d| deferred_file(shared.as_ref(), d)).collect();
            served += shared.placement.hand_over(worker, &held);
        }
        if !deferred.is_empty() {
            served += crate::deferred::resume(&shared, worker, &mut deferred, stopping, &mut reply);
        }
        // Clients with requests waiting as the round starts: the load
        // manager's measure of this worker's queues (counted only for it).
        let pending = if shared.managed { clients.iter().filter(|c| servable(c, worker)).count() as u64 } else { 0 };
        let mut requests = 0;
        for client in &clients {
            if client.is_closed() {
                continue;
            }
            requests += serve_client(&shared, worker, client, stopping, &mut deferred, &mut record, &mut reply);
        }
        if shared.managed {
            shared.load.add_round(worker, requests as u64, pending);
        }
        served += requests;
        if stopping && served == 0 {
            return;
        }
        if served > 0 {
            if idle_rounds > 0 {
                spinner.finish(idle_rounds, true);
                idle_rounds = 0;
            }
            continue;
        }
        if idle_rounds == 0 {
            spin_limit = spinner.start();
        }
        // A parked worker takes no new work: it sleeps at once, woken only
        // by a client that still sends to it (and is redirected).
        if idle_rounds < spin_limit && shared.placement.is_active(worker) {
            idle_rounds += 1;
            std::hint::spin_loop();
            continue;
        }
        spinner.finish(idle_rounds, false);
        idle_rounds = 0;
        sleep(&shared, worker, &clients, crate::deferred::patience(&deferred, SLEEP));
    }
}

/// Whether `client` has requests waiting that worker `worker` would take
/// now: not one back-pressured (whose completions wait for it to reap).
fn servable(client: &ConnectedClient, worker: u32) -> bool {
    !client.is_closed()
        && client.region.server_rings(worker).is_ok_and(|r| r.has_request())
        && !back_pressured(client, worker)
}

/// Whether `client`'s completions waiting on worker `worker` reached its
/// in-flight limit.
fn back_pressured(client: &ConnectedClient, worker: u32) -> bool {
    client.backlog[worker as usize].lock().len() >= client.session.limits().max_in_flight as usize
}

/// How long a worker with completions waiting for room sleeps before it
/// looks whether their clients reaped (clients do not ring for that).
const BACKLOG_SLEEP: Duration = Duration::from_millis(1);

/// The open file a deferred request is on, if any.
fn deferred_file(shared: &Shared, deferred: &Deferred) -> Option<u64> {
    shared.route(&deferred.client, &deferred.request).1
}

/// Sleeps until a client rings, or `timeout` passes.
fn sleep(shared: &Shared, worker: u32, clients: &[Arc<ConnectedClient>], timeout: Duration) {
    let Ok(seen) = shared.doorbell.seen(worker) else { return };
    let live: Vec<&Arc<ConnectedClient>> = clients.iter().filter(|c| !c.is_closed()).collect();
    let rings: Vec<ServerRings<'_>> = live.iter().filter_map(|c| c.region.server_rings(worker).ok()).collect();
    for r in &rings {
        r.set_sleeping(true);
    }
    // A request published before the flag was set was not rung for: look
    // once more before sleeping. A back-pressured client's requests do
    // not count: they wait for it, not for the worker.
    if !live.iter().any(|c| servable(c, worker))
        && !shared.stopping.load(Ordering::Acquire)
        && !shared.placement.has_moves(worker)
    {
        let backlog = live.iter().any(|c| !c.backlog[worker as usize].lock().is_empty());
        // A failed wait (it cannot fail on a mapped doorbell) only means
        // the worker looks at its rings again at once.
        let _ = shared.doorbell.wait(worker, seen, if backlog { timeout.min(BACKLOG_SLEEP) } else { timeout });
    }
    for r in &rings {
        r.set_sleeping(false);
    }
}

/// Serves one client's ring for one round; returns how many requests it
/// took. The client is woken (if it sleeps) once for the completions of
/// the round, not once per completion: a client that posted a request
/// (a release, a write) and then sent the call it waits for would
/// otherwise be woken for the posted one's answer, find it is not the
/// one it waits for, and sleep again. A request that may take long
/// (`quick` says which do not) is preceded by the wake-up for what was
/// answered before it, so no answer waits behind it.
fn serve_client(
    shared: &Shared,
    worker: u32,
    client: &Arc<ConnectedClient>,
    stopping: bool,
    deferred: &mut Vec<Deferred>,
    record: &mut Vec<u8>,
    reply: &mut Vec<u8>,
) -> usize {
    let Ok(rings) = client.region.server_rings(worker) else { return 0 };
    let backlog = &client.backlog[worker as usize];
    // Whether completions wait in the backlog: only then can the client
    // be back-pressured, and only a delivery that queues makes it so.
    let mut waiting = match drain_backlog(rings, backlog) {
        Ok(left) => left > 0,
        Err(why) => {
            client.close(&why);
            return 0;
        }
    };
    let mut taken = 0;
    // Completions written this round that the client was not woken for.
    let mut unwoken = false;
    while taken < BATCH {
        if waiting && back_pressured(client, worker) {
            // Back-pressure: it reaps completions first.
            break;
        }
        if deferred.iter().any(|d| Arc::ptr_eq(&d.client, client)) {
            // Its requests on this ring stay in order behind the one
            // waiting for a revocation.
            break;
        }
        match rings.receive(record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(violation) => {
                client.close(&format!("broke the ring protocol: {violation}"));
                return taken;
            }
        }
        taken += 1;
        let (id, request) = match decode_request(record) {
            Ok(decoded) => decoded,
            Err(e) => {
                client.close(&format!("sent a request that does not decode: {e}"));
                return taken;
            }
        };
        if unwoken && !quick(&request) {
            wake(rings);
            unwoken = false;
        }
        let response = if stopping {
            Response::Error { errno: libc::ESHUTDOWN, message: "the server is shutting down".into() }
        } else {
            match answer(shared, worker, client, id, request, deferred) {
                Ok(Some(response)) => response,
                Ok(None) => break,
                Err(why) => {
                    client.close(&why);
                    return taken;
                }
            }
        };
        let delivery = deliver(client, worker, rings, id, &response, reply);
        if let Response::Data(bytes) = response {
            // Encoded: its buffer serves the next read.
            crate::read_buffer::give_back(bytes);
        }
        match delivery {
            Delivery::Sent => unwoken = true,
            Delivery::Queued => waiting = true,
            Delivery::Dropped => return taken,
        }
    }
    if unwoken {
        wake(rings);
    }
    taken
}

/// Wakes the client if it sleeps on its completion ring. A failed
/// wake-up leaves it to its timed wait.
pub(crate) fn wake(rings: ServerRings<'_>) {
    let _ = rings.wake_client();
}

/// Requests that wait for nothing in the engine (no fsync, sync or
/// batch; at most 64 KiB of bytes): a completion's wake-up may wait
/// behind them until the end of the round.
fn quick(request: &Request) -> bool {
    const QUICK_BYTES: u64 = 64 << 10;
    match request {
        Request::Ping
        | Request::Lookup { .. }
        | Request::GetAttributes { .. }
        | Request::Resolve { .. }
        | Request::Readlink { .. }
        | Request::Access { .. }
        | Request::Open { .. }
        | Request::Release { .. }
        | Request::ReleaseDirectory { .. }
        | Request::Lease { .. } => true,
        Request::OpenPath { flags, read, .. } => flags & libc::O_TRUNC == 0 && u64::from(*read) <= QUICK_BYTES,
        Request::Read { length, .. } => u64::from(*length) <= QUICK_BYTES,
        Request::ReadBuffer { into, .. } => u64::from(into.length) <= QUICK_BYTES,
        Request::Write { data, .. } => match data {
            larder_protocol::message::Payload::Inline(bytes) => bytes.len() as u64 <= QUICK_BYTES,
            larder_protocol::message::Payload::Buffer(slice) => u64::from(slice.length) <= QUICK_BYTES,
        },
        _ => false,
    }
}

/// What became of a completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Written to the completion ring.
    Sent,
    /// Queued in the client's backlog: its ring had no room, or older
    /// completions wait before it.
    Queued,
    /// The client broke the completion ring and is closed.
    Dropped,
}

/// Sends the completion `response` to request `id`, or queues it in the
/// client's backlog when the ring is full (or the backlog holds older
/// ones); closes a client that broke the completion ring. Wakes nobody:
/// after a `Sent`, the caller wakes the client ([`wake`]).
pub(crate) fn deliver(
    client: &ConnectedClient,
    worker: u32,
    rings: ServerRings<'_>,
    id: u64,
    response: &Response,
    reply: &mut Vec<u8>,
) -> Delivery {
    let backlog = &client.backlog[worker as usize];
    // A read's bytes stay in the read's buffer: the ring takes them from
    // there, after the rest of the encoding in `reply`.
    let data = encode_within(id, response, rings.max_record(), reply);
    let sent = {
        let mut waiting = backlog.lock();
        if waiting.is_empty() {
            match rings.send_parts(&[reply, data]) {
                Ok(true) => true,
                Ok(false) => {
                    reply.extend_from_slice(data);
                    waiting.push_back(std::mem::take(reply));
                    false
                }
                Err(SendError::TooLarge { .. }) => unreachable_too_large(),
                Err(SendError::Violation(violation)) => {
                    drop(waiting);
                    client.close(&format!("broke the completion ring: {violation}"));
                    return Delivery::Dropped;
                }
            }
        } else {
            reply.extend_from_slice(data);
            waiting.push_back(std::mem::take(reply));
            false
        }
    };
    if sent {
        Delivery::Sent
    } else {
        Delivery::Queued
    }
}

/// Executes one request, or redirects it to the worker that must serve
/// it, or defers it (`None`) until the leases it revokes are settled. An
/// `Err` is a protocol violation: the client is dropped.
fn answer(
    shared: &Shared,
    worker: u32,
    client: &Arc<ConnectedClient>,
    id: u64,
    request: Request,
    deferred: &mut Vec<Deferred>,
) -> Result<Option<Response>, String> {
    let (target, file) = shared.route(client, &request);
    if target != worker {
        shared.worker_stats[worker as usize].redirects.fetch_add(1, Ordering::Relaxed);
        return Ok(Some(Response::Redirect { worker: target }));
    }
    let mut revocation = crate::execute::revocation_for(&shared.state, &client.session, &request);
    if let Some(waiting) = revocation.take_if(|r| !r.settled()) {
        deferred.push(Deferred { client: client.clone(), id, request, revocation: waiting });
        return Ok(None);
    }
    let response = execute_now(shared, worker, client, request, file);
    drop(revocation);
    response.map(Some)
}

/// Executes a request that this worker serves and whose revocation, if
/// any, is settled; keeps the counters, the load and the placement of
/// open files in step. `file` is the open file it is on, as routed
/// (`Shared::route`).
pub(crate) fn execute_now(
    shared: &Shared,
    worker: u32,
    client: &ConnectedClient,
    request: Request,
    file: Option<u64>,
) -> Result<Response, String> {
    let opened_file = matches!(request, Request::Open { .. } | Request::OpenPath { .. } | Request::Create { .. });
    let released = match request {
        Request::Release { handle } => Some(handle),
        _ => None,
    };
    let opened_ino = match &request {
        Request::Open { ino, .. } => Some(*ino),
        _ => None,
    };
    let stats_asked = matches!(request, Request::Stats);
    // The load manager weighs each client and file by its time in a 5 ms
    // window and moves the heaviest: a sample's 0 or 8 times would make a
    // quick client unmovable in one window and eight times too heavy in
    // the next, so with it every request is timed.
    let sampled = quick(&request) && !shared.managed;
    let weight = shared.worker_stats[worker as usize].sample_weight(sampled);
    let started = (weight > 0).then(Instant::now);
    let memory = crate::region_memory::RegionMemory::new(&client.region);
    let mut result = crate::execute::execute_settled(&shared.state, &client.session, request, &memory);
    let nanos = started.map_or(0, |started| (started.elapsed().as_nanos() as u64).saturating_mul(weight));
    if let (true, Ok(Response::Text(text))) = (stats_asked, &mut result) {
        text.push_str(&crate::server_stats::section(shared));
    }
    shared.worker_stats[worker as usize].count(nanos);
    if shared.managed {
        shared.load.add(worker, client.id, file, nanos);
    }
    let response = result.map_err(|violation| format!("named memory outside its data area: {violation}"))?;
    if let Some(hook) = &shared.before_answer {
        (hook.0)();
    }
    // Keep the placement of open files in step with the client's handles.
    if opened_file {
        match (&response, opened_ino) {
            (Response::Handle(handle), Some(ino)) => client.opened(*handle, ino),
            (Response::Created { attributes, handle, .. }, _) => client.opened(*handle, attributes.ino),
            (Response::PathOpened { attributes, handle, .. }, _) => client.opened(*handle, attributes.ino),
            _ => {}
        }
    }
    if let Some(handle) = released {
        // A release ends the handle whatever its answer.
        client.closed(handle);
    }
    Ok(response)
}

/// Encodes `response` into `out` as [`encode_response_split`] does: a
/// `Data` answer's bytes are returned, not copied, and go after `out`.
/// One too large for a ring record is replaced by an EFBIG error saying
/// what to do instead.
fn encode_within<'r>(id: u64, response: &'r Response, max_record: u32, out: &mut Vec<u8>) -> &'r [u8] {
    out.clear();
    let data = encode_response_split(id, response, out);
    let length = out.len().saturating_add(data.len());
    if length <= max_record as usize {
        return data;
    }
    out.clear();
    let refusal = Response::Error {
        errno: libc::EFBIG,
        message: format!(
            "an answer of {length} bytes does not fit a ring record ({max_record} bytes): \
             read into a buffer, ask for fewer entries, or use a streamed reader"
        ),
    };
    encode_response(id, &refusal, out);
    &[]
}

/// `encode_within` keeps every completion within the ring's largest
/// record, so the ring never refuses one as too large.
fn unreachable_too_large() -> bool {
    debug_assert!(false, "a completion was encoded larger than the ring's largest record");
    false
}

/// Writes the completions waiting for room, in order, while there is room;
/// returns how many still wait.
fn drain_backlog(
    rings: ServerRings<'_>,
    backlog: &parking_lot::Mutex<std::collections::VecDeque<Vec<u8>>>,
) -> Result<usize, String> {
    let mut waiting = backlog.lock();
    let mut sent = false;
    while let Some(front) = waiting.front() {
        match rings.send(front) {
            Ok(true) => {
                waiting.pop_front();
                sent = true;
            }
            Ok(false) => break,
            Err(SendError::TooLarge { .. }) => {
                waiting.pop_front();
                unreachable_too_large();
            }
            Err(SendError::Violation(violation)) => return Err(format!("broke the completion ring: {violation}")),
        }
    }
    let left = waiting.len();
    drop(waiting);
    if sent {
        let _ = rings.wake_client();
    }
    Ok(left)
}

#[cfg(test)]
mod tests {
    use super::{WorkerStats, QUICK_SAMPLE};

    #[test]
    fn requests_that_may_take_long_are_always_timed_once() {
        let stats = WorkerStats::default();
        assert!((0..1_000).all(|_| stats.sample_weight(false) == 1));
    }

    /// Quick requests: about one in `QUICK_SAMPLE` timed, each counted
    /// `QUICK_SAMPLE` times, so the weights add up to about the count; and
    /// of requests alternating two kinds, both kinds are timed about
    /// equally (a fixed one-in-8 would time only one of them).
    #[test]
    fn quick_requests_are_sampled_without_bias_whatever_their_order() {
        let stats = WorkerStats::default();
        let n = 80_000u64;
        let weights: Vec<u64> = (0..n).map(|_| stats.sample_weight(true)).collect();
        assert!(weights.iter().all(|&w| w == 0 || w == QUICK_SAMPLE));
        let total: u64 = weights.iter().sum();
        assert!(total.abs_diff(n) < n / 20, "weights add up to {total} for {n} requests");
        let even: u64 = weights.iter().step_by(2).sum();
        let odd: u64 = weights.iter().skip(1).step_by(2).sum();
        assert!(even.abs_diff(odd) < n / 10, "alternate requests weighted {even} and {odd}");
        let timed = weights.iter().filter(|&&w| w > 0).count() as u64;
        assert!(timed < n / 4, "{timed} of {n} quick requests timed");
    }
}
