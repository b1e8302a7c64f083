//! Setup shared by the server tests: a server over a fresh store in a
//! temporary directory, sessions of chosen users, and request helpers.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;

use larder_fs::{Fs, FsOptions};
use larder_object::meta::{map_prefix, Map};
use larder_object::CreationOptions;
use larder_protocol::message::{Request, Response};
use larder_server::{execute, Limits, Server, ServerOptions, ServerState, Session, VecMemory};

/// Bytes of the test data area.
pub const AREA: usize = 1 << 20;

/// A server over a fresh store, kept with its directory.
pub struct TestServer {
    pub server: ServerState,
    pub dir: tempfile::TempDir,
}

/// Small containers and log segments: a store is quick to create.
pub fn options() -> FsOptions {
    let creation =
        CreationOptions { container_bytes: 4 << 20, log_segment_bytes: 1 << 20, ..CreationOptions::default() };
    FsOptions { creation, ..FsOptions::default() }
}

/// A server with `limits` over a fresh store.
pub fn server_with(limits: Limits) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let fs = Fs::create(&dir.path().join("store"), options()).unwrap();
    TestServer { server: ServerState::new(Arc::new(fs), limits, 7), dir }
}

/// A server with the default limits.
pub fn server() -> TestServer {
    server_with(Limits::default())
}

impl TestServer {
    /// A session of `uid`/`gid` with no supplementary groups.
    pub fn session(&self, uid: u32, gid: u32) -> Session {
        self.server.open_session(uid, gid, Vec::new()).unwrap()
    }

    /// Executes `request` with a fresh data area; panics on a violation.
    pub fn run(&self, session: &Session, request: Request) -> Response {
        self.run_in(session, request, &VecMemory::new(AREA))
    }

    /// Executes `request` with `memory` as the data area.
    pub fn run_in(&self, session: &Session, request: Request, memory: &VecMemory) -> Response {
        execute(&self.server, session, request, memory).unwrap()
    }

    /// Objects with an orphan record (unnamed, awaiting freeing).
    pub fn orphans(&self) -> usize {
        self.server.fs().store().index().prefix(&map_prefix(Map::Orphans), true).unwrap().count()
    }

    /// Panics unless fsck finds the store clean.
    pub fn assert_fsck_clean(&self) {
        let report = larder_fsck::check(self.server.fs().store(), &mut |_| {}).unwrap();
        assert!(report.is_clean(), "fsck: {report:?}");
    }
}

/// The errno of an error response; panics on anything else.
pub fn errno(r: Response) -> i32 {
    match r {
        Response::Error { errno, .. } => errno,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// The handle of a `Handle` response.
pub fn handle(r: Response) -> u64 {
    match r {
        Response::Handle(h) => h,
        Response::Created { handle, .. } => handle,
        Response::Opened { handle, .. } => handle,
        other => panic!("expected a handle, got {other:?}"),
    }
}

/// The inode of an `Attributes` or `Created` response.
pub fn ino(r: Response) -> u64 {
    match r {
        Response::Attributes(a) => a.ino,
        Response::Created { attributes, .. } => attributes.ino,
        other => panic!("expected attributes, got {other:?}"),
    }
}

/// A running server with `limits` (one worker) over a fresh store; the
/// directory holding the store, and the store's path.
pub fn served(limits: Limits) -> (Server, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fs = Fs::create(&store, options()).unwrap();
    let options = ServerOptions { limits, ..ServerOptions::for_store(&store) }.workers(1..=1);
    let server = Server::start(Arc::new(fs), options).unwrap();
    (server, dir, store)
}

/// A client speaking the protocol by hand (leases it takes, it never
/// gives back: it acknowledges no revocation).
pub struct SilentClient {
    _stream: std::os::unix::net::UnixStream,
    pub connected: larder_protocol::handshake::Connected,
    next: u64,
}

impl SilentClient {
    pub fn connect(socket: &std::path::Path) -> SilentClient {
        let stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
        let connected =
            larder_protocol::handshake::client_handshake(&stream, std::time::Duration::from_secs(5)).unwrap();
        SilentClient { _stream: stream, connected, next: 1 }
    }

    pub fn call(&mut self, request: &Request) -> Response {
        let id = self.next;
        self.next += 1;
        let mut record = Vec::new();
        larder_protocol::codec::encode_request(id, request, &mut record);
        let rings = self.connected.region.client_rings(0).unwrap();
        assert!(rings.send(&record).unwrap());
        self.connected.doorbell.ring(0).unwrap();
        let mut reply = Vec::new();
        loop {
            if rings.receive(&mut reply).unwrap() {
                let (got, response) = larder_protocol::codec::decode_response(&reply).unwrap();
                assert_eq!(got, id);
                return response;
            }
            rings
                .wait_for_completion(
                    &mut larder_protocol::backoff::Spinner::fixed(1000),
                    std::time::Duration::from_millis(100),
                )
                .unwrap();
        }
    }
}

/// Reads `file` whole, 64 KiB at a time until a short read.
pub fn read_through(file: &larder_client::File) -> Vec<u8> {
    let mut buf = vec![0u8; 64 << 10];
    let mut out = Vec::new();
    loop {
        let n = file.read_at(&mut buf, out.len() as u64).unwrap();
        out.extend_from_slice(&buf[..n]);
        if n < buf.len() {
            return out;
        }
    }
}

/// Writes `data` at `offset` through `file`, posted or waited (all of
/// it), and into `model`, the bytes the file must hold, as the file
/// takes it (grown with zeros up to the write).
pub fn write_both(file: &larder_client::File, model: &mut Vec<u8>, offset: u64, data: &[u8], posted: bool) {
    if posted {
        file.write_posted(data, offset).unwrap();
    } else {
        assert_eq!(file.write_at(data, offset).unwrap(), data.len());
    }
    let (start, end) = (offset as usize, offset as usize + data.len());
    if model.len() < end {
        model.resize(end, 0);
    }
    model[start..end].copy_from_slice(data);
}
