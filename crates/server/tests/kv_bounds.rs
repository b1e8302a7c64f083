//! KV requests that would make the server spend what it must not (memory
//! a client chooses), or change what the client's uid may not: refused.
#![allow(clippy::unwrap_used)]

mod common;

use common::{errno, server};
use larder_fs::{Cred, SetAttr};
use larder_protocol::message::{BufferSlice, Durability, KvOperation, Payload, Request, Response};
use larder_server::{execute, ClientMemory, VecMemory, Violation};

/// A data area that counts the bytes the server copies out of it.
struct CountingMemory {
    area: VecMemory,
    copied: std::cell::Cell<usize>,
}

impl ClientMemory for CountingMemory {
    fn copy_out(&self, slice: BufferSlice) -> Result<Vec<u8>, Violation> {
        self.copied.set(self.copied.get() + slice.length as usize);
        self.area.copy_out(slice)
    }

    fn copy_in(&self, slice: BufferSlice, bytes: &[u8]) -> Result<(), Violation> {
        self.area.copy_in(slice, bytes)
    }
}

const ALICE: (u32, u32) = (41001, 41001);
const BOB: (u32, u32) = (41002, 41002);

fn cred((uid, gid): (u32, u32)) -> Cred {
    Cred::new(uid, gid, Vec::new())
}

fn put(bucket: &str, key: &str, value: &[u8]) -> Request {
    Request::KvPut {
        bucket: bucket.into(),
        key: key.into(),
        value: Payload::Inline(value.to_vec()),
        durability: Durability::Buffered,
    }
}

/// A world-writable sticky bucket, as /tmp is.
fn sticky_bucket(t: &common::TestServer) -> u64 {
    let fs = t.server.fs();
    let bucket = fs.mkdir(&Cred::root(), fs.root(), b"tmp", 0o777).unwrap().ino;
    fs.setattr(&Cred::root(), bucket, &SetAttr { mode: Some(0o1777), ..SetAttr::default() }, None).unwrap();
    bucket
}

#[test]
fn a_get_never_reads_more_than_its_answer_can_carry() {
    let t = server();
    let alice = t.session(ALICE.0, ALICE.1);
    sticky_bucket(&t);
    assert_eq!(t.run(&alice, put("tmp", "big", b"x")), Response::Done);
    // Grown, sparse, to 32 TiB: reading it whole would need 32 TiB.
    let fs = t.server.fs();
    let tmp = fs.lookup(&Cred::root(), fs.root(), b"tmp").unwrap().ino;
    let big = fs.lookup(&cred(ALICE), tmp, b"big").unwrap().ino;
    fs.setattr(&cred(ALICE), big, &SetAttr { size: Some(1 << 45), ..SetAttr::default() }, None).unwrap();

    let get = |into| Request::KvGet { bucket: "tmp".into(), key: "big".into(), into };
    assert_eq!(errno(t.run(&alice, get(None))), libc::EFBIG);
    let memory = VecMemory::new(4096);
    let answer = t.run_in(&alice, get(Some(BufferSlice { offset: 0, length: 4096 })), &memory);
    assert_eq!(answer, Response::ValueInBuffer { length: 1 << 45 }, "the length, nothing written");
    assert!(memory.snapshot().iter().all(|&b| b == 0));
    // A value that fits is still answered whole.
    assert_eq!(t.run(&alice, put("tmp", "small", b"hello")), Response::Done);
    assert_eq!(
        t.run(&alice, Request::KvGet { bucket: "tmp".into(), key: "small".into(), into: None }),
        Response::Value(Some(b"hello".to_vec()))
    );
}

#[test]
fn a_batch_is_measured_before_any_value_is_copied() {
    let t = server();
    let alice = t.session(ALICE.0, ALICE.1);
    sticky_bucket(&t);
    let area = 1 << 20;
    let memory = CountingMemory { area: VecMemory::new(area), copied: std::cell::Cell::new(0) };
    let whole_area = Payload::Buffer(BufferSlice { offset: 0, length: area as u32 });
    // 64 puts naming the whole area each: 64 MiB of copies if copied
    // before the total is checked against max_io_bytes (16 MiB).
    let operations = (0..64).map(|i| KvOperation::Put { key: format!("k{i}").into(), value: whole_area.clone() });
    let batch = Request::KvWriteBatch {
        bucket: "tmp".into(),
        operations: operations.collect(),
        durability: Durability::Buffered,
    };
    assert_eq!(errno(execute(&t.server, &alice, batch, &memory).unwrap()), libc::EMSGSIZE);
    assert_eq!(memory.copied.get(), 0, "values were copied before the batch's total was checked");
    assert_eq!(
        t.run(&alice, Request::KvHead { bucket: "tmp".into(), key: "k0".into() }),
        Response::Head(None),
        "a refused batch changes nothing"
    );
}

#[test]
fn a_put_rewrites_only_regular_files_and_obeys_the_sticky_bit() {
    let t = server();
    let (alice, bob) = (t.session(ALICE.0, ALICE.1), t.session(BOB.0, BOB.1));
    let tmp = sticky_bucket(&t);
    let fs = t.server.fs();
    // Bob's symlink and Bob's empty level in the sticky bucket.
    fs.symlink(&cred(BOB), tmp, b"link", b"/target").unwrap();
    let level = fs.mkdir(&cred(BOB), tmp, b"level", 0o777).unwrap().ino;

    assert_eq!(errno(t.run(&alice, put("tmp", "link", b"/evil"))), libc::EPERM);
    let link = fs.lookup(&cred(BOB), tmp, b"link").unwrap().ino;
    assert_eq!(fs.readlink(link).unwrap(), b"/target", "Bob's symlink was rewritten");
    assert_eq!(errno(t.run(&alice, put("tmp", "level", b"value"))), libc::EPERM);
    assert_eq!(fs.lookup(&cred(BOB), tmp, b"level").unwrap().ino, level, "Bob's level was replaced");

    // Bob may replace his own empty level.
    assert_eq!(t.run(&bob, put("tmp", "level", b"value")), Response::Done);
}

#[test]
fn a_put_in_place_drops_setuid_as_a_write_does() {
    let t = server();
    let (alice, bob) = (t.session(ALICE.0, ALICE.1), t.session(BOB.0, BOB.1));
    sticky_bucket(&t);
    assert_eq!(t.run(&bob, put("tmp", "tool", b"#!/bin/sh\n")), Response::Done);
    let fs = t.server.fs();
    let tmp = fs.lookup(&Cred::root(), fs.root(), b"tmp").unwrap().ino;
    let tool = fs.lookup(&cred(BOB), tmp, b"tool").unwrap().ino;
    fs.setattr(&cred(BOB), tool, &SetAttr { mode: Some(0o6777), ..SetAttr::default() }, None).unwrap();

    assert_eq!(t.run(&alice, put("tmp", "tool", b"#!/bin/sh\nevil\n")), Response::Done);
    let mode = fs.getattr(tool).unwrap().mode;
    assert_eq!(mode & 0o6000, 0, "setuid and setgid left on a file another user rewrote: {mode:o}");
}

#[test]
fn a_delete_does_not_remove_levels_the_sticky_bit_protects() {
    let t = server();
    let (alice, bob) = (t.session(ALICE.0, ALICE.1), t.session(BOB.0, BOB.1));
    let tmp = sticky_bucket(&t);
    let fs = t.server.fs();
    // Bob's level, world-writable, holding only Alice's value.
    let level = fs.mkdir(&cred(BOB), tmp, b"shared", 0o777).unwrap().ino;
    assert_eq!(t.run(&alice, put("tmp", "shared/mine", b"v")), Response::Done);
    let delete =
        Request::KvDelete { bucket: "tmp".into(), key: "shared/mine".into(), durability: Durability::Buffered };
    assert!(
        matches!(errno(t.run(&alice, delete.clone())), libc::EPERM | libc::EACCES),
        "the delete would remove Bob's level from the sticky bucket"
    );
    assert_eq!(fs.lookup(&cred(BOB), tmp, b"shared").unwrap().ino, level);
    // Bob may: the level is his.
    assert_eq!(t.run(&bob, delete), Response::Deleted(true));
}
