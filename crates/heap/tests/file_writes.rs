//! Large `write_at`s on the real storage go to the object's file rather
//! than through its mapping: the mapping (this process's and another
//! handle's) sees the bytes at once, `read_at` reads them, a bad one
//! changes nothing, and `sync` makes them durable like mapped bytes.
#![allow(clippy::unwrap_used)]

mod common;

use larder_heap::limits::FILE_WRITE_BYTES;
use larder_heap::{Credentials, Heap, HeapError};

use common::{heap, real_heap, real_store};

/// `len` bytes of a pattern that differs at every offset mod 251.
fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ salt).collect()
}

#[test]
fn a_large_write_reaches_the_mapping_and_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let size = 3 * FILE_WRITE_BYTES + 12_345;
    let data = pattern(2 * FILE_WRITE_BYTES + 17, 0x5a);
    let offset = 4096 + 7;
    let a = {
        let store = real_store(dir.path());
        let h = heap(&store);
        let a = h.alloc(size as u64).unwrap();
        let p = h.pointer(a).unwrap();
        // A small write through the mapping first, partly overwritten below.
        h.write_at(a, offset as u64 - 3, b"small").unwrap();
        h.write_at(a, offset as u64, &data).unwrap();
        // SAFETY: the object is attached with `size` bytes and nothing else
        // writes it while this reads.
        #[allow(unsafe_code)]
        let mapped = unsafe { std::slice::from_raw_parts(p.cast_const(), size) };
        assert_eq!(&mapped[offset..offset + data.len()], &data[..], "the mapping sees the file's bytes");
        assert_eq!(&mapped[offset - 3..offset], b"sma");
        assert!(mapped[..offset - 3].iter().all(|&b| b == 0));
        assert!(mapped[offset + data.len()..].iter().all(|&b| b == 0));
        let mut back = vec![0u8; data.len()];
        h.read_at(a, offset as u64, &mut back).unwrap();
        assert_eq!(back, data);
        h.add_name(a, "big").unwrap();
        h.close().unwrap();
        std::sync::Arc::into_inner(store).unwrap().close().unwrap();
        a
    };
    let file = std::fs::read(dir.path().join(larder_object::HEAP_DIR).join(a.0.to_string())).unwrap();
    assert_eq!(file.len(), size);
    assert_eq!(&file[offset..offset + data.len()], &data[..]);
    let store = real_store(dir.path());
    let h = heap(&store);
    let again = h.get_by_name("big").unwrap();
    let mut back = vec![0u8; data.len()];
    h.read_at(again, offset as u64, &mut back).unwrap();
    assert_eq!(back, data, "durable after sync and a reopen");
}

#[test]
fn a_bad_large_write_changes_nothing() {
    let (dir, store, admin) = real_heap();
    let size = FILE_WRITE_BYTES + 100;
    let a = admin.alloc(size as u64).unwrap();
    let data = pattern(FILE_WRITE_BYTES, 1);
    match admin.write_at(a, 101, &data) {
        Err(HeapError::OutOfBounds { offset, len, size: s, .. }) => {
            assert_eq!((offset, len, s), (101, FILE_WRITE_BYTES as u64, size as u64));
        }
        other => panic!("expected OutOfBounds, got {other:?}"),
    }
    assert!(matches!(admin.write_at(a, u64::MAX, &data), Err(HeapError::OutOfBounds { .. })));
    admin.sync().unwrap();
    let reader = Heap::open(&store, "/heap", Credentials::user(1000, 1000)).unwrap();
    assert!(!reader.is_writable(a).unwrap());
    assert!(matches!(reader.write_at(a, 0, &data), Err(HeapError::PermissionDenied { .. })));
    let mut all = vec![1u8; size];
    admin.read_at(a, 0, &mut all).unwrap();
    assert!(all.iter().all(|&b| b == 0), "no byte was written");
    let file = std::fs::read(dir.path().join(larder_object::HEAP_DIR).join(a.0.to_string())).unwrap();
    assert!(file.iter().all(|&b| b == 0));
}

#[test]
fn another_handle_sees_a_large_write_through_its_mapping() {
    let (_dir, store, writer) = real_heap();
    let a = writer.alloc(FILE_WRITE_BYTES as u64).unwrap();
    writer.sync().unwrap();
    let reader = Heap::open(&store, "/heap", Credentials::user(1000, 1000)).unwrap();
    let seen = reader.pointer(a).unwrap();
    let data = pattern(FILE_WRITE_BYTES, 9);
    writer.write_at(a, 0, &data).unwrap();
    // SAFETY: the reader's read-only mapping of the object is
    // FILE_WRITE_BYTES long and stays attached while this reads.
    #[allow(unsafe_code)]
    let mapped = unsafe { std::slice::from_raw_parts(seen.cast_const(), FILE_WRITE_BYTES) };
    assert_eq!(mapped, &data[..]);
}
