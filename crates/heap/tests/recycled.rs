//! A freed object's file reused for a new object (docs/heap.md, "Recycled
//! files"): only once its free is durable and nothing holds it open or
//! mapped; the new object reads zeros, and a crash before its first sync
//! cannot show the freed object's bytes in it.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::MetadataExt;

use larder_io::sim::CrashMode;

use common::{real_heap, reopen_sim, sim_heap};

fn inode(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).unwrap().ino()
}

/// Syncs the store (records, and whatever bytes were written to files) but
/// not the heap, crashes keeping every pending write, and reopens.
fn crash_keeping_pending(
    sim: &larder_io::SimStorage,
    store: std::sync::Arc<larder_object::Store>,
    h: larder_heap::Heap,
) -> (std::sync::Arc<larder_object::Store>, larder_heap::Heap) {
    store.sync().unwrap();
    drop(h);
    drop(store);
    let store = reopen_sim(&sim.crash_with(CrashMode::KeepAllPending));
    let h = common::heap(&store);
    (store, h)
}

/// The first `len` bytes of the object named `name`.
fn read_named(h: &larder_heap::Heap, name: &str, len: usize) -> Vec<u8> {
    let mut buf = vec![1u8; len];
    h.read_at(h.get_by_name(name).unwrap(), 0, &mut buf).unwrap();
    buf
}

#[test]
fn a_durably_freed_file_becomes_the_next_objects() {
    let (_dir, store, h) = real_heap();
    let a = h.alloc(8192).unwrap();
    h.write_at(a, 0, &[0xAA; 8192]).unwrap();
    let a_file = store.heap_file_path(a.0);
    let a_inode = inode(&a_file);
    h.free(a).unwrap();
    // The free is durable: its file is kept (whole: it is small).
    h.sync().unwrap();
    let b = h.alloc(100).unwrap();
    let b_file = store.heap_file_path(b.0);
    assert_eq!(inode(&b_file), a_inode, "b took a's file");
    assert!(!a_file.exists(), "a's name is gone");
    assert_eq!(std::fs::metadata(&b_file).unwrap().len(), 100);
    let mut buf = [1u8; 100];
    h.read_at(b, 0, &mut buf).unwrap();
    assert_eq!(buf, [0; 100], "b reads zeros");
    assert!(store.heap_object(b.0).unwrap().unwrap().is_recycled());
    h.write_at(b, 0, &[0xBB; 100]).unwrap();
    h.sync().unwrap();
    assert!(!store.heap_object(b.0).unwrap().unwrap().is_recycled(), "synced: b's bytes are its own");
    h.close().unwrap();
    // Closing removes the spares: no file without a record is left.
    let (files, _) = store.list_heap_files().unwrap();
    assert_eq!(files, vec![b.0]);
}

#[test]
fn a_freed_file_still_open_elsewhere_is_removed_not_reused() {
    let (_dir, store, h) = real_heap();
    let a = h.alloc(4096).unwrap();
    h.write_at(a, 0, &[0xAA; 4096]).unwrap();
    h.sync().unwrap();
    let a_file = store.heap_file_path(a.0);
    // Another holder (a client's descriptor, a plain tool).
    let held = std::fs::File::open(&a_file).unwrap();
    let held_inode = held.metadata().unwrap().ino();
    h.free(a).unwrap();
    h.sync().unwrap();
    assert!(!a_file.exists(), "a's file is removed");
    let b = h.alloc(4096).unwrap();
    assert_ne!(inode(&store.heap_file_path(b.0)), held_inode, "b has a file of its own");
    h.write_at(b, 0, &[0xBB; 4096]).unwrap();
    let mut buf = vec![0u8; 4096];
    std::os::unix::fs::FileExt::read_exact_at(&held, &mut buf, 0).unwrap();
    assert_eq!(buf, vec![0xAA; 4096], "the holder still sees a's bytes, not b's");
}

#[test]
fn a_freed_object_still_mapped_here_keeps_its_file() {
    let (_dir, store, h) = real_heap();
    let a = h.alloc(4096).unwrap();
    let a_inode = inode(&store.heap_file_path(a.0));
    // A mapping of the file that outlives the free (no descriptor open).
    let mapped = store.map_heap_file(a.0, 1 << 20, larder_io::MapAccess::ReadOnly).unwrap();
    h.free(a).unwrap();
    h.sync().unwrap();
    let b = h.alloc(4096).unwrap();
    assert_ne!(inode(&store.heap_file_path(b.0)), a_inode, "a's file was in use: not reused");
    drop(mapped);
}

#[test]
fn recovery_empties_a_recycled_file_never_synced() {
    let (sim, store, h) = sim_heap(7);
    let a = h.alloc(3000).unwrap();
    h.write_at(a, 0, &[0xAA; 3000]).unwrap();
    h.add_name(a, "a").unwrap();
    h.sync().unwrap();
    h.free(a).unwrap();
    h.sync().unwrap();
    let b = h.alloc(3000).unwrap();
    assert!(store.heap_object(b.0).unwrap().unwrap().is_recycled(), "b took a's file");
    h.write_at(b, 0, &[0xBB; 3000]).unwrap();
    h.add_name(b, "b").unwrap();
    // Its bytes written to the file, not synced.
    h.close_object(b).unwrap();
    // Everything pending reaches the disk, b's bytes too, but no heap sync
    // ran since b took the file: recovery cannot tell b's bytes from the
    // freed a's (had the emptying been lost), so it empties the file.
    let (store, h) = crash_keeping_pending(&sim, store, h);
    let b = h.get_by_name("b").unwrap();
    assert_eq!(read_named(&h, "b", 3000), vec![0; 3000], "never synced: zeros, whatever reached the disk");
    assert!(!store.heap_object(b.0).unwrap().unwrap().is_recycled(), "recovery cleared the flag");
}

#[test]
fn recovery_empties_a_copy_into_a_kept_spare_never_synced() {
    let (sim, store, h) = sim_heap(8);
    let source = h.alloc(3000).unwrap();
    h.write_at(source, 0, &[0xCC; 3000]).unwrap();
    h.add_name(source, "source").unwrap();
    let freed = h.alloc(5000).unwrap();
    h.write_at(freed, 0, &[0xAA; 5000]).unwrap();
    h.sync().unwrap();
    h.free(freed).unwrap();
    h.sync().unwrap();
    // The freed file is small: a spare that kept its 5,000 bytes, which
    // the copy overwrites in place (and shortens).
    let copy = h.copy(source).unwrap();
    assert!(store.heap_object(copy.0).unwrap().unwrap().is_recycled(), "the copy took the spare");
    let mut buf = vec![0u8; 3000];
    h.read_at(copy, 0, &mut buf).unwrap();
    assert_eq!(buf, vec![0xCC; 3000]);
    h.add_name(copy, "copy").unwrap();
    // The record reaches the disk, the copy's bytes maybe not: no heap sync.
    let (_store, h) = crash_keeping_pending(&sim, store, h);
    assert_eq!(read_named(&h, "copy", 3000), vec![0; 3000], "never synced: zeros, never the freed object's bytes");
    assert_eq!(read_named(&h, "source", 3000), vec![0xCC; 3000], "the source is as synced");
}

#[test]
fn only_mapped_spares_keep_bytes_and_every_reuse_reads_zeros() {
    use larder_heap::limits::{SPARE_KEPT_FILE_BYTES, SPARE_MAPPINGS};
    let (_dir, store, h) = real_heap();
    let freed: Vec<_> = (0..200)
        .map(|_| {
            let object = h.alloc(4096).unwrap();
            h.write_at(object, 0, &[0xAA; 4096]).unwrap();
            object
        })
        .collect();
    h.sync().unwrap();
    for object in &freed {
        h.free(*object).unwrap();
    }
    h.sync().unwrap();
    let (files, _) = store.list_heap_files().unwrap();
    assert_eq!(files.len(), 200, "every freed file is a spare");
    let kept: Vec<u64> = files
        .iter()
        .map(|id| std::fs::metadata(store.heap_file_path(*id)).unwrap().len())
        .filter(|&len| len > 0)
        .collect();
    assert_eq!(kept.len(), SPARE_MAPPINGS, "the mapped spares keep their bytes, the others none");
    assert!(kept.iter().all(|&len| len <= SPARE_KEPT_FILE_BYTES));
    for _ in 0..200 {
        let object = h.alloc(4096).unwrap();
        let mut buf = vec![1u8; 4096];
        h.read_at(object, 0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0), "object {} reads zeros", object.0);
        assert!(store.heap_object(object.0).unwrap().unwrap().is_recycled(), "it took a spare");
    }
}

/// Frees whose files would refill the spares make the log sync early: with
/// a group-commit interval of an hour, the frees past
/// `SPARE_SYNC_SOON_FREES` become durable without any sync of the heap's.
#[test]
fn many_frees_waiting_for_the_log_ask_it_to_sync() {
    let dir = tempfile::tempdir().unwrap();
    let storage: larder_io::StorageRef = std::sync::Arc::new(larder_io::RealStorage::new());
    let mut options = larder_object::StoreOptions::default();
    options.log.buffered_sync_interval = Some(std::time::Duration::from_secs(3600));
    let store =
        std::sync::Arc::new(larder_object::Store::create(storage, dir.path(), common::creation(), options).unwrap());
    let h = common::heap(&store);
    let frees = larder_heap::limits::SPARE_SYNC_SOON_FREES + 8;
    let objects: Vec<_> = (0..frees).map(|_| h.alloc(4096).unwrap()).collect();
    h.sync().unwrap();
    let synced = store.durable_lsn();
    for object in objects {
        h.free(object).unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while store.durable_lsn() == synced {
        assert!(std::time::Instant::now() < deadline, "the frees never became durable");
        std::thread::yield_now();
    }
    h.close().unwrap();
}
