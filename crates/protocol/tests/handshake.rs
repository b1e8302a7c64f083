//! The socket handshake: a welcome with the region and doorbell passed by
//! SCM_RIGHTS and attached by the client; refusals, a version mismatch,
//! descriptors that are not what the protocol requires, timeouts; and the
//! peer's credentials from the kernel.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use larder_protocol::doorbell::{doorbell_bytes, Doorbell};
use larder_protocol::error::TransportError;
use larder_protocol::handshake::{
    client_handshake, peer_credentials, read_hello, send_hello, send_refusal, send_welcome, Frame, FrameError,
    HandshakeError, Hello, Refusal, Welcome, FRAME_HEADER_BYTES,
};
use larder_protocol::layout::{Layout, PAGE_BYTES};
use larder_protocol::region::Region;
use larder_protocol::PROTOCOL_VERSION;
use rustix::fs::{MemfdFlags, SealFlags};

const TIMEOUT: Duration = Duration::from_secs(10);

fn layout() -> Layout {
    Layout { workers: 2, request_ring_bytes: 8192, completion_ring_bytes: 4096, data_bytes: 2 * PAGE_BYTES }
}

fn welcome() -> Welcome {
    Welcome {
        epoch: 0x0123_4567_89AB_CDEF,
        client_id: 42,
        layout: layout(),
        primary_worker: 1,
        max_open_handles: 1024,
        max_in_flight: 64,
    }
}

#[test]
fn a_welcome_hands_over_a_region_both_sides_share() {
    let (client, server) = UnixStream::pair().unwrap();
    let server = std::thread::spawn(move || {
        let hello = read_hello(&server, TIMEOUT).unwrap();
        assert_eq!(hello, Hello { version: PROTOCOL_VERSION });
        assert!(hello.is_supported());
        let (region, region_fd) = Region::create(layout()).unwrap();
        let (doorbell, doorbell_fd) = Doorbell::create(layout().workers).unwrap();
        send_welcome(&server, &welcome(), &region_fd, &doorbell_fd).unwrap();
        drop((region_fd, doorbell_fd));
        // Wait for the client's request through the shared memory, and the
        // doorbell it rings.
        let rings = region.server_rings(1).unwrap();
        let seen = doorbell.seen(1).unwrap();
        rings.set_sleeping(true);
        let mut out = Vec::new();
        let deadline = Instant::now() + TIMEOUT;
        while !rings.receive(&mut out).unwrap() {
            assert!(Instant::now() < deadline, "no request");
            doorbell.wait(1, seen, Duration::from_millis(100)).unwrap();
        }
        rings.set_sleeping(false);
        assert_eq!(out, b"hello through the region");
        assert_eq!(region.data().copy_out(PAGE_BYTES, 4).unwrap(), b"data");
        assert!(rings.send(b"done").unwrap());
        rings.wake_client().unwrap();
        // Keep the region mapped until the client has the completion.
        let mut byte = [0u8; 1];
        std::io::Read::read(&mut &server, &mut byte).unwrap();
    });
    let connected = client_handshake(&client, TIMEOUT).unwrap();
    assert_eq!(connected.welcome, welcome());
    assert_eq!(connected.region.layout(), &layout());
    assert_eq!(connected.region.header_layout(), Some(layout()));
    assert_eq!(connected.doorbell.workers(), 2);
    let rings = connected.region.client_rings(1).unwrap();
    connected.region.data().copy_in(PAGE_BYTES, b"data").unwrap();
    assert!(rings.send(b"hello through the region").unwrap());
    connected.doorbell.ring(1).unwrap();
    rings.wait_for_completion(&mut larder_protocol::backoff::Spinner::fixed(1000), TIMEOUT).unwrap();
    let mut out = Vec::new();
    assert!(rings.receive(&mut out).unwrap());
    assert_eq!(out, b"done");
    (&client).write_all(b"x").unwrap();
    server.join().unwrap();
}

#[test]
fn a_client_of_another_version_is_refused() {
    let (client, server) = UnixStream::pair().unwrap();
    send_hello(&client, PROTOCOL_VERSION + 1).unwrap();
    let hello = read_hello(&server, TIMEOUT).unwrap();
    assert_eq!(hello.version, PROTOCOL_VERSION + 1);
    assert!(!hello.is_supported());
    send_refusal(&server, libc::EPROTONOSUPPORT, "protocol version 2 is not spoken here").unwrap();
    // The client reads the refusal as client_handshake would.
    let (client2, server2) = UnixStream::pair().unwrap();
    send_refusal(&server2, libc::EPROTONOSUPPORT, "protocol version 2 is not spoken here").unwrap();
    match client_handshake(&client2, TIMEOUT) {
        Err(HandshakeError::Refused { errno, message }) => {
            assert_eq!(errno, libc::EPROTONOSUPPORT);
            assert_eq!(message, "protocol version 2 is not spoken here");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(send_refusal(&server, 1, &"x".repeat(2000)), Err(HandshakeError::MessageTooLong(2000))));
    drop(client);
}

/// A welcome frame stamped with another version, its crc fixed.
fn welcome_of_version(version: u32) -> Vec<u8> {
    let mut bytes = Frame::Welcome(welcome()).encode();
    bytes[4..8].copy_from_slice(&version.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[..16]), &bytes[FRAME_HEADER_BYTES..]);
    bytes[16..20].copy_from_slice(&crc.to_le_bytes());
    bytes
}

#[test]
fn a_welcome_of_another_version_is_refused_by_the_client() {
    let (client, server) = UnixStream::pair().unwrap();
    (&server).write_all(&welcome_of_version(PROTOCOL_VERSION + 1)).unwrap();
    match client_handshake(&client, TIMEOUT) {
        Err(HandshakeError::Frame(FrameError::Version(v))) => assert_eq!(v, PROTOCOL_VERSION + 1),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_welcome_without_its_descriptors_is_refused() {
    let (client, server) = UnixStream::pair().unwrap();
    (&server).write_all(&Frame::Welcome(welcome()).encode()).unwrap();
    assert!(matches!(client_handshake(&client, TIMEOUT), Err(HandshakeError::Descriptors(0))));
}

#[test]
fn a_silent_or_vanished_peer_ends_the_handshake() {
    let (client, server) = UnixStream::pair().unwrap();
    let started = Instant::now();
    assert!(matches!(read_hello(&server, Duration::from_millis(50)), Err(HandshakeError::TimedOut)));
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(server.read_timeout().unwrap(), None, "the socket's timeout is restored");
    drop(client);
    assert!(matches!(read_hello(&server, TIMEOUT), Err(HandshakeError::Closed)));
    let (client, server) = UnixStream::pair().unwrap();
    drop(server);
    assert!(client_handshake(&client, TIMEOUT).is_err());
}

#[test]
fn frames_round_trip_and_damage_is_refused() {
    let frames = [
        Frame::Hello(Hello { version: PROTOCOL_VERSION }),
        Frame::Welcome(welcome()),
        Frame::Refusal(Refusal { errno: libc::EMFILE, message: "too many clients: ünïcode".into() }),
    ];
    for frame in frames {
        let bytes = frame.encode();
        assert_eq!(Frame::decode(&bytes), Ok(frame.clone()));
        assert!(matches!(Frame::decode(&bytes[..bytes.len() - 1]), Err(FrameError::Truncated(_))));
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(Frame::decode(&longer), Err(FrameError::TrailingBytes(1)));
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x01;
            assert!(Frame::decode(&damaged).is_err(), "{frame:?} with byte {at} flipped was accepted");
        }
    }
}

#[test]
fn attach_refuses_a_region_that_is_unsealed_or_of_the_wrong_size() {
    // Unsealed, right size.
    let fd = rustix::fs::memfd_create("unsealed", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
    rustix::fs::ftruncate(&fd, layout().region_bytes()).unwrap();
    assert!(matches!(Region::attach(fd, layout()), Err(TransportError::NotSealed { .. })));
    // Sealed against shrinking only: it could still grow, and seal more.
    let fd = rustix::fs::memfd_create("half", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
    rustix::fs::ftruncate(&fd, layout().region_bytes()).unwrap();
    rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK).unwrap();
    match Region::attach(fd, layout()) {
        Err(TransportError::NotSealed { missing, .. }) => {
            assert_eq!(missing, (SealFlags::GROW | SealFlags::SEAL).bits())
        }
        other => panic!("{other:?}"),
    }
    // Sealed, wrong size.
    let (_, fd) = Region::create(Layout { data_bytes: PAGE_BYTES, ..layout() }).unwrap();
    match Region::attach(fd, layout()) {
        Err(TransportError::Size { expected, actual, .. }) => {
            assert_eq!(expected, layout().region_bytes());
            assert_eq!(actual, layout().region_bytes() - PAGE_BYTES);
        }
        other => panic!("{other:?}"),
    }
    // A doorbell of the wrong size, or unsealed.
    let fd = rustix::fs::memfd_create("doorbell", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
    rustix::fs::ftruncate(&fd, 2 * PAGE_BYTES).unwrap();
    let copy = fd.try_clone().unwrap();
    assert!(matches!(
        Doorbell::attach(copy, 2),
        Err(TransportError::NotSealed { .. }) | Err(TransportError::Size { .. })
    ));
    rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL).unwrap();
    assert!(
        matches!(Doorbell::attach(fd, 2), Err(TransportError::Size { expected: PAGE_BYTES, actual, .. }) if actual == 2 * PAGE_BYTES)
    );
    let (_, fd) = Doorbell::create(64).unwrap();
    assert_eq!(doorbell_bytes(64), PAGE_BYTES);
    assert!(matches!(Doorbell::attach(fd, 65), Err(TransportError::Layout(_))));
    // An invalid layout is refused before anything is mapped.
    let (_, fd) = Region::create(layout()).unwrap();
    assert!(matches!(Region::attach(fd, Layout { workers: 0, ..layout() }), Err(TransportError::Layout(_))));
}

#[test]
fn peer_credentials_are_the_kernels() {
    let (client, server) = UnixStream::pair().unwrap();
    let credentials = peer_credentials(&server).unwrap();
    assert_eq!(credentials.pid, std::process::id() as i32);
    assert_eq!(credentials.uid, rustix::process::getuid().as_raw());
    assert_eq!(credentials.gid, rustix::process::getgid().as_raw());
    let mut expected: Vec<u32> = rustix::process::getgroups().unwrap().into_iter().map(|g| g.as_raw()).collect();
    let mut groups = credentials.groups.clone();
    expected.sort_unstable();
    groups.sort_unstable();
    assert_eq!(groups, expected);
    assert_eq!(peer_credentials(&client).unwrap(), credentials);
}

#[test]
fn a_peer_sending_a_byte_at_a_time_does_not_restart_the_clock() {
    let (client, server) = UnixStream::pair().unwrap();
    let hello = Frame::Hello(Hello { version: PROTOCOL_VERSION }).encode();
    let writer = std::thread::spawn(move || {
        for byte in hello {
            if (&client).write_all(&[byte]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(40));
        }
    });
    // The whole frame takes 800 ms to arrive; with a clock restarted per
    // byte the hello would be read.
    let started = Instant::now();
    assert!(matches!(read_hello(&server, Duration::from_millis(200)), Err(HandshakeError::TimedOut)));
    assert!(started.elapsed() >= Duration::from_millis(200));
    drop(server);
    writer.join().unwrap();
}

#[test]
fn regions_and_doorbells_are_shared_between_threads() {
    fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Region>();
    send_and_sync::<Doorbell>();
    send_and_sync::<larder_protocol::region::ServerRings<'static>>();
    send_and_sync::<larder_protocol::region::DataArea<'static>>();
}
