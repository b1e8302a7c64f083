//! A key deleted or replaced through the KV API while its object is open
//! through the file system of the same store: as on ext4, where an
//! unlinked file stays readable through its open descriptors until the
//! last is closed, the open reads the object's bytes, and its last close
//! frees it (no orphan left, fsck clean).
#![allow(clippy::unwrap_used)]

mod common;
mod serving;

use std::io::Write;

use larder_client::{Client, Durability, KvOperation};
use serving::serve;

const D: Durability = Durability::Buffered;

fn read_all(file: &larder_client::File) -> Result<Vec<u8>, i32> {
    let mut buf = vec![0u8; 64 << 10];
    let mut out = Vec::new();
    loop {
        let n = file.read_at(&mut buf, out.len() as u64).map_err(|e| e.errno())?;
        out.extend_from_slice(&buf[..n]);
        if n < buf.len() {
            return Ok(out);
        }
    }
}

/// How a key's object loses its name through the KV API.
#[derive(Clone, Copy, Debug)]
enum Change {
    Delete,
    BatchDelete,
    /// A streamed value replacing the key's object by a new one.
    WriterReplace,
}

fn change(client: &Client, how: Change, key: &str) {
    match how {
        Change::Delete => assert!(client.delete("b", key, D).unwrap()),
        Change::BatchDelete => {
            client.write_batch("b", vec![KvOperation::Delete { key: key.as_bytes().to_vec() }], D).unwrap()
        }
        Change::WriterReplace => {
            let mut writer = client.writer("b", key, D).unwrap();
            writer.write_all(b"new value").unwrap();
            writer.finish().unwrap();
        }
    }
}

#[test]
fn a_key_deleted_or_replaced_while_open_through_the_fs_stays_readable_until_closed() {
    let mut t = serve();
    let fs_client = t.client();
    let kv_client = t.client();
    kv_client.create_bucket("b").unwrap();
    let value: Vec<u8> = (0..20_000).map(|i| (i % 251) as u8).collect();
    for (n, how) in [Change::Delete, Change::BatchDelete, Change::WriterReplace].into_iter().enumerate() {
        let key = format!("k{n}");
        kv_client.put("b", &key, &value, D).unwrap();
        let file = fs_client.open(format!("/b/{key}")).unwrap();
        assert_eq!(read_all(&file).map(|v| v == value), Ok(true), "{how:?}: before");
        change(&kv_client, how, &key);
        assert_eq!(read_all(&file).map(|v| v == value), Ok(true), "{how:?}: a read through the open after it");
        assert_eq!(t.orphans(), 1, "{how:?}: kept while open");
        file.close().unwrap();
        assert_eq!(t.orphans(), 0, "{how:?}: freed at its last close");
    }
    t.assert_fsck_clean();
}

/// A directory level or a bucket removed through the KV API while a
/// client has it open through the file system: as after `rmdir(2)` of an
/// open directory on Linux, the open lists nothing (not even `.` and
/// `..`), its attributes read (0 links), nothing can be made in it
/// (ENOENT), and the last release frees it (no orphan left, fsck clean,
/// while it is kept too).
#[test]
fn a_directory_removed_through_kv_while_open_through_the_fs_reads_as_removed_until_released() {
    use common::{errno, handle, ino};
    use larder_protocol::message::{Durability as D, KvOperation as Op, Payload, Request as R, Response};

    let t = common::server();
    let fs_session = t.session(0, 0);
    let kv_session = t.session(0, 0);
    let v = |s: &str| s.as_bytes().to_vec();
    for how in ["delete", "batch delete", "delete bucket"] {
        let bucket = v(&format!("b-{how}"));
        assert_eq!(t.run(&kv_session, R::CreateBucket { bucket: bucket.clone() }), Response::Done);
        let put =
            R::KvPut { bucket: bucket.clone(), key: v("d/k"), value: Payload::Inline(v("x")), durability: D::Buffered };
        assert_eq!(t.run(&kv_session, put), Response::Done);
        let bucket_ino = ino(t.run(&fs_session, R::Lookup { parent: 1, name: bucket.clone() }));
        let level = ino(t.run(&fs_session, R::Lookup { parent: bucket_ino, name: v("d") }));
        let dir = if how == "delete bucket" { bucket_ino } else { level };
        let dh = handle(t.run(&fs_session, R::OpenDirectory { ino: dir }));
        let delete = R::KvDelete { bucket: bucket.clone(), key: v("d/k"), durability: D::Buffered };
        match how {
            "delete" | "delete bucket" => assert!(matches!(t.run(&kv_session, delete), Response::Deleted(true))),
            _ => {
                let ops = vec![Op::Delete { key: v("d/k") }];
                let batch = R::KvWriteBatch { bucket: bucket.clone(), operations: ops, durability: D::Buffered };
                assert_eq!(t.run(&kv_session, batch), Response::Done);
            }
        }
        if how == "delete bucket" {
            assert_eq!(t.run(&kv_session, R::DeleteBucket { bucket: bucket.clone() }), Response::Done);
        }

        let listed = t.run(&fs_session, R::ReadDirectory { handle: dh, offset: 0, max_entries: 16 });
        assert_eq!(listed, Response::Entries(Vec::new()), "{how}: the open's listing");
        match t.run(&fs_session, R::GetAttributes { ino: dir }) {
            Response::Attributes(a) => assert_eq!((a.ino, a.nlink), (dir, 0), "{how}: fstat"),
            other => panic!("{how}: fstat of the open directory: {other:?}"),
        }
        let create = R::Create { parent: dir, name: v("f"), mode: 0o644, flags: libc::O_RDWR, lease: false };
        assert_eq!(errno(t.run(&fs_session, create)), libc::ENOENT, "{how}: create in it");
        assert_eq!(errno(t.run(&fs_session, R::Mkdir { parent: dir, name: v("e"), mode: 0o755 })), libc::ENOENT);
        assert_eq!(t.orphans(), 1, "{how}: kept while open");
        t.assert_fsck_clean();

        assert_eq!(t.run(&fs_session, R::ReleaseDirectory { handle: dh }), Response::Done);
        assert_eq!(t.orphans(), 0, "{how}: freed at its last release");
        assert_eq!(errno(t.run(&fs_session, R::GetAttributes { ino: dir })), libc::ENOENT, "{how}: freed");
    }
    t.assert_fsck_clean();
}
