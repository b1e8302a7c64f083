//! The leased client's own writes to a file owned by the worker that is
//! not the client's home (two workers; its requests to the file are
//! redirected there): what it reads back, from its cached pages and,
//! once another client's write revoked its lease, from the server, is
//! the store's bytes (as an uncached client reads them).
#![allow(clippy::unwrap_used)]

mod common;
mod serving;

use std::time::Duration;

use common::{read_through, write_both};
use larder_client::{Client, OpenOptions};
use larder_server::Limits;
use serving::{limits, move_file_and_wait, pattern, serve_with};

#[test]
fn own_writes_to_a_file_on_the_other_worker_are_read_back_as_stored() {
    let t = serve_with(Limits { lease_term: Duration::from_secs(30), ..limits(2..=2) });
    let server = t.server();
    let leased = t.client();
    let plain = Client::connect_socket_with(&t.socket(), false).unwrap();
    let other = t.client();

    let mut model = pattern(20_000, 1);
    let file = OpenOptions::new().read(true).write(true).create(true).open(&leased, "/f").unwrap();
    assert_eq!(file.write_at(&model, 0).unwrap(), model.len());
    // The file's owner is the home of the client that made it (the
    // primary): moved to the other worker, every request of the leased
    // client to it is redirected there.
    let ino = file.ino();
    let home = server.file_owner(ino).unwrap();
    move_file_and_wait(server, ino, 1 - home);
    let redirected = || server.worker_requests().iter().map(|(_, redirected)| redirected).sum::<u64>();
    let redirected_before = redirected();

    // Waited and posted writes, inside the file, across pages and past
    // its end. The first learns where the file went (a redirect); the
    // file is then read whole, so that its pages are cached and the
    // writes after it patch them.
    let writes = [(100, 50), (5000, 4096), (8191, 2), (19_990, 30), (20_100, 4000), (40, 7)];
    for (i, &(offset, length)) in writes.iter().enumerate() {
        write_both(&file, &mut model, offset, &pattern(length, 10 + i as u64), i % 2 == 1);
        if i == 0 {
            assert!(read_through(&file) == model, "the leased client's read after the redirect");
        }
    }
    let cached_before = leased.cache_counters().cached_reads;
    assert!(read_through(&file) == model, "the leased client's reads of its own writes");
    assert!(leased.cache_counters().cached_reads > cached_before, "served from its cached pages");
    assert!(leased.read("/f").unwrap() == model, "a new open of the leased client");
    assert!(plain.read("/f").unwrap() == model, "the store's bytes");
    assert!(redirected() > redirected_before, "the leased client's requests were redirected");

    // Moved back while the client still sends to where it went: a posted
    // write redirected (sent again after later ones, so the client drops
    // its pages), then a waited one, are read back as stored, and later
    // writes again from the cached pages.
    let at = server.file_owner(ino).unwrap();
    move_file_and_wait(server, ino, 1 - at);
    let redirected_before = redirected();
    write_both(&file, &mut model, 300, &pattern(700, 50), true);
    write_both(&file, &mut model, 12_000, &pattern(700, 51), false);
    assert!(read_through(&file) == model, "the leased client's reads after a redirected post");
    assert!(redirected() > redirected_before, "the post was redirected");
    write_both(&file, &mut model, 4090, b"cached again", true);
    let cached_before = leased.cache_counters().cached_reads;
    assert!(read_through(&file) == model, "the leased client's reads of its writes after the move back");
    assert!(leased.cache_counters().cached_reads > cached_before, "served from its cached pages again");
    assert!(plain.read("/f").unwrap() == model, "the store's bytes after the move back");

    // Another client's write revokes the lease: the leased client reads
    // the server's bytes, its own writes and the other's.
    let revocations = leased.cache_counters().revocations;
    let theirs = pattern(3000, 99);
    let writer = OpenOptions::new().write(true).open(&other, "/f").unwrap();
    write_both(&writer, &mut model, 1000, &theirs, false);
    writer.close().unwrap();
    assert!(read_through(&file) == model, "the leased client's reads after the revocation");
    assert!(leased.cache_counters().revocations > revocations, "its lease was revoked");
    assert!(plain.read("/f").unwrap() == model, "the store's bytes after the other write");

    // Its own writes after the revocation, posted and waited.
    write_both(&file, &mut model, 10, b"after", true);
    write_both(&file, &mut model, 29_995, b"and more", false);
    assert!(read_through(&file) == model, "the leased client's reads of its writes after the revocation");
    assert!(plain.read("/f").unwrap() == model, "the store's bytes at the end");
    file.close().unwrap();
}
