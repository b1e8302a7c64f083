//! The descriptors a heap keeps between one-flush syncs (docs/heap.md,
//! "One flush per sync"): a sync writes an object's pages back through its
//! mapping's descriptor, kept for the next sync. At most
//! `limits::SYNC_DESCRIPTORS` mappings keep one; a closed object's mapping
//! keeps none, and a freed or regrown object's descriptor goes with the
//! mapping it was opened for, so a later sync writes back the file that is
//! mapped now.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use larder_heap::limits::SYNC_DESCRIPTORS;
use larder_heap::{Heap, ObjectId};
use larder_object::meta::heap_image_prefix;
use larder_object::Store;

use common::real_store;

fn images(store: &Store, object: ObjectId) -> usize {
    store.index().prefix(&heap_image_prefix(object.0), true).unwrap().count()
}

/// A heap on a store under target/ (on the build's disk: /tmp may be a
/// tmpfs, whose log sync does not cover the heap's files).
fn heap_on_disk() -> (tempfile::TempDir, Arc<Store>, Heap) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = real_store(dir.path());
    let heap = common::heap(&store);
    (dir, store, heap)
}

/// An object whose last sync took one flush (its block's page imaged).
/// Fails where the log's sync does not flush the heap's files (every sync
/// then flushes twice and keeps no descriptor): these tests would check
/// nothing there.
fn synced_once_flushed(h: &Heap, store: &Store) -> ObjectId {
    let a = h.alloc(4096).unwrap();
    h.alloc_in(a, 64, 8).unwrap();
    // A new object's first sync images it whole; the second syncs its file.
    h.sync().unwrap();
    h.sync().unwrap();
    let p = h.alloc_in(a, 64, 8).unwrap();
    h.write_at(a, p.offset, &[0xAB; 64]).unwrap();
    h.sync().unwrap();
    assert!(
        images(store, a) > 0,
        "the sync took two flushes: the log's sync does not cover the heap's files on this file system \
         (ext4 or XFS on one device is needed)"
    );
    a
}

#[test]
fn at_most_the_bound_of_mappings_keep_a_descriptor() {
    let (_dir, store, h) = heap_on_disk();
    let mut objects = Vec::new();
    for _ in 0..SYNC_DESCRIPTORS + 4 {
        let a = synced_once_flushed(&h, &store);
        objects.push(a);
        assert!(h.kept_descriptors() <= SYNC_DESCRIPTORS, "{} kept", h.kept_descriptors());
    }
    assert_eq!(h.kept_descriptors(), SYNC_DESCRIPTORS);
    for a in objects {
        h.close_object(a).unwrap();
    }
    assert_eq!(h.kept_descriptors(), 0, "closed objects keep no descriptor");
}

#[test]
fn a_closed_object_attached_again_keeps_no_descriptor_until_its_next_sync() {
    let (_dir, store, h) = heap_on_disk();
    let a = synced_once_flushed(&h, &store);
    assert_eq!(h.kept_descriptors(), 1);
    h.close_object(a).unwrap();
    let a = h.get(a).unwrap();
    assert_eq!(h.kept_mappings(), 0, "the kept mapping was reused");
    assert_eq!(h.kept_descriptors(), 0, "the mapping released its descriptor when closed");
    // A close makes the next sync flush twice; the one after takes one
    // flush again, through a descriptor opened anew.
    for byte in [0xCD, 0xEF] {
        let p = h.alloc_in(a, 64, 8).unwrap();
        h.write_at(a, p.offset, &[byte; 64]).unwrap();
        h.sync().unwrap();
    }
    assert_eq!(h.kept_descriptors(), 1);
}

#[test]
fn a_freed_object_drops_its_descriptor_and_its_recycled_file_is_synced_as_the_new_object() {
    let (dir, store, h) = heap_on_disk();
    let a = synced_once_flushed(&h, &store);
    h.free(a).unwrap();
    h.sync().unwrap();
    assert_eq!(h.kept_descriptors(), 0);
    // The next object takes the freed object's file (renamed): its syncs
    // write back that file under its new name, not the old one.
    let b = synced_once_flushed(&h, &store);
    assert_eq!(h.kept_descriptors(), 1);
    h.write_at(b, 8, b"after the free").unwrap();
    h.sync().unwrap();
    h.close().unwrap();
    drop(store);
    let store = real_store(dir.path());
    let h = common::heap(&store);
    let mut buf = [0u8; 14];
    h.read_at(b, 8, &mut buf).unwrap();
    assert_eq!(&buf, b"after the free");
}

#[test]
fn growth_past_the_reservation_syncs_through_the_new_mapping() {
    let (dir, store, h) = heap_on_disk();
    let a = synced_once_flushed(&h, &store);
    assert_eq!(h.kept_descriptors(), 1);
    // Past the 1 GiB reservation: mapped anew (the file stays sparse).
    let size = 3 << 30;
    h.grow(a, size).unwrap();
    h.sync().unwrap();
    h.write_at(a, 16, b"after the growth").unwrap();
    h.sync().unwrap();
    assert!(h.kept_descriptors() <= 1);
    h.close().unwrap();
    drop(store);
    let store: Arc<Store> = real_store(dir.path());
    let h = common::heap(&store);
    let mut buf = [0u8; 16];
    h.read_at(a, 16, &mut buf).unwrap();
    assert_eq!(&buf, b"after the growth");
    assert_eq!(h.size(a).unwrap(), size);
}
