//! The KV API through a running server and `larder-client`: every call
//! reaches the store and answers as the embedded API would, values of
//! every size take their path (inline, data area, streamed), and errors
//! carry the errno docs/server.md gives them.
#![allow(clippy::unwrap_used)]

mod serving;

use std::io::{Read, Write};

use larder_client::{Durability, KvOperation, Payload};
use serving::{pattern, serve};

const D: Durability = Durability::Buffered;

#[test]
fn put_get_head_delete_and_buckets() {
    let t = serve();
    let c = t.client();
    c.create_bucket("b").unwrap();
    c.create_bucket("c").unwrap();
    assert_eq!(c.buckets().unwrap(), vec![b"b".to_vec(), b"c".to_vec()]);
    assert_eq!(c.get("b", "k").unwrap(), None);
    assert_eq!(c.head("b", "k").unwrap(), None);
    c.put("b", "k", b"one", Durability::Durable).unwrap();
    c.put("b", "dir/k2", b"", D).unwrap();
    assert_eq!(c.get("b", "k").unwrap().as_deref(), Some(&b"one"[..]));
    assert_eq!(c.get("b", "dir/k2").unwrap().as_deref(), Some(&b""[..]));
    assert_eq!(c.get("c", "k").unwrap(), None, "buckets are apart");
    c.put("b", "k", b"replaced", D).unwrap();
    let head = c.head("b", "k").unwrap().unwrap();
    assert_eq!(head.size, 8);
    assert!(c.delete("b", "k", D).unwrap());
    assert!(!c.delete("b", "k", D).unwrap(), "a second delete finds nothing");
    assert_eq!(c.get("b", "k").unwrap(), None);
    c.delete_bucket("c").unwrap();
    assert_eq!(c.buckets().unwrap(), vec![b"b".to_vec()]);
    // Another client sees the same store.
    let other = t.client();
    assert_eq!(other.get("b", "dir/k2").unwrap().as_deref(), Some(&b""[..]));
}

fn errno<T>(r: Result<T, larder_client::ClientError>) -> i32 {
    r.map(|_| ()).unwrap_err().errno()
}

#[test]
fn errors_carry_the_errno() {
    let t = serve();
    let c = t.client();
    c.create_bucket("b").unwrap();
    assert_eq!(errno(c.create_bucket("b")), libc::EEXIST);
    assert_eq!(errno(c.get("nobucket", "k")), libc::ENOENT);
    assert_eq!(errno(c.put("nobucket", "k", b"v", D)), libc::ENOENT);
    assert_eq!(errno(c.put("b", "", b"v", D)), libc::EINVAL, "an empty key");
    assert_eq!(errno(c.create_bucket("a/b")), libc::EINVAL, "a bucket name with a slash");
    c.put("b", "x/y", b"v", D).unwrap();
    assert_eq!(errno(c.put("b", "x", b"v", D)), libc::EEXIST, "a key where a level is");
    assert_eq!(errno(c.put("b", "x/y/z", b"v", D)), libc::ENOTDIR, "a key through a value");
    assert_eq!(errno(c.delete_bucket("b")), libc::ENOTEMPTY);
    assert_eq!(errno(c.delete_bucket("none")), libc::ENOENT);
    // Nothing refused changed anything.
    assert_eq!(c.scan("b", b"", None).map(|e| e.unwrap().key).collect::<Vec<_>>(), vec![b"x/y".to_vec()]);
    let stats = c.stats().unwrap();
    assert!(stats.contains("buckets:          1"), "stats: {stats}");
}

#[test]
fn scans_cross_pages_and_batches_are_atomic() {
    let t = serve();
    let c = t.client();
    c.create_bucket("b").unwrap();
    // 2,500 keys: the client asks for pages of 1,024.
    let keys: Vec<String> = (0..2500).map(|i| format!("k{i:05}")).collect();
    for chunk in keys.chunks(500) {
        let operations = chunk
            .iter()
            .map(|k| KvOperation::Put { key: k.clone().into_bytes(), value: Payload::Inline(k.clone().into_bytes()) })
            .collect();
        c.write_batch("b", operations, D).unwrap();
    }
    let all: Vec<Vec<u8>> = c.scan("b", b"", None).map(|e| e.unwrap().key).collect();
    assert_eq!(all, keys.iter().map(|k| k.clone().into_bytes()).collect::<Vec<_>>());
    let range: Vec<Vec<u8>> = c.scan("b", b"k00100", Some(b"k02000")).map(|e| e.unwrap().key).collect();
    assert_eq!(range.len(), 1900);
    assert_eq!(range.first().map(Vec::as_slice), Some(&b"k00100"[..]));
    assert_eq!(range.last().map(Vec::as_slice), Some(&b"k01999"[..]));
    let prefixed: Vec<Vec<u8>> = c.scan_prefix("b", b"k012").map(|e| e.unwrap().key).collect();
    assert_eq!(prefixed.len(), 100);
    let sized = c.scan_prefix("b", b"k00007").next().unwrap().unwrap();
    assert_eq!(sized.size, 6);

    // A batch whose last operation conflicts is refused whole.
    let refused = vec![
        KvOperation::Put { key: b"new".to_vec(), value: Payload::Inline(b"v".to_vec()) },
        KvOperation::Delete { key: b"k00000".to_vec() },
        KvOperation::Put { key: b"k00001/under".to_vec(), value: Payload::Inline(b"v".to_vec()) },
    ];
    assert_eq!(c.write_batch("b", refused, D).unwrap_err().errno(), libc::ENOTDIR);
    assert_eq!(c.get("b", "new").unwrap(), None);
    assert_eq!(c.get("b", "k00000").unwrap().as_deref(), Some(&b"k00000"[..]));
    // And one that holds applies whole, with a value in the data area.
    let mut buffer = c.alloc_buffer(100_000).unwrap();
    buffer.as_mut_slice().copy_from_slice(&pattern(100_000, 1));
    let applied = vec![
        KvOperation::Put { key: b"new".to_vec(), value: Payload::Buffer(buffer.slice()) },
        KvOperation::Delete { key: b"k00000".to_vec() },
    ];
    c.write_batch("b", applied, D).unwrap();
    assert_eq!(c.get("b", "new").unwrap(), Some(pattern(100_000, 1)));
    assert_eq!(c.get("b", "k00000").unwrap(), None);
}

#[test]
fn values_of_every_size_take_their_path() {
    let t = serve();
    let c = t.client();
    c.create_bucket("b").unwrap();
    // Inline (1 KiB), the data area (1 MiB), a streamed writer (5 MiB:
    // more than the 4 MiB data area).
    for (key, len) in [("inline", 1 << 10), ("buffered", 1 << 20), ("streamed", 5 << 20)] {
        let value = pattern(len, len as u64);
        c.put("b", key, &value, D).unwrap();
        // Values above one ring record come back through a reader.
        assert_eq!(c.get("b", key).unwrap().as_deref(), Some(&value[..]), "{key}");
        assert_eq!(c.head("b", key).unwrap().unwrap().size, len as u64);
    }

    // Streams of several MiB, written in uneven pieces.
    let value = pattern(3 << 20, 9);
    let mut writer = c.writer("b", "written", Durability::Durable).unwrap();
    for piece in value.chunks(700_001) {
        writer.write_all(piece).unwrap();
    }
    assert_eq!(c.get("b", "written").unwrap(), None, "nothing stored before finish");
    writer.finish().unwrap();
    let mut reader = c.reader("b", "written").unwrap().unwrap();
    assert_eq!(reader.size(), value.len() as u64);
    let mut read = Vec::new();
    reader.read_to_end(&mut read).unwrap();
    assert!(read == value, "the streamed value reads back");
    assert!(c.reader("b", "missing").unwrap().is_none());

    // A writer dropped unfinished stores nothing and leaves nothing.
    let mut dropped = c.writer("b", "dropped", D).unwrap();
    dropped.write_all(&pattern(100_000, 3)).unwrap();
    drop(dropped);
    assert_eq!(c.get("b", "dropped").unwrap(), None);
    drop(reader);
    drop(c);
    t.wait_for_clients(0);
    assert_eq!(t.orphans(), 0);
    let mut t = t;
    t.assert_fsck_clean();
}

#[test]
fn zero_copy_puts_and_gets() {
    let t = serve();
    let c = t.client();
    c.create_bucket("b").unwrap();
    let value = pattern(200_000, 5);
    let mut put = c.alloc_buffer(value.len()).unwrap();
    put.as_mut_slice().copy_from_slice(&value);
    c.put_buffer("b", "k", &put, D).unwrap();
    // The server copied the bytes: changing the buffer afterwards changes
    // nothing stored.
    put.as_mut_slice().fill(0xAA);
    let mut got = c.alloc_buffer(300_000).unwrap();
    assert_eq!(c.get_buffer("b", "k", &mut got).unwrap(), Some(value.len() as u64));
    assert!(got.as_slice()[..value.len()] == value[..]);
    // Too small a buffer: the length says so and nothing is written.
    let mut small = c.alloc_buffer(1000).unwrap();
    small.as_mut_slice().fill(7);
    assert_eq!(c.get_buffer("b", "k", &mut small).unwrap(), Some(value.len() as u64));
    assert!(small.as_slice().iter().all(|&b| b == 7), "a value that does not fit is not written");
    assert_eq!(c.get_buffer("b", "missing", &mut small).unwrap(), None);
    assert_eq!(c.get("b", "k").unwrap(), Some(value));
    // The data area is this client's: a buffer as large as it, after
    // the others are given back.
    drop((put, got, small));
    let whole = c.alloc_buffer(4 << 20).unwrap();
    assert_eq!(whole.len(), 4 << 20);
    assert_eq!(c.alloc_buffer(1).err().map(|e| e.errno()), Some(libc::ENOMEM));
}

#[test]
fn a_batch_sees_the_state_its_earlier_operations_left() {
    let t = serve();
    let c = t.client();
    c.create_bucket("b").unwrap();
    c.put("b", "a", b"a value", D).unwrap();
    c.put("b", "x/y", b"deep value", D).unwrap();
    let put = |key: &str| KvOperation::Put { key: key.as_bytes().to_vec(), value: Payload::Inline(b"v".to_vec()) };
    let delete = |key: &str| KvOperation::Delete { key: key.as_bytes().to_vec() };
    // As the embedded KV batch: the value "a" is deleted, then "a" is a
    // level of "a/c"; and "x/y" likewise, two levels down.
    c.write_batch("b", vec![delete("a"), put("a/c"), delete("x/y"), put("x/y/z/w")], D).unwrap();
    assert_eq!(c.get("b", "a/c").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(c.get("b", "x/y/z/w").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(c.get("b", "a").unwrap(), None);
    // A put under a value nothing in the batch deletes is still refused,
    // whole, and so is one under a value deleted only after it.
    c.put("b", "v", b"value", D).unwrap();
    assert_eq!(errno(c.write_batch("b", vec![put("p"), put("v/under")], D)), libc::ENOTDIR);
    assert_eq!(errno(c.write_batch("b", vec![put("v/under"), delete("v")], D)), libc::ENOTDIR);
    assert_eq!(errno(c.write_batch("b", vec![delete("v"), put("v"), put("v/under")], D)), libc::ENOTDIR);
    assert_eq!(c.get("b", "p").unwrap(), None);
    assert_eq!(c.get("b", "v").unwrap().as_deref(), Some(&b"value"[..]));
}

#[test]
fn scans_of_long_keys_fit_their_pages() {
    let t = serve();
    let c = t.client();
    c.create_bucket("b").unwrap();
    // 1,100 keys of 963 bytes (four levels): a page of 1,024 of them is
    // 1 MB, far more than a completion ring record (64 KiB).
    let key =
        |i: usize| format!("{}/{}/{}/{i:04}{}", "l".repeat(240), "m".repeat(240), "n".repeat(240), "k".repeat(236));
    for chunk in (0..1100).collect::<Vec<_>>().chunks(50) {
        let operations = chunk
            .iter()
            .map(|&i| KvOperation::Put { key: key(i).into_bytes(), value: Payload::Inline(vec![i as u8]) })
            .collect();
        c.write_batch("b", operations, D).unwrap();
    }
    let scanned: Vec<Vec<u8>> = c.scan("b", b"", None).map(|e| e.unwrap().key).collect();
    assert_eq!(scanned, (0..1100).map(|i| key(i).into_bytes()).collect::<Vec<_>>());
}
