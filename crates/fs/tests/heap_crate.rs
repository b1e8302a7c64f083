//! A heap made by `larder-heap` seen through the file system: its bytes,
//! written through the heap's mapping, read as a file; bytes written
//! through the file system are what the mapping sees; its directories
//! refuse namespace changes; an object freed by `Store::free_heap_object`
//! (what `larder heap rm` runs) is gone for the heap too.
#![allow(clippy::unwrap_used)]

mod common;

use common::{errno, fresh, root};
use larder_heap::{Credentials, Heap, HeapError};
use larder_object::Durability;

#[test]
fn a_heap_crate_heap_through_the_file_system() {
    let (_dir, fs) = fresh();
    let heap = Heap::open(fs.store(), "/heap", Credentials::root()).unwrap();
    let object = heap.alloc(4096).unwrap();
    heap.write_at(object, 0, b"written through the mapping").unwrap();
    heap.add_name(object, "doc").unwrap();
    heap.sync().unwrap();
    let id = object.0;

    let found = fs.resolve(&root(), b"/heap/names/doc", true).unwrap().attr.unwrap();
    assert_eq!((found.ino, found.size), (id, 4096));
    let fh = fs.open_file(&root(), id, libc::O_RDWR).unwrap();
    assert_eq!(fs.read(fh, 0, 27).unwrap(), b"written through the mapping");
    fs.write(&root(), fh, 0, b"WRITTEN").unwrap();
    fs.release(fh).unwrap();
    let mut seen = [0u8; 27];
    heap.read_at(object, 0, &mut seen).unwrap();
    assert_eq!(&seen, b"WRITTEN through the mapping", "the mapping sees the write in place");

    let names = fs.resolve(&root(), b"/heap/names", true).unwrap().attr.unwrap().ino;
    assert_eq!(errno(fs.unlink(&root(), names, b"doc")), libc::EPERM);
    assert_eq!(heap.get_by_name("doc").unwrap(), object);
    let report = larder_fsck::check(fs.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report}");

    heap.close_object(object).unwrap();
    let freed = fs.store().free_heap_object(heap.root_id(), id, Durability::Durable).unwrap();
    assert_eq!(freed.names.len(), 1);
    assert!(matches!(heap.get_by_name("doc"), Err(HeapError::NotFound { .. })));
    assert!(fs.resolve(&root(), b"/heap/names/doc", true).unwrap().attr.is_none());
    assert!(!fs.store().heap_file_path(id).exists());
    let report = larder_fsck::check(fs.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report}");
    heap.close().unwrap();
}
