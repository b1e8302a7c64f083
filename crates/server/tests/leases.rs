//! Leases through a running server and the Rust client: cached opens,
//! attributes and reads make no round trip; another client's change is
//! seen as soon as it returns; a client that never answers a revocation
//! delays the change by at most two terms while the worker serves others;
//! leases go with their client; `max_leases` holds.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::SilentClient;
use larder_client::{Client, Durability, OpenOptions};
use larder_fs::Fs;
use larder_protocol::message::{LeaseGrant, LeaseTarget, Request, Response};
use larder_server::{Limits, Server, ServerOptions};
use proptest::prelude::*;

fn long_term() -> Limits {
    Limits { lease_term: Duration::from_secs(30), ..Limits::default() }
}

/// Polls `done` until it holds, for at most 5 seconds.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within 5 s");
        std::thread::yield_now();
    }
}

fn read_all(client: &Client, path: &str) -> Vec<u8> {
    let mut file = client.open(path).unwrap();
    let mut out = Vec::new();
    file.read_to_end(&mut out).unwrap();
    out
}

#[test]
fn a_leased_open_stat_and_read_make_no_round_trip() {
    let (server, _dir, store) = common::served(long_term());
    let client = Client::connect(&store).unwrap();
    client.write("/cached.txt", &vec![7u8; 10_000]).unwrap();
    // Warm: the leases, the path, the open kept, the pages.
    let mut page = [0u8; 4096];
    {
        let file = client.open("/cached.txt").unwrap();
        assert_eq!(file.read_at(&mut page, 4096).unwrap(), 4096);
        assert_eq!(file.metadata().unwrap().len(), 10_000);
    }
    let before = server.requests();
    let counted = client.cache_counters();
    for _ in 0..200 {
        let file = client.open("/cached.txt").unwrap();
        assert_eq!(file.read_at(&mut page, 4096).unwrap(), 4096);
        assert_eq!(page, [7u8; 4096]);
        assert_eq!(file.metadata().unwrap().len(), 10_000);
        assert_eq!(client.metadata("/cached.txt").unwrap().len(), 10_000);
    }
    assert_eq!(server.requests(), before, "cached calls reached the server");
    let now = client.cache_counters();
    assert_eq!(now.cached_opens - counted.cached_opens, 200);
    assert!(now.cached_reads - counted.cached_reads >= 200);
    assert!(now.cached_attributes - counted.cached_attributes >= 400);
    // Without leases every open is a round trip (an open by path).
    let plain = Client::connect_socket_with(&larder_client::socket_of(&store), false).unwrap();
    let before = server.requests();
    drop(plain.open("/cached.txt").unwrap());
    // The close's release is posted, not waited for: a ping on the same
    // ring is answered after it.
    plain.ping().unwrap();
    assert_eq!(server.requests() - before, 3, "an uncached open, its close and a ping");
}

/// A file the client has not opened before is opened by path, with its
/// lease and its first bytes, in one request: a small file is read whole
/// without another; later opens and reads of it make none. Without
/// leases, `Client::read` reads a small file in one request and the
/// posted close.
#[test]
fn an_uncached_small_file_is_opened_and_read_in_one_round_trip() {
    let (server, _dir, store) = common::served(long_term());
    let writer = Client::connect(&store).unwrap();
    writer.create_dir("/www", 0o755).unwrap();
    let page = |i: usize| vec![i as u8; 16 << 10];
    for i in 0..20 {
        writer.write(format!("/www/p{i}"), &page(i)).unwrap();
    }
    let leased = Client::connect(&store).unwrap();
    // The walk of the directories and their leases, once.
    assert_eq!(read_all(&leased, "/www/p0"), page(0));
    let mut buf = vec![0u8; 64 << 10];
    for i in 1..20 {
        let before = server.requests();
        let file = leased.open(format!("/www/p{i}")).unwrap();
        assert_eq!(file.read_at(&mut buf, 0).unwrap(), 16 << 10);
        assert_eq!(buf[..16 << 10], page(i)[..], "file {i}");
        assert_eq!(file.read_at(&mut buf, 16 << 10).unwrap(), 0, "the end, from the cache");
        // Kept under the file's lease: no release.
        file.close().unwrap();
        assert_eq!(server.requests() - before, 1, "file {i}: one open by path, nothing more");
    }
    let before = server.requests();
    for i in 0..20 {
        assert_eq!(leased.read(format!("/www/p{i}")).unwrap(), page(i));
    }
    assert_eq!(server.requests(), before, "the names, opens and bytes cached by the opens by path");

    let plain = Client::connect_socket_with(&larder_client::socket_of(&store), false).unwrap();
    plain.ping().unwrap();
    for i in 0..20 {
        let before = server.requests();
        assert_eq!(plain.read(format!("/www/p{i}")).unwrap(), page(i));
        plain.ping().unwrap();
        assert_eq!(server.requests() - before, 3, "file {i}: the open with the bytes, the posted close, the ping");
    }
    // A file longer than one answer is read on through its handle.
    let long: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    writer.write("/www/long", &long).unwrap();
    assert_eq!(plain.read("/www/long").unwrap(), long);
    assert_eq!(leased.read("/www/long").unwrap(), long);
    assert!(plain.read("/www/missing").unwrap_err().is_not_found());
    assert!(leased.read("/www/missing").unwrap_err().is_not_found());
}

/// Files the leased client opened by path (their names, attributes and
/// bytes cached from that one answer) show another client's write,
/// rename, unlink and chmod as soon as it returns.
#[test]
fn files_opened_by_path_show_another_clients_changes_at_once() {
    let (_server, _dir, store) = common::served(long_term());
    let reader = Client::connect(&store).unwrap();
    let writer = Client::connect(&store).unwrap();
    writer.create_dir("/d", 0o755).unwrap();
    for name in ["a", "b", "c"] {
        writer.write(format!("/d/{name}"), format!("{name} first").as_bytes()).unwrap();
    }
    // The walk of /d once; then each file is new to the reader.
    assert_eq!(read_all(&reader, "/d/a"), b"a first");
    assert_eq!(read_all(&reader, "/d/b"), b"b first");
    assert_eq!(read_all(&reader, "/d/c"), b"c first");
    assert_eq!(reader.metadata("/d/c").unwrap().mode() & 0o777, 0o644);
    let cached = reader.cache_counters();
    assert_eq!(read_all(&reader, "/d/a"), b"a first");
    assert!(reader.cache_counters().cached_reads > cached.cached_reads, "served from the cache");

    // A write through an open file.
    let file = OpenOptions::new().write(true).open(&writer, "/d/a").unwrap();
    file.write_at(b"A", 0).unwrap();
    file.close().unwrap();
    assert_eq!(read_all(&reader, "/d/a"), b"A first");
    // A rename: the old name is gone, the new one names the file.
    writer.rename("/d/a", "/d/moved").unwrap();
    assert!(reader.open("/d/a").err().unwrap().is_not_found());
    assert_eq!(read_all(&reader, "/d/moved"), b"A first");
    // An unlink.
    writer.remove_file("/d/b").unwrap();
    assert!(reader.open("/d/b").err().unwrap().is_not_found());
    assert!(reader.read("/d/b").unwrap_err().is_not_found());
    // A chmod: the attributes, and the next open is checked.
    writer.set_permissions("/d/c", 0o000).unwrap();
    assert_eq!(reader.metadata("/d/c").unwrap().mode() & 0o777, 0);
    if test_uid() != 0 {
        assert_eq!(reader.open("/d/c").err().unwrap().errno(), libc::EACCES);
    }
    assert!(reader.cache_counters().revocations > 0);
}

/// The client's own unlink drops the removed name's lookup and the file's
/// entry, not the other lookups: a path walked before still opens without
/// a request (a cleared cache would look every name up again).
#[test]
fn an_own_unlink_keeps_every_other_lookup_cached() {
    let (server, _dir, store) = common::served(long_term());
    let client = Client::connect(&store).unwrap();
    let paths = ["/a/f1", "/a/f2", "/a/f3", "/b/g"];
    client.create_dir("/a", 0o755).unwrap();
    client.create_dir("/b", 0o755).unwrap();
    for path in paths {
        client.write(path, path.as_bytes()).unwrap();
    }
    for _ in 0..2 {
        for path in paths {
            assert_eq!(read_all(&client, path), path.as_bytes());
        }
    }
    let before = server.requests();
    for path in paths {
        assert_eq!(read_all(&client, path), path.as_bytes());
    }
    assert_eq!(server.requests(), before, "warm: everything cached");

    client.remove_file("/a/f1").unwrap();
    let before = server.requests();
    for path in &paths[1..] {
        assert_eq!(read_all(&client, path), path.as_bytes());
    }
    assert_eq!(server.requests(), before, "the unlink dropped lookups of other names");
    assert!(client.open("/a/f1").err().unwrap().is_not_found());
    assert!(client.metadata("/a/f1").unwrap_err().is_not_found());
    // The directory's listing was dropped: it shows the unlink.
    let names: Vec<Vec<u8>> = client.read_dir("/a").unwrap().map(|e| e.unwrap().name).collect();
    assert_eq!(names.len(), 2);

    // A name the cache never walked (created through a path with `.`,
    // which the server resolves: the create caches no lookup of it):
    // which file it named is not known, so every file's entry goes, but
    // the directories' lookups stay: each file opens again with one
    // request (an open by path), no lookup.
    client.write("/a/./unread", b"x").unwrap();
    client.remove_file("/a/unread").unwrap();
    for path in &paths[1..] {
        let before = server.requests();
        assert_eq!(read_all(&client, path), path.as_bytes());
        assert_eq!(server.requests() - before, 1, "{path}: more than the open by path");
    }
}

#[test]
fn another_clients_changes_are_seen_as_soon_as_they_return() {
    let (_server, _dir, store) = common::served(long_term());
    let reader = Client::connect(&store).unwrap();
    let writer = Client::connect(&store).unwrap();
    writer.write("/shared.txt", b"first version").unwrap();
    assert_eq!(read_all(&reader, "/shared.txt"), b"first version");
    assert_eq!(read_all(&reader, "/shared.txt"), b"first version");
    assert!(reader.cache_counters().cached_reads > 0);

    // A write through an open file.
    let file = OpenOptions::new().write(true).open(&writer, "/shared.txt").unwrap();
    file.write_at(b"SECOND", 0).unwrap();
    assert_eq!(read_all(&reader, "/shared.txt"), b"SECONDversion");
    // A truncate.
    file.set_len(6).unwrap();
    assert_eq!(reader.metadata("/shared.txt").unwrap().len(), 6);
    assert_eq!(read_all(&reader, "/shared.txt"), b"SECOND");
    drop(file);
    // A rewrite by path (open with O_TRUNC).
    writer.write("/shared.txt", b"third").unwrap();
    assert_eq!(read_all(&reader, "/shared.txt"), b"third");
    // A rename over it: the path names the other file at once.
    writer.write("/other.txt", b"the other file").unwrap();
    assert_eq!(read_all(&reader, "/other.txt"), b"the other file");
    writer.rename("/other.txt", "/shared.txt").unwrap();
    assert_eq!(read_all(&reader, "/shared.txt"), b"the other file");
    assert!(reader.open("/other.txt").err().unwrap().is_not_found());
    // An unlink.
    writer.remove_file("/shared.txt").unwrap();
    assert!(reader.open("/shared.txt").err().unwrap().is_not_found());
    assert!(reader.metadata("/shared.txt").unwrap_err().is_not_found());
    // A permission change on a directory on the path.
    writer.create_dir("/locked", 0o755).unwrap();
    writer.write("/locked/inside.txt", b"x").unwrap();
    assert_eq!(read_all(&reader, "/locked/inside.txt"), b"x");
    writer.set_permissions("/locked", 0o700).unwrap();
    if test_uid() != 0 {
        assert_eq!(reader.open("/locked/inside.txt").err().unwrap().errno(), libc::EACCES);
    }
    assert!(reader.cache_counters().revocations > 0);
}

/// The test's uid: root passes every permission check.
fn test_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

#[test]
fn a_kv_put_over_a_cached_file_is_seen() {
    let (_server, _dir, store) = common::served(long_term());
    let reader = Client::connect(&store).unwrap();
    let writer = Client::connect(&store).unwrap();
    writer.create_bucket("b").unwrap();
    writer.put("b", "k", b"value one", Durability::Buffered).unwrap();
    assert_eq!(read_all(&reader, "/b/k"), b"value one");
    assert_eq!(read_all(&reader, "/b/k"), b"value one");
    writer.put("b", "k", b"value two!", Durability::Buffered).unwrap();
    assert_eq!(read_all(&reader, "/b/k"), b"value two!");
    writer.delete("b", "k", Durability::Buffered).unwrap();
    assert!(reader.open("/b/k").err().unwrap().is_not_found());
}

/// What two clients do to one file, one step at a time.
#[derive(Clone, Debug)]
enum Step {
    Read { client: usize, offset: u64, length: usize },
    Write { client: usize, offset: u64, byte: u8, length: usize },
    Truncate { client: usize, size: u64 },
    Stat { client: usize },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..2usize, 0..20_000u64, 1..9_000usize).prop_map(|(client, offset, length)| Step::Read { client, offset, length }),
        2 => (0..2usize, 0..20_000u64, any::<u8>(), 1..6_000usize)
            .prop_map(|(client, offset, byte, length)| Step::Write { client, offset, byte, length }),
        1 => (0..2usize, 0..24_000u64).prop_map(|(client, size)| Step::Truncate { client, size }),
        1 => (0..2usize).prop_map(|client| Step::Stat { client }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Two caching clients against a model of the file: after each step
    /// returns, every read and stat of either client sees the model.
    #[test]
    fn two_caching_clients_always_read_the_latest_bytes(steps in proptest::collection::vec(step(), 1..120)) {
        let (_server, _dir, store) = common::served(long_term());
        let clients = [Client::connect(&store).unwrap(), Client::connect(&store).unwrap()];
        clients[0].write("/model.bin", &[]).unwrap();
        let mut model: Vec<u8> = Vec::new();
        for step in steps {
            match step {
                Step::Read { client, offset, length } => {
                    let mut file = clients[client].open("/model.bin").unwrap();
                    file.seek(SeekFrom::Start(offset)).unwrap();
                    let mut out = vec![0u8; length];
                    let mut got = 0;
                    loop {
                        let n = file.read(&mut out[got..]).unwrap();
                        if n == 0 || got + n == length { got += n; break; }
                        got += n;
                    }
                    let start = (offset as usize).min(model.len());
                    let end = (offset as usize + length).min(model.len());
                    prop_assert_eq!(&out[..got], &model[start..end]);
                }
                Step::Write { client, offset, byte, length } => {
                    let file = OpenOptions::new().write(true).open(&clients[client], "/model.bin").unwrap();
                    let data = vec![byte; length];
                    let mut done = 0;
                    while done < length {
                        done += file.write_at(&data[done..], offset + done as u64).unwrap();
                    }
                    let end = offset as usize + length;
                    if model.len() < end { model.resize(end, 0); }
                    model[offset as usize..end].fill(byte);
                }
                Step::Truncate { client, size } => {
                    let file = OpenOptions::new().write(true).open(&clients[client], "/model.bin").unwrap();
                    file.set_len(size).unwrap();
                    model.resize(size as usize, 0);
                }
                Step::Stat { client } => {
                    prop_assert_eq!(clients[client].metadata("/model.bin").unwrap().len(), model.len() as u64);
                    let file = clients[client].open("/model.bin").unwrap();
                    prop_assert_eq!(file.metadata().unwrap().len(), model.len() as u64);
                }
            }
        }
    }
}

#[test]
fn a_client_that_never_answers_delays_a_writer_by_at_most_two_terms_and_blocks_nobody_else() {
    let term = Duration::from_secs(1);
    let (server, _dir, store) = common::served(Limits { lease_term: term, ..Limits::default() });
    let writer = Client::connect(&store).unwrap();
    writer.write("/contended.txt", b"before").unwrap();
    writer.write("/elsewhere.txt", b"unrelated").unwrap();
    let bystander = Client::connect_socket_with(&larder_client::socket_of(&store), false).unwrap();
    let mut silent = SilentClient::connect(server.socket());
    let grant = silent.lease_on("/contended.txt");
    assert_eq!(grant.term_nanos, term.as_nanos() as u64);

    let file = OpenOptions::new().write(true).open(&writer, "/contended.txt").unwrap();
    let started = Instant::now();
    let writing = std::thread::spawn(move || {
        file.write_at(b"AFTER!", 0).unwrap();
        started.elapsed()
    });
    // While the write waits, the only worker serves everyone else.
    let mut slowest = Duration::ZERO;
    while !writing.is_finished() {
        let call = Instant::now();
        assert_eq!(read_all(&bystander, "/elsewhere.txt"), b"unrelated");
        slowest = slowest.max(call.elapsed());
    }
    let waited = writing.join().unwrap();
    println!("writer waited {waited:?} for a silent client (term {term:?}); slowest other call {slowest:?}");
    assert!(waited <= 2 * term + Duration::from_millis(300), "the writer waited {waited:?}");
    assert!(waited >= term / 4, "the writer did not wait for the lease ({waited:?})");
    assert!(slowest < term / 2, "another client's calls were held up ({slowest:?})");
    assert!(silent.connected.region.leases().revoked(grant.slot, grant.sequence), "no notice was written");
    assert_eq!(read_all(&bystander, "/contended.txt"), b"AFTER!");
    // The silent client's lease is gone: a new one is granted in another
    // sequence.
    let again = silent.lease_on("/contended.txt");
    assert_ne!((again.slot, again.sequence), (grant.slot, grant.sequence));
}

#[test]
fn a_client_that_answers_lets_the_writer_go_at_once() {
    let term = Duration::from_secs(20);
    let (_server, _dir, store) = common::served(Limits { lease_term: term, ..Limits::default() });
    let reader = Client::connect(&store).unwrap();
    let writer = Client::connect(&store).unwrap();
    writer.write("/quick.txt", b"one").unwrap();
    assert_eq!(read_all(&reader, "/quick.txt"), b"one");
    let file = OpenOptions::new().write(true).open(&writer, "/quick.txt").unwrap();
    let started = Instant::now();
    file.write_at(b"two", 0).unwrap();
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(2), "an answering client held the writer {waited:?}");
    assert_eq!(read_all(&reader, "/quick.txt"), b"two");
}

#[test]
fn leases_go_with_a_client_that_disconnects() {
    let (server, _dir, store) = common::served(long_term());
    let writer = Client::connect(&store).unwrap();
    for i in 0..5 {
        writer.write(format!("/f{i}"), b"bytes").unwrap();
    }
    // The writer's own: the files it created and the root it walked.
    let writers = server.leases_held();
    let reader = Client::connect(&store).unwrap();
    for i in 0..5 {
        assert_eq!(read_all(&reader, &format!("/f{i}")), b"bytes");
    }
    let held = server.leases_held();
    assert!(held >= writers + 6, "five files and the root directory: {held}");
    drop(reader);
    eventually("the reader's leases dropped", || server.leases_held() == writers);
    // A write needs no wait for a client that is gone.
    let file = OpenOptions::new().write(true).open(&writer, "/f0").unwrap();
    let started = Instant::now();
    file.write_at(b"B", 0).unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn max_leases_is_enforced_and_renewal_is_not_a_new_lease() {
    let (server, _dir, store) = common::served(Limits { max_leases: 3, ..long_term() });
    let writer = Client::connect(&store).unwrap();
    for i in 0..4 {
        writer.write(format!("/m{i}"), b"m").unwrap();
    }
    drop(writer);
    let mut raw = SilentClient::connect(server.socket());
    let first = raw.lease_on("/m0");
    raw.lease_on("/m1");
    raw.lease_on("/m2");
    let Response::Resolved { attributes: Some(attributes), .. } =
        raw.call(&Request::Resolve { path: b"/m3".to_vec(), follow: true })
    else {
        panic!()
    };
    match raw.call(&Request::Lease { target: LeaseTarget::Object(attributes.ino) }) {
        Response::Error { errno, .. } => assert_eq!(errno, libc::ENOLCK),
        other => panic!("a fourth lease: {other:?}"),
    }
    // Renewing one held is allowed, in the same slot and sequence.
    assert_eq!(raw.lease_on("/m0"), first);
    // A caching client at its limit goes on uncached, correctly.
    let client = Client::connect(&store).unwrap();
    for _ in 0..2 {
        for i in 0..4 {
            assert_eq!(read_all(&client, &format!("/m{i}")), b"m");
        }
    }
}

#[test]
fn an_unknown_object_gets_no_lease() {
    let (server, _dir, _store) = common::served(long_term());
    let mut raw = SilentClient::connect(server.socket());
    match raw.call(&Request::Lease { target: LeaseTarget::Object(987_654) }) {
        Response::Error { errno, .. } => assert_eq!(errno, libc::ENOENT),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_dead_server_fails_cached_calls_and_a_new_epoch_starts_clean() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fs = Arc::new(Fs::create(&store, common::options()).unwrap());
    let options = ServerOptions { limits: long_term(), ..ServerOptions::for_store(&store) };
    let server = Server::start(fs.clone(), options.clone()).unwrap();
    let first_epoch = server.epoch();
    let client = Client::connect(&store).unwrap();
    client.write("/kept.txt", b"cached").unwrap();
    assert_eq!(read_all(&client, "/kept.txt"), b"cached");
    server.shutdown().unwrap();
    let stopped = Instant::now();
    eventually("a cached read fails once the server is gone", || {
        let mut out = [0u8; 6];
        client.open("/kept.txt").and_then(|f| f.read_at(&mut out, 0)).is_err()
    });
    assert!(stopped.elapsed() < Duration::from_secs(2));
    let server = Server::start(fs, options).unwrap();
    assert_ne!(server.epoch(), first_epoch);
    let again = Client::connect(&store).unwrap();
    assert_ne!(again.epoch(), first_epoch);
    assert_eq!(read_all(&again, "/kept.txt"), b"cached");
}

#[test]
fn a_permission_change_makes_the_next_open_a_checked_one() {
    let (server, _dir, store) = common::served(long_term());
    let client = Client::connect(&store).unwrap();
    client.write("/guarded.txt", b"g").unwrap();
    drop(client.open("/guarded.txt").unwrap());
    drop(client.open("/guarded.txt").unwrap());
    let kept = client.cache_counters().cached_opens;
    assert!(kept >= 1);
    // Its own chmod: the kept open is released, the next open is checked.
    client.set_permissions("/guarded.txt", 0o600).unwrap();
    let before = server.requests();
    drop(client.open("/guarded.txt").unwrap());
    assert_eq!(client.cache_counters().cached_opens, kept, "a kept open outlived a chmod");
    assert!(server.requests() > before);
    // Another client's chmod: revoked, the next open is checked again.
    drop(client.open("/guarded.txt").unwrap());
    let kept = client.cache_counters().cached_opens;
    let other = Client::connect(&store).unwrap();
    other.set_permissions("/guarded.txt", 0o640).unwrap();
    let before = server.requests();
    drop(client.open("/guarded.txt").unwrap());
    assert_eq!(client.cache_counters().cached_opens, kept, "a kept open outlived another client's chmod");
    assert!(server.requests() > before);
}

/// Sessions driven through `execute` have no lease area: their leases are
/// only expired, and a change by another session waits for that, bounded
/// by the term; the holder's own change waits for nothing; a session
/// closed lets the change go at once.
#[test]
fn without_a_region_a_change_waits_for_expiry_only() {
    let term = Duration::from_millis(500);
    let t = common::server_with(Limits { lease_term: term, max_leases: 2, ..Limits::default() });
    let holder = t.session(0, 0);
    let writer = t.session(0, 0);
    let created = t.run(
        &writer,
        Request::Create { parent: 1, name: b"f".to_vec(), mode: 0o644, flags: libc::O_RDWR, lease: false },
    );
    let (ino, handle) = (common::ino(created.clone()), common::handle(created));
    let _ = t.run(&holder, Request::Lookup { parent: 1, name: b"f".to_vec() });
    assert!(matches!(t.run(&holder, Request::Lease { target: LeaseTarget::Object(ino) }), Response::Lease(_)));
    assert!(matches!(t.run(&holder, Request::Lease { target: LeaseTarget::Namespace }), Response::Lease(_)));
    assert_eq!(
        common::errno(t.run(&holder, Request::Lease { target: LeaseTarget::Object(1) })),
        libc::ENOLCK,
        "a third lease over max_leases 2"
    );
    assert_eq!(holder.lease_count(), 2);
    // The holder's own write does not wait.
    let own = t.run(&holder, Request::Open { ino, flags: libc::O_RDWR });
    let own = common::handle(own);
    let started = Instant::now();
    let write =
        Request::Write { handle: own, offset: 0, data: larder_protocol::message::Payload::Inline(b"x".to_vec()) };
    assert!(matches!(t.run(&holder, write), Response::Length(1)));
    assert!(started.elapsed() < term / 2, "its own write waited for its own lease");
    // Another session's write waits for the lease's expiry, at most.
    let started = Instant::now();
    let write = Request::Write { handle, offset: 0, data: larder_protocol::message::Payload::Inline(b"y".to_vec()) };
    assert!(matches!(t.run(&writer, write), Response::Length(1)));
    let waited = started.elapsed();
    assert!(waited >= term / 4 && waited <= 2 * term, "waited {waited:?} for a lease of {term:?}");
    assert_eq!(holder.lease_count(), 1, "the revoked lease ended; the namespace lease stays");
    // A closed session's leases go with it: the next change does not wait.
    assert!(matches!(t.run(&holder, Request::Lease { target: LeaseTarget::Object(ino) }), Response::Lease(_)));
    holder.close().unwrap();
    assert_eq!(t.server.leases_held(), 0);
    let started = Instant::now();
    let write = Request::Write { handle, offset: 0, data: larder_protocol::message::Payload::Inline(b"z".to_vec()) };
    assert!(matches!(t.run(&writer, write), Response::Length(1)));
    assert!(started.elapsed() < term / 2);
}

/// A writer and two caching readers at once: once a write has returned,
/// no reader reads an older value (each reader reads the floor the writer
/// published before its read, and must see at least that).
#[test]
fn no_reader_reads_a_value_older_than_a_returned_write() {
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    let (_server, _dir, store) = common::served(long_term());
    let writer = Client::connect(&store).unwrap();
    writer.write("/counter", &0u64.to_le_bytes()).unwrap();
    let returned = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    // Readers that have read once: the writes start when both have, so
    // on a loaded machine they do not all land before a reader runs.
    let reading = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (store, returned, done, reading) = (store.clone(), returned.clone(), done.clone(), reading.clone());
            std::thread::spawn(move || {
                let client = Client::connect(&store).unwrap();
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) {
                    let floor = returned.load(Ordering::Acquire);
                    let file = client.open("/counter").unwrap();
                    let mut bytes = [0u8; 8];
                    assert_eq!(file.read_at(&mut bytes, 0).unwrap(), 8);
                    let seen = u64::from_le_bytes(bytes);
                    assert!(seen >= floor, "read {seen} after write {floor} had returned");
                    reads += 1;
                    if reads == 1 {
                        reading.fetch_add(1, Ordering::AcqRel);
                    }
                }
                (reads, client.cache_counters().cached_reads)
            })
        })
        .collect();
    eventually("both readers read", || reading.load(Ordering::Acquire) == 2);
    let file = OpenOptions::new().write(true).open(&writer, "/counter").unwrap();
    for value in 1..=300u64 {
        file.write_at(&value.to_le_bytes(), 0).unwrap();
        returned.store(value, Ordering::Release);
        if value % 30 == 0 {
            std::thread::yield_now();
        }
    }
    done.store(true, Ordering::Release);
    for reader in readers {
        let (reads, cached) = reader.join().unwrap();
        println!("reader: {reads} reads, {cached} from the cache");
        assert!(reads > 0);
    }
}

/// One caching client shared by four threads, reading the counter another
/// client writes; two of them also write bytes of their own further on
/// (the client's own changes) and all open and read, so several threads
/// take the file's lease at once. A grant one thread read after the lease
/// had been revoked, answered and ended, and a later lease of its slot
/// revoked, once looked live (the notice held the later sequence) and no
/// write revoked it: readers read old values (1 run in 5 failed).
#[test]
fn threads_sharing_a_client_never_read_a_value_older_than_a_returned_write() {
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    let (_server, _dir, store) = common::served(long_term());
    let writer = Client::connect(&store).unwrap();
    writer.write("/counter", &[0u8; 200]).unwrap();
    let shared = Client::connect(&store).unwrap();
    let returned = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let reading = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let (client, returned, done, reading) = (shared.clone(), returned.clone(), done.clone(), reading.clone());
            std::thread::spawn(move || {
                let own = OpenOptions::new().read(true).write(true).open(&client, "/counter").unwrap();
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) {
                    if t % 2 == 1 {
                        own.write_at(&[t; 8], 100 + 8 * u64::from(t)).unwrap();
                    }
                    let floor = returned.load(Ordering::Acquire);
                    let file = client.open("/counter").unwrap();
                    let mut bytes = [0u8; 8];
                    assert_eq!(file.read_at(&mut bytes, 0).unwrap(), 8);
                    let seen = u64::from_le_bytes(bytes);
                    assert!(seen >= floor, "thread {t} read {seen} after write {floor} had returned");
                    reads += 1;
                    if reads == 1 {
                        reading.fetch_add(1, Ordering::AcqRel);
                    }
                }
                reads
            })
        })
        .collect();
    eventually("every thread read", || reading.load(Ordering::Acquire) == 4);
    let file = OpenOptions::new().write(true).open(&writer, "/counter").unwrap();
    for value in 1..=3000u64 {
        file.write_at(&value.to_le_bytes(), 0).unwrap();
        returned.store(value, Ordering::Release);
    }
    done.store(true, Ordering::Release);
    for thread in threads {
        assert!(thread.join().unwrap() > 0);
    }
    println!("{:?}", shared.cache_counters());
}

/// The lease area's contract for a client written by hand: a revocation
/// shows in the slot's notice word; acknowledging the sequence lets the
/// writer go at once, acknowledging anything else counts for nothing.
#[test]
fn a_hand_written_client_answers_through_the_lease_area() {
    let term = Duration::from_secs(3);
    let (server, _dir, store) = common::served(Limits { lease_term: term, ..Limits::default() });
    let writer = Client::connect(&store).unwrap();
    writer.write("/hand.txt", b"one").unwrap();
    let file = OpenOptions::new().write(true).open(&writer, "/hand.txt").unwrap();
    let mut raw = SilentClient::connect(server.socket());
    for honest in [true, false] {
        let grant = raw.lease_on("/hand.txt");
        let area = raw.connected.region.leases();
        let started = Instant::now();
        let writing = std::thread::scope(|scope| {
            let writing = scope.spawn(|| {
                file.write_at(b"two", 0).unwrap();
                started.elapsed()
            });
            eventually("the notice", || area.revoked(grant.slot, grant.sequence));
            if honest {
                area.acknowledge(grant.slot, grant.sequence);
            } else {
                area.acknowledge(grant.slot, grant.sequence.wrapping_add(7));
            }
            server_doorbell_rings(&raw);
            writing.join().unwrap()
        });
        if honest {
            assert!(writing < term / 2, "an acknowledged revocation held the writer {writing:?}");
        } else {
            assert!(writing >= term / 2 && writing <= 2 * term, "a false acknowledgement: {writing:?}");
        }
    }
}

/// Rings worker 0's doorbell, as a client does after acknowledging.
fn server_doorbell_rings(raw: &SilentClient) {
    raw.connected.doorbell.ring(0).unwrap();
}

fn names(client: &Client, path: &str) -> Vec<String> {
    let mut names: Vec<String> =
        client.read_dir(path).unwrap().map(|e| String::from_utf8(e.unwrap().name).unwrap()).collect();
    names.sort();
    names
}

#[test]
fn a_listing_is_cached_under_the_directory_lease_and_changes_show_at_once() {
    let (server, _dir, store) = common::served(long_term());
    let reader = Client::connect(&store).unwrap();
    let writer = Client::connect(&store).unwrap();
    writer.create_dir("/d", 0o755).unwrap();
    writer.write("/d/a", b"a").unwrap();
    assert_eq!(names(&reader, "/d"), ["a"]);
    let before = server.requests();
    for _ in 0..50 {
        assert_eq!(names(&reader, "/d"), ["a"]);
    }
    assert_eq!(server.requests(), before, "cached listings reached the server");
    assert!(reader.cache_counters().cached_listings >= 50);
    writer.write("/d/b", b"b").unwrap();
    assert_eq!(names(&reader, "/d"), ["a", "b"]);
    writer.rename("/d/a", "/d/c").unwrap();
    assert_eq!(names(&reader, "/d"), ["b", "c"]);
    writer.remove_file("/d/b").unwrap();
    assert_eq!(names(&reader, "/d"), ["c"]);
    writer.create_dir("/d/sub", 0o755).unwrap();
    assert_eq!(names(&reader, "/d"), ["c", "sub"]);
    writer.create_bucket("kv").unwrap();
    writer.put("kv", "x", b"1", Durability::Buffered).unwrap();
    assert_eq!(names(&reader, "/kv"), ["x"]);
    writer.put("kv", "y", b"2", Durability::Buffered).unwrap();
    assert_eq!(names(&reader, "/kv"), ["x", "y"]);
    // The reader's own changes show in its own listings too.
    reader.write("/d/mine", b"m").unwrap();
    assert_eq!(names(&reader, "/d"), ["c", "mine", "sub"]);
    reader.remove_file("/d/mine").unwrap();
    assert_eq!(names(&reader, "/d"), ["c", "sub"]);
}

#[test]
fn a_write_only_open_reads_nothing_from_the_cache() {
    let (_server, _dir, store) = common::served(long_term());
    let client = Client::connect(&store).unwrap();
    client.write("/wo.txt", b"secret bytes").unwrap();
    assert_eq!(read_all(&client, "/wo.txt"), b"secret bytes");
    let file = OpenOptions::new().write(true).open(&client, "/wo.txt").unwrap();
    let mut out = [0u8; 6];
    assert_eq!(file.read_at(&mut out, 0).unwrap_err().errno(), libc::EBADF);
}

#[test]
fn a_server_that_grants_leases_refuses_a_small_read_limit() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fs = Arc::new(Fs::create(&store, common::options()).unwrap());
    let small = Limits { max_io_bytes: 4096, ..Limits::default() };
    let refused =
        Server::start(fs.clone(), ServerOptions { limits: small.clone(), ..ServerOptions::for_store(&store) });
    assert!(refused.is_err());
    let without_leases = Limits { lease_term: Duration::ZERO, ..small };
    let server =
        Server::start(fs, ServerOptions { limits: without_leases, ..ServerOptions::for_store(&store) }).unwrap();
    let client = Client::connect(&store).unwrap();
    let file = client.create("/n.txt").unwrap();
    for at in (0..10_000u64).step_by(2_500) {
        assert_eq!(file.write_at(&[3u8; 2_500], at).unwrap(), 2_500);
    }
    drop(file);
    assert_eq!(read_all(&client, "/n.txt"), vec![3u8; 10_000]);
    assert_eq!(client.cache_counters().cached_reads, 0);
    drop(server);
}

#[test]
fn a_change_in_one_directory_spares_the_lookups_of_others() {
    let (server, _dir, store) = common::served(long_term());
    let reader = Client::connect(&store).unwrap();
    let writer = Client::connect(&store).unwrap();
    for dir in ["/x", "/y"] {
        writer.create_dir(dir, 0o755).unwrap();
        writer.write(format!("{dir}/f"), b"f").unwrap();
        assert_eq!(read_all(&reader, &format!("{dir}/f")), b"f");
    }
    writer.write("/x/new", b"n").unwrap();
    let before = server.requests();
    assert_eq!(read_all(&reader, "/y/f"), b"f");
    assert_eq!(server.requests(), before, "a create in /x revoked what /y's lease covers");
    // /x's lease was revoked: its lookups are asked for again, and right.
    assert_eq!(read_all(&reader, "/x/new"), b"n");
    assert!(server.requests() > before);
    // A rename of a directory revokes its parent's lease: the old path is
    // gone at once, the new one resolves.
    writer.rename("/y", "/z").unwrap();
    assert!(reader.open("/y/f").err().unwrap().is_not_found());
    assert_eq!(read_all(&reader, "/z/f"), b"f");
}

/// Objects with an orphan record: unlinked, kept alive by an open handle.
fn orphans(fs: &Fs) -> usize {
    use larder_object::meta::{map_prefix, Map};
    fs.store().index().prefix(&map_prefix(Map::Orphans), true).unwrap().count()
}

#[test]
fn a_kept_open_does_not_keep_an_unlinked_file_alive() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fs = Arc::new(Fs::create(&store, common::options()).unwrap());
    let _server =
        Server::start(fs.clone(), ServerOptions { limits: long_term(), ..ServerOptions::for_store(&store) }).unwrap();
    let client = Client::connect(&store).unwrap();
    let other = Client::connect(&store).unwrap();
    for (remover, name) in [(&client, "/mine.txt"), (&other, "/theirs.txt"), (&client, "/replaced.txt")] {
        client.write(name, &[1u8; 5000]).unwrap();
        drop(client.open(name).unwrap());
        drop(client.open(name).unwrap());
        assert!(client.cache_counters().cached_opens > 0);
        if name == "/replaced.txt" {
            client.write("/new.txt", b"new").unwrap();
            remover.rename("/new.txt", name).unwrap();
        } else {
            remover.remove_file(name).unwrap();
        }
        eventually("the removed file freed", || orphans(&fs) == 0);
    }
}

impl SilentClient {
    fn lease_on(&mut self, path: &str) -> LeaseGrant {
        let Response::Resolved { attributes: Some(attributes), .. } =
            self.call(&Request::Resolve { path: path.as_bytes().to_vec(), follow: true })
        else {
            panic!("{path} does not resolve")
        };
        match self.call(&Request::Lease { target: LeaseTarget::Object(attributes.ino) }) {
            Response::Lease(grant) => grant,
            other => panic!("no lease: {other:?}"),
        }
    }
}
