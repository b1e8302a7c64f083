//! Clients that break the protocol (issue 20's list): garbage in ring
//! control words and slots, lying positions, records crossing the ring's
//! end, bad checksums, slots rewritten after publication, buffer slices
//! outside the data area, unknown and reused handles and inode numbers,
//! replayed request ids, completions never reaped, bytes on the socket,
//! no hello, and many clients coming and going. In every case the server
//! stays up, a client that broke the protocol is dropped (its socket
//! hangs up), and the other clients are served and see correct data.
#![allow(clippy::unwrap_used)]

mod serving;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use larder_client::Client;
use larder_protocol::codec::encode_request;
use larder_protocol::layout::{CONSUMER_POSITION_OFFSET, FUTEX_OFFSET, SLEEPING_OFFSET};
use larder_protocol::message::{BufferSlice, Durability, Payload, Request as R, Response};
use larder_protocol::ring::{max_record, record_bytes, PADDING_FLAG};
use serving::{assert_served, limits, pattern, serve, serve_with, Raw, Served, PATIENCE};

const ROOT: u64 = 1;

/// The hostile client is dropped; `good` and a new client are served;
/// only `good` keeps a session.
fn assert_dropped_and_others_served(t: &Served, raw: Raw, good: &Client, tag: &str) {
    assert!(raw.dropped_within(PATIENCE), "{tag}: the hostile client was not dropped");
    drop(raw);
    assert_served(good, tag);
    assert_served(&t.client(), &format!("{tag}, a new client"));
    t.wait_for_clients(1);
}

/// Writes a record header (and `payload`, if any) where the client's
/// next request would go on `worker`, and publishes `publish` bytes.
fn forge(raw: &Raw, worker: u32, length_word: u32, crc: u32, payload: &[u8], publish: u32) {
    let ring = raw.welcome.layout.request_ring(worker);
    let producer = raw.word(ring.control);
    let at = ring.slots + u64::from(producer & (ring.bytes - 1));
    raw.set_word(at, length_word);
    raw.set_word(at + 4, crc);
    raw.region.write_bytes(at + 8, payload).unwrap();
    raw.set_word(ring.control, producer.wrapping_add(publish));
    raw.ring(worker);
}

/// Something a hostile client does to its region.
type Lie<'a> = Box<dyn Fn(&Raw) + 'a>;

fn ping_record() -> Vec<u8> {
    let mut record = Vec::new();
    encode_request(99, &R::Ping, &mut record);
    record
}

#[test]
fn garbage_in_ring_slots_and_positions_drops_the_client() {
    let t = serve();
    let good = t.client();
    assert_served(&good, "before");
    let ring_bytes = t.raw().welcome.layout.request_ring_bytes;
    t.wait_for_clients(1);
    for seed in 0..6u64 {
        let raw = t.raw();
        let ring = raw.welcome.layout.request_ring(0);
        // Random slots, and a published distance that is in bounds: the
        // server reads garbage records, which no checksum can pass.
        raw.region.write_bytes(ring.slots, &pattern(8192, seed)).unwrap();
        let distance = 8 * (1 + (seed as u32 * 131) % 1000);
        raw.set_word(ring.control, distance);
        raw.ring(0);
        assert_dropped_and_others_served(&t, raw, &good, &format!("garbage slots {seed}"));
    }
    // Producer positions no ring can have: beyond the ring, unaligned.
    for producer in [ring_bytes + 8, 4, u32::MAX - 3, 0x8000_0000] {
        let raw = t.raw();
        raw.set_word(raw.request_control(0), producer);
        raw.ring(0);
        assert_dropped_and_others_served(&t, raw, &good, &format!("producer {producer:#x}"));
    }
}

#[test]
fn garbage_in_words_the_server_does_not_trust_changes_nothing() {
    let t = serve();
    let good = t.client();
    let raw = t.raw();
    // The sleeping flags and futex words are hints: garbage there costs
    // the liar a wake-up at most.
    let request = raw.request_control(0);
    let completion = raw.completion_control(0);
    for (offset, value) in [
        (request + u64::from(SLEEPING_OFFSET), 0xFFFF_FFFF),
        (request + u64::from(FUTEX_OFFSET), 12345),
        (completion + u64::from(SLEEPING_OFFSET), 7),
        (completion + u64::from(FUTEX_OFFSET), u32::MAX),
    ] {
        raw.set_word(offset, value);
        assert!(matches!(raw.call(0, &R::Ping), Response::Pong { .. }), "garbage {value:#x} at {offset}");
    }
    // The header page is never read back.
    raw.region.write_bytes(0, &[0xFF; 4096]).unwrap();
    assert!(matches!(raw.call(0, &R::Ping), Response::Pong { .. }));
    // The request ring's consumer position is the server's to write (a
    // well-behaved client would now refuse to send: forge the request).
    let ping = ping_record();
    raw.set_word(request + u64::from(CONSUMER_POSITION_OFFSET), 0xDEAD_BEEF);
    forge(&raw, 0, ping.len() as u32, crc32c::crc32c(&ping), &ping, record_bytes(ping.len() as u32));
    assert!(matches!(raw.receive(0, PATIENCE), Some((99, Response::Pong { .. }))));
    assert!(!raw.dropped_within(Duration::from_millis(1)));
    assert_served(&good, "good");
}

#[test]
fn lying_completion_consumer_positions() {
    let t = serve();
    let good = t.client();
    // Ahead of what the server produced: a violation.
    let raw = t.raw();
    assert!(matches!(raw.call(0, &R::Ping), Response::Pong { .. }));
    let consumer = raw.completion_control(0) + u64::from(CONSUMER_POSITION_OFFSET);
    raw.set_word(consumer, 1 << 20);
    let id = raw.id();
    assert!(raw.send_as(0, id, &R::Ping));
    assert_dropped_and_others_served(&t, raw, &good, "consumer ahead");

    // Behind by a whole ring: the ring looks full, the server keeps the
    // completion back (the client is slow, not hostile) and serves
    // others; when the position is right again the completion comes.
    let raw = t.raw();
    assert!(matches!(raw.call(0, &R::Ping), Response::Pong { .. }));
    let produced = raw.word(raw.completion_control(0));
    let ring_bytes = raw.welcome.layout.completion_ring_bytes;
    raw.set_word(consumer, produced.wrapping_sub(ring_bytes));
    let id = raw.id();
    assert!(raw.send_as(0, id, &R::Ping));
    assert_served(&good, "while the liar looks full");
    assert!(raw.receive(0, Duration::from_millis(50)).is_none(), "no room, no completion");
    raw.set_word(consumer, produced);
    raw.ring(0);
    let (got, response) = raw.receive(0, PATIENCE).expect("the kept completion");
    assert_eq!((got, matches!(response, Response::Pong { .. })), (id, true));
    assert!(!raw.dropped_within(Duration::from_millis(1)));
}

#[test]
fn malformed_records_drop_the_client() {
    let t = serve();
    let good = t.client();
    let ping = ping_record();
    let crc = crc32c::crc32c(&ping);
    let size = record_bytes(ping.len() as u32);
    let max = max_record(t.raw().welcome.layout.request_ring_bytes);
    t.wait_for_clients(1);
    let cases: Vec<(&str, Lie)> = vec![
        ("bad crc", Box::new(|raw| forge(raw, 0, ping.len() as u32, crc ^ 1, &ping, size))),
        ("a message that does not decode", {
            let junk = b"not a request at all!!!!".to_vec();
            let junk_crc = crc32c::crc32c(&junk);
            Box::new(move |raw| forge(raw, 0, junk.len() as u32, junk_crc, &junk, record_bytes(junk.len() as u32)))
        }),
        ("a record beyond what was published", Box::new(|raw| forge(raw, 0, ping.len() as u32, crc, &ping, 8))),
        ("a record longer than a ring record", Box::new(move |raw| forge(raw, 0, max + 8, 0, &[], 4096))),
        ("padding that does not run to the end", Box::new(|raw| forge(raw, 0, PADDING_FLAG | 8, 0, &[], 16))),
    ];
    for (what, lie) in cases {
        let raw = t.raw();
        lie(&raw);
        assert_dropped_and_others_served(&t, raw, &good, what);
    }
}

#[test]
fn a_record_crossing_the_ring_end_drops_the_client() {
    let t = serve();
    let good = t.client();
    let raw = t.raw();
    let ring = raw.welcome.layout.request_ring(0);
    // Move the ring's positions near its end with real requests (puts to
    // a bucket that does not exist: ENOENT).
    let filler = R::KvPut {
        bucket: b"none".to_vec(),
        key: b"k".to_vec(),
        value: Payload::Inline(vec![0; 60_000]),
        durability: Durability::Buffered,
    };
    while ring.bytes - (raw.word(ring.control) & (ring.bytes - 1)) > 30_000 {
        assert!(matches!(raw.call(0, &filler), Response::Error { errno: libc::ENOENT, .. }));
    }
    let left = ring.bytes - (raw.word(ring.control) & (ring.bytes - 1));
    // A record of 30,000 bytes from here would cross the end: only its
    // header is written (its bytes would be the next control block).
    forge(&raw, 0, 30_000, 0, &[], record_bytes(30_000));
    assert!(left < record_bytes(30_000));
    assert_dropped_and_others_served(&t, raw, &good, "a record across the end");
}

#[test]
fn a_slot_rewritten_after_publication_is_seen_whole_or_refused() {
    let t = serve();
    let good = t.client();
    good.create_bucket("b").unwrap();
    let (mut applied, mut dropped) = (0, 0);
    for round in 0..16 {
        let raw = t.raw();
        let ring = raw.welcome.layout.request_ring(0);
        let key = format!("k{round}");
        let value = pattern(30_000, round);
        let at = ring.slots + u64::from(raw.word(ring.control) & (ring.bytes - 1));
        let put = R::KvPut {
            bucket: b"b".to_vec(),
            key: key.clone().into_bytes(),
            value: Payload::Inline(value.clone()),
            durability: Durability::Buffered,
        };
        let id = raw.id();
        assert!(raw.send_as(0, id, &put));
        // Rewrite the value's bytes in the slot, late or early.
        raw.region.write_bytes(at + 8 + 1000, &[0x55; 20_000]).unwrap();
        let deadline = Instant::now() + PATIENCE;
        let answer = loop {
            if let Some(answer) = raw.receive(0, Duration::from_millis(10)) {
                break Some(answer);
            }
            if raw.dropped_within(Duration::from_millis(1)) {
                break None;
            }
            assert!(Instant::now() < deadline, "neither answered nor dropped");
        };
        match answer {
            Some((got, Response::Done)) => {
                assert_eq!(got, id);
                applied += 1;
                assert_eq!(good.get("b", &key).unwrap(), Some(value), "the value as published");
            }
            None => {
                dropped += 1;
                assert_eq!(good.get("b", &key).unwrap(), None, "a refused record stored nothing");
            }
            Some(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(applied + dropped, 16);
    assert_served(&good, "after rewrites");
}

#[test]
fn buffer_slices_outside_the_data_area_drop_the_client() {
    let t = serve();
    let good = t.client();
    let area = t.raw().welcome.layout.data_bytes;
    t.wait_for_clients(1);
    let outside = [
        BufferSlice { offset: area - 8, length: 16 },
        BufferSlice { offset: area, length: 1 },
        BufferSlice { offset: u64::MAX, length: 2 },
    ];
    for (n, slice) in outside.into_iter().enumerate() {
        let requests = [
            R::KvPut {
                bucket: b"b".to_vec(),
                key: b"k".to_vec(),
                value: Payload::Buffer(slice),
                durability: Durability::Buffered,
            },
            R::KvGet { bucket: b"b".to_vec(), key: b"k".to_vec(), into: Some(slice) },
            R::Write { handle: 1, offset: 0, data: Payload::Buffer(slice) },
            R::ReadBuffer { handle: 1, offset: 0, into: slice },
        ];
        for request in requests {
            let raw = t.raw();
            // A file open as handle 1, so a handle is no excuse.
            let created = raw.call(
                0,
                &R::Create {
                    parent: ROOT,
                    name: format!("f{n}").into_bytes(),
                    mode: 0o644,
                    flags: libc::O_RDWR,
                    lease: false,
                },
            );
            assert!(matches!(created, Response::Created { handle: 1, .. }), "{created:?}");
            let id = raw.id();
            assert!(raw.send_as(0, id, &request));
            assert_dropped_and_others_served(&t, raw, &good, &format!("{request:?}"));
        }
    }
    // The puts named nothing valid: nothing was stored.
    assert_eq!(good.get("b", "k").unwrap(), None);
}

#[test]
fn unknown_and_reused_handles_and_inodes_are_errors_not_harm() {
    let t = serve();
    let good = t.client();
    good.write("/secret", b"theirs").unwrap();
    let theirs = good.metadata("/secret").unwrap().ino();
    let kept = good.open("/secret").unwrap();
    let raw = t.raw();
    let errno = |r: Response| match r {
        Response::Error { errno, .. } => errno,
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!(errno(raw.call(0, &R::Read { handle: 77, offset: 0, length: 10 })), libc::EBADF);
    assert_eq!(errno(raw.call(0, &R::Release { handle: 1 })), libc::EBADF, "another client's handle 1");
    assert_eq!(errno(raw.call(0, &R::GetAttributes { ino: theirs })), libc::ENOENT, "not reached");
    assert_eq!(errno(raw.call(0, &R::Open { ino: theirs, flags: libc::O_RDWR })), libc::ENOENT);
    assert_eq!(errno(raw.call(0, &R::GetAttributes { ino: 1 << 40 })), libc::ENOENT);
    let created = raw
        .call(0, &R::Create { parent: ROOT, name: b"mine".to_vec(), mode: 0o644, flags: libc::O_RDWR, lease: false });
    let Response::Created { handle, .. } = created else { panic!("{created:?}") };
    assert_eq!(raw.call(0, &R::Release { handle }), Response::Done);
    assert_eq!(errno(raw.call(0, &R::Release { handle })), libc::EBADF, "released twice");
    assert_eq!(errno(raw.call(0, &R::Write { handle, offset: 0, data: Payload::Inline(b"x".to_vec()) })), libc::EBADF);
    assert_eq!(errno(raw.call(0, &R::ReadDirectory { handle, offset: 0, max_entries: 10 })), libc::EBADF);
    assert_eq!(errno(raw.call(0, &R::KvWriterFinish { handle: u64::MAX })), libc::EBADF);
    // Still served, and nothing of the other client's changed.
    assert!(matches!(raw.call(0, &R::Ping), Response::Pong { .. }));
    let mut back = [0u8; 6];
    assert_eq!(kept.read_at(&mut back, 0).unwrap(), 6);
    assert_eq!(&back, b"theirs");
}

#[test]
fn replayed_request_ids_are_new_requests() {
    let t = serve();
    let raw = t.raw();
    let create = R::Create {
        parent: ROOT,
        name: b"once".to_vec(),
        mode: 0o644,
        flags: libc::O_RDWR | libc::O_EXCL,
        lease: false,
    };
    for expected in [None, Some(libc::EEXIST)] {
        assert!(raw.send_as(0, 5, &create));
        let (id, response) = raw.receive(0, PATIENCE).unwrap();
        assert_eq!(id, 5);
        match (expected, response) {
            (None, Response::Created { .. }) => {}
            (Some(e), Response::Error { errno, .. }) => assert_eq!(errno, e, "the replay is applied as itself"),
            (_, other) => panic!("unexpected {other:?}"),
        }
    }
    // Two at once with the same id: both answered, in order.
    assert!(raw.send_as(0, 5, &R::Ping));
    assert!(raw.send_as(0, 5, &R::Lookup { parent: ROOT, name: b"once".to_vec() }));
    assert!(matches!(raw.receive(0, PATIENCE), Some((5, Response::Pong { .. }))));
    assert!(matches!(raw.receive(0, PATIENCE), Some((5, Response::Attributes(_)))));
}

#[test]
fn a_client_that_never_reaps_does_not_stop_others() {
    let t = serve_with(larder_server::Limits { max_in_flight: 16, ..limits(1..=1) });
    let good = t.client();
    let raw = t.raw();
    // Ping until the request ring is full: the server takes requests
    // until the completion ring and the client's backlog are full.
    let mut sent = Vec::new();
    loop {
        let id = raw.id();
        if !raw.send_as(0, id, &R::Ping) {
            break;
        }
        sent.push(id);
    }
    // The other client, on the same worker, is served all the while (on
    // a thread, so that a server that waited for the liar fails the test
    // rather than hanging it).
    let (done, finished) = std::sync::mpsc::channel();
    let served = good.clone();
    std::thread::spawn(move || {
        for round in 0..100 {
            assert_served(&served, &format!("round {round}"));
        }
        let _ = done.send(());
    });
    if finished.recv_timeout(PATIENCE).is_err() {
        // A server stuck on the liar could not be stopped either.
        std::mem::forget(t);
        panic!("the other client was not served while the liar did not reap");
    }
    assert!(!raw.dropped_within(Duration::from_millis(1)), "slow is not hostile");
    // Every completion comes, in order, once reaped.
    for id in sent {
        let (got, response) = raw.receive(0, PATIENCE).expect("a kept completion");
        assert_eq!(got, id);
        assert!(matches!(response, Response::Pong { .. }));
    }
    assert!(matches!(raw.call(0, &R::Ping), Response::Pong { .. }));
}

#[test]
fn bytes_on_the_socket_after_the_handshake_drop_the_client() {
    let t = serve();
    let good = t.client();
    let raw = t.raw();
    (&raw.stream).write_all(b"hello again").unwrap();
    assert_dropped_and_others_served(&t, raw, &good, "bytes on the socket");
}

#[test]
fn clients_that_never_say_hello_do_not_block_others() {
    let t = serve();
    let good = t.client();
    // Silent, and half a hello: each would hold a listener that shook
    // hands itself for its 1 s hello timeout, 8 s in all.
    let mut silent: Vec<UnixStream> = (0..7).map(|_| UnixStream::connect(t.socket()).unwrap()).collect();
    let half = UnixStream::connect(t.socket()).unwrap();
    (&half).write_all(b"LRDH").unwrap();
    silent.push(half);
    let started = Instant::now();
    let newcomer = t.client();
    assert_served(&newcomer, "newcomer");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "a client waited {took:?} behind silent ones");
    assert_served(&good, "good");
    drop(silent);
}

#[test]
fn many_clients_come_and_go() {
    let t = serve_with(limits(2..=2));
    let good = t.client();
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let t = &t;
            scope.spawn(move || {
                for round in 0..25 {
                    let c = t.client();
                    assert_served(&c, &format!("t{thread} r{round}"));
                    drop(c);
                    // Gone with a file open and, every other round, a
                    // request left in its ring.
                    let raw = t.raw();
                    let name = format!("t{thread}r{round}").into_bytes();
                    let create = R::Create { parent: ROOT, name, mode: 0o644, flags: libc::O_RDWR, lease: false };
                    let Response::Created { handle, .. } = raw.call(0, &create) else { panic!("create") };
                    let write = R::Write { handle, offset: 0, data: Payload::Inline(b"kept".to_vec()) };
                    assert_eq!(raw.call_owner(&write), Response::Length(4));
                    if round % 2 == 0 {
                        let id = raw.id();
                        raw.send_as(0, id, &R::Ping);
                    }
                }
            });
        }
    });
    t.wait_for_clients(1);
    assert_eq!(t.server().clients(), 1);
    for thread in 0..4 {
        for round in 0..25 {
            assert_eq!(
                good.get("b", format!("t{thread} r{round}")).unwrap(),
                Some(format!("value of t{thread} r{round}").into_bytes())
            );
            assert_eq!(good.read(format!("/t{thread}r{round}")).unwrap(), b"kept");
        }
    }
    assert_served(&good, "good");
}

#[test]
fn a_buffer_changed_while_the_server_copies_it_stores_what_was_checksummed() {
    let mut t = serve();
    let good = t.client();
    good.create_bucket("b").unwrap();
    let raw = t.raw();
    const LEN: u32 = 256 << 10;
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        // Rewrites the buffer without pause while the puts copy it.
        let (region, stop) = (&raw.region, &stop);
        scope.spawn(move || {
            let (a, b) = (vec![0xAAu8; LEN as usize], vec![0x55u8; LEN as usize]);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                region.data().copy_in(0, &a).unwrap();
                region.data().copy_in(0, &b).unwrap();
            }
        });
        for n in 0..20 {
            let put = R::KvPut {
                bucket: b"b".to_vec(),
                key: format!("k{n}").into_bytes(),
                value: Payload::Buffer(BufferSlice { offset: 0, length: LEN }),
                durability: Durability::Buffered,
            };
            assert_eq!(raw.call(0, &put), Response::Done);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    // Each value reads back (its checksums cover what was stored) and
    // holds only bytes the area held: zeros at first, then the client's.
    for n in 0..20 {
        let value = good.get("b", format!("k{n}")).unwrap().unwrap();
        assert_eq!(value.len(), LEN as usize);
        assert!(value.iter().all(|&b| b == 0 || b == 0xAA || b == 0x55), "value {n}");
    }
    drop((raw, good));
    t.wait_for_clients(0);
    t.assert_fsck_clean();
}

#[test]
fn a_client_that_floods_its_ring_does_not_starve_others() {
    let t = serve();
    let good = t.client();
    let raw = t.raw();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (done, finished) = std::sync::mpsc::channel();
    let raw = std::thread::scope(|scope| {
        let stop = &stop;
        // Keeps its ring full of requests and reaps as fast as it can.
        let flooder = scope.spawn(move || {
            let mut answered = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                while raw.send_as(0, raw.id(), &R::StatFs) {}
                while raw.receive(0, Duration::ZERO).is_some() {
                    answered += 1;
                }
            }
            // Were it dropped (a violation found in an honest flood), its
            // requests would go unanswered: say which.
            let dropped = raw.dropped_within(Duration::from_millis(1));
            assert!(answered > 0, "no request of the flooder was answered (its connection dropped: {dropped})");
            raw
        });
        let served = good.clone();
        scope.spawn(move || {
            for round in 0..100 {
                assert_served(&served, &format!("round {round}"));
            }
            let _ = done.send(());
        });
        let outcome = finished.recv_timeout(PATIENCE);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(outcome.is_ok(), "the other client was starved");
        flooder.join().unwrap()
    });
    assert!(!raw.dropped_within(Duration::from_millis(1)), "busy is not hostile");
}

/// `OpenPath` from a client that lies about its path: a length running
/// past the message, or over the codec's limit, breaks the protocol (the
/// client is dropped); a path the fs layer refuses (too long for it, a NUL
/// inside, a name over 255 bytes), garbage flags and a huge read are
/// errors or capped answers, and the client is served on.
#[test]
fn open_path_with_lying_lengths_and_hostile_paths() {
    let t = serve();
    let good = t.client();
    good.write("/page.html", &pattern(5000, 3)).unwrap();
    let open = |path: Vec<u8>, flags: i32, read: u32| R::OpenPath { path, flags, read, lease: false };
    t.wait_for_clients(1);

    let mut record = Vec::new();
    encode_request(7, &open(b"/page.html".to_vec(), libc::O_RDONLY, 0), &mut record);
    // The path's length says more bytes than the message holds.
    let mut longer = record.clone();
    longer[12..16].copy_from_slice(&4000u32.to_le_bytes());
    // Over the codec's path limit (8 KiB): refused before anything is read.
    let mut over = Vec::new();
    encode_request(8, &open(vec![b'a'; larder_protocol::codec::MAX_PATH_BYTES + 1], 0, 0), &mut over);
    // Cut inside the path, and cut before the last field.
    let cut_path = record[..18].to_vec();
    let cut_flag = record[..record.len() - 1].to_vec();
    for (what, bytes) in [
        ("a path longer than the message", longer),
        ("a path over the limit", over),
        ("a cut path", cut_path),
        ("no lease byte", cut_flag),
    ] {
        let raw = t.raw();
        assert!(raw.send_record(0, &bytes), "{what}: the ring took it");
        assert_dropped_and_others_served(&t, raw, &good, what);
    }

    let raw = t.raw();
    let errno = |r: Response| match r {
        Response::Error { errno, .. } => errno,
        other => panic!("expected an error, got {other:?}"),
    };
    let mut long_path = b"/".to_vec();
    long_path.extend(std::iter::repeat_n(b"d/", 2500).flatten());
    assert_eq!(errno(raw.call_owner(&open(long_path, libc::O_RDONLY, 0))), libc::ENAMETOOLONG);
    assert_eq!(errno(raw.call_owner(&open(b"/page.html\0/etc".to_vec(), libc::O_RDONLY, 0))), libc::EINVAL);
    assert_eq!(errno(raw.call_owner(&open(vec![b'n'; 300], libc::O_RDONLY, 0))), libc::ENAMETOOLONG);
    assert_eq!(errno(raw.call_owner(&open(b"/page.html".to_vec(), -1, 0))), libc::EINVAL);
    assert_eq!(errno(raw.call_owner(&open(b"/page.html".to_vec(), i32::MIN | libc::O_TRUNC, 0))), libc::EINVAL);
    // A read of 4 GiB is answered with the file, in one record.
    match raw.call_owner(&open(b"/page.html".to_vec(), libc::O_RDONLY, u32::MAX)) {
        Response::PathOpened { data: Some(data), handle, .. } => {
            assert_eq!(data, pattern(5000, 3));
            assert_eq!(raw.call_owner(&R::Release { handle }), Response::Done);
        }
        other => panic!("{other:?}"),
    }
    assert!(!raw.dropped_within(Duration::from_millis(1)), "refusals are not violations");
    assert_served(&good, "after the hostile opens");
}
