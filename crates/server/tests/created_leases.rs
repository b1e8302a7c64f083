//! A file a leased client creates comes with a lease (`Create` with
//! `lease`, protocol version 7), and the client's own writes fill its
//! cached pages: it reads back what it wrote without a round trip, as a
//! process reads back from the kernel's page cache what it wrote. Another
//! client's write revokes the lease first; a client that never answers
//! the revocation delays the writer by at most two terms.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{read_through, write_both, SilentClient};
use larder_client::{Client, OpenOptions};
use larder_protocol::message::{Request, Response};
use larder_server::Limits;

fn long_term() -> Limits {
    Limits { lease_term: Duration::from_secs(30), ..Limits::default() }
}

/// Bytes of file `i`, 16 KiB and a few more for odd ones (a short last
/// page).
fn content(i: usize) -> Vec<u8> {
    let length = (16 << 10) + (i % 2) * 100;
    (0..length).map(|b| (b * 7 + i) as u8).collect()
}

/// Creates `path` for reading and writing and writes `data` into it by
/// posted writes of 4 KiB and 100 bytes, as a web server's setup would,
/// then drops it (the close kept under the lease).
fn create_and_write(client: &Client, path: &str, data: &[u8]) {
    let file = OpenOptions::new().read(true).write(true).create(true).open(client, path).unwrap();
    let mut at = 0;
    for (n, chunk) in data.chunks(4096).enumerate() {
        if n % 2 == 0 {
            file.write_posted(chunk, at as u64).unwrap();
        } else {
            assert_eq!(file.write_at(chunk, at as u64).unwrap(), chunk.len());
        }
        at += chunk.len();
    }
}

/// Reads `path` whole as the web server does: open, read of 64 KiB at a
/// time until a short one, close.
fn read_whole(client: &Client, path: &str) -> Vec<u8> {
    read_through(&client.open(path).unwrap())
}

/// What the creating client caches after create, writes and a read is
/// the file's content (as another, uncached client reads it from the
/// store), and its opens and reads of the files it wrote reach the server
/// not once: the names, the opens kept after close and the pages all
/// came with the creates and the writes.
#[test]
fn files_a_client_created_and_wrote_are_read_back_from_its_cache() {
    let (server, _dir, store) = common::served(long_term());
    let client = Client::connect(&store).unwrap();
    client.create_dir("/www", 0o755).unwrap();
    // One file first: the walk takes the directory's lease once.
    create_and_write(&client, "/www/p0", &content(0));
    for i in 1..20 {
        create_and_write(&client, &format!("/www/p{i}"), &content(i));
    }
    // Every posted write answered: nothing left to reach the server later.
    client.ping().unwrap();
    let before = server.requests();
    let counted = client.cache_counters();
    for i in 0..20 {
        assert_eq!(read_whole(&client, &format!("/www/p{i}")), content(i), "file {i}");
    }
    assert_eq!(server.requests(), before, "reads of files the client wrote reached the server");
    let now = client.cache_counters();
    assert_eq!(now.cached_opens - counted.cached_opens, 20);
    assert_eq!(now.cached_reads - counted.cached_reads, 20);
    let plain = Client::connect_socket_with(&larder_client::socket_of(&store), false).unwrap();
    for i in 0..20 {
        assert_eq!(read_whole(&plain, &format!("/www/p{i}")), content(i), "file {i} in the store");
    }
}

/// Overwrites and writes past the end through the creating client keep
/// its cache equal to the store, whatever mixture of posted and waited
/// writes made them.
#[test]
fn overwrites_and_holes_keep_the_cache_equal_to_the_store() {
    let (server, _dir, store) = common::served(long_term());
    let client = Client::connect(&store).unwrap();
    let plain = Client::connect_socket_with(&larder_client::socket_of(&store), false).unwrap();
    let mut model = content(1);
    create_and_write(&client, "/f", &model);
    let file = OpenOptions::new().read(true).write(true).open(&client, "/f").unwrap();
    let writes: [(u64, usize, u8); 5] = [(10, 5000, 1), (20_000, 100, 2), (4096, 4096, 3), (40_000, 1, 4), (0, 3, 5)];
    for (n, (offset, length, byte)) in writes.into_iter().enumerate() {
        write_both(&file, &mut model, offset, &vec![byte; length], n % 2 == 0);
        // Every request either client sent so far is counted before the
        // count is taken: the creator's posted write is answered before
        // its ping, and the plain client's close of the last round is a
        // posted release, which the worker may run after the creator's
        // ping (it serves the clients' rings in turn, the creator's
        // first), unless the plain client's own ping waits for it.
        client.ping().unwrap();
        plain.ping().unwrap();
        let before = server.requests();
        assert_eq!(read_through(&file), model, "after write {n}");
        // The write past the end left a page partly written and uncached:
        // that read asks the server; the others do not.
        if n != 1 && n != 3 {
            assert_eq!(server.requests(), before, "after write {n}: the read reached the server");
        }
        assert_eq!(read_whole(&plain, "/f"), model, "after write {n}: the store");
    }
}

/// Another client's write to a file the first client created and cached
/// revokes its lease before it executes; the first client then reads the
/// new bytes.
#[test]
fn another_clients_write_revokes_and_the_creator_reads_the_new_bytes() {
    let (_server, _dir, store) = common::served(long_term());
    let creator = Client::connect(&store).unwrap();
    let other = Client::connect(&store).unwrap();
    let mut expected = content(2);
    create_and_write(&creator, "/shared", &expected);
    assert_eq!(read_whole(&creator, "/shared"), expected);
    let revoked = creator.cache_counters().revocations;
    let file = OpenOptions::new().write(true).open(&other, "/shared").unwrap();
    file.write_at(b"CHANGED", 5000).unwrap();
    expected[5000..5007].copy_from_slice(b"CHANGED");
    assert!(creator.cache_counters().revocations > revoked, "the creator's lease was not revoked");
    assert_eq!(read_whole(&creator, "/shared"), expected);
    // And back: the creator's write revokes the other's lease.
    assert_eq!(read_whole(&other, "/shared"), expected);
    let mine = OpenOptions::new().write(true).open(&creator, "/shared").unwrap();
    mine.write_at(b"MINE", 0).unwrap();
    expected[..4].copy_from_slice(b"MINE");
    assert_eq!(read_whole(&other, "/shared"), expected);
    assert_eq!(read_whole(&creator, "/shared"), expected);
}

/// A read-only open served by a kept read-write open refuses writes, as
/// the server refuses them through a read-only handle.
#[test]
fn a_read_only_open_on_a_kept_read_write_open_refuses_writes() {
    let (_server, _dir, store) = common::served(long_term());
    let client = Client::connect(&store).unwrap();
    create_and_write(&client, "/ro", b"abc");
    let opens = client.cache_counters().cached_opens;
    let file = client.open("/ro").unwrap();
    assert_eq!(client.cache_counters().cached_opens, opens + 1, "the kept open served the read-only one");
    assert_eq!(file.write_at(b"x", 0).unwrap_err().errno(), libc::EBADF);
    // A posted one fails at the next flush point, as the server's refusal
    // of a posted write through a read-only handle does.
    file.write_posted(b"x", 0).unwrap();
    assert_eq!(file.sync_all().unwrap_err().errno(), libc::EBADF);
    file.sync_all().unwrap();
    drop(file);
    assert_eq!(read_whole(&client, "/ro"), b"abc");
}

/// The lease a create grants is revoked as any other: a client that never
/// answers delays another client's write by at most two terms.
#[test]
fn a_creator_that_never_answers_delays_a_writer_by_at_most_two_terms() {
    let term = Duration::from_secs(1);
    let (server, _dir, store) = common::served(Limits { lease_term: term, ..Limits::default() });
    let mut silent = SilentClient::connect(server.socket());
    let create = Request::Create { parent: 1, name: b"made".to_vec(), mode: 0o666, flags: libc::O_RDWR, lease: true };
    let Response::Created { lease: Some(grant), attributes, .. } = silent.call(&create) else {
        panic!("no lease with the create")
    };
    assert_eq!(attributes.size, 0);
    assert_eq!(grant.term_nanos, term.as_nanos() as u64);
    // Without asking, no lease.
    let plain = Request::Create { parent: 1, name: b"plain".to_vec(), mode: 0o666, flags: libc::O_RDWR, lease: false };
    assert!(matches!(silent.call(&plain), Response::Created { lease: None, .. }));

    let writer = Client::connect(&store).unwrap();
    let file = OpenOptions::new().write(true).open(&writer, "/made").unwrap();
    let started = Instant::now();
    file.write_at(b"after", 0).unwrap();
    let waited = started.elapsed();
    assert!(waited <= 2 * term + Duration::from_millis(300), "the writer waited {waited:?}");
    assert!(waited >= term / 4, "the writer did not wait for the lease ({waited:?})");
    assert!(silent.connected.region.leases().revoked(grant.slot, grant.sequence), "no notice was written");
    assert_eq!(read_whole(&writer, "/made"), b"after");
}
