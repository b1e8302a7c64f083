//! `Heap::copy` on real files: the bytes come from the source's mapping,
//! so what was stored through it and never synced is copied too, into a
//! freed object's spare file (written, or overwritten in place when it kept
//! enough bytes) or a new one; a copy is durable at the next sync like any
//! object.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::MetadataExt;

use common::{real_heap, real_store};

/// Bytes no two offsets of a few pages share with their neighbours.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8).collect()
}

/// Stores `data` at the start of `object` through its mapping (no write
/// call: the bytes are only in the shared pages).
#[allow(unsafe_code)]
fn store_mapped(h: &larder_heap::Heap, object: larder_heap::ObjectId, data: &[u8]) {
    assert!(h.size(object).unwrap() >= data.len() as u64);
    let p = h.pointer(object).unwrap();
    // SAFETY: the object is attached, writable and at least data.len() bytes.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
}

fn read(h: &larder_heap::Heap, object: larder_heap::ObjectId) -> Vec<u8> {
    let mut buf = vec![0u8; h.size(object).unwrap() as usize];
    h.read_at(object, 0, &mut buf).unwrap();
    buf
}

#[test]
fn a_copy_into_a_new_file_has_the_mapped_bytes_never_synced() {
    let (_dir, store, h) = real_heap();
    let data = pattern(3 * 4096 + 100, 7);
    let a = h.alloc(data.len() as u64).unwrap();
    store_mapped(&h, a, &data);
    let c = h.copy(a).unwrap();
    assert_ne!(c, a);
    assert_eq!(read(&h, c), data, "the copy reads the source's mapped bytes");
    assert_eq!(std::fs::read(store.heap_file_path(c.0)).unwrap(), data, "its file holds them");
    // The copy is its own: a store into the source after it is not seen.
    store_mapped(&h, a, &[0xEE; 16]);
    assert_eq!(read(&h, c)[..16], data[..16]);
}

#[test]
fn a_copy_takes_a_spare_file_and_is_durable_at_the_next_sync() {
    let dir = tempfile::tempdir().unwrap();
    let (c, data) = {
        let store = real_store(dir.path());
        let h = common::heap(&store);
        let old = h.alloc(64 * 1024).unwrap();
        h.write_at(old, 0, &[0xAA; 64 * 1024]).unwrap();
        let old_inode = std::fs::metadata(store.heap_file_path(old.0)).unwrap().ino();
        h.free(old).unwrap();
        // The free is durable: its file is kept as a spare (whole: small).
        h.sync().unwrap();
        let data = pattern(5000, 3);
        let a = h.alloc(data.len() as u64).unwrap();
        store_mapped(&h, a, &data);
        // `a` took the spare; free another to make one for the copy.
        let b = h.alloc(4096).unwrap();
        let b_inode = std::fs::metadata(store.heap_file_path(b.0)).unwrap().ino();
        h.free(b).unwrap();
        h.sync().unwrap();
        let c = h.copy(a).unwrap();
        let c_file = store.heap_file_path(c.0);
        assert!([old_inode, b_inode].contains(&std::fs::metadata(&c_file).unwrap().ino()), "c took a spare");
        assert!(store.heap_object(c.0).unwrap().unwrap().is_recycled(), "flagged until a sync");
        assert_eq!(std::fs::read(&c_file).unwrap(), data, "the spare holds the copy's bytes alone");
        assert_eq!(read(&h, c), data);
        h.sync().unwrap();
        assert!(!store.heap_object(c.0).unwrap().unwrap().is_recycled(), "synced: the bytes are c's");
        h.close().unwrap();
        (c, data)
    };
    // Reopened: the copy is there with its bytes (recovery left it alone).
    let store = real_store(dir.path());
    let h = common::heap(&store);
    assert_eq!(read(&h, c), data);
}

#[test]
fn a_copy_overwrites_a_spare_that_kept_its_bytes_and_only_its_own_remain() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(5000, 11);
    let mut copies = Vec::new();
    {
        let store = real_store(dir.path());
        let h = common::heap(&store);
        let a = h.alloc(data.len() as u64).unwrap();
        store_mapped(&h, a, &data);
        // Spares longer than the copy, as long, and shorter (that one is
        // copied into by the kernel, over what it kept).
        for spare_len in [3 * 4096 + 7, 5000, 4096] {
            let old = h.alloc(spare_len).unwrap();
            h.write_at(old, 0, &vec![0xAA; spare_len as usize]).unwrap();
            let old_inode = std::fs::metadata(store.heap_file_path(old.0)).unwrap().ino();
            h.free(old).unwrap();
            h.sync().unwrap();
            let c = h.copy(a).unwrap();
            let c_file = store.heap_file_path(c.0);
            assert_eq!(std::fs::metadata(&c_file).unwrap().ino(), old_inode, "c took the spare of {spare_len}");
            assert!(store.heap_object(c.0).unwrap().unwrap().is_recycled(), "flagged until a sync");
            assert!(std::fs::read(&c_file).unwrap() == data, "the file holds the copy's bytes alone");
            assert!(read(&h, c) == data);
            copies.push(c);
        }
        h.sync().unwrap();
        for &c in &copies {
            assert!(!store.heap_object(c.0).unwrap().unwrap().is_recycled(), "synced: the bytes are c's");
        }
        h.close().unwrap();
    }
    let store = real_store(dir.path());
    let h = common::heap(&store);
    for c in copies {
        assert!(read(&h, c) == data, "reopened, copy {} is there", c.0);
    }
}

#[test]
fn copying_a_freed_object_fails_and_leaves_no_file() {
    let (_dir, store, h) = real_heap();
    let a = h.alloc(4096).unwrap();
    let keep = h.alloc(10).unwrap();
    h.free(a).unwrap();
    h.sync().unwrap();
    assert!(matches!(h.copy(a), Err(larder_heap::HeapError::NotFound { .. })));
    h.close().unwrap();
    let (files, _) = store.list_heap_files().unwrap();
    assert_eq!(files, vec![keep.0], "no copy's file is left behind");
}

#[test]
fn a_copy_of_an_arena_on_real_files_carries_its_blocks() {
    let (_dir, _store, h) = real_heap();
    let a = h.alloc(8).unwrap();
    let blocks: Vec<larder_heap::PPtr<u8>> = (0..20).map(|i| h.alloc_in(a, 40 + i * 300, 8).unwrap()).collect();
    for (i, p) in blocks.iter().enumerate() {
        let place = h.deref(*p).unwrap();
        #[allow(unsafe_code)]
        // SAFETY: a live block of at least 40 bytes, mapped writable.
        unsafe {
            std::ptr::write_bytes(place, i as u8 + 1, 40)
        };
    }
    h.free_in(blocks[3]).unwrap();
    let c = h.copy(a).unwrap();
    assert_eq!(h.size(c).unwrap(), h.size(a).unwrap());
    for (i, p) in blocks.iter().enumerate() {
        let q = larder_heap::PPtr::<u8>::new(c.0, p.offset, p.generation);
        if i == 3 {
            assert!(matches!(h.deref(q), Err(larder_heap::HeapError::Stale { .. })));
            continue;
        }
        let mut buf = [0u8; 40];
        h.read_at(c, h.deref(q).map(|_| p.offset).unwrap(), &mut buf).unwrap();
        assert_eq!(buf, [i as u8 + 1; 40], "block {i}'s bytes, stored through the mapping");
    }
}

#[test]
fn a_copy_of_an_arena_whose_allocator_is_not_loaded_carries_its_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let (a, blocks) = {
        let store = real_store(dir.path());
        let h = common::heap(&store);
        let a = h.alloc(8).unwrap();
        let blocks: Vec<larder_heap::PPtr<u8>> = (0..8).map(|i| h.alloc_in(a, 100 + i * 50, 8).unwrap()).collect();
        for (i, p) in blocks.iter().enumerate() {
            h.write_at(a, p.offset, &[i as u8 + 1; 16]).unwrap();
        }
        h.free_in(blocks[5]).unwrap();
        h.sync().unwrap();
        h.close().unwrap();
        (a, blocks)
    };
    // Reopened: the allocator's records are in the index only.
    let store = real_store(dir.path());
    let h = common::heap(&store);
    let c = h.copy(a).unwrap();
    for (i, p) in blocks.iter().enumerate() {
        let q = larder_heap::PPtr::<u8>::new(c.0, p.offset, p.generation);
        if i == 5 {
            assert!(matches!(h.deref(q), Err(larder_heap::HeapError::Stale { .. })), "a freed block stays freed");
            continue;
        }
        h.deref(q).unwrap();
        let mut buf = [0u8; 16];
        h.read_at(c, p.offset, &mut buf).unwrap();
        assert_eq!(buf, [i as u8 + 1; 16], "block {i} is live in the copy with its bytes");
    }
}
