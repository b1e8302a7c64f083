//! A leased client over a working set of many files (a web server's):
//! more files than the 4,096 lease slots of protocol version 4 stay
//! cached whole, opens kept after close are reused once their lease ran
//! out through one renewal, and the cache's page limits are the client's
//! options.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use larder_client::{Client, ClientOptions};
use larder_server::Limits;

/// Opens `path`, reads it whole through `read_at` with a buffer larger
/// than the file (as the webserver workload does), closes it.
fn open_read_close(client: &Client, path: &str, buf: &mut [u8]) -> Vec<u8> {
    let file = client.open(path).unwrap();
    let mut out = Vec::new();
    loop {
        let n = file.read_at(buf, out.len() as u64).unwrap();
        out.extend_from_slice(&buf[..n]);
        if n == 0 {
            break;
        }
    }
    file.close().unwrap();
    out
}

fn content(i: usize, bytes: usize) -> Vec<u8> {
    (0..bytes).map(|j| (i * 31 + j) as u8).collect()
}

/// 5,000 files (more than the 4,096 lease slots a region had) are read
/// once, each by one open by path; read again, none makes a round trip.
#[test]
fn a_working_set_beyond_4096_files_is_read_again_without_a_round_trip() {
    const FILES: usize = 5_000;
    let limits = Limits { lease_term: Duration::from_secs(60), max_open_handles: 8_192, ..Limits::default() };
    let (server, _dir, store) = common::served(limits);
    let writer = Client::connect_socket_with(&larder_client::socket_of(&store), false).unwrap();
    writer.create_dir("/www", 0o755).unwrap();
    for i in 0..FILES {
        writer.write(format!("/www/f{i}"), &content(i, 100)).unwrap();
    }
    let reader = Client::connect(&store).unwrap();
    let mut buf = vec![0u8; 4096];
    for i in 0..FILES {
        assert_eq!(open_read_close(&reader, &format!("/www/f{i}"), &mut buf), content(i, 100), "file {i}");
    }
    assert!(server.leases_held() > FILES, "a lease on every file and directory: {}", server.leases_held());
    let counters = reader.cache_counters();
    let before = server.requests();
    for i in 0..FILES {
        assert_eq!(open_read_close(&reader, &format!("/www/f{i}"), &mut buf), content(i, 100), "file {i}");
    }
    assert_eq!(server.requests(), before, "every open kept, every byte cached");
    let after = reader.cache_counters();
    assert_eq!(after.cached_opens - counters.cached_opens, FILES as u64);
    assert!(after.cached_reads - counters.cached_reads >= FILES as u64);
}

/// Once a file's lease ran out, its kept open and pages are used again
/// after one renewal; a change another client made meanwhile is seen.
#[test]
fn a_kept_open_whose_lease_ran_out_is_reused_after_one_renewal() {
    let term = Duration::from_millis(300);
    let (server, _dir, store) = common::served(Limits { lease_term: term, ..Limits::default() });
    let writer = Client::connect_socket_with(&larder_client::socket_of(&store), false).unwrap();
    writer.create_dir("/www", 0o755).unwrap();
    for i in 0..4 {
        writer.write(format!("/www/p{i}"), &content(i, 16 << 10)).unwrap();
    }
    let reader = Client::connect(&store).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    for i in 0..4 {
        assert_eq!(open_read_close(&reader, &format!("/www/p{i}"), &mut buf), content(i, 16 << 10));
    }
    let ran_out = Instant::now() + term;
    while Instant::now() <= ran_out {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Another client's write after the reader's lease ran out: the server
    // still holds the lease, so the write revokes it first.
    let changed = content(99, 16 << 10);
    writer.write("/www/p3", &changed).unwrap();
    // The directories' leases ran out too: renew them with a first open.
    assert_eq!(open_read_close(&reader, "/www/p0", &mut buf), content(0, 16 << 10));
    for i in 1..3 {
        let opens = reader.cache_counters().cached_opens;
        let before = server.requests();
        assert_eq!(open_read_close(&reader, &format!("/www/p{i}"), &mut buf), content(i, 16 << 10), "file {i}");
        assert_eq!(server.requests() - before, 1, "file {i}: the lease's renewal, nothing more");
        assert_eq!(reader.cache_counters().cached_opens, opens + 1, "file {i}: the kept open");
    }
    assert_eq!(open_read_close(&reader, "/www/p3", &mut buf), changed, "the write made while the lease ran out");
}

/// The cache holds at most its `cache_page_bytes`; reads beyond are
/// served, and a file may fill up to an eighth of the default 128 MiB
/// (a 4 MiB file is cached whole).
#[test]
fn the_page_cache_keeps_to_its_option_and_caches_large_files_whole() {
    let (server, _dir, store) = common::served(Limits { lease_term: Duration::from_secs(60), ..Limits::default() });
    let socket = larder_client::socket_of(&store);
    let writer = Client::connect_socket_with(&socket, false).unwrap();
    writer.create_dir("/www", 0o755).unwrap();
    for i in 0..8 {
        writer.write(format!("/www/p{i}"), &content(i, 16 << 10)).unwrap();
    }
    let big = content(7, 4 << 20);
    writer.write("/www/big", &big).unwrap();

    let small =
        Client::connect_socket_with_options(&socket, &ClientOptions { leases: true, cache_page_bytes: 64 << 10 })
            .unwrap();
    let mut buf = vec![0u8; 64 << 10];
    for i in 0..8 {
        assert_eq!(open_read_close(&small, &format!("/www/p{i}"), &mut buf), content(i, 16 << 10));
    }
    let before = server.requests();
    for i in 0..8 {
        assert_eq!(open_read_close(&small, &format!("/www/p{i}"), &mut buf), content(i, 16 << 10));
    }
    // The end of each file is cached as an empty page, which takes no room.
    assert_eq!(server.requests() - before, 4, "64 KiB hold four files' pages; the other four read through");

    let default = Client::connect_socket_with_options(&socket, &ClientOptions::default()).unwrap();
    assert_eq!(open_read_close(&default, "/www/big", &mut buf), big);
    let before = server.requests();
    assert_eq!(open_read_close(&default, "/www/big", &mut buf), big);
    assert_eq!(server.requests(), before, "4 MiB cached whole");
}
