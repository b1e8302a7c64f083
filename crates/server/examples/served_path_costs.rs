//! The server's own CPU cost per request, without a round trip (run with
//! `cargo run --release -p larder-server --example served_path_costs`):
//! for a stat by path, an open and close by path and a random 4 KiB read,
//! the engine's calls alone (what Larder embedded does) and the served
//! path in this thread: the request encoded and decoded as it crosses the
//! ring, executed by `larder_server::execute` for a session, and its
//! answer encoded. The difference is what serving adds besides the ring
//! and the wake-ups, which a busy machine's round trips hide. Prints the
//! fastest of several batches, in nanoseconds per call.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Instant;

use larder_fs::{Cred, Fs, FsOptions};
use larder_protocol::codec::{decode_request, encode_request, encode_response};
use larder_protocol::message::{Request, Response};
use larder_server::{execute, Limits, ServerState, VecMemory};

/// Calls per batch.
const CALLS: u32 = 1_000;
/// Batches; the fastest counts.
const BATCHES: u32 = 200;
/// Files the stats and opens go round.
const FILES: u32 = 1_000;
/// 4 KiB blocks of the file read.
const BLOCKS: u64 = 4_096;

/// The fastest batch's nanoseconds per call of `call(i)`.
fn per_call(mut call: impl FnMut(u32)) -> f64 {
    let mut best = f64::MAX;
    for batch in 0..=BATCHES {
        let started = Instant::now();
        for i in 0..CALLS {
            call(i);
        }
        let nanos = started.elapsed().as_nanos() as f64 / f64::from(CALLS);
        // The first batch warms up.
        if batch > 0 {
            best = best.min(nanos);
        }
    }
    best
}

/// A random block number for call `i` (a fixed sequence).
fn block(i: u32) -> u64 {
    (u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20) % BLOCKS
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fs = Arc::new(Fs::create(&store, FsOptions::default()).unwrap());
    let (uid, gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
    let cred = Cred::new(uid, gid, Vec::new());
    fs.mkdir(&cred, fs.root(), b"bench", 0o755).unwrap();
    let bench = fs.lookup(&cred, fs.root(), b"bench").unwrap().ino;
    let files = fs.mkdir(&cred, bench, b"dir", 0o755).unwrap().ino;
    for i in 0..FILES {
        let (_, h) = fs.create_file(&cred, files, format!("f{i}").as_bytes(), 0o644, libc::O_WRONLY).unwrap();
        fs.write(&cred, h, 0, &[7u8; 1024]).unwrap();
        fs.release(h).unwrap();
    }
    let (_, h) = fs.create_file(&cred, bench, b"big", 0o644, libc::O_WRONLY).unwrap();
    // In 1 MiB writes, as the server suite writes its file: large writes
    // go to containers, not the log.
    let chunk = vec![7u8; 1 << 20];
    for at in (0..BLOCKS * 4096).step_by(chunk.len()) {
        fs.write(&cred, h, at, &chunk).unwrap();
    }
    fs.release(h).unwrap();
    fs.sync().unwrap();
    let paths: Vec<Vec<u8>> = (0..FILES).map(|i| format!("/bench/dir/f{i}").into_bytes()).collect();
    let path = |i: u32| &paths[(i % FILES) as usize];

    let state = ServerState::new(Arc::clone(&fs), Limits::default(), 1);
    let session = state.open_session(uid, gid, Vec::new()).unwrap();
    let memory = VecMemory::new(0);
    let (mut wire, mut answer) = (Vec::new(), Vec::new());
    let mut serve = |request: Request| -> Response {
        wire.clear();
        encode_request(1, &request, &mut wire);
        let (id, request) = decode_request(&wire).unwrap();
        let response = execute(&state, &session, request, &memory).unwrap();
        answer.clear();
        encode_response(id, &response, &mut answer);
        response
    };
    let big =
        match serve(Request::OpenPath { path: b"/bench/big".to_vec(), flags: libc::O_RDONLY, read: 0, lease: false }) {
            Response::PathOpened { handle, .. } => handle,
            other => panic!("opening the big file: {other:?}"),
        };
    let engine_big = fs.open_file(&cred, fs.resolve(&cred, b"/bench/big", true).unwrap().attr.unwrap().ino, 0).unwrap();

    let mut page = vec![0u8; 4096];
    let engine_stat = per_call(|i| assert!(fs.resolve(&cred, path(i), true).unwrap().attr.is_some()));
    let engine_open = per_call(|i| {
        let ino = fs.resolve(&cred, path(i), true).unwrap().attr.unwrap().ino;
        fs.release(fs.open_file(&cred, ino, libc::O_RDONLY).unwrap()).unwrap();
    });
    let engine_read = per_call(|i| assert_eq!(fs.read_into(engine_big, block(i) * 4096, &mut page).unwrap(), 4096));

    let served_stat = per_call(|i| {
        let response = serve(Request::Resolve { path: path(i).clone(), follow: true });
        assert!(matches!(response, Response::Resolved { .. }), "{response:?}");
    });
    let served_open = per_call(|i| {
        let request = Request::OpenPath { path: path(i).clone(), flags: libc::O_RDONLY, read: 0, lease: false };
        let Response::PathOpened { handle, .. } = serve(request) else { panic!("open failed") };
        assert!(matches!(serve(Request::Release { handle }), Response::Done));
    });
    let served_read = per_call(|i| {
        let response = serve(Request::Read { handle: big, offset: block(i) * 4096, length: 4096 });
        assert!(matches!(&response, Response::Data(d) if d.len() == 4096));
    });
    println!("op          engine ns   served ns   served - engine ns");
    for (op, engine, served) in [
        ("stat", engine_stat, served_stat),
        ("open-close", engine_open, served_open),
        ("read4k-rand", engine_read, served_read),
    ] {
        println!("{op:<11} {engine:>9.0}   {served:>9.0}   {:>9.0}", served - engine);
    }
}
