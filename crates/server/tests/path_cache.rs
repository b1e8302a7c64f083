//! Each session's cache of resolved directories (`Resolve` and `OpenPath`
//! walk only a path's last component when its prefix is cached) answers
//! exactly what a walk from the root answers: a rename, removal, mode or
//! owner change of any directory on a cached path, by this session or
//! another, is seen by the next resolution, as are such changes made
//! while files move between workers.
#![allow(clippy::unwrap_used)]

mod common;
mod serving;

use common::{errno, server, server_with, TestServer};
use larder_protocol::message::{RenameFlags, Request as R, Response, SetAttributes};
use larder_server::{Limits, Session};

const ROOT: u64 = 1;
/// The tree's owner, and another user.
const A: u32 = 42_101;
const B: u32 = 42_102;

fn v(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn resolve(t: &TestServer, s: &Session, path: &str) -> Response {
    t.run(s, R::Resolve { path: v(path), follow: true })
}

/// The inode a resolution found; panics when it found nothing.
fn found(r: Response) -> u64 {
    match r {
        Response::Resolved { attributes: Some(a), .. } => a.ino,
        other => panic!("expected a found object, got {other:?}"),
    }
}

fn mkdir(t: &TestServer, s: &Session, parent: u64, name: &str, mode: u32) -> u64 {
    common::ino(t.run(s, R::Mkdir { parent, name: v(name), mode }))
}

fn chmod(t: &TestServer, s: &Session, ino: u64, mode: u32) {
    let set = SetAttributes { mode: Some(mode), ..SetAttributes::default() };
    assert_eq!(common::ino(t.run(s, R::SetAttributes { ino, set, handle: None })), ino);
}

/// `/a/b/f` made by uid `A` (directories 0755), the ids of `a`, `b`, `f`.
fn tree(t: &TestServer) -> (u64, u64, u64) {
    let root = t.session(0, 0);
    let a = mkdir(t, &root, ROOT, "a", 0o777);
    let owner = t.session(A, A);
    found(resolve(t, &owner, "/a"));
    let b = mkdir(t, &owner, a, "b", 0o755);
    let f = common::ino(t.run(&owner, R::Mknod { parent: b, name: v("f"), mode: 0o644, rdev: 0 }));
    let set = SetAttributes { uid: Some(A), gid: Some(A), mode: Some(0o755), ..SetAttributes::default() };
    t.run(&root, R::SetAttributes { ino: a, set, handle: None });
    (a, b, f)
}

/// Resolves `path` twice in `s` and checks the second came from the cache.
fn cached(t: &TestServer, s: &Session, path: &str) -> u64 {
    let first = found(resolve(t, s, path));
    assert_eq!(found(resolve(t, s, path)), first);
    assert_eq!(s.cached_directories(), 1, "{path}'s directory is cached");
    first
}

#[test]
fn a_renamed_parent_leaves_its_old_path_enoent_in_every_session() {
    let t = server();
    let (a, _, f) = tree(&t);
    let reader = t.session(B, B);
    let owner = t.session(A, A);
    found(resolve(&t, &owner, "/a/b"));
    assert_eq!(cached(&t, &reader, "/a/b/f"), f);
    // By another session, then by the reader's own.
    let rename = |from: &str, to: &str| R::Rename {
        parent: a,
        name: v(from),
        new_parent: a,
        new_name: v(to),
        flags: RenameFlags::default(),
    };
    assert_eq!(t.run(&owner, rename("b", "c")), Response::Done);
    assert_eq!(errno(resolve(&t, &reader, "/a/b/f")), libc::ENOENT);
    assert_eq!(errno(t.run(&reader, R::OpenPath { path: v("/a/b/f"), flags: 0, read: 0, lease: false })), libc::ENOENT);
    assert_eq!(cached(&t, &reader, "/a/c/f"), f);
    assert_eq!(t.run(&owner, rename("c", "b")), Response::Done);
    assert_eq!(errno(resolve(&t, &reader, "/a/c/f")), libc::ENOENT);
    assert_eq!(found(resolve(&t, &reader, "/a/b/f")), f);
}

#[test]
fn a_parent_or_grandparent_made_private_to_another_uid_is_eacces() {
    let t = server();
    let (a, b, f) = tree(&t);
    let reader = t.session(B, B);
    let owner = t.session(A, A);
    found(resolve(&t, &owner, "/a/b"));
    for dir in [b, a] {
        assert_eq!(cached(&t, &reader, "/a/b/f"), f);
        chmod(&t, &owner, dir, 0o700);
        assert_eq!(errno(resolve(&t, &reader, "/a/b/f")), libc::EACCES);
        let open = R::OpenPath { path: v("/a/b/f"), flags: 0, read: 0, lease: false };
        assert_eq!(errno(t.run(&reader, open)), libc::EACCES);
        chmod(&t, &owner, dir, 0o755);
    }
    // A change of owner: b given to root, then made private to it.
    assert_eq!(cached(&t, &reader, "/a/b/f"), f);
    let root = t.session(0, 0);
    found(resolve(&t, &root, "/a/b"));
    let set = SetAttributes { uid: Some(0), gid: Some(0), mode: Some(0o700), ..SetAttributes::default() };
    assert_eq!(common::ino(t.run(&root, R::SetAttributes { ino: b, set, handle: None })), b);
    assert_eq!(errno(resolve(&t, &reader, "/a/b/f")), libc::EACCES);
    // The owner itself is refused too now (it no longer owns b).
    assert_eq!(errno(resolve(&t, &owner, "/a/b/f")), libc::EACCES);
}

#[test]
fn a_file_unlinked_and_made_again_under_a_cached_directory_is_seen_at_once() {
    // An unlink leaves the cached directories in place (it removes no
    // directory): the last name is looked up every time.
    let t = server();
    let (_, b, f) = tree(&t);
    let owner = t.session(A, A);
    let reader = t.session(B, B);
    found(resolve(&t, &owner, "/a/b"));
    assert_eq!(cached(&t, &reader, "/a/b/f"), f);
    assert_eq!(t.run(&owner, R::Unlink { parent: b, name: v("f") }), Response::Done);
    match resolve(&t, &reader, "/a/b/f") {
        Response::Resolved { parent, attributes: None, .. } => assert_eq!(parent, b),
        other => panic!("{other:?}"),
    }
    let open = R::OpenPath { path: v("/a/b/f"), flags: 0, read: 0, lease: false };
    assert_eq!(errno(t.run(&reader, open)), libc::ENOENT);
    let again = common::ino(t.run(&owner, R::Mknod { parent: b, name: v("f"), mode: 0o644, rdev: 0 }));
    assert_ne!(again, f);
    assert_eq!(found(resolve(&t, &reader, "/a/b/f")), again);
}

#[test]
fn a_removed_and_remade_directory_is_the_new_one() {
    let t = server();
    let root = t.session(0, 0);
    let x = mkdir(&t, &root, ROOT, "x", 0o755);
    let old = mkdir(&t, &root, x, "y", 0o755);
    let reader = t.session(0, 0);
    // A missing last name caches its directory too.
    for _ in 0..2 {
        match resolve(&t, &reader, "/x/y/z") {
            Response::Resolved { parent, attributes: None, .. } => assert_eq!(parent, old),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(reader.cached_directories(), 1);
    assert_eq!(t.run(&root, R::Rmdir { parent: x, name: v("y") }), Response::Done);
    assert_eq!(errno(resolve(&t, &reader, "/x/y/z")), libc::ENOENT);
    let new = mkdir(&t, &root, x, "y", 0o755);
    let z = common::ino(t.run(&root, R::Mknod { parent: new, name: v("z"), mode: 0o644, rdev: 0 }));
    match resolve(&t, &reader, "/x/y/z") {
        Response::Resolved { parent, attributes: Some(a), .. } => assert_eq!((parent, a.ino), (new, z)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn prefixes_through_symlinks_or_dots_are_not_cached_and_none_are_at_zero() {
    let t = server();
    let (_, _, f) = tree(&t);
    let root = t.session(0, 0);
    common::ino(t.run(&root, R::Symlink { parent: ROOT, name: v("l"), target: v("a/b") }));
    let reader = t.session(B, B);
    for path in ["/l/f", "/a/./b/f", "/a/b/../b/f", "/l/../b/f"] {
        assert_eq!(found(resolve(&t, &reader, path)), f, "{path}");
    }
    assert_eq!(reader.cached_directories(), 0);
    // A symbolic link as the last component after a cached prefix is
    // followed by a walk from the root.
    let b = match resolve(&t, &root, "/a/b") {
        Response::Resolved { attributes: Some(a), .. } => a.ino,
        other => panic!("{other:?}"),
    };
    common::ino(t.run(&root, R::Symlink { parent: b, name: v("up"), target: v("../../l") }));
    assert_eq!(cached(&t, &reader, "/a/b/f"), f);
    assert_eq!(found(resolve(&t, &reader, "/a/b/up/f")), f);
    let not_followed = t.run(&reader, R::Resolve { path: v("/a/b/up"), follow: false });
    assert_ne!(found(not_followed), b);
    assert_eq!(found(resolve(&t, &reader, "/a/b/up")), b);
    let t0 = server_with(Limits { max_cached_directories: 0, ..Limits::default() });
    tree(&t0);
    let none = t0.session(B, B);
    found(resolve(&t0, &none, "/a/b/f"));
    found(resolve(&t0, &none, "/a/b/f"));
    assert_eq!(none.cached_directories(), 0);
}

/// Two unleased clients of a server with two workers, the file moving
/// between them and the worker count changing: a rename by one client is
/// seen by the other's next stat and open.
#[test]
fn two_clients_over_moving_workers_see_renames() {
    let t = serving::serve_with(serving::limits(2..=2));
    let owner = larder_client::Client::connect_socket_with(&t.socket(), false).unwrap();
    owner.create_dir("/a", 0o755).unwrap();
    owner.create_dir("/a/b", 0o755).unwrap();
    drop(larder_client::OpenOptions::new().write(true).create_new(true).open(&owner, "/a/b/f").unwrap());
    let f = owner.metadata("/a/b/f").unwrap().ino();
    // Open, so that it is placed on a worker and can be moved.
    let held = owner.open("/a/b/f").unwrap();
    let other = larder_client::Client::connect_socket_with(&t.socket(), false).unwrap();
    for round in 0..4u32 {
        let (from, to) = if round % 2 == 0 { ("/a/b", "/a/c") } else { ("/a/c", "/a/b") };
        assert_eq!(other.metadata(format!("{from}/f")).unwrap().ino(), f);
        drop(other.open(format!("{from}/f")).unwrap());
        serving::move_file_and_wait(t.server(), f, round % 2);
        owner.rename(from, to).unwrap();
        assert_eq!(other.metadata(format!("{from}/f")).unwrap_err().errno(), libc::ENOENT);
        assert_eq!(other.open(format!("{from}/f")).err().map(|e| e.errno()), Some(libc::ENOENT));
        assert_eq!(other.metadata(format!("{to}/f")).unwrap().ino(), f);
    }
    // Fewer workers, then more: the clients move, their caches with them.
    for workers in [1, 2] {
        t.server().set_active_workers(workers);
        assert_eq!(other.metadata("/a/b/f").unwrap().ino(), f);
        owner.rename("/a/b", "/a/c").unwrap();
        assert_eq!(other.metadata("/a/b/f").unwrap_err().errno(), libc::ENOENT);
        owner.rename("/a/c", "/a/b").unwrap();
    }
    drop(held);
}
