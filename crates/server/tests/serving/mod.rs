//! Setup shared by the tests of a running server: a `Server` over a fresh
//! store in a temporary directory, clients of it, and a raw client that
//! speaks the protocol by hand (and can lie, as a hostile peer can).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::ops::RangeInclusive;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use larder_client::Client;
use larder_fs::{Fs, FsOptions};
use larder_object::meta::{map_prefix, Map};
use larder_object::CreationOptions;
use larder_protocol::codec::{decode_response, encode_request};
use larder_protocol::doorbell::Doorbell;
use larder_protocol::futex::Wake;
use larder_protocol::handshake::{client_handshake, Welcome};
use larder_protocol::message::{Request, Response};
use larder_protocol::region::Region;
use larder_server::{Limits, Server, ServerOptions};

/// How long a test waits for something the server does at once (a drop,
/// a reclaim) before it calls it a failure.
pub const PATIENCE: Duration = Duration::from_secs(5);

/// Small containers and log segments: a store is quick to create.
pub fn fs_options() -> FsOptions {
    let creation =
        CreationOptions { container_bytes: 8 << 20, log_segment_bytes: 2 << 20, ..CreationOptions::default() };
    FsOptions { creation, ..FsOptions::default() }
}

/// Moves file `ino` to worker `to` and waits until the move landed (the
/// owner moves it when it next looks); panics after `PATIENCE`.
pub fn move_file_and_wait(server: &Server, ino: u64, to: u32) {
    assert!(server.move_file(ino, to), "file {ino} moved to worker {to}");
    let deadline = Instant::now() + PATIENCE;
    while server.file_owner(ino) != Some(to) {
        assert!(Instant::now() < deadline, "the move of file {ino} to worker {to} never landed");
        std::thread::yield_now();
    }
}

/// A running server over a fresh store, kept with its directory.
pub struct Served {
    pub server: Option<Server>,
    /// None while the store is being reopened.
    pub fs: Option<Arc<Fs>>,
    pub store: PathBuf,
    pub dir: tempfile::TempDir,
}

/// Limits small enough for tests: 4 MiB data areas, the given workers.
pub fn limits(workers: RangeInclusive<u32>) -> Limits {
    Limits { data_area_bytes: 4 << 20, min_workers: *workers.start(), max_workers: *workers.end(), ..Limits::default() }
}

/// A server with `limits` over a fresh store.
pub fn serve_with(limits: Limits) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fs = Arc::new(Fs::create(&store, fs_options()).unwrap());
    let options = ServerOptions { limits, ..ServerOptions::for_store(&store) };
    let server = Server::start(fs.clone(), options).unwrap();
    Served { server: Some(server), fs: Some(fs), store, dir }
}

/// A server with one worker.
pub fn serve() -> Served {
    serve_with(limits(1..=1))
}

impl Served {
    /// The server.
    pub fn server(&self) -> &Server {
        self.server.as_ref().unwrap()
    }

    /// Its socket.
    pub fn socket(&self) -> PathBuf {
        larder_client::socket_of(&self.store)
    }

    /// A new client.
    pub fn client(&self) -> Client {
        Client::connect_socket(&self.socket()).unwrap()
    }

    /// A new raw client.
    pub fn raw(&self) -> Raw {
        Raw::connect(&self.socket())
    }

    /// Waits until at most `n` sessions are open; panics after `PATIENCE`.
    pub fn wait_for_clients(&self, n: usize) {
        assert!(
            self.server().wait_for_clients(n, PATIENCE),
            "{} clients still open after {PATIENCE:?}, expected {n}",
            self.server().clients()
        );
    }

    /// Stops the server (everything synced).
    pub fn shutdown(&mut self) {
        self.server.take().unwrap().shutdown().unwrap();
    }

    /// The file system the server serves.
    pub fn fs(&self) -> &Arc<Fs> {
        self.fs.as_ref().unwrap()
    }

    /// Stops the server if it runs, closes the store and opens it again
    /// (recovering it), then serves it with `limits`.
    pub fn restart(&mut self, limits: Limits) {
        if self.server.is_some() {
            self.shutdown();
        }
        let Ok(fs) = Arc::try_unwrap(self.fs.take().unwrap()) else {
            panic!("the stopped server still holds the store")
        };
        fs.close().unwrap();
        let fs = Arc::new(Fs::open(&self.store, fs_options()).unwrap());
        let options = ServerOptions { limits, ..ServerOptions::for_store(&self.store) };
        self.server = Some(Server::start(fs.clone(), options).unwrap());
        self.fs = Some(fs);
    }

    /// Objects with an orphan record (unnamed, awaiting freeing).
    pub fn orphans(&self) -> usize {
        self.fs().store().index().prefix(&map_prefix(Map::Orphans), true).unwrap().count()
    }

    /// Stops the server if it runs, then panics unless fsck finds the
    /// store clean.
    pub fn assert_fsck_clean(&mut self) {
        if self.server.is_some() {
            self.shutdown();
        }
        let report = larder_fsck::check(self.fs().store(), &mut |_| {}).unwrap();
        assert!(report.is_clean(), "fsck: {report:?}");
    }
}

/// A client that speaks the protocol by hand: it can send any record,
/// write any byte of its region, and never reap its completions.
pub struct Raw {
    pub stream: UnixStream,
    pub region: Region,
    pub doorbell: Doorbell,
    pub welcome: Welcome,
    next_id: std::cell::Cell<u64>,
    record: std::cell::RefCell<Vec<u8>>,
}

impl Raw {
    /// Connects and shakes hands.
    pub fn connect(socket: &Path) -> Raw {
        let stream = UnixStream::connect(socket).unwrap();
        let connected = client_handshake(&stream, Duration::from_secs(5)).unwrap();
        Raw {
            stream,
            region: connected.region,
            doorbell: connected.doorbell,
            welcome: connected.welcome,
            next_id: std::cell::Cell::new(1),
            record: std::cell::RefCell::new(Vec::new()),
        }
    }

    /// A fresh request id.
    pub fn id(&self) -> u64 {
        self.next_id.set(self.next_id.get() + 1);
        self.next_id.get()
    }

    /// Sends `request` with id `id` to `worker`; false if the ring is full.
    pub fn send_as(&self, worker: u32, id: u64, request: &Request) -> bool {
        let mut record = Vec::new();
        encode_request(id, request, &mut record);
        self.send_record(worker, &record)
    }

    /// Sends an encoded record to `worker` and rings it; false if full.
    pub fn send_record(&self, worker: u32, record: &[u8]) -> bool {
        let rings = self.region.client_rings(worker).unwrap();
        let sent = rings.send(record).unwrap();
        if sent {
            self.ring(worker);
        }
        sent
    }

    /// Rings `worker`'s doorbell, as a client does after publishing.
    pub fn ring(&self, worker: u32) {
        self.doorbell.ring(worker).unwrap();
    }

    /// The next completion from `worker`, waiting at most `timeout`.
    pub fn receive(&self, worker: u32, timeout: Duration) -> Option<(u64, Response)> {
        let rings = self.region.client_rings(worker).unwrap();
        let deadline = Instant::now() + timeout;
        let mut record = self.record.borrow_mut();
        loop {
            if rings.receive(&mut record).unwrap() {
                return Some(decode_response(&record).unwrap());
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            match rings
                .wait_for_completion(
                    &mut larder_protocol::backoff::Spinner::fixed(1000),
                    left.min(Duration::from_millis(50)),
                )
                .unwrap()
            {
                Wake::Ready | Wake::Woken | Wake::TimedOut => {}
            }
        }
    }

    /// Sends `request` to `worker` and returns its answer.
    pub fn call(&self, worker: u32, request: &Request) -> Response {
        let id = self.id();
        assert!(self.send_as(worker, id, request), "the request ring is full");
        let (got, response) = self.receive(worker, PATIENCE).expect("no answer");
        assert_eq!(got, id, "the answer carries the request's id");
        response
    }

    /// Sends `request` to the primary and follows redirects.
    pub fn call_owner(&self, request: &Request) -> Response {
        let mut worker = self.welcome.primary_worker;
        loop {
            match self.call(worker, request) {
                Response::Redirect { worker: to } => worker = to,
                other => return other,
            }
        }
    }

    /// Whether the server hung up this client's socket within `timeout`.
    pub fn dropped_within(&self, timeout: Duration) -> bool {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
        let mut byte = [0u8; 1];
        match (&self.stream).read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }

    /// Offset in the region of `worker`'s request ring control block.
    pub fn request_control(&self, worker: u32) -> u64 {
        self.welcome.layout.request_ring(worker).control
    }

    /// Offset in the region of `worker`'s request ring bytes.
    pub fn request_slots(&self, worker: u32) -> u64 {
        self.welcome.layout.request_ring(worker).slots
    }

    /// Offset in the region of `worker`'s completion ring control block.
    pub fn completion_control(&self, worker: u32) -> u64 {
        self.welcome.layout.completion_ring(worker).control
    }

    /// Reads a little-endian word of the region.
    pub fn word(&self, offset: u64) -> u32 {
        let mut bytes = [0u8; 4];
        self.region.read_bytes(offset, &mut bytes).unwrap();
        u32::from_le_bytes(bytes)
    }

    /// Writes a little-endian word of the region.
    pub fn set_word(&self, offset: u64, value: u32) {
        self.region.write_bytes(offset, &value.to_le_bytes()).unwrap();
    }
}

/// Asserts `client` is served and sees correct data: a put of a fresh
/// value and its get, in bucket `b` (made if missing).
pub fn assert_served(client: &Client, tag: &str) {
    match client.create_bucket("b") {
        Ok(()) => {}
        Err(e) if e.errno() == libc::EEXIST => {}
        Err(e) => panic!("create_bucket: {e}"),
    }
    let value = format!("value of {tag}").into_bytes();
    client.put("b", tag, &value, larder_client::Durability::Buffered).unwrap();
    assert_eq!(client.get("b", tag).unwrap(), Some(value), "{tag}");
}

/// Bytes that differ with `seed` and position.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
