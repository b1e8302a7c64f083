//! Two processes: this test re-executes its own binary as the client
//! (`LARDER_TRANSPORT_CLIENT_SOCKET` names the socket to connect to). The
//! client receives its region and the doorbell by SCM_RIGHTS, and the two
//! exchange records with futex wake-ups both ways: the client sleeps on
//! its completion ring, the server's worker on the doorbell. Waits have a
//! long timeout, and a wait that times out fails the test, so a lost
//! wake-up shows as a failure, not as a slow pass.

#![allow(clippy::unwrap_used)]

use std::os::unix::net::{UnixListener, UnixStream};
use std::process::Command;
use std::time::{Duration, Instant};

use larder_protocol::doorbell::Doorbell;
use larder_protocol::futex::Wake;
use larder_protocol::handshake::{client_handshake, peer_credentials, read_hello, send_welcome, Welcome};
use larder_protocol::layout::{Layout, PAGE_BYTES};
use larder_protocol::region::Region;

const CLIENT_ENV: &str = "LARDER_TRANSPORT_CLIENT_SOCKET";
const TEST_NAME: &str = "two_processes_exchange_records_with_futex_wake_ups";
const ROUND_TRIPS: u64 = 2000;
const WORKER: u32 = 1;
const WAIT: Duration = Duration::from_secs(10);

fn layout() -> Layout {
    Layout { workers: 2, request_ring_bytes: 4096, completion_ring_bytes: 4096, data_bytes: 4 * PAGE_BYTES }
}

fn request(index: u64) -> Vec<u8> {
    let mut bytes = index.to_le_bytes().to_vec();
    bytes.extend((0..(index % 200)).map(|i| (i as u8) ^ (index as u8)));
    bytes
}

/// The server's answer: the request reversed, then the data area's bytes
/// at the offset the request's index picks.
fn completion(request: &[u8], data: &[u8]) -> Vec<u8> {
    let mut bytes: Vec<u8> = request.iter().rev().copied().collect();
    bytes.extend_from_slice(data);
    bytes
}

fn data_offset(index: u64) -> u64 {
    index * 37 % (4 * PAGE_BYTES - 8)
}

#[test]
fn two_processes_exchange_records_with_futex_wake_ups() {
    if let Ok(path) = std::env::var(CLIENT_ENV) {
        client(&path);
        return;
    }
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("larder.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([TEST_NAME, "--exact", "--nocapture"])
        .env(CLIENT_ENV, &path)
        .spawn()
        .unwrap();
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let stream = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(child.try_wait().unwrap().is_none(), "the client exited before connecting");
                assert!(Instant::now() < deadline, "the client did not connect");
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    stream.set_nonblocking(false).unwrap();
    assert_eq!(peer_credentials(&stream).unwrap().pid, child.id() as i32);
    assert!(read_hello(&stream, WAIT).unwrap().is_supported());
    let (region, region_fd) = Region::create(layout()).unwrap();
    let (doorbell, doorbell_fd) = Doorbell::create(layout().workers).unwrap();
    let welcome =
        Welcome { epoch: 7, client_id: 1, layout: layout(), primary_worker: 0, max_open_handles: 16, max_in_flight: 4 };
    send_welcome(&stream, &welcome, &region_fd, &doorbell_fd).unwrap();
    drop((region_fd, doorbell_fd));

    let rings = region.server_rings(WORKER).unwrap();
    let (mut served, mut slept, mut timeouts) = (0u64, 0u64, 0u64);
    let mut out = Vec::new();
    while served < ROUND_TRIPS {
        if rings.receive(&mut out).unwrap() {
            let index = u64::from_le_bytes(out[..8].try_into().unwrap());
            assert_eq!(index, served, "requests out of order");
            assert_eq!(out, request(index));
            let data = region.data().copy_out(data_offset(index), 8).unwrap();
            assert!(rings.send(&completion(&out, &data)).unwrap(), "the client reaps before sending more");
            rings.wake_client().unwrap();
            served += 1;
            continue;
        }
        let seen = doorbell.seen(WORKER).unwrap();
        rings.set_sleeping(true);
        if rings.has_request() {
            rings.set_sleeping(false);
            continue;
        }
        match doorbell.wait(WORKER, seen, WAIT).unwrap() {
            Wake::TimedOut => timeouts += 1,
            _ => slept += 1,
        }
        rings.set_sleeping(false);
        assert!(child.try_wait().unwrap().is_none(), "the client exited after {served} requests");
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "client: {status}");
    assert_eq!(timeouts, 0, "the worker missed a wake-up");
    assert!(slept > 0, "the worker never slept on the doorbell");
    println!("server: {served} requests, slept on the doorbell {slept} times");
}

fn client(path: &str) {
    let stream = UnixStream::connect(path).unwrap();
    let connected = client_handshake(&stream, WAIT).unwrap();
    assert_eq!(connected.welcome.epoch, 7);
    let rings = connected.region.client_rings(WORKER).unwrap();
    let data = connected.region.data();
    let (mut woken, mut ready) = (0u64, 0u64);
    let mut out = Vec::new();
    for index in 0..ROUND_TRIPS {
        let bytes = index.wrapping_mul(0x0101_0101_0101_0101).to_le_bytes();
        data.copy_in(data_offset(index), &bytes).unwrap();
        assert!(connected.region.client_rings(WORKER).unwrap().send(&request(index)).unwrap());
        if rings.server_sleeping() {
            connected.doorbell.ring(WORKER).unwrap();
        }
        // No spinning: every wait that finds nothing sleeps on the futex.
        match rings.wait_for_completion(&mut larder_protocol::backoff::Spinner::fixed(0), WAIT).unwrap() {
            Wake::TimedOut => panic!("request {index}: no completion within {WAIT:?} (a lost wake-up)"),
            Wake::Woken => woken += 1,
            Wake::Ready => ready += 1,
        }
        assert!(rings.receive(&mut out).unwrap());
        assert_eq!(out, completion(&request(index), &bytes), "completion {index}");
    }
    assert!(woken > 0, "the client never slept on its completion ring ({ready} ready at once)");
    println!("client: {woken} woken, {ready} ready at once");
}
