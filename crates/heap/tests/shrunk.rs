//! A heap file shrunk behind the heap's back (by another program) is
//! refused when the heap attaches it, with `Shrunk`, rather than mapped
//! (a load past the file's end would be a SIGBUS); recovery leaves it for
//! fsck to report and the heap's other objects keep working.
#![allow(clippy::unwrap_used)]

mod common;

use larder_heap::HeapError;

use common::{heap, real_heap, real_store};

#[test]
fn a_file_shrunk_outside_larder_is_refused_at_attach() {
    let dir = tempfile::tempdir().unwrap();
    let (victim, other) = {
        let store = real_store(dir.path());
        let h = heap(&store);
        let victim = h.alloc(64 << 10).unwrap();
        let other = h.alloc(100).unwrap();
        h.write_at(other, 0, b"still fine").unwrap();
        h.add_name(victim, "victim").unwrap();
        h.close().unwrap();
        std::sync::Arc::into_inner(store).unwrap().close().unwrap();
        (victim, other)
    };
    let path = dir.path().join(larder_object::HEAP_DIR).join(victim.0.to_string());
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(4096).unwrap();

    let store = real_store(dir.path());
    let report = store.recover_heap_files().unwrap();
    assert_eq!(report.short, vec![victim.0], "recovery reports it and leaves it");
    let h = heap(&store);
    match h.get_by_name("victim") {
        Err(HeapError::Shrunk { object, file_len, durable }) => {
            assert_eq!((object, file_len, durable), (victim.0, 4096, 64 << 10));
        }
        other => panic!("expected Shrunk, got {other:?}"),
    }
    assert!(matches!(h.pointer(victim), Err(HeapError::Shrunk { .. })));
    let mut buf = [0u8; 10];
    h.read_at(other, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"still fine");
}

#[test]
fn growing_past_the_reservation_maps_anew_and_keeps_the_bytes() {
    let (_dir, _store, h) = real_heap();
    let a = h.alloc(16).unwrap();
    h.write_at(a, 0, b"first sixteen b.").unwrap();
    let before = h.pointer(a).unwrap();
    // The reservation is 1 GiB for a small object: this outgrows it.
    let big = larder_heap::limits::MIN_RESERVE_BYTES + 8192;
    h.grow(a, big).unwrap();
    let after = h.pointer(a).unwrap();
    assert_ne!(before, after, "a new mapping at a new base");
    let mut buf = [0u8; 16];
    h.read_at(a, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"first sixteen b.");
    h.write_at(a, big - 4, b"tail").unwrap();
    h.sync().unwrap();
    let mut tail = [0u8; 4];
    h.read_at(a, big - 4, &mut tail).unwrap();
    assert_eq!(&tail, b"tail");
    // The old mapping stays valid memory until the object is closed.
    #[allow(unsafe_code)]
    // SAFETY: the retired mapping of a is kept while a is attached; it maps
    // the same file, so it shows the same first byte.
    let first = unsafe { before.read_volatile() };
    assert_eq!(first, b'f');
}
