//! Attaching: the mapping's reservation follows the file's length (one
//! open for most objects, a second for large ones), and an attach racing a
//! free leaves nothing attached once the free returned.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};

use larder_heap::limits::MIN_RESERVE_BYTES;
use larder_heap::{Heap, HeapError, ObjectId};

use common::{real_heap, sim_heap};

/// Re-attaches `object` of `size` bytes and checks that it grows in place
/// to twice that size (the reservation an attach promises) with its bytes.
fn reattached_whole(h: &Heap, object: ObjectId, size: u64) {
    h.write_at(object, size - 4, b"tail").unwrap();
    h.close_object(object).unwrap();
    let base = h.pointer(object).unwrap();
    assert_eq!(h.size(object).unwrap(), size);
    let mut tail = [0u8; 4];
    h.read_at(object, size - 4, &mut tail).unwrap();
    assert_eq!(&tail, b"tail");
    h.grow(object, 2 * size).unwrap();
    assert_eq!(h.pointer(object).unwrap(), base, "growth to twice the size at attach stays in place");
    h.write_at(object, 2 * size - 4, b"end.").unwrap();
    h.read_at(object, 2 * size - 4, &mut tail).unwrap();
    assert_eq!(&tail, b"end.");
}

#[test]
fn large_objects_are_attached_in_a_reservation_for_their_length() {
    let (_dir, _store, h) = real_heap();
    // Past half the smallest reservation: mapped again in a bigger one.
    let half = MIN_RESERVE_BYTES / 2 + 8192;
    let a = h.alloc(half).unwrap();
    reattached_whole(&h, a, half);
    // Past the smallest reservation: its length is read first.
    let past = MIN_RESERVE_BYTES + 8192;
    let b = h.alloc(past).unwrap();
    reattached_whole(&h, b, past);
    // A small object: in the smallest reservation, in place up to it.
    let c = h.alloc(4096).unwrap();
    h.close_object(c).unwrap();
    let base = h.pointer(c).unwrap();
    h.grow(c, MIN_RESERVE_BYTES).unwrap();
    assert_eq!(h.pointer(c).unwrap(), base);
}

/// Rounds of one thread attaching an object while another frees it: once
/// both are done the object is not attached, whoever won.
fn attach_racing_free(h: &Heap, rounds: usize) {
    for round in 0..rounds {
        let object = h.alloc(64).unwrap();
        h.close_object(object).unwrap();
        let freed = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| loop {
                let done = freed.load(Ordering::SeqCst);
                match h.get(object) {
                    Ok(_) if done => panic!("round {round}: object attached after its free returned"),
                    Ok(_) => {}
                    Err(HeapError::NotFound { .. }) => break,
                    Err(e) => panic!("round {round}: {e}"),
                }
            });
            s.spawn(|| {
                h.free(object).unwrap();
                freed.store(true, Ordering::SeqCst);
            });
        });
        assert!(matches!(h.get(object), Err(HeapError::NotFound { .. })), "round {round}");
        assert!(matches!(h.pointer(object), Err(HeapError::NotFound { .. })), "round {round}");
        if round % 16 == 15 {
            h.sync().unwrap();
        }
    }
    h.sync().unwrap();
}

/// Every freed object's file is removed, or kept for reuse (a spare:
/// emptied, or small and whole) until the heap closes.
fn no_file_left(store: &larder_object::Store, h: Heap) {
    for id in store.list_heap_files().unwrap().0 {
        assert!(store.heap_object(id).unwrap().is_none(), "object {id} was freed");
        let len = std::fs::metadata(store.heap_file_path(id)).map_or(0, |m| m.len());
        assert!(len <= larder_heap::limits::SPARE_KEPT_FILE_BYTES, "spare {id} kept {len} bytes");
    }
    h.close().unwrap();
    assert_eq!(store.list_heap_files().unwrap().0.len(), 0, "closing removes the spares");
}

#[test]
fn an_attach_racing_a_free_leaves_nothing_attached_on_real_mappings() {
    let (_dir, store, h) = real_heap();
    attach_racing_free(&h, 200);
    no_file_left(&store, h);
}

#[test]
fn an_attach_racing_a_free_leaves_nothing_attached_on_the_simulation() {
    let (_sim, store, h) = sim_heap(7);
    attach_racing_free(&h, 100);
    no_file_left(&store, h);
}
