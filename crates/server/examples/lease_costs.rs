//! What leases save, measured through the Rust client against a server in
//! this process (run with `cargo run --release -p larder-server --example
//! lease_costs`): an open and close of a file, a 4 KiB read and a stat,
//! each with the client's lease cache and without it, the same by system
//! calls on the host's file system, and a round trip that does nothing,
//! for scale. Prints nanoseconds per call.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Instant;

use larder_client::Client;
use larder_fs::{Fs, FsOptions};
use larder_server::{Server, ServerOptions};

const ROUNDS: u32 = 20_000;

fn per_call(mut call: impl FnMut()) -> f64 {
    for _ in 0..ROUNDS / 10 {
        call();
    }
    let started = Instant::now();
    for _ in 0..ROUNDS {
        call();
    }
    started.elapsed().as_nanos() as f64 / f64::from(ROUNDS)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fs = Fs::create(&store, FsOptions::default()).unwrap();
    let server = Server::start(Arc::new(fs), ServerOptions::for_store(&store).workers(1..=1)).unwrap();
    let socket = larder_client::socket_of(&store);
    let leased = Client::connect_socket_with(&socket, true).unwrap();
    let plain = Client::connect_socket_with(&socket, false).unwrap();
    leased.write("/file", &vec![1u8; 64 << 10]).unwrap();
    println!("round trip (ping)        {:>8.0} ns", per_call(|| assert_ne!(plain.ping().unwrap(), 0)));
    for (name, client) in [("unleased", &plain), ("leased", &leased)] {
        let open = per_call(|| drop(client.open("/file").unwrap()));
        let file = client.open("/file").unwrap();
        let mut page = vec![0u8; 4096];
        let read = per_call(|| assert_eq!(file.read_at(&mut page, 8192).unwrap(), 4096));
        let stat = per_call(|| assert_eq!(file.metadata().unwrap().len(), 64 << 10));
        println!("{name:<9} open+close {open:>8.0} ns   4 KiB read {read:>8.0} ns   stat {stat:>8.0} ns");
    }
    // The host's file system, by system calls, for scale (the temporary
    // directory's file system: ext4 where it is one).
    let host = dir.path().join("host-file");
    std::fs::write(&host, vec![1u8; 64 << 10]).unwrap();
    let open = per_call(|| drop(std::fs::File::open(&host).unwrap()));
    let file = std::fs::File::open(&host).unwrap();
    let mut page = vec![0u8; 4096];
    let read = per_call(|| assert_eq!(std::os::unix::fs::FileExt::read_at(&file, &mut page, 8192).unwrap(), 4096));
    let stat = per_call(|| assert_eq!(file.metadata().unwrap().len(), 64 << 10));
    println!("host fs   open+close {open:>8.0} ns   4 KiB read {read:>8.0} ns   stat {stat:>8.0} ns");
    let requests = server.requests();
    println!("server requests executed: {requests}");
}
