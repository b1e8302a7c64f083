//! Sessions: limits refuse without changing anything, handles are a
//! session's own, and closing (or dropping) a session releases all it
//! holds, freeing unlinked-but-open files and unfinished KV values.
#![allow(clippy::unwrap_used)]

mod common;

use common::{errno, handle, ino, server, server_with};
use larder_protocol::message::{Durability, Payload, Request as R, Response};
use larder_server::{execute, Limits, ServerError, VecMemory};

const ROOT: u64 = 1;

fn v(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[test]
fn emfile_at_max_open_handles_and_the_refused_open_changes_nothing() {
    let t = server_with(Limits { max_open_handles: 3, ..Limits::default() });
    let s = t.session(0, 0);
    t.run(&s, R::CreateBucket { bucket: v("b") });
    t.run(
        &s,
        R::KvPut { bucket: v("b"), key: v("k"), value: Payload::Inline(v("v")), durability: Durability::Buffered },
    );
    let created = t.run(&s, R::Create { parent: ROOT, name: v("f"), mode: 0o644, flags: libc::O_RDWR, lease: false });
    let (f, first) = (ino(created.clone()), handle(created));
    t.run(&s, R::Write { handle: first, offset: 0, data: Payload::Inline(v("kept")) });
    handle(t.run(&s, R::OpenDirectory { ino: ROOT }));
    handle(t.run(&s, R::KvReaderOpen { bucket: v("b"), key: v("k") }));
    assert_eq!(s.handle_count(), 3);

    let truncating = R::Open { ino: f, flags: libc::O_RDWR | libc::O_TRUNC };
    assert_eq!(errno(t.run(&s, truncating.clone())), libc::EMFILE);
    assert_eq!(t.run(&s, R::Read { handle: first, offset: 0, length: 10 }), Response::Data(v("kept")), "not truncated");
    assert_eq!(
        errno(t.run(&s, R::Create { parent: ROOT, name: v("g"), mode: 0o644, flags: libc::O_RDWR, lease: false })),
        libc::EMFILE
    );
    assert_eq!(errno(t.run(&s, R::Lookup { parent: ROOT, name: v("g") })), libc::ENOENT, "not created");
    assert_eq!(errno(t.run(&s, R::OpenDirectory { ino: ROOT })), libc::EMFILE);
    let writer = R::KvWriterOpen { bucket: v("b"), key: v("w"), durability: Durability::Buffered };
    assert_eq!(errno(t.run(&s, writer.clone())), libc::EMFILE);
    assert_eq!(t.orphans(), 0, "no writer object made");
    assert_eq!(errno(t.run(&s, R::KvReaderOpen { bucket: v("b"), key: v("k") })), libc::EMFILE);
    assert_eq!(s.handle_count(), 3);

    // Another client has limits of its own.
    let other = t.session(0, 0);
    handle(t.run(&other, R::OpenDirectory { ino: ROOT }));
    // A released handle makes room again.
    t.run(&s, R::Release { handle: first });
    handle(t.run(&s, writer));
    assert_eq!(errno(t.run(&s, truncating)), libc::EMFILE);
    assert_eq!(s.handle_count(), 3);
    t.assert_fsck_clean();
}

#[test]
fn a_handle_of_another_session_is_ebadf_there() {
    let t = server();
    let a = t.session(0, 0);
    let b = t.session(0, 0);
    let h = handle(t.run(&a, R::Create { parent: ROOT, name: v("f"), mode: 0o644, flags: libc::O_RDWR, lease: false }));
    let d = handle(t.run(&a, R::OpenDirectory { ino: ROOT }));
    // Handle numbers are per session: a's mean nothing in b.
    assert_eq!(errno(t.run(&b, R::Read { handle: h, offset: 0, length: 1 })), libc::EBADF);
    assert_eq!(errno(t.run(&b, R::Write { handle: h, offset: 0, data: Payload::Inline(v("x")) })), libc::EBADF);
    assert_eq!(errno(t.run(&b, R::Fsync { handle: h })), libc::EBADF);
    assert_eq!(errno(t.run(&b, R::Release { handle: h })), libc::EBADF);
    assert_eq!(errno(t.run(&b, R::ReadDirectory { handle: d, offset: 0, max_entries: 1 })), libc::EBADF);
    assert_eq!(errno(t.run(&b, R::ReleaseDirectory { handle: d })), libc::EBADF);
    assert_eq!(errno(t.run(&b, R::KvWriterFinish { handle: h })), libc::EBADF);
    assert_eq!(t.run(&a, R::Write { handle: h, offset: 0, data: Payload::Inline(v("mine")) }), Response::Length(4));
    assert_eq!(a.handle_count(), 2);
    assert_eq!(b.handle_count(), 0);
}

#[test]
fn max_clients_refuses_a_session_with_eagain_until_one_closes() {
    let t = server_with(Limits { max_clients: 2, ..Limits::default() });
    let a = t.session(1, 1);
    let b = t.session(2, 2);
    let refused = t.server.open_session(3, 3, Vec::new()).unwrap_err();
    assert!(matches!(refused, ServerError::TooManyClients { max: 2 }), "{refused:?}");
    assert_eq!(refused.errno(), libc::EAGAIN);
    assert_eq!(t.server.clients(), 2);
    a.close().unwrap();
    drop(b);
    assert_eq!(t.server.clients(), 0);
    let c = t.session(3, 3);
    assert_eq!(c.cred().uid, 3);
    assert_eq!(t.server.clients(), 1);
}

#[test]
fn max_in_flight_refuses_with_eagain_while_requests_execute() {
    let t = server_with(Limits { max_in_flight: 2, ..Limits::default() });
    let s = t.session(0, 0);
    let first = s.admit().unwrap();
    let second = s.admit().unwrap();
    assert_eq!(s.in_flight(), 2);
    assert_eq!(errno(t.run(&s, R::Ping)), libc::EAGAIN);
    assert!(matches!(s.admit(), Err(ServerError::TooManyInFlight { max: 2 })));
    // An admitted request executes, and its count ends with it.
    let memory = VecMemory::new(16);
    assert_eq!(
        larder_server::execute_admitted(&t.server, &s, second, R::Ping, &memory),
        Ok(Response::Pong { epoch: 7 })
    );
    assert_eq!(s.in_flight(), 1);
    drop(first);
    assert_eq!(s.in_flight(), 0);
    assert_eq!(t.run(&s, R::Ping), Response::Pong { epoch: 7 });
    assert_eq!(s.in_flight(), 0);
}

#[test]
fn closing_the_last_session_holding_an_unlinked_file_frees_it() {
    let t = server();
    let a = t.session(0, 0);
    let b = t.session(0, 0);
    let created = t.run(&a, R::Create { parent: ROOT, name: v("f"), mode: 0o644, flags: libc::O_RDWR, lease: false });
    let (f, h) = (ino(created.clone()), handle(created));
    let data = vec![7u8; 256 << 10];
    t.run(&a, R::Write { handle: h, offset: 0, data: Payload::Inline(data.clone()) });
    assert_eq!(ino(t.run(&b, R::Lookup { parent: ROOT, name: v("f") })), f);
    handle(t.run(&b, R::Open { ino: f, flags: libc::O_RDONLY }));
    assert_eq!(t.run(&b, R::Unlink { parent: ROOT, name: v("f") }), Response::Done);
    assert_eq!(t.orphans(), 1);
    // Still readable through the open handle.
    let Response::Data(back) = t.run(&a, R::Read { handle: h, offset: 0, length: data.len() as u32 }) else { panic!() };
    assert_eq!(back, data);
    a.close().unwrap();
    assert!(t.server.fs().store().stat(f).unwrap().is_some(), "b still has it open");
    assert_eq!(t.orphans(), 1);
    b.close().unwrap();
    assert_eq!(t.server.fs().store().stat(f).unwrap(), None, "freed at the last close");
    assert_eq!(t.orphans(), 0);
    assert!(t.server.fs().store().used_extents().unwrap().is_empty(), "its space is free");
    t.assert_fsck_clean();
}

#[test]
fn dropping_a_session_releases_files_directories_and_unfinished_writers() {
    let t = server();
    let s = t.session(0, 0);
    t.run(&s, R::CreateBucket { bucket: v("b") });
    let created = t.run(&s, R::Create { parent: ROOT, name: v("f"), mode: 0o644, flags: libc::O_RDWR, lease: false });
    let f = ino(created);
    handle(t.run(&s, R::OpenDirectory { ino: ROOT }));
    let w = handle(t.run(&s, R::KvWriterOpen { bucket: v("b"), key: v("k"), durability: Durability::Durable }));
    t.run(&s, R::Write { handle: w, offset: 0, data: Payload::Inline(vec![1u8; 64 << 10]) });
    t.run(&s, R::Unlink { parent: ROOT, name: v("f") });
    assert_eq!(t.orphans(), 2, "the unlinked file and the unfinished value");
    assert_eq!(s.handle_count(), 3);
    drop(s);
    assert_eq!(t.orphans(), 0);
    assert_eq!(t.server.fs().store().stat(f).unwrap(), None);
    assert_eq!(t.server.clients(), 0);
    let s = t.session(0, 0);
    assert_eq!(t.run(&s, R::KvGet { bucket: v("b"), key: v("k"), into: None }), Response::Value(None));
    t.assert_fsck_clean();
}

#[test]
fn one_session_serves_several_workers_at_once() {
    let t = server_with(Limits { max_open_handles: 8, ..Limits::default() });
    let s = t.session(0, 0);
    let dir = ino(t.run(&s, R::Mkdir { parent: ROOT, name: v("d"), mode: 0o755 }));
    let (server, session) = (&t.server, &s);
    std::thread::scope(|scope| {
        for worker in 0..4u8 {
            scope.spawn(move || {
                let memory = VecMemory::new(64);
                let run = |r| execute(server, session, r, &memory).unwrap();
                for i in 0..50u32 {
                    let name = format!("w{worker}-{i}").into_bytes();
                    let created = run(R::Create {
                        parent: dir,
                        name: name.clone(),
                        mode: 0o644,
                        flags: libc::O_RDWR,
                        lease: false,
                    });
                    let h = match created {
                        Response::Created { handle, .. } => handle,
                        // Four workers of one client share its 8 handles.
                        Response::Error { errno, .. } => {
                            assert_eq!(errno, libc::EMFILE);
                            continue;
                        }
                        other => panic!("{other:?}"),
                    };
                    let data = vec![worker; 100];
                    assert_eq!(
                        run(R::Write { handle: h, offset: 0, data: Payload::Inline(data.clone()) }),
                        Response::Length(100)
                    );
                    assert_eq!(run(R::Read { handle: h, offset: 0, length: 100 }), Response::Data(data));
                    assert_eq!(run(R::Release { handle: h }), Response::Done);
                    assert!(session.handle_count() <= 8);
                }
            });
        }
    });
    assert_eq!(s.handle_count(), 0);
    assert_eq!(s.in_flight(), 0);
    t.assert_fsck_clean();
}

#[test]
fn an_object_is_named_by_number_only_once_the_session_reached_it() {
    let t = server_with(Limits { max_known_objects: 3, ..Limits::default() });
    let owner = t.session(1000, 1000);
    let other = t.session(2000, 2000);
    let chmod = |mode| larder_protocol::message::SetAttributes { mode: Some(mode), ..Default::default() };
    t.run(&t.session(0, 0), R::SetAttributes { ino: ROOT, set: chmod(0o777), handle: None });
    let private = ino(t.run(&owner, R::Mkdir { parent: ROOT, name: v("private"), mode: 0o700 }));
    let created =
        t.run(&owner, R::Create { parent: private, name: v("f"), mode: 0o666, flags: libc::O_RDWR, lease: false });
    let f = ino(created);
    assert!(owner.knows(private) && owner.knows(f));
    // The file's mode would let anyone read and write it, but the other
    // user cannot reach it: its directory is 0700. A guessed number
    // reaches nothing.
    assert!(!other.knows(f));
    for request in [
        R::GetAttributes { ino: f },
        R::Open { ino: f, flags: libc::O_RDWR },
        R::Access { ino: f, mask: 0 },
        R::SetAttributes { ino: f, set: chmod(0o600), handle: None },
        R::GetXattr { ino: f, name: v("user.x") },
        R::OpenDirectory { ino: private },
        R::Lookup { parent: private, name: v("f") },
        R::Link { ino: f, parent: ROOT, name: v("stolen") },
        R::Unlink { parent: private, name: v("f") },
    ] {
        assert_eq!(errno(t.run(&other, request.clone())), libc::ENOENT, "{request:?}");
    }
    assert_eq!(errno(t.run(&other, R::Resolve { path: v("/private/f"), follow: true })), libc::EACCES);
    assert_eq!(errno(t.run(&other, R::Lookup { parent: ROOT, name: v("nope") })), libc::ENOENT);
    assert!(!other.knows(f));
    // Once the directory lets it search, a lookup reaches the file.
    t.run(&owner, R::SetAttributes { ino: private, set: chmod(0o711), handle: None });
    assert_eq!(ino(t.run(&other, R::Lookup { parent: ROOT, name: v("private") })), private);
    assert_eq!(ino(t.run(&other, R::Lookup { parent: private, name: v("f") })), f);
    handle(t.run(&other, R::Open { ino: f, flags: libc::O_RDWR }));
    // The root, the directory and the file: a fourth object is ENFILE.
    t.run(&owner, R::Mknod { parent: private, name: v("g"), mode: 0o644, rdev: 0 });
    assert_eq!(errno(t.run(&other, R::Lookup { parent: private, name: v("g") })), libc::ENFILE);
    assert_eq!(ino(t.run(&other, R::Lookup { parent: private, name: v("f") })), f, "a known one still resolves");
}

/// A resolution learns the directory and then the object, as two
/// lookups would: at the limit the directory is learnt and the object
/// refused.
#[test]
fn a_path_resolved_at_the_known_limit_reaches_its_directory_only() {
    let t = server_with(Limits { max_known_objects: 2, ..Limits::default() });
    let maker = t.session(0, 0);
    let d = ino(t.run(&maker, R::Mkdir { parent: ROOT, name: v("d"), mode: 0o755 }));
    let f = ino(t.run(&maker, R::Mknod { parent: d, name: v("f"), mode: 0o644, rdev: 0 }));
    for request in [
        R::Resolve { path: v("/d/f"), follow: true },
        R::OpenPath { path: v("/d/f"), flags: libc::O_RDONLY, read: 0, lease: false },
    ] {
        let s = t.session(0, 0);
        assert_eq!(errno(t.run(&s, request.clone())), libc::ENFILE, "{request:?}");
        assert!(s.knows(d) && !s.knows(f), "{request:?}");
        assert_eq!(s.handle_count(), 0);
    }
}

#[test]
fn sessions_and_the_server_state_may_be_shared_between_worker_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<larder_server::Session>();
    shared::<larder_server::ServerState>();
    fn sendable<T: Send>() {}
    sendable::<larder_server::InFlight<'static>>();
}
