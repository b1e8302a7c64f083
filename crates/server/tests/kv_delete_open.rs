//! A key deleted or replaced through the KV API while its object is open
//! through the file system of the same store: as on ext4, where an
//! unlinked file stays readable through its open descriptors until the
//! last is closed, the open reads the object's bytes, and its last close
//! frees it (no orphan left, fsck clean).
#![allow(clippy::unwrap_used)]

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
