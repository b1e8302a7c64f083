//! Subtree leases (Aerie's directory leases over a subtree) through a
//! running server and the Rust client: one lease on a directory serves
//! walks anywhere below it without a lease request per directory; another
//! client's change to any directory inside, however deep, revokes it, so
//! the holder never sees a name that is gone; a lease on a file is
//! refused; a server without leases grants none.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use larder_client::Client;
use larder_server::Limits;

fn long_term() -> Limits {
    Limits { lease_term: Duration::from_secs(30), ..Limits::default() }
}

/// Makes `/t/a/b/c/f` (four directories deep) through `client`.
fn deep_tree(client: &Client) {
    for dir in ["/t", "/t/a", "/t/a/b", "/t/a/b/c"] {
        client.create_dir(dir, 0o755).unwrap();
    }
    client.write("/t/a/b/c/f", b"deep").unwrap();
}

/// Requests a fresh client's first `metadata` of the deep file costs,
/// with or without a subtree lease on `/t` taken first.
fn first_walk_requests(server: &larder_server::Server, store: &std::path::Path, subtree: bool) -> u64 {
    let client = Client::connect(store).unwrap();
    // The root's lease and lookup of `t`, the same either way.
    assert!(client.metadata("/t").unwrap().is_dir());
    if subtree {
        assert!(client.lease_subtree("/t").unwrap(), "the lease is granted");
    }
    let before = server.requests();
    assert_eq!(client.metadata("/t/a/b/c/f").unwrap().len(), 4);
    server.requests() - before
}

#[test]
fn a_subtree_lease_spares_a_lease_request_per_directory_inside() {
    let (server, _dir, store) = common::served(long_term());
    deep_tree(&Client::connect(&store).unwrap());
    let without = first_walk_requests(&server, &store, false);
    let with = first_walk_requests(&server, &store, true);
    // t, a, b and c each took a lease of their own without it.
    assert_eq!(without - with, 4, "requests without {without}, with {with}");

    // Warm, the walk is the cache's alone, lookups included.
    let client = Client::connect(&store).unwrap();
    assert!(client.lease_subtree("/t").unwrap());
    assert_eq!(client.metadata("/t/a/b/c/f").unwrap().len(), 4);
    let (before, counted) = (server.requests(), client.cache_counters());
    for _ in 0..50 {
        assert_eq!(client.metadata("/t/a/b/c/f").unwrap().len(), 4);
    }
    assert_eq!(server.requests(), before, "a warm walk reached the server");
    assert!(client.cache_counters().cached_lookups - counted.cached_lookups >= 250);
}

#[test]
fn another_clients_change_deep_inside_revokes_the_subtree_lease() {
    let (server, _dir, store) = common::served(long_term());
    let holder = Client::connect(&store).unwrap();
    deep_tree(&holder);
    assert!(holder.lease_subtree("/t").unwrap());
    assert_eq!(holder.metadata("/t/a/b/c/f").unwrap().len(), 4);
    let revoked_before = holder.cache_counters().revocations;

    // Another client renames the file four levels down: the holder took
    // no lease on those directories, only the subtree's.
    let other = Client::connect(&store).unwrap();
    other.rename("/t/a/b/c/f", "/t/a/b/c/g").unwrap();
    assert!(holder.cache_counters().revocations > revoked_before, "the holder's leases were revoked");
    assert!(holder.metadata("/t/a/b/c/f").unwrap_err().is_not_found(), "a name that is gone is not served");
    assert_eq!(holder.metadata("/t/a/b/c/g").unwrap().len(), 4);

    // Taken again, it covers the change; a new directory deep inside is
    // seen as soon as the other client's mkdir returns.
    assert!(holder.lease_subtree("/t").unwrap());
    assert!(holder.read_dir("/t/a/b").unwrap().count() == 1);
    other.create_dir("/t/a/b/new", 0o755).unwrap();
    let names: Vec<Vec<u8>> = holder.read_dir("/t/a/b").unwrap().map(|e| e.unwrap().name).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // A change outside the subtree leaves it alone: the root's own lease
    // goes (its entries changed), so the walk asks for it and for `t`
    // again, and nothing inside.
    assert!(holder.lease_subtree("/t").unwrap());
    assert_eq!(holder.metadata("/t/a/b/c/g").unwrap().len(), 4);
    other.create_dir("/elsewhere", 0o755).unwrap();
    let before = server.requests();
    assert_eq!(holder.metadata("/t/a/b/c/g").unwrap().len(), 4);
    assert_eq!(server.requests() - before, 2, "the root's lease and lookup of t, nothing inside");
}

#[test]
fn a_subtree_lease_is_refused_on_a_file_and_by_a_server_without_leases() {
    let (_server, _dir, store) = common::served(long_term());
    let client = Client::connect(&store).unwrap();
    deep_tree(&client);
    let refused = client.lease_subtree("/t/a/b/c/f").unwrap_err();
    assert_eq!(refused.errno(), libc::ENOTDIR, "{refused}");
    assert!(client.lease_subtree("/missing").unwrap_err().is_not_found());

    let (_server, _dir, store) = common::served(Limits { lease_term: Duration::ZERO, ..Limits::default() });
    let client = Client::connect(&store).unwrap();
    client.create_dir("/t", 0o755).unwrap();
    assert!(!client.lease_subtree("/t").unwrap(), "a server without leases grants none");
}
