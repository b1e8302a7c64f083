//! Clients and servers that go away: a client gone with files, an
//! unlinked-but-open file, KV writers and readers and a directory open is
//! reclaimed whole; a server that stops makes every client call fail
//! (ESHUTDOWN or ServerGone) within a second, never hang, with everything
//! acknowledged durable; a new server on the store has a new epoch and
//! clients reconnect.
#![allow(clippy::unwrap_used)]

mod serving;

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use larder_client::{Client, ClientError, Durability};
use larder_protocol::message::{Payload, Request as R, Response};
use serving::{limits, pattern, serve, serve_with, PATIENCE};

const ROOT: u64 = 1;

fn handle(response: Response) -> u64 {
    match response {
        Response::Handle(h) | Response::Created { handle: h, .. } | Response::Opened { handle: h, .. } => h,
        other => panic!("expected a handle, got {other:?}"),
    }
}

#[test]
fn a_gone_client_is_reclaimed_whole() {
    let mut t = serve_with(limits(2..=2));
    let good = t.client();
    good.create_bucket("b").unwrap();
    good.put("b", "read", b"being read", Durability::Buffered).unwrap();
    let raw = t.raw();
    // A file written and left open.
    let kept = handle(raw.call_owner(&R::Create {
        parent: ROOT,
        name: b"kept".to_vec(),
        mode: 0o644,
        flags: libc::O_RDWR,
        lease: false,
    }));
    let write = R::Write { handle: kept, offset: 0, data: Payload::Inline(b"kept".to_vec()) };
    assert_eq!(raw.call_owner(&write), Response::Length(4));
    // A file unlinked while open: an orphan until released.
    let gone = handle(raw.call_owner(&R::Create {
        parent: ROOT,
        name: b"gone".to_vec(),
        mode: 0o644,
        flags: libc::O_RDWR,
        lease: false,
    }));
    let write = R::Write { handle: gone, offset: 0, data: Payload::Inline(pattern(40_000, 1)) };
    assert_eq!(raw.call_owner(&write), Response::Length(40_000));
    assert_eq!(raw.call_owner(&R::Unlink { parent: ROOT, name: b"gone".to_vec() }), Response::Done);
    // An unfinished KV writer, a reader and a directory handle.
    let writer = handle(raw.call_owner(&R::KvWriterOpen {
        bucket: b"b".to_vec(),
        key: b"unfinished".to_vec(),
        durability: Durability::Buffered,
    }));
    let write = R::Write { handle: writer, offset: 0, data: Payload::Inline(pattern(50_000, 2)) };
    assert_eq!(raw.call_owner(&write), Response::Length(50_000));
    handle(raw.call_owner(&R::KvReaderOpen { bucket: b"b".to_vec(), key: b"read".to_vec() }));
    handle(raw.call_owner(&R::OpenDirectory { ino: ROOT }));
    // And a request left in its ring.
    let id = raw.id();
    raw.send_as(0, id, &R::Ping);
    assert!(t.orphans() >= 2, "the unlinked file and the writer's value: {}", t.orphans());
    assert_eq!(t.server().clients(), 2);

    drop(raw);
    t.wait_for_clients(1);
    assert_eq!(t.server().clients(), 1);
    assert_eq!(t.orphans(), 0, "the unlinked file and the unfinished value are freed");
    assert_eq!(good.get("b", "unfinished").unwrap(), None);
    assert_eq!(good.read("/kept").unwrap(), b"kept");
    assert!(good.metadata("/gone").is_err());
    drop(good);
    t.wait_for_clients(0);
    t.assert_fsck_clean();
}

/// Whether `e` is what a call gets from a server that is stopping or gone.
fn stopped(e: &ClientError) -> bool {
    matches!(e, ClientError::ServerGone) || e.errno() == libc::ESHUTDOWN
}

#[test]
fn a_stopped_server_fails_calls_quickly_and_a_new_one_takes_over() {
    let mut t = serve();
    let c = t.client();
    c.create_bucket("b").unwrap();
    c.put("b", "k", b"before", Durability::Buffered).unwrap();
    let file = c.create("/f").unwrap();
    let epoch = c.epoch();
    assert_eq!(c.ping().unwrap(), epoch);
    t.shutdown();

    let started = Instant::now();
    assert!(matches!(c.ping(), Err(ClientError::ServerGone)));
    assert!(started.elapsed() < Duration::from_secs(1), "noticed after {:?}", started.elapsed());
    assert!(matches!(file.write_at(b"x", 0), Err(ClientError::ServerGone)));
    assert!(matches!(c.get("b", "k"), Err(ClientError::ServerGone)));
    drop(file);

    // A new server on the same store: a new epoch, the data, and the
    // old client stays gone while a new one connects.
    t.restart(limits(1..=1));
    let again = Client::connect(&t.store).unwrap();
    assert_ne!(again.epoch(), epoch);
    assert_eq!(again.ping().unwrap(), again.epoch());
    assert_eq!(again.get("b", "k").unwrap().as_deref(), Some(&b"before"[..]));
    assert!(matches!(c.ping(), Err(ClientError::ServerGone)), "an old connection does not come back");
}

#[test]
fn calls_during_shutdown_end_with_eshutdown_or_server_gone_and_acknowledged_puts_last() {
    let mut t = serve_with(limits(2..=2));
    let setup = t.client();
    setup.create_bucket("b").unwrap();
    drop(setup);
    const THREADS: usize = 4;
    let started = Arc::new(Barrier::new(THREADS + 1));
    let (results, outcomes) = mpsc::channel();
    for thread in 0..THREADS {
        let c = t.client();
        let (started, results) = (started.clone(), results.clone());
        std::thread::spawn(move || {
            let mut acknowledged = 0u32;
            let error = loop {
                let key = format!("t{thread}/{acknowledged}");
                match c.put("b", &key, &value(acknowledged), Durability::Buffered) {
                    Ok(()) => acknowledged += 1,
                    Err(e) => break e,
                }
                if acknowledged == 20 {
                    started.wait();
                }
            };
            let _ = results.send((thread, acknowledged, error));
        });
    }
    started.wait();
    t.shutdown();
    let mut acknowledged = [0u32; THREADS];
    for _ in 0..THREADS {
        let (thread, count, error) = outcomes.recv_timeout(PATIENCE).expect("a call hung after the shutdown");
        assert!(stopped(&error), "thread {thread}: {error}");
        assert!(count >= 20);
        acknowledged[thread] = count;
    }
    // Every acknowledged put is in the store, synced at shutdown.
    t.restart(limits(1..=1));
    let c = t.client();
    for (thread, &count) in acknowledged.iter().enumerate() {
        for n in 0..count {
            let key = format!("t{thread}/{n}");
            assert_eq!(c.get("b", &key).unwrap(), Some(value(n)), "{key}");
        }
    }
    drop(c);
    t.wait_for_clients(0);
    t.assert_fsck_clean();
}

/// The value of the `n`th put of a thread.
fn value(n: u32) -> Vec<u8> {
    pattern(100 + (n as usize % 5000), u64::from(n))
}

#[test]
fn a_client_waiting_when_the_server_is_dropped_gets_server_gone() {
    let t = serve();
    let c = t.client();
    let waiting = c.clone();
    let (done, outcome) = mpsc::channel();
    // Calls in a loop on one thread while the server is dropped on this
    // one: each ends, the last with an error.
    std::thread::spawn(move || {
        let error = loop {
            if let Err(e) = waiting.ping() {
                break e;
            }
        };
        let _ = done.send(error);
    });
    assert_eq!(c.ping().unwrap(), c.epoch());
    drop(t);
    let error = outcome.recv_timeout(PATIENCE).expect("a call hung after the server was dropped");
    assert!(stopped(&error), "{error}");
}

#[test]
fn a_shutdown_does_not_wait_for_a_silent_connection() {
    use std::io::Read;
    let t = serve();
    let silent = std::os::unix::net::UnixStream::connect(t.socket()).unwrap();
    // The listener takes connections in order: once a later client is
    // admitted, the silent one's handshake is under way.
    let c = t.client();
    assert_eq!(c.ping().unwrap(), c.epoch());
    let started = Instant::now();
    let stopping = std::thread::spawn(move || {
        let mut t = t;
        t.shutdown();
    });
    // Cut short: hung up at once, not after the 1 s it has to say hello.
    silent.set_read_timeout(Some(Duration::from_millis(900))).unwrap();
    assert_eq!((&silent).read(&mut [0u8; 16]).unwrap(), 0, "hung up");
    let took = started.elapsed();
    assert!(took < Duration::from_millis(900), "hung up after {took:?}");
    stopping.join().unwrap();
}

#[test]
fn clients_past_max_clients_are_refused_until_one_goes() {
    let t = serve_with(larder_server::Limits { max_clients: 2, ..limits(1..=1) });
    let (a, b) = (t.client(), t.client());
    match Client::connect_socket(&t.socket()) {
        Err(ClientError::Handshake {
            source: larder_protocol::handshake::HandshakeError::Refused { errno, .. },
            ..
        }) => {
            assert_eq!(errno, libc::EAGAIN)
        }
        Err(other) => panic!("refused with {other}"),
        Ok(_) => panic!("a third client was admitted"),
    }
    assert_eq!(a.ping().unwrap(), b.ping().unwrap());
    drop(a);
    t.wait_for_clients(1);
    let c = t.client();
    assert_eq!(c.ping().unwrap(), c.epoch());
}

/// This process's sockets and shared-memory descriptors (server and
/// clients alike), and its threads: what a client's coming and going
/// makes and must give back. (The store's files are left out: it opens
/// containers as data first reaches them.)
fn descriptors_and_threads() -> (usize, usize) {
    let sockets = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .filter(|link| {
            let link = link.to_string_lossy();
            link.starts_with("socket:") || link.starts_with("/memfd:")
        })
        .count();
    (sockets, std::fs::read_dir("/proc/self/task").unwrap().count())
}

/// Names of this process's threads.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("comm")).ok())
        .collect()
}

/// `descriptors_and_threads` once `done` holds: a handshake thread ends a
/// little after its client is admitted or refused (the region's
/// descriptor and its socket go with it), and nothing signals that, so
/// this looks until it has (a leaked thread never gets there).
fn settled(done: impl Fn() -> bool) -> (usize, usize) {
    let deadline = Instant::now() + PATIENCE;
    while !done() && Instant::now() < deadline {
        std::thread::yield_now();
    }
    descriptors_and_threads()
}

#[test]
fn descriptors_and_threads_return_to_their_baseline() {
    let t = serve_with(limits(2..=2));
    let good = t.client();
    serving::assert_served(&good, "warm-up");
    // The warm-up client's handshake thread has sent its welcome, so it
    // carries its name (a thread just spawned may not yet).
    let baseline = settled(|| !thread_names().iter().any(|name| name.starts_with("larder-handshak")));
    for round in 0..30 {
        // A client with a file and a buffer, one that breaks the protocol,
        // and one that never says hello.
        let c = t.client();
        let f = c.create(format!("/f{round}")).unwrap();
        let mut buffer = c.alloc_buffer(100_000).unwrap();
        buffer.as_mut_slice().fill(round as u8);
        f.write_buffer(&buffer, 0).unwrap();
        drop((f, buffer, c));
        let raw = t.raw();
        raw.set_word(raw.request_control(0), 4);
        raw.ring(0);
        assert!(raw.dropped_within(PATIENCE));
        drop(raw);
        drop(std::os::unix::net::UnixStream::connect(t.socket()).unwrap());
    }
    // The listener takes connections in order: once a client that came
    // last is admitted, every silent one before it has its handshake.
    let last = t.client();
    assert_eq!(last.ping().unwrap(), last.epoch());
    drop(last);
    t.wait_for_clients(1);
    assert_eq!(
        settled(|| descriptors_and_threads().1 <= baseline.1),
        baseline,
        "descriptors and threads after 90 clients came and went"
    );
    assert_eq!(good.read("/f29").unwrap(), vec![29u8; 100_000]);
}

#[test]
fn requests_queued_at_a_shutdown_are_all_answered_in_order() {
    let mut t = serve_with(limits(2..=2));
    let raw = t.raw();
    // Published without ringing: the workers find them when the stop
    // wakes them, or earlier on their own.
    let mut ids = Vec::new();
    for _ in 0..200 {
        let id = raw.id();
        let mut record = Vec::new();
        larder_protocol::codec::encode_request(id, &R::Ping, &mut record);
        assert!(raw.region.client_rings(0).unwrap().send(&record).unwrap());
        ids.push(id);
    }
    t.shutdown();
    assert!(raw.dropped_within(PATIENCE), "the stopped server hung up");
    let (mut pongs, mut refused) = (0, 0);
    for id in ids {
        let (got, response) = raw.receive(0, Duration::from_millis(1)).expect("a queued request was not answered");
        assert_eq!(got, id, "answered in order");
        match response {
            Response::Pong { .. } => pongs += 1,
            Response::Error { errno: libc::ESHUTDOWN, .. } => refused += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(pongs + refused, 200);
}
