//! `OpenPath`: an open by path in one request must answer exactly what
//! the two requests it stands for answer (`Resolve`, then `Open` of what
//! it named), for every user, path and flag of a tree with private
//! directories, unreadable files and symbolic links; it returns the
//! file's bytes and a lease when asked, and leaves nothing open when it
//! fails.
#![allow(clippy::unwrap_used)]

mod common;

use larder_fs::{Cred, Fs, SetAttr};
use larder_protocol::codec::{check_response, encode_response};
use larder_protocol::message::{Request as R, Response};
use larder_server::{Limits, Session};

/// The tree's owner, and another user.
const A: u32 = 42_001;
const B: u32 = 42_002;

const CONTENT: &[u8] = b"the file's bytes\n";

/// Builds, as root, the tree every case runs on; returns its root.
fn tree(fs: &Fs) {
    let root = Cred::root();
    let r = fs.root();
    let dir = |parent: u64, name: &str, mode: u32| {
        let attr = fs.mkdir(&root, parent, name.as_bytes(), mode).unwrap();
        fs.setattr(&root, attr.ino, &SetAttr { uid: Some(A), gid: Some(A), ..SetAttr::default() }, None).unwrap();
        fs.setattr(&root, attr.ino, &SetAttr { mode: Some(mode), ..SetAttr::default() }, None).unwrap();
        attr.ino
    };
    let file = |parent: u64, name: &str, mode: u32| {
        let attr = fs.mknod(&root, parent, name.as_bytes(), 0o644, 0).unwrap();
        let h = fs.open_file(&root, attr.ino, libc::O_WRONLY).unwrap();
        fs.write(&root, h, 0, CONTENT).unwrap();
        fs.release(h).unwrap();
        fs.setattr(&root, attr.ino, &SetAttr { uid: Some(A), gid: Some(A), ..SetAttr::default() }, None).unwrap();
        fs.setattr(&root, attr.ino, &SetAttr { mode: Some(mode), ..SetAttr::default() }, None).unwrap();
    };
    let link = |parent: u64, name: &str, target: &str| {
        fs.symlink(&root, parent, name.as_bytes(), target.as_bytes()).unwrap();
    };
    let public = dir(r, "public", 0o755);
    file(public, "f644", 0o644);
    file(public, "f600", 0o600);
    file(public, "f666", 0o666);
    let private = dir(r, "private", 0o700);
    file(private, "f", 0o644);
    // Search without listing: a path through it opens, as on ext4.
    let search = dir(r, "search", 0o711);
    file(search, "f", 0o644);
    // Listing without search: no path through it opens.
    let list = dir(r, "list", 0o744);
    file(list, "f", 0o644);
    let deep = dir(public, "deep", 0o755);
    let deeper = dir(deep, "deeper", 0o700);
    file(deeper, "f", 0o644);
    link(public, "to_f644", "f644");
    link(public, "abs_to_f644", "/public/f644");
    link(public, "to_private_f", "../private/f");
    link(public, "to_dir", "deep");
    link(public, "dangling", "nothing");
    link(public, "loop_a", "loop_b");
    link(public, "loop_b", "loop_a");
    link(r, "pub", "public");
}

/// Every path a case opens.
const PATHS: &[&str] = &[
    "/public/f644",
    "/public/f600",
    "/public/f666",
    "public/f644",
    "/public//f644",
    "/public/./f644",
    "/public/deep/../f644",
    "/private/f",
    "/search/f",
    "/list/f",
    "/public/deep/deeper/f",
    "/public/to_f644",
    "/public/abs_to_f644",
    "/public/to_private_f",
    "/public/to_dir",
    "/public/to_dir/deeper/f",
    "/pub/f644",
    "/public/dangling",
    "/public/loop_a",
    "/public/missing",
    "/missing/f",
    "/public/f644/x",
    "/public/f644/",
    "/public/deep/",
    "/public",
    "/",
    "",
    "/public/a\0b",
];

/// Every flag set a case opens with.
const FLAGS: &[i32] = &[
    libc::O_RDONLY,
    libc::O_WRONLY,
    libc::O_RDWR,
    libc::O_RDWR | libc::O_APPEND,
    libc::O_RDONLY | libc::O_NOFOLLOW,
    libc::O_RDWR | libc::O_NOFOLLOW,
];

/// The outcome of an open: the errno, or the object opened.
fn outcome(r: &Response) -> Result<u64, i32> {
    match r {
        Response::Handle(_) => Ok(0),
        Response::PathOpened { attributes, .. } => Ok(attributes.ino),
        Response::Error { errno, .. } => Err(*errno),
        other => panic!("unexpected {other:?}"),
    }
}

/// `Resolve` then `Open`, as a client did before `OpenPath`: the object
/// opened or the errno.
fn two_requests(t: &common::TestServer, s: &Session, path: &str, flags: i32) -> Result<u64, i32> {
    let follow = flags & libc::O_NOFOLLOW == 0;
    let ino = match t.run(s, R::Resolve { path: path.as_bytes().to_vec(), follow }) {
        Response::Resolved { attributes: Some(a), .. } => a.ino,
        Response::Resolved { attributes: None, .. } => return Err(libc::ENOENT),
        Response::Error { errno, .. } => return Err(errno),
        other => panic!("{other:?}"),
    };
    let handle = match t.run(s, R::Open { ino, flags }) {
        Response::Handle(h) => h,
        Response::Error { errno, .. } => return Err(errno),
        other => panic!("{other:?}"),
    };
    assert_eq!(t.run(s, R::Release { handle }), Response::Done);
    Ok(ino)
}

fn open_path(path: &str, flags: i32, read: u32) -> R {
    R::OpenPath { path: path.as_bytes().to_vec(), flags, read, lease: false }
}

#[test]
fn open_path_answers_what_resolve_and_open_answer_for_every_user_path_and_flag() {
    let mut compared = 0;
    let mut errnos = std::collections::BTreeSet::new();
    for (uid, gid) in [(A, A), (B, B), (0, 0)] {
        let t = common::server();
        tree(t.server.fs());
        let one = t.session(uid, gid);
        let two = t.session(uid, gid);
        for path in PATHS {
            for &flags in FLAGS {
                let expected = two_requests(&t, &two, path, flags);
                let response = t.run(&one, open_path(path, flags, 4096));
                let got = outcome(&response);
                assert_eq!(got, expected, "uid {uid}, {path:?}, flags {flags:#o}: {response:?}");
                if let Response::PathOpened { handle, .. } = response {
                    assert_eq!(t.run(&one, R::Release { handle }), Response::Done);
                }
                if let Err(errno) = got {
                    errnos.insert(errno);
                }
                compared += 1;
            }
        }
        assert_eq!(one.handle_count(), 0, "uid {uid}: an open left behind");
    }
    assert_eq!(compared, 3 * PATHS.len() * FLAGS.len());
    // The cases reach every refusal the issue names.
    for errno in [libc::EACCES, libc::ENOENT, libc::ENOTDIR, libc::ELOOP, libc::EISDIR] {
        assert!(errnos.contains(&errno), "no case gave errno {errno}: {errnos:?}");
    }
}

/// The search permission of every directory on the way is checked with
/// the client's credentials: a server that resolved as root (or skipped
/// the check) would open these.
#[test]
fn a_directory_without_search_permission_refuses_the_open() {
    let t = common::server();
    tree(t.server.fs());
    let b = t.session(B, B);
    for path in ["/private/f", "/list/f", "/public/deep/deeper/f", "/public/to_private_f", "/pub/deep/deeper/f"] {
        assert_eq!(common::errno(t.run(&b, open_path(path, libc::O_RDONLY, 4096))), libc::EACCES, "{path}");
    }
    // The file's own permission too.
    assert_eq!(common::errno(t.run(&b, open_path("/public/f600", libc::O_RDONLY, 4096))), libc::EACCES);
    assert_eq!(common::errno(t.run(&b, open_path("/public/f644", libc::O_WRONLY, 0))), libc::EACCES);
    assert_eq!(b.handle_count(), 0);
    // The owner opens them all, and search without read permission on
    // the directory is enough for B.
    let a = t.session(A, A);
    for path in ["/private/f", "/list/f", "/public/deep/deeper/f", "/public/to_private_f", "/search/f"] {
        assert!(outcome(&t.run(&a, open_path(path, libc::O_RDONLY, 0))).is_ok(), "{path}");
    }
    assert!(outcome(&t.run(&b, open_path("/search/f", libc::O_RDONLY, 0))).is_ok());
}

#[test]
fn the_answer_carries_the_bytes_asked_for_and_the_handle_reads_on() {
    let t = common::server();
    tree(t.server.fs());
    let s = t.session(B, B);
    let Response::PathOpened { parent, name, attributes, handle, data, lease } =
        t.run(&s, open_path("/public/to_f644", libc::O_RDONLY, 4096))
    else {
        panic!("not opened")
    };
    // The name the symbolic link led to, in its directory.
    assert_eq!(name, b"f644");
    assert_eq!(parent, common::ino(t.run(&s, R::Lookup { parent: 1, name: b"public".to_vec() })));
    assert_eq!(attributes.size, CONTENT.len() as u64);
    assert_eq!(data.as_deref(), Some(CONTENT), "the whole file: fewer bytes than asked");
    assert_eq!(lease, None, "not asked for");
    assert_eq!(t.run(&s, R::Read { handle, offset: 4, length: 4 }), Response::Data(CONTENT[4..8].to_vec()));
    assert_eq!(t.run(&s, R::Release { handle }), Response::Done);
    // Fewer than the file: exactly as many as asked.
    let Response::PathOpened { data, handle, .. } = t.run(&s, open_path("/public/f644", libc::O_RDONLY, 5)) else {
        panic!()
    };
    assert_eq!(data.as_deref(), Some(&CONTENT[..5]));
    t.run(&s, R::Release { handle });
    // None asked, a file opened for writing only, a directory: no bytes.
    for (path, flags, read) in
        [("/public/f666", libc::O_RDONLY, 0), ("/public/f666", libc::O_WRONLY, 4096), ("/public", libc::O_RDONLY, 4096)]
    {
        let Response::PathOpened { data, handle, .. } = t.run(&s, open_path(path, flags, read)) else { panic!() };
        assert_eq!(data, None, "{path} {flags:#o} {read}");
        t.run(&s, R::Release { handle });
    }
    assert_eq!(s.handle_count(), 0);
}

#[test]
fn the_bytes_stop_at_max_io_bytes_and_at_what_fits_a_completion_record() {
    let limits = Limits { max_io_bytes: 64 << 10, ring_bytes: 16 << 10, ..Limits::default() };
    let t = common::server_with(limits.clone());
    let root = Cred::root();
    let fs = t.server.fs();
    let big = fs.mknod(&root, fs.root(), b"big", 0o644, 0).unwrap();
    let h = fs.open_file(&root, big.ino, libc::O_WRONLY).unwrap();
    let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    fs.write(&root, h, 0, &bytes).unwrap();
    fs.release(h).unwrap();
    let s = t.session(0, 0);
    let max_record = larder_protocol::ring::max_record(limits.ring_bytes) as usize;
    let response = t.run(&s, open_path("/big", libc::O_RDONLY, u32::MAX));
    let Response::PathOpened { data: Some(data), .. } = &response else { panic!("{response:?}") };
    assert!(!data.is_empty());
    assert_eq!(data[..], bytes[..data.len()]);
    let length = check_response(&response).unwrap();
    assert!(length <= max_record, "{length} bytes: more than a record of {max_record}");
    let mut encoded = Vec::new();
    encode_response(1, &response, &mut encoded);
    assert!(encoded.len() > max_record - 64, "the record is filled: {} of {max_record}", encoded.len());

    let wide = common::server_with(Limits { max_io_bytes: 4096, ..Limits::default() });
    let fs = wide.server.fs();
    let f = fs.mknod(&root, fs.root(), b"f", 0o644, 0).unwrap();
    let h = fs.open_file(&root, f.ino, libc::O_WRONLY).unwrap();
    fs.write(&root, h, 0, &bytes[..20_000]).unwrap();
    fs.release(h).unwrap();
    let s = wide.session(0, 0);
    let Response::PathOpened { data: Some(data), .. } = wide.run(&s, open_path("/f", libc::O_RDONLY, 20_000)) else {
        panic!()
    };
    assert_eq!(data.len(), 4096, "max_io_bytes");
}

/// A client asks for whole pages (64 KiB) whatever the file's size: the
/// answer carries the file, exactly its size, with or without a lease,
/// for an empty file, one shorter than a page and one of 16 KiB.
#[test]
fn pages_asked_of_a_shorter_file_answer_exactly_the_file() {
    let t = common::server();
    let root = Cred::root();
    let fs = t.server.fs();
    let bytes: Vec<u8> = (0..(16u32 << 10)).map(|i| (i % 253) as u8).collect();
    for (name, length) in [("empty", 0usize), ("short", 100), ("sixteen", 16 << 10)] {
        let f = fs.mknod(&root, fs.root(), name.as_bytes(), 0o644, 0).unwrap();
        let h = fs.open_file(&root, f.ino, libc::O_WRONLY).unwrap();
        fs.write(&root, h, 0, &bytes[..length]).unwrap();
        fs.release(h).unwrap();
    }
    let s = t.session(0, 0);
    for lease in [false, true] {
        for (name, length) in [("empty", 0usize), ("short", 100), ("sixteen", 16 << 10)] {
            let asked =
                R::OpenPath { path: format!("/{name}").into_bytes(), flags: libc::O_RDONLY, read: 64 << 10, lease };
            let Response::PathOpened { attributes, data, handle, .. } = t.run(&s, asked) else { panic!("{name}") };
            assert_eq!(attributes.size, length as u64, "{name}");
            assert_eq!(data.as_deref(), Some(&bytes[..length]), "{name}, lease {lease}");
            assert_eq!(t.run(&s, R::Release { handle }), Response::Done);
        }
    }
    assert_eq!(s.handle_count(), 0);
}

#[test]
fn flags_that_create_or_truncate_are_refused_and_change_nothing() {
    let t = common::server();
    tree(t.server.fs());
    let s = t.session(A, A);
    for flags in
        [libc::O_RDWR | libc::O_CREAT, libc::O_RDWR | libc::O_TRUNC, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL]
    {
        assert_eq!(common::errno(t.run(&s, open_path("/public/f644", flags, 0))), libc::EINVAL);
        assert_eq!(common::errno(t.run(&s, open_path("/public/new", flags, 0))), libc::EINVAL);
    }
    let public = common::ino(t.run(&s, R::Lookup { parent: 1, name: b"public".to_vec() }));
    assert_eq!(common::errno(t.run(&s, R::Lookup { parent: public, name: b"new".to_vec() })), libc::ENOENT);
    let f = t.run(&s, open_path("/public/f644", libc::O_RDONLY, 4096));
    let Response::PathOpened { data, handle, .. } = f else { panic!() };
    assert_eq!(data.as_deref(), Some(CONTENT), "not truncated");
    t.run(&s, R::Release { handle });
    assert_eq!(s.handle_count(), 0);
}

#[test]
fn a_session_at_its_handle_limit_opens_nothing_and_the_objects_it_reaches_are_known() {
    let t = common::server_with(Limits { max_open_handles: 1, ..Limits::default() });
    tree(t.server.fs());
    let s = t.session(A, A);
    let Response::PathOpened { handle, attributes, parent, .. } =
        t.run(&s, open_path("/public/f644", libc::O_RDONLY, 0))
    else {
        panic!()
    };
    // What the open reached can be named by number now, as after a Resolve.
    assert!(s.knows(attributes.ino) && s.knows(parent));
    assert_eq!(common::errno(t.run(&s, open_path("/public/f666", libc::O_RDONLY, 0))), libc::EMFILE);
    assert_eq!(s.handle_count(), 1);
    t.run(&s, R::Release { handle });
    assert!(outcome(&t.run(&s, open_path("/public/f666", libc::O_RDONLY, 0))).is_ok());
}

#[test]
fn a_lease_comes_with_the_open_when_asked() {
    let t = common::server();
    tree(t.server.fs());
    let s = t.session(A, A);
    let asked = R::OpenPath { path: b"/public/f644".to_vec(), flags: libc::O_RDONLY, read: 0, lease: true };
    let Response::PathOpened { lease: Some(grant), handle, .. } = t.run(&s, asked.clone()) else { panic!("no lease") };
    assert!(grant.sequence != 0 && grant.term_nanos > 0);
    assert_eq!(s.lease_count(), 1);
    t.run(&s, R::Release { handle });
    // Asked again: the same lease, renewed.
    let Response::PathOpened { lease: Some(again), handle, .. } = t.run(&s, asked) else { panic!() };
    assert_eq!((again.slot, again.sequence), (grant.slot, grant.sequence));
    t.run(&s, R::Release { handle });
    // A server that grants no leases still opens.
    let off = common::server_with(Limits { lease_term: std::time::Duration::ZERO, ..Limits::default() });
    tree(off.server.fs());
    let s = off.session(A, A);
    let asked = R::OpenPath { path: b"/public/f644".to_vec(), flags: libc::O_RDONLY, read: 0, lease: true };
    let Response::PathOpened { lease: None, .. } = off.run(&s, asked) else { panic!("a lease from a server without") };
}
