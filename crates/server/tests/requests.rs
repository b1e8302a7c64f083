//! Every request, executed against a fresh store: what it returns, and
//! the errno of its refusals.
#![allow(clippy::unwrap_used)]

mod common;

use common::{errno, handle, ino, server};
use larder_protocol::message::{
    BufferSlice, Durability, FileKind, KvOperation, Payload, RenameFlags, Request as R, Response, SetAttributes,
    TimeChange, Timestamp, XattrFlags,
};
use larder_server::{execute, VecMemory};

const ROOT: u64 = 1;

fn v(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[test]
fn ping_answers_the_servers_epoch() {
    let t = server();
    let s = t.session(0, 0);
    assert_eq!(t.run(&s, R::Ping), Response::Pong { epoch: 7 });
}

#[test]
fn names_are_made_found_renamed_and_removed() {
    let t = server();
    let s = t.session(0, 0);
    let dir = ino(t.run(&s, R::Mkdir { parent: ROOT, name: v("d"), mode: 0o755 }));
    assert_eq!(errno(t.run(&s, R::Mkdir { parent: ROOT, name: v("d"), mode: 0o755 })), libc::EEXIST);
    assert_eq!(ino(t.run(&s, R::Lookup { parent: ROOT, name: v("d") })), dir);
    assert_eq!(errno(t.run(&s, R::Lookup { parent: ROOT, name: v("nope") })), libc::ENOENT);
    let Response::Attributes(a) = t.run(&s, R::GetAttributes { ino: dir }) else { panic!() };
    assert_eq!((a.kind, a.mode & 0o7777), (FileKind::Directory, 0o755));
    assert_eq!(errno(t.run(&s, R::GetAttributes { ino: 999_999 })), libc::ENOENT);

    let fifo = t.run(&s, R::Mknod { parent: dir, name: v("p"), mode: libc::S_IFIFO | 0o600, rdev: 0 });
    let Response::Attributes(fifo) = fifo else { panic!("{fifo:?}") };
    assert_eq!(fifo.kind, FileKind::Fifo);
    assert_eq!(errno(t.run(&s, R::Mknod { parent: dir, name: v("q"), mode: libc::S_IFDIR, rdev: 0 })), libc::EINVAL);

    let link = ino(t.run(&s, R::Symlink { parent: dir, name: v("l"), target: v("p") }));
    assert_eq!(t.run(&s, R::Readlink { ino: link }), Response::Data(v("p")));
    assert_eq!(errno(t.run(&s, R::Readlink { ino: dir })), libc::EINVAL);

    let Response::Attributes(linked) = t.run(&s, R::Link { ino: fifo.ino, parent: ROOT, name: v("p2") }) else {
        panic!()
    };
    assert_eq!(linked.nlink, 2);
    assert_eq!(errno(t.run(&s, R::Link { ino: dir, parent: ROOT, name: v("d2") })), libc::EPERM);

    let resolved = t.run(&s, R::Resolve { path: v("/d/l"), follow: true });
    let Response::Resolved { parent, name, attributes: Some(target) } = resolved else { panic!("{resolved:?}") };
    assert_eq!((parent, name, target.ino), (dir, v("p"), fifo.ino));
    let Response::Resolved { attributes: None, .. } = t.run(&s, R::Resolve { path: v("/d/none"), follow: true }) else {
        panic!()
    };
    assert_eq!(errno(t.run(&s, R::Resolve { path: v("/none/x"), follow: true })), libc::ENOENT);

    let flags = RenameFlags::default();
    let rename = |from: &str, to: &str, flags| R::Rename {
        parent: dir,
        name: v(from),
        new_parent: ROOT,
        new_name: v(to),
        flags,
    };
    assert_eq!(t.run(&s, rename("p", "moved", flags)), Response::Done);
    assert_eq!(ino(t.run(&s, R::Lookup { parent: ROOT, name: v("moved") })), fifo.ino);
    assert_eq!(errno(t.run(&s, rename("p", "again", flags))), libc::ENOENT);
    let noreplace = RenameFlags { noreplace: true, exchange: false };
    assert_eq!(errno(t.run(&s, rename("l", "moved", noreplace))), libc::EEXIST);

    assert_eq!(errno(t.run(&s, R::Rmdir { parent: ROOT, name: v("d") })), libc::ENOTEMPTY);
    assert_eq!(errno(t.run(&s, R::Unlink { parent: ROOT, name: v("d") })), libc::EISDIR);
    assert_eq!(t.run(&s, R::Unlink { parent: dir, name: v("l") }), Response::Done);
    assert_eq!(t.run(&s, R::Rmdir { parent: ROOT, name: v("d") }), Response::Done);
    assert_eq!(errno(t.run(&s, R::Rmdir { parent: ROOT, name: v("d") })), libc::ENOENT);
    t.assert_fsck_clean();
}

#[test]
fn attributes_access_statfs_and_sync() {
    let t = server();
    let s = t.session(0, 0);
    let created = t.run(&s, R::Create { parent: ROOT, name: v("f"), mode: 0o640, flags: libc::O_RDWR, lease: false });
    let (f, h) = (ino(created.clone()), handle(created));
    let set = SetAttributes {
        mode: Some(0o600),
        uid: Some(1000),
        size: Some(10),
        mtime: Some(TimeChange::At(Timestamp { seconds: 5, nanoseconds: 6 })),
        ..SetAttributes::default()
    };
    let Response::Attributes(a) = t.run(&s, R::SetAttributes { ino: f, set, handle: None }) else { panic!() };
    assert_eq!((a.mode & 0o7777, a.uid, a.size, a.mtime.seconds), (0o600, 1000, 10, 5));
    // A truncate through a handle of this session; a handle it does not
    // hold is EBADF.
    let shrink = SetAttributes { size: Some(3), ..SetAttributes::default() };
    let Response::Attributes(a) = t.run(&s, R::SetAttributes { ino: f, set: shrink.clone(), handle: Some(h) }) else {
        panic!()
    };
    assert_eq!(a.size, 3);
    assert_eq!(errno(t.run(&s, R::SetAttributes { ino: f, set: shrink, handle: Some(h + 100) })), libc::EBADF);

    let other = t.session(2000, 2000);
    assert_eq!(t.run(&other, R::Access { ino: ROOT, mask: libc::R_OK as u32 }), Response::Done);
    assert_eq!(errno(t.run(&other, R::Access { ino: f, mask: 0 })), libc::ENOENT, "not reached by a lookup yet");
    assert_eq!(ino(t.run(&other, R::Lookup { parent: ROOT, name: v("f") })), f);
    assert_eq!(errno(t.run(&other, R::Access { ino: f, mask: libc::R_OK as u32 })), libc::EACCES);
    assert_eq!(errno(t.run(&other, R::Access { ino: 999_999, mask: 0 })), libc::ENOENT);

    let Response::FsStats(st) = t.run(&s, R::StatFs) else { panic!() };
    assert!(st.blocks >= st.blocks_free && st.blocks_free >= st.blocks_available && st.name_max == 255, "{st:?}");
    assert_eq!(t.run(&s, R::Sync), Response::Done);
}

#[test]
fn files_are_read_and_written_inline_and_through_the_data_area() {
    let t = server();
    let s = t.session(0, 0);
    let memory = VecMemory::new(common::AREA);
    let created = t.run(&s, R::Create { parent: ROOT, name: v("f"), mode: 0o644, flags: libc::O_RDWR, lease: false });
    let h = handle(created.clone());
    let f = ino(created);
    let excl = libc::O_RDWR | libc::O_EXCL;
    assert_eq!(
        errno(t.run(&s, R::Create { parent: ROOT, name: v("f"), mode: 0o644, flags: excl, lease: false })),
        libc::EEXIST
    );

    let write = |offset, data| R::Write { handle: h, offset, data };
    assert_eq!(t.run_in(&s, write(0, Payload::Inline(v("hello "))), &memory), Response::Length(6));
    memory.fill(100, b"world").unwrap();
    let slice = BufferSlice { offset: 100, length: 5 };
    assert_eq!(t.run_in(&s, write(6, Payload::Buffer(slice)), &memory), Response::Length(5));
    assert_eq!(t.run(&s, R::Read { handle: h, offset: 0, length: 100 }), Response::Data(v("hello world")));
    let into = BufferSlice { offset: 200, length: 5 };
    assert_eq!(t.run_in(&s, R::ReadBuffer { handle: h, offset: 6, into }, &memory), Response::Length(5));
    assert_eq!(&memory.snapshot()[200..205], b"world");
    assert_eq!(t.run(&s, R::Fsync { handle: h }), Response::Done);
    assert_eq!(t.run(&s, R::Fallocate { handle: h, offset: 0, length: 4096, mode: 0 }), Response::Done);
    assert_eq!(errno(t.run(&s, R::Fallocate { handle: h, offset: 0, length: 0, mode: 0 })), libc::EINVAL);
    let Response::Attributes(a) = t.run(&s, R::GetAttributes { ino: f }) else { panic!() };
    assert_eq!(a.size, 4096);

    // A slice outside the area is a violation, not an error response.
    let outside = BufferSlice { offset: common::AREA as u64 - 2, length: 5 };
    assert!(execute(&t.server, &s, write(0, Payload::Buffer(outside)), &memory).is_err());
    assert!(execute(&t.server, &s, R::ReadBuffer { handle: h, offset: 0, into: outside }, &memory).is_err());

    // Read-only handles refuse writes; O_TRUNC empties.
    let ro = handle(t.run(&s, R::Open { ino: f, flags: libc::O_RDONLY }));
    assert_eq!(errno(t.run(&s, R::Write { handle: ro, offset: 0, data: Payload::Inline(v("x")) })), libc::EBADF);
    let wo = handle(t.run(&s, R::Open { ino: f, flags: libc::O_WRONLY | libc::O_TRUNC }));
    assert_eq!(errno(t.run(&s, R::Read { handle: wo, offset: 0, length: 1 })), libc::EBADF);
    assert_eq!(t.run(&s, R::Read { handle: ro, offset: 0, length: 10 }), Response::Data(Vec::new()));
    let dir = ino(t.run(&s, R::Mkdir { parent: ROOT, name: v("d"), mode: 0o755 }));
    assert_eq!(errno(t.run(&s, R::Open { ino: dir, flags: libc::O_WRONLY })), libc::EISDIR);
    for handle in [h, ro, wo] {
        assert_eq!(t.run(&s, R::Release { handle }), Response::Done);
        assert_eq!(errno(t.run(&s, R::Release { handle })), libc::EBADF);
    }
    assert_eq!(s.handle_count(), 0);
    let c = s.counters();
    assert_eq!((c.bytes_written, c.bytes_read), (11, 16));
    assert!(c.errors >= 8 && c.requests > c.errors, "{c:?}");
}

#[test]
fn directories_are_listed_through_handles_of_their_own_kind() {
    let t = server();
    let s = t.session(0, 0);
    let dir = ino(t.run(&s, R::Mkdir { parent: ROOT, name: v("d"), mode: 0o755 }));
    for name in ["a", "b", "c"] {
        t.run(&s, R::Mknod { parent: dir, name: v(name), mode: 0o644, rdev: 0 });
    }
    let dh = handle(t.run(&s, R::OpenDirectory { ino: dir }));
    let Response::Entries(first) = t.run(&s, R::ReadDirectory { handle: dh, offset: 0, max_entries: 3 }) else {
        panic!()
    };
    let names: Vec<_> = first.iter().map(|e| e.name.clone()).collect();
    assert_eq!(names, [v("."), v(".."), v("a")]);
    let next = first[2].next;
    let Response::Entries(rest) = t.run(&s, R::ReadDirectory { handle: dh, offset: next, max_entries: 10 }) else {
        panic!()
    };
    assert_eq!(rest.iter().map(|e| e.name.clone()).collect::<Vec<_>>(), [v("b"), v("c")]);
    assert_eq!(t.run(&s, R::FsyncDirectory { handle: dh }), Response::Done);
    // A directory handle is not a file handle, and the other way round.
    assert_eq!(errno(t.run(&s, R::Release { handle: dh })), libc::EBADF);
    assert_eq!(errno(t.run(&s, R::Read { handle: dh, offset: 0, length: 1 })), libc::EBADF);
    let fh = handle(t.run(&s, R::Create { parent: dir, name: v("f"), mode: 0o644, flags: libc::O_RDWR, lease: false }));
    assert_eq!(errno(t.run(&s, R::ReadDirectory { handle: fh, offset: 0, max_entries: 1 })), libc::EBADF);
    assert_eq!(errno(t.run(&s, R::ReleaseDirectory { handle: fh })), libc::EBADF);
    assert_eq!(errno(t.run(&s, R::FsyncDirectory { handle: fh })), libc::EBADF);
    assert_eq!(errno(t.run(&s, R::Fsync { handle: dh })), libc::EBADF);
    assert_eq!(t.run(&s, R::ReleaseDirectory { handle: dh }), Response::Done);
    assert_eq!(errno(t.run(&s, R::ReleaseDirectory { handle: dh })), libc::EBADF);
    assert_eq!(
        errno(t.run(&s, R::OpenDirectory { ino: ino(t.run(&s, R::Lookup { parent: dir, name: v("a") })) })),
        libc::ENOTDIR
    );
}

#[test]
fn extended_attributes_are_set_read_listed_and_removed() {
    let t = server();
    let s = t.session(0, 0);
    let f = ino(t.run(&s, R::Mknod { parent: ROOT, name: v("f"), mode: 0o644, rdev: 0 }));
    let set = |name: &str, value: &str, flags| R::SetXattr { ino: f, name: v(name), value: v(value), flags };
    assert_eq!(t.run(&s, set("user.a", "1", XattrFlags::default())), Response::Done);
    let create = XattrFlags { create: true, replace: false };
    assert_eq!(errno(t.run(&s, set("user.a", "2", create))), libc::EEXIST);
    let replace = XattrFlags { create: false, replace: true };
    assert_eq!(errno(t.run(&s, set("user.b", "2", replace))), libc::ENODATA);
    assert_eq!(errno(t.run(&s, set("bogus.a", "2", XattrFlags::default()))), libc::EOPNOTSUPP);
    assert_eq!(t.run(&s, R::GetXattr { ino: f, name: v("user.a") }), Response::Data(v("1")));
    assert_eq!(errno(t.run(&s, R::GetXattr { ino: f, name: v("user.b") })), libc::ENODATA);
    assert_eq!(t.run(&s, R::ListXattr { ino: f }), Response::Names(vec![v("user.a")]));
    assert_eq!(t.run(&s, R::RemoveXattr { ino: f, name: v("user.a") }), Response::Done);
    assert_eq!(errno(t.run(&s, R::RemoveXattr { ino: f, name: v("user.a") })), libc::ENODATA);
    assert_eq!(t.run(&s, R::ListXattr { ino: f }), Response::Names(Vec::new()));
}

#[test]
fn kv_values_are_put_got_scanned_and_deleted() {
    let t = server();
    let s = t.session(1000, 1000);
    let root = t.session(0, 0);
    let memory = VecMemory::new(common::AREA);
    let put =
        |key: &str, value: Payload| R::KvPut { bucket: v("b"), key: v(key), value, durability: Durability::Buffered };
    assert_eq!(errno(t.run(&s, put("k", Payload::Inline(v("x"))))), libc::ENOENT, "no bucket yet");
    // The root is root's, 0755: only root makes buckets, as only root
    // could mkdir there.
    assert_eq!(errno(t.run(&s, R::CreateBucket { bucket: v("b") })), libc::EACCES);
    let chmod = SetAttributes { mode: Some(0o777), ..SetAttributes::default() };
    t.run(&root, R::SetAttributes { ino: ROOT, set: chmod, handle: None });
    assert_eq!(t.run(&s, R::CreateBucket { bucket: v("b") }), Response::Done);
    assert_eq!(errno(t.run(&s, R::CreateBucket { bucket: v("b") })), libc::EEXIST);
    assert_eq!(errno(t.run(&s, R::CreateBucket { bucket: v("a/b") })), libc::EINVAL);

    assert_eq!(t.run(&s, put("k1", Payload::Inline(v("one")))), Response::Done);
    memory.fill(0, b"two!").unwrap();
    let slice = BufferSlice { offset: 0, length: 4 };
    assert_eq!(t.run_in(&s, put("dir/k2", Payload::Buffer(slice)), &memory), Response::Done);
    assert_eq!(errno(t.run(&s, put("a//b", Payload::Inline(v("x"))))), libc::EINVAL);
    assert_eq!(errno(t.run(&s, put("k1/under", Payload::Inline(v("x"))))), libc::ENOTDIR);
    let outside = BufferSlice { offset: common::AREA as u64, length: 1 };
    assert!(execute(&t.server, &s, put("k3", Payload::Buffer(outside)), &memory).is_err());

    // New objects and levels are the client's.
    let Response::Resolved { attributes: Some(a), .. } = t.run(&s, R::Resolve { path: v("/b/dir/k2"), follow: false })
    else {
        panic!()
    };
    assert_eq!((a.uid, a.gid, a.size), (1000, 1000, 4));

    let get = |key: &str, into| R::KvGet { bucket: v("b"), key: v(key), into };
    assert_eq!(t.run(&s, get("k1", None)), Response::Value(Some(v("one"))));
    assert_eq!(t.run(&s, get("none", None)), Response::Value(None));
    let into = BufferSlice { offset: 64, length: 3 };
    assert_eq!(t.run_in(&s, get("k1", Some(into)), &memory), Response::ValueInBuffer { length: 3 });
    assert_eq!(&memory.snapshot()[64..67], b"one");
    let small = BufferSlice { offset: 128, length: 2 };
    assert_eq!(t.run_in(&s, get("dir/k2", Some(small)), &memory), Response::ValueInBuffer { length: 4 });
    assert_eq!(&memory.snapshot()[128..130], b"\0\0", "a value longer than the slice is not written");
    assert!(execute(&t.server, &s, get("k1", Some(outside)), &memory).is_err());

    let Response::Head(Some(h)) = t.run(&s, R::KvHead { bucket: v("b"), key: v("dir/k2") }) else { panic!() };
    assert_eq!(h.size, 4);
    assert_eq!(t.run(&s, R::KvHead { bucket: v("b"), key: v("none") }), Response::Head(None));

    let scan = |start: &str, max| R::KvScan { bucket: v("b"), start: v(start), end: None, max_entries: max };
    let Response::ScanPage { entries, more } = t.run(&s, scan("", 1)) else { panic!() };
    assert_eq!((entries.len(), more, entries[0].key.clone()), (1, true, v("dir/k2")));
    let Response::ScanPage { entries, more } = t.run(&s, scan("dir/k3", 10)) else { panic!() };
    assert_eq!((entries.iter().map(|e| e.key.clone()).collect::<Vec<_>>(), more), (vec![v("k1")], false));
    assert_eq!(
        errno(t.run(&s, R::KvScan { bucket: v("x"), start: Vec::new(), end: None, max_entries: 1 })),
        libc::ENOENT
    );

    let delete = |key: &str| R::KvDelete { bucket: v("b"), key: v(key), durability: Durability::Durable };
    assert_eq!(t.run(&s, delete("k1")), Response::Deleted(true));
    assert_eq!(t.run(&s, delete("k1")), Response::Deleted(false));
    assert_eq!(t.run(&s, R::ListBuckets), Response::Names(vec![v("b")]));
    assert_eq!(errno(t.run(&s, R::DeleteBucket { bucket: v("b") })), libc::ENOTEMPTY);
    assert_eq!(t.run(&s, delete("dir/k2")), Response::Deleted(true));
    assert_eq!(t.run(&s, R::DeleteBucket { bucket: v("b") }), Response::Done);
    assert_eq!(errno(t.run(&s, R::DeleteBucket { bucket: v("b") })), libc::ENOENT);
    let Response::Text(text) = t.run(&s, R::Stats) else { panic!() };
    assert!(text.contains("buckets:          0"), "{text}");
    t.assert_fsck_clean();
}

#[test]
fn kv_batches_apply_whole_or_not_at_all() {
    let t = server();
    let s = t.session(0, 0);
    t.run(&s, R::CreateBucket { bucket: v("b") });
    let memory = VecMemory::new(common::AREA);
    memory.fill(0, b"buffered").unwrap();
    let batch = |operations| R::KvWriteBatch { bucket: v("b"), operations, durability: Durability::Durable };
    let ok = vec![
        KvOperation::Put { key: v("a"), value: Payload::Inline(v("1")) },
        KvOperation::Put { key: v("x/b"), value: Payload::Buffer(BufferSlice { offset: 0, length: 8 }) },
        KvOperation::Delete { key: v("none") },
    ];
    assert_eq!(t.run_in(&s, batch(ok), &memory), Response::Done);
    assert_eq!(t.run(&s, R::KvGet { bucket: v("b"), key: v("x/b"), into: None }), Response::Value(Some(v("buffered"))));
    // A refused operation refuses the batch: nothing of it happens.
    let refused = vec![
        KvOperation::Delete { key: v("x/b") },
        KvOperation::Put { key: v("a/under"), value: Payload::Inline(v("2")) },
    ];
    assert_eq!(errno(t.run(&s, batch(refused))), libc::ENOTDIR);
    assert_eq!(t.run(&s, R::KvGet { bucket: v("b"), key: v("a"), into: None }), Response::Value(Some(v("1"))));
    assert_eq!(t.run(&s, R::KvGet { bucket: v("b"), key: v("x/b"), into: None }), Response::Value(Some(v("buffered"))));
    // As in the embedded API, each operation sees what the earlier ones
    // left: a value deleted may become a level.
    let relevel = vec![
        KvOperation::Delete { key: v("a") },
        KvOperation::Put { key: v("a/under"), value: Payload::Inline(v("2")) },
    ];
    assert_eq!(t.run(&s, batch(relevel)), Response::Done);
    assert_eq!(t.run(&s, R::KvGet { bucket: v("b"), key: v("a/under"), into: None }), Response::Value(Some(v("2"))));
    let restore = vec![
        KvOperation::Delete { key: v("a/under") },
        KvOperation::Put { key: v("a"), value: Payload::Inline(v("1")) },
    ];
    assert_eq!(t.run(&s, batch(restore)), Response::Done);
    let bad_key = vec![KvOperation::Delete { key: v("a") }, KvOperation::Delete { key: v("/") }];
    assert_eq!(errno(t.run(&s, batch(bad_key))), libc::EINVAL);
    assert_eq!(t.run(&s, R::KvGet { bucket: v("b"), key: v("a"), into: None }), Response::Value(Some(v("1"))));
    // A bad slice in any operation is a violation before anything runs.
    let violating = vec![
        KvOperation::Delete { key: v("a") },
        KvOperation::Put { key: v("c"), value: Payload::Buffer(BufferSlice { offset: u64::MAX, length: 1 }) },
    ];
    assert!(execute(&t.server, &s, batch(violating), &memory).is_err());
    assert_eq!(t.run(&s, R::KvGet { bucket: v("b"), key: v("a"), into: None }), Response::Value(Some(v("1"))));
}

#[test]
fn kv_writers_and_readers_work_through_handles() {
    let t = server();
    let s = t.session(0, 0);
    t.run(&s, R::CreateBucket { bucket: v("b") });
    let memory = VecMemory::new(common::AREA);
    let open = R::KvWriterOpen { bucket: v("b"), key: v("big/v"), durability: Durability::Durable };
    let w = handle(t.run(&s, open));
    let write = |offset, data| R::Write { handle: w, offset, data };
    assert_eq!(t.run(&s, write(0, Payload::Inline(v("abc")))), Response::Length(3));
    memory.fill(10, b"def").unwrap();
    assert_eq!(
        t.run_in(&s, write(3, Payload::Buffer(BufferSlice { offset: 10, length: 3 })), &memory),
        Response::Length(3)
    );
    assert_eq!(errno(t.run(&s, write(2, Payload::Inline(v("x"))))), libc::EINVAL, "bytes in order only");
    assert_eq!(errno(t.run(&s, R::Read { handle: w, offset: 0, length: 1 })), libc::EBADF);
    assert_eq!(errno(t.run(&s, R::Fsync { handle: w })), libc::EBADF);
    assert_eq!(t.run(&s, R::KvGet { bucket: v("b"), key: v("big/v"), into: None }), Response::Value(None));
    assert_eq!(t.run(&s, R::KvWriterFinish { handle: w }), Response::Done);
    assert_eq!(errno(t.run(&s, R::KvWriterFinish { handle: w })), libc::EBADF);
    assert_eq!(t.run(&s, R::KvGet { bucket: v("b"), key: v("big/v"), into: None }), Response::Value(Some(v("abcdef"))));

    let opened = t.run(&s, R::KvReaderOpen { bucket: v("b"), key: v("big/v") });
    assert_eq!(opened, Response::Opened { handle: 2, size: 6 });
    let r = handle(opened);
    assert_eq!(t.run(&s, R::Read { handle: r, offset: 2, length: 10 }), Response::Data(v("cdef")));
    let into = BufferSlice { offset: 100, length: 3 };
    assert_eq!(t.run_in(&s, R::ReadBuffer { handle: r, offset: 0, into }, &memory), Response::Length(3));
    assert_eq!(&memory.snapshot()[100..103], b"abc");
    assert_eq!(errno(t.run(&s, R::Write { handle: r, offset: 0, data: Payload::Inline(v("x")) })), libc::EBADF);
    assert_eq!(errno(t.run(&s, R::KvWriterFinish { handle: r })), libc::EBADF);
    assert_eq!(t.run(&s, R::Release { handle: r }), Response::Done);
    assert_eq!(errno(t.run(&s, R::KvReaderOpen { bucket: v("b"), key: v("none") })), libc::ENOENT);

    // Released unfinished: nothing stored, the object freed.
    let w = handle(t.run(&s, R::KvWriterOpen { bucket: v("b"), key: v("gone"), durability: Durability::Buffered }));
    t.run(&s, R::Write { handle: w, offset: 0, data: Payload::Inline(v("lost")) });
    assert_eq!(t.orphans(), 1);
    assert_eq!(t.run(&s, R::Release { handle: w }), Response::Done);
    assert_eq!(t.orphans(), 0);
    assert_eq!(t.run(&s, R::KvGet { bucket: v("b"), key: v("gone"), into: None }), Response::Value(None));
    assert_eq!(s.handle_count(), 0);
    t.assert_fsck_clean();
}

#[test]
fn a_batch_of_metadata_requests_applies_whole_or_not_at_all() {
    use larder_server::{execute_batch, BatchOutcome};
    let t = server();
    let s = t.session(0, 0);
    let other = t.session(0, 0);
    let d = ino(t.run(&s, R::Mkdir { parent: ROOT, name: v("d"), mode: 0o777 }));
    let flags = RenameFlags::default();
    let ops = vec![
        R::Mknod { parent: d, name: v("a"), mode: 0o644, rdev: 0 },
        R::Mkdir { parent: d, name: v("sub"), mode: 0o755 },
        R::Rename { parent: d, name: v("a"), new_parent: d, new_name: v("b"), flags },
        R::Symlink { parent: d, name: v("l"), target: v("b") },
        R::Unlink { parent: d, name: v("l") },
    ];
    let BatchOutcome::Applied(responses) = execute_batch(&t.server, &s, ops, Durability::Durable) else { panic!() };
    assert_eq!(responses.len(), 5);
    let made = ino(responses[0].clone());
    assert!(s.knows(made), "objects a batch made are reached");
    assert_eq!(responses[2..].iter().filter(|r| **r == Response::Done).count(), 2);
    assert_eq!(ino(t.run(&s, R::Lookup { parent: d, name: v("b") })), made);

    // One refusal refuses all: the first create does not happen.
    let refused =
        vec![R::Mknod { parent: d, name: v("c"), mode: 0o644, rdev: 0 }, R::Rmdir { parent: d, name: v("b") }];
    let BatchOutcome::Refused(e) = execute_batch(&t.server, &s, refused, Durability::Buffered) else { panic!() };
    assert_eq!(errno(e), libc::ENOTDIR);
    assert_eq!(errno(t.run(&s, R::Lookup { parent: d, name: v("c") })), libc::ENOENT);
    // Objects the session has not reached, and requests a batch cannot
    // hold, refuse it too.
    let unreached = vec![R::Unlink { parent: d, name: v("b") }];
    let BatchOutcome::Refused(e) = execute_batch(&t.server, &other, unreached, Durability::Buffered) else { panic!() };
    assert_eq!(errno(e), libc::ENOENT);
    let not_metadata = vec![R::Unlink { parent: d, name: v("b") }, R::Sync];
    let BatchOutcome::Refused(e) = execute_batch(&t.server, &s, not_metadata, Durability::Buffered) else { panic!() };
    assert_eq!(errno(e), libc::EINVAL);
    assert_eq!(ino(t.run(&s, R::Lookup { parent: d, name: v("b") })), made);
    t.assert_fsck_clean();
}
