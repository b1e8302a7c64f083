//! A hostile server's read answers: bytes whose crc32c does not match
//! them, and more bytes than the read asked for. The client refuses both
//! as protocol violations, and writes nothing past the caller's buffer.
//! The fake server writes its completion records by hand (header, payload,
//! producer position) so that it can give them any checksum.

#![allow(clippy::unwrap_used)]

use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::Duration;

use larder_client::{Client, ClientError};
use larder_protocol::codec::{decode_request, encode_response};
use larder_protocol::doorbell::Doorbell;
use larder_protocol::handshake::{read_hello, send_welcome, Welcome};
use larder_protocol::layout::{Layout, PRODUCER_POSITION_OFFSET};
use larder_protocol::message::{Attributes, FileKind, Request, Response, Timestamp};
use larder_protocol::region::Region;
use larder_protocol::ring::record_bytes;

/// How a read is answered: its data, and whether the record's crc32c is
/// made wrong.
struct ReadAnswer {
    data: Vec<u8>,
    bad_crc: bool,
}

fn layout() -> Layout {
    Layout { workers: 1, request_ring_bytes: 256 << 10, completion_ring_bytes: 256 << 10, data_bytes: 1 << 20 }
}

fn file_attributes() -> Attributes {
    let time = Timestamp { seconds: 0, nanoseconds: 0 };
    Attributes {
        ino: 2,
        kind: FileKind::File,
        mode: 0o100_644,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        size: 1 << 20,
        blocks: 0,
        atime: time,
        mtime: time,
        ctime: time,
        btime: time,
        generation: 1,
    }
}

/// The completion ring's producer, by hand.
struct Producer<'a> {
    region: &'a Region,
    produced: u32,
}

impl Producer<'_> {
    fn publish(&mut self, payload: &[u8], bad_crc: bool) {
        let ring = self.region.layout().completion_ring(0);
        let size = record_bytes(payload.len() as u32);
        assert!(self.produced + size <= ring.bytes, "the test's records all fit the ring without wrapping");
        let at = ring.slots + u64::from(self.produced);
        let crc = crc32c::crc32c(payload) ^ u32::from(bad_crc);
        self.region.write_word32(at, payload.len() as u32).unwrap();
        self.region.write_word32(at + 4, crc).unwrap();
        self.region.write_bytes(at + 8, payload).unwrap();
        self.produced += size;
        self.region.write_word32(ring.control + u64::from(PRODUCER_POSITION_OFFSET), self.produced).unwrap();
        self.region.server_rings(0).unwrap().wake_client().unwrap();
    }
}

/// Whether the client closed its socket.
fn closed(stream: &UnixStream) -> bool {
    use rustix::net::RecvFlags;
    let mut byte = [0u8; 1];
    matches!(rustix::net::recv(stream, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT), Ok((0, _)))
}

/// Serves one client at `listener`: opens by path succeed, reads are
/// answered by `answer` (given the length asked), releases are done.
fn serve(listener: UnixListener, answer: impl Fn(u32) -> ReadAnswer) {
    let (stream, _) = listener.accept().unwrap();
    read_hello(&stream, Duration::from_secs(5)).unwrap();
    let (region, region_fd) = Region::create(layout()).unwrap();
    let (_doorbell, doorbell_fd) = Doorbell::create(1).unwrap();
    let welcome = Welcome {
        epoch: 1,
        client_id: 1,
        layout: layout(),
        primary_worker: 0,
        max_open_handles: 64,
        max_in_flight: 64,
    };
    send_welcome(&stream, &welcome, region_fd.as_fd(), doorbell_fd.as_fd()).unwrap();
    let mut producer = Producer { region: &region, produced: 0 };
    let rings = region.server_rings(0).unwrap();
    let (mut record, mut reply) = (Vec::new(), Vec::new());
    while !closed(&stream) {
        if !rings.receive(&mut record).unwrap() {
            std::thread::yield_now();
            continue;
        }
        let (id, request) = decode_request(&record).unwrap();
        let (response, bad_crc) = match request {
            Request::OpenPath { path, .. } => (
                Response::PathOpened {
                    parent: 1,
                    name: path.rsplit(|&b| b == b'/').next().unwrap_or_default().to_vec(),
                    attributes: file_attributes(),
                    handle: 7,
                    data: None,
                    lease: None,
                },
                false,
            ),
            Request::Read { length, .. } => {
                let ReadAnswer { data, bad_crc } = answer(length);
                (Response::Data(data), bad_crc)
            }
            Request::Release { .. } => (Response::Done, false),
            other => (Response::Error { errno: libc::ENOSYS, message: format!("{:?}", other.opcode()) }, false),
        };
        reply.clear();
        encode_response(id, &response, &mut reply);
        producer.publish(&reply, bad_crc);
    }
}

/// Runs `answer`'s server, opens a file through a client and gives it to
/// `check`.
fn with_file(
    name: &str,
    answer: impl Fn(u32) -> ReadAnswer + Send + 'static,
    check: impl FnOnce(&larder_client::File),
) {
    let socket: PathBuf = std::env::temp_dir().join(format!("larder-hostile-reads-{}-{name}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).unwrap();
    let server = std::thread::spawn(move || serve(listener, answer));
    {
        let client = Client::connect_socket_with(&socket, false).unwrap();
        let file = client.open("/f").unwrap();
        check(&file);
    }
    server.join().unwrap();
    let _ = std::fs::remove_file(&socket);
}

fn pattern(length: usize) -> Vec<u8> {
    (0..length).map(|i| (i * 31 % 251) as u8).collect()
}

#[test]
fn an_honest_answer_is_read_into_the_buffer() {
    with_file(
        "honest",
        |length| ReadAnswer { data: pattern(length as usize / 2), bad_crc: false },
        |file| {
            let mut out = vec![0xEEu8; 4096];
            assert_eq!(file.read_at(&mut out, 0).unwrap(), 2048);
            assert_eq!(&out[..2048], pattern(2048).as_slice());
            assert!(out[2048..].iter().all(|&b| b == 0xEE), "written past the bytes answered");
            // An empty answer: the end of the file.
            let mut none = [0u8; 0];
            assert_eq!(file.read_at(&mut none, 0).unwrap(), 0);
        },
    );
}

#[test]
fn an_answer_whose_checksum_does_not_match_its_bytes_is_refused() {
    for length in [16usize, 4096] {
        with_file(
            &format!("crc{length}"),
            |length| ReadAnswer { data: pattern(length as usize), bad_crc: true },
            |file| {
                let mut out = vec![0u8; length];
                match file.read_at(&mut out, 0) {
                    Err(ClientError::Protocol(message)) => assert!(message.contains("crc32c"), "{message}"),
                    other => panic!("a read of {length} bytes with a bad checksum: {other:?}"),
                }
                // The ring can no longer be trusted: the connection is
                // dropped, and the next call says why instead of reading
                // the ring again.
                match file.read_at(&mut out, 0) {
                    Err(ClientError::Protocol(message)) => {
                        assert!(message.contains("dropped after a protocol violation"), "{message}");
                        assert!(message.contains("crc32c"), "{message}");
                    }
                    other => panic!("a read after a bad checksum: {other:?}"),
                }
            },
        );
    }
}

#[test]
fn an_answer_longer_than_the_buffer_is_refused_without_writing_past_it() {
    let answered = std::sync::atomic::AtomicUsize::new(0);
    with_file(
        "long",
        // The first read is answered with 40 bytes more than asked, the
        // next ones honestly.
        move |length| {
            let extra = if answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0 { 40 } else { 0 };
            ReadAnswer { data: pattern(length as usize + extra), bad_crc: false }
        },
        |file| {
            let mut out = vec![0xEEu8; 4096 + 64];
            match file.read_at(&mut out[..4096], 0) {
                Err(ClientError::Protocol(message)) => assert!(message.contains("4136"), "{message}"),
                other => panic!("an answer of 40 bytes more than asked: {other:?}"),
            }
            assert!(out[4096..].iter().all(|&b| b == 0xEE), "written past the caller's buffer");
            // The refused answer was a whole, well-formed record: the
            // connection goes on, and the next read gets its bytes.
            assert_eq!(file.read_at(&mut out[..4096], 0).unwrap(), 4096);
            assert_eq!(&out[..4096], pattern(4096).as_slice());
        },
    );
}
