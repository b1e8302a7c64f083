//! Writes posted without waiting (`File::write_posted`): they take effect
//! in the client's order before its next call is answered, follow their
//! file when it moves to another worker, and a failure comes back at the
//! file's next flush point, once.
#![allow(clippy::unwrap_used)]

mod serving;

use larder_client::{Client, OpenOptions};
use serving::{limits, move_file_and_wait, pattern, serve, serve_with};

/// Sizes from one byte to past the default ring's inline limit (48 KiB),
/// where a posted write is written by waiting writes instead.
const SIZES: [usize; 6] = [1, 100, 4096, 16 << 10, 40_000, 60_000];

/// Posts `count` appends of the sizes above to `path` through `client`
/// and returns what the file must hold afterwards.
fn post_appends(client: &Client, path: &str, count: usize, seed: u64) -> Vec<u8> {
    let file = OpenOptions::new().write(true).create(true).append(true).open(client, path).unwrap();
    let mut expected = Vec::new();
    for i in 0..count {
        let data = pattern(SIZES[i % SIZES.len()], seed + i as u64);
        file.write_posted(&data, 0).unwrap();
        expected.extend_from_slice(&data);
    }
    expected
}

/// More writes than one ring keeps posted (32), with and without leases:
/// the next call of the client (a read, a stat) sees every one, in order.
#[test]
fn posted_appends_land_in_order_before_the_next_call() {
    let t = serve();
    for (round, leases) in [(0u64, true), (1, false)] {
        let client = Client::connect_socket_with(&t.socket(), leases).unwrap();
        let path = format!("/log{round}");
        let expected = post_appends(&client, &path, 100, round * 1000);
        assert_eq!(client.metadata(&path).unwrap().len(), expected.len() as u64, "leases {leases}: the size");
        assert!(client.read(&path).unwrap() == expected, "leases {leases}: the bytes, in order");
        // Another client sees them too, now that they were answered.
        let other = t.client();
        assert!(other.read(&path).unwrap() == expected, "leases {leases}: another client");
    }
}

/// A posted write into a file opened read-only fails on the server (EBADF);
/// the file's next `sync_all`, which succeeds on its own, returns that
/// failure, and the one after it succeeds: the failure is returned once.
/// `close` returns one too, and so does `write_posted` once the failure's
/// answer was read.
#[test]
fn a_failed_posted_write_comes_back_at_the_next_flush_point_once() {
    let t = serve();
    let client = t.client();
    client.write("/ro", b"content").unwrap();
    let file = OpenOptions::new().read(true).open(&client, "/ro").unwrap();
    file.sync_all().unwrap();
    file.write_posted(b"refused", 0).unwrap();
    assert_eq!(file.sync_all().unwrap_err().errno(), libc::EBADF, "the posted write's failure");
    file.sync_all().unwrap();
    file.write_posted(b"refused", 0).unwrap();
    // A round trip on the same (only) ring reads the refusal's answer
    // first; the next post returns the failure it knows, without waiting.
    client.ping().unwrap();
    assert_eq!(file.write_posted(b"again", 0).unwrap_err().errno(), libc::EBADF, "returned by the next post");
    file.write_posted(b"refused", 0).unwrap();
    assert_eq!(file.close().unwrap_err().errno(), libc::EBADF, "returned by close");
    assert_eq!(client.read("/ro").unwrap(), b"content", "nothing written");
    // A failure of one file is not another's.
    let other = OpenOptions::new().read(true).open(&client, "/ro").unwrap();
    let writable = OpenOptions::new().write(true).open(&client, "/ro").unwrap();
    other.write_posted(b"refused", 0).unwrap();
    writable.write_posted(b"C", 0).unwrap();
    writable.sync_all().unwrap();
    assert_eq!(other.sync_all().unwrap_err().errno(), libc::EBADF);
    assert_eq!(client.read("/ro").unwrap(), b"Content");
}

/// A file moved to the other worker while writes to it are posted on the
/// old owner's ring: the writes are redirected and sent again where it
/// went, in order, before the client's next call.
#[test]
fn posted_writes_follow_their_file_when_it_moves() {
    let t = serve_with(limits(2..=2));
    let server = t.server();
    let client = t.client();
    for round in 0..4u64 {
        let path = format!("/moving{round}");
        let file = OpenOptions::new().write(true).create(true).append(true).open(&client, &path).unwrap();
        let mut expected = Vec::new();
        for step in 0..3u64 {
            let ino = file.ino();
            // Before the first post in even rounds, between posts in odd
            // ones: the client's next posts go where it last knew the file.
            if step == round % 2 {
                // Landed before the posts: they are then surely redirected.
                let owner = server.file_owner(ino).unwrap();
                move_file_and_wait(server, ino, 1 - owner);
            }
            for i in 0..5u64 {
                let data = pattern(SIZES[(i + step) as usize % SIZES.len()], round * 100 + step * 10 + i);
                file.write_posted(&data, 0).unwrap();
                expected.extend_from_slice(&data);
            }
        }
        assert!(client.read(&path).unwrap() == expected, "round {round}: every write once, in order");
        file.close().unwrap();
    }
    let redirected: u64 = server.worker_requests().iter().map(|(_, redirected)| redirected).sum();
    assert!(redirected >= 4, "posts went to the old owner and were redirected: {redirected}");
}

/// Threads sharing one client over two workers, each posting appends to
/// a file of its own while the others post and read: each file holds its
/// thread's writes in order, and a `sync_all` after them, which waits for
/// every posted write's answer, returns.
#[test]
fn threads_sharing_a_client_post_in_their_own_order() {
    let t = serve_with(limits(2..=2));
    let client = t.client();
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let client = client.clone();
            scope.spawn(move || {
                let path = format!("/thread{thread}");
                let expected = post_appends(&client, &path, 60, thread * 1000);
                assert!(client.read(&path).unwrap() == expected, "thread {thread}: its writes, in order");
                let file = OpenOptions::new().write(true).open(&client, &path).unwrap();
                file.sync_all().unwrap();
            });
        }
    });
    for thread in 0..4u64 {
        let expected: Vec<u8> =
            (0..60).flat_map(|i| pattern(SIZES[i % SIZES.len()], thread * 1000 + i as u64)).collect();
        assert!(client.read(format!("/thread{thread}")).unwrap() == expected, "thread {thread}, afterwards");
    }
}
