//! Mappings kept after `close_object` (docs/heap.md, "Closed mappings"):
//! the next attach reuses one only after the checks a first attach makes
//! (the object's records, the caller's access) and one `stat` of its file
//! (the same file, not shorter than the mapping, grown in place). Every
//! path that frees, removes, shrinks, replaces or grows an object behind a
//! kept mapping is tried here; each test fails if the attach handed out the
//! kept mapping without its checks.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use larder_heap::limits::{CLOSED_MAPPINGS, CLOSED_MAPPING_BYTES};
use larder_heap::{Credentials, Heap, HeapError, ObjectId};
use larder_object::{Durability, Store};

use common::{heap, real_heap};

/// The host file of `object` in the store at `dir`.
fn file_of(dir: &std::path::Path, object: ObjectId) -> PathBuf {
    dir.join(larder_object::HEAP_DIR).join(object.0.to_string())
}

/// An object of `len` bytes of `fill`, synced and closed: its mapping kept.
fn closed_object(h: &Heap, len: u64, fill: u8) -> ObjectId {
    let object = h.alloc(len).unwrap();
    h.write_at(object, 0, &vec![fill; len as usize]).unwrap();
    h.sync().unwrap();
    let before = h.kept_mappings();
    h.close_object(object).unwrap();
    assert_eq!(h.kept_mappings(), before + 1, "the closed object's mapping is kept");
    object
}

/// How many mappings of `object`'s file this process has (its lines in
/// /proc/self/maps): what the heap keeps mapped, seen from outside it.
fn mappings_of(dir: &std::path::Path, object: ObjectId) -> usize {
    let path = file_of(&dir.canonicalize().unwrap(), object);
    let path = path.to_str().unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().filter(|l| l.ends_with(path) || l.ends_with(&format!("{path} (deleted)"))).count()
}

fn is_not_found<T: std::fmt::Debug>(result: larder_heap::Result<T>) -> bool {
    matches!(result, Err(HeapError::NotFound { .. }))
}

#[test]
fn a_closed_object_is_attached_again_from_its_kept_mapping_with_its_bytes() {
    let (dir, _store, h) = real_heap();
    let object = closed_object(&h, 1024, 7);
    h.add_name(object, "seven").unwrap();
    for round in 0..100 {
        assert_eq!(h.get_by_name("seven").unwrap(), object);
        assert_eq!(h.kept_mappings(), 0, "attached, so no longer among the closed");
        let mut buf = [0u8; 1024];
        h.read_at(object, 0, &mut buf).unwrap();
        let (written, rest) = buf.split_at(round as usize);
        assert!(written.iter().all(|&b| b == 8) && rest.iter().all(|&b| b == 7), "round {round}");
        h.write_at(object, round, &[8]).unwrap();
        h.close_object(object).unwrap();
        assert_eq!(h.kept_mappings(), 1);
    }
    h.sync().unwrap();
    let bytes = std::fs::read(file_of(dir.path(), object)).unwrap();
    assert!(bytes[..100].iter().all(|&b| b == 8), "writes through a reused mapping reach the file");
}

#[test]
fn a_freed_object_is_not_found_never_its_old_bytes() {
    let (dir, _store, h) = real_heap();
    let object = closed_object(&h, 4096, 0xAB);
    h.add_name(object, "gone").unwrap();
    assert_eq!(mappings_of(dir.path(), object), 1);
    h.free(object).unwrap();
    assert_eq!(h.kept_mappings(), 0);
    assert_eq!(mappings_of(dir.path(), object), 0, "a free unmaps the object's kept mapping");
    assert!(is_not_found(h.get(object)));
    assert!(is_not_found(h.get_by_name("gone")));
    assert!(is_not_found(h.pointer(object)));
    let mut buf = [0u8; 16];
    assert!(is_not_found(h.read_at(object, 0, &mut buf)));
    // After the file is removed too.
    h.sync().unwrap();
    assert!(is_not_found(h.get(object)));
}

#[test]
fn a_free_through_another_handle_is_seen() {
    let (_dir, store, h) = real_heap();
    let other = Heap::open(&store, "/heap", Credentials::root()).unwrap();
    let object = closed_object(&h, 1024, 1);
    other.free(object).unwrap();
    assert!(is_not_found(h.get(object)));
}

#[test]
fn a_free_through_the_object_layer_is_seen() {
    let (dir, store, h) = real_heap();
    // Buffered: the file stays (until the next open), only the records go.
    let buffered = closed_object(&h, 1024, 2);
    store.free_heap_object(h.root_id(), buffered.0, Durability::Buffered).unwrap();
    assert!(file_of(dir.path(), buffered).exists());
    assert!(is_not_found(h.get(buffered)), "the records decide, not the file");
    assert_eq!(h.kept_mappings(), 0, "the refused object's kept mapping is dropped");
    // Durable: the file is removed as well (`larder heap rm`).
    let durable = closed_object(&h, 1024, 3);
    store.free_heap_object(h.root_id(), durable.0, Durability::Durable).unwrap();
    assert!(!file_of(dir.path(), durable).exists());
    assert!(is_not_found(h.get(durable)));
}

#[test]
fn a_delete_through_the_object_layer_is_seen() {
    let (dir, store, h) = real_heap();
    let object = closed_object(&h, 1024, 4);
    store.delete_object(object.0, Durability::Buffered).unwrap();
    assert!(file_of(dir.path(), object).exists(), "the file goes at the next open");
    assert!(is_not_found(h.get(object)));
    assert!(is_not_found(h.pointer(object)));
}

#[test]
fn a_file_shrunk_behind_the_heap_is_refused_not_mapped() {
    let (dir, _store, h) = real_heap();
    let object = closed_object(&h, 64 << 10, 5);
    std::fs::OpenOptions::new().write(true).open(file_of(dir.path(), object)).unwrap().set_len(4096).unwrap();
    match h.get(object) {
        Err(HeapError::Shrunk { object: id, file_len, durable }) => {
            assert_eq!((id, file_len, durable), (object.0, 4096, 64 << 10));
        }
        other => panic!("expected Shrunk, got {other:?}"),
    }
    assert!(matches!(h.pointer(object), Err(HeapError::Shrunk { .. })));
    let mut buf = [0u8; 8];
    // A load at 60 KiB through the kept mapping would be a SIGBUS.
    assert!(matches!(h.read_at(object, 60 << 10, &mut buf), Err(HeapError::Shrunk { .. })));
    assert_eq!(h.kept_mappings(), 0);
}

#[test]
fn a_file_removed_behind_the_heap_is_not_found() {
    let (dir, _store, h) = real_heap();
    let object = closed_object(&h, 4096, 6);
    std::fs::remove_file(file_of(dir.path(), object)).unwrap();
    assert!(is_not_found(h.get(object)), "no file: nothing to map, whatever is kept");
}

#[test]
fn a_file_replaced_under_its_name_is_mapped_anew() {
    let (dir, _store, h) = real_heap();
    let object = closed_object(&h, 4096, 0x11);
    let path = file_of(dir.path(), object);
    let replacement = path.with_extension("new");
    std::fs::write(&replacement, vec![0x22u8; 4096]).unwrap();
    std::fs::rename(&replacement, &path).unwrap();
    let mut buf = [0u8; 4096];
    h.read_at(object, 0, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0x22), "the file the name names now, not the one kept mapped");
}

#[test]
fn growth_through_the_object_layer_is_seen_in_place() {
    let (_dir, store, h) = real_heap();
    let object = closed_object(&h, 1024, 9);
    // A write past the end extends the file in place (the heap's one
    // exception to shadowing), then commits the new size.
    store.write(object.0, 10_000, b"past the end", Durability::Buffered).unwrap();
    assert_eq!(h.size(object).unwrap(), 10_012);
    let mut buf = [0u8; 12];
    h.read_at(object, 10_000, &mut buf).unwrap();
    assert_eq!(&buf, b"past the end");
    h.close_object(object).unwrap();
    // Growth by truncate: zeros.
    store.truncate(object.0, 20_000, Durability::Buffered).unwrap();
    assert_eq!(h.size(object).unwrap(), 20_000);
    h.read_at(object, 19_988, &mut buf).unwrap();
    assert_eq!(buf, [0u8; 12]);
    h.read_at(object, 0, &mut buf[..1]).unwrap();
    assert_eq!(buf[0], 9);
}

#[test]
fn growth_past_half_the_reservation_behind_the_heap_is_mapped_anew() {
    let (_dir, store, h) = real_heap();
    let object = closed_object(&h, 4096, 10);
    // Longer than half the kept mapping's reservation: growth to twice the
    // length (what an attach promises in place) would not fit it.
    let len = larder_heap::limits::MIN_RESERVE_BYTES / 2 + 8192;
    store.truncate(object.0, len, Durability::Buffered).unwrap();
    let base = h.pointer(object).unwrap();
    assert_eq!(h.size(object).unwrap(), len);
    h.grow(object, 2 * len).unwrap();
    assert_eq!(h.pointer(object).unwrap(), base, "growth to twice the size at attach stays in place");
    let mut first = [0u8; 1];
    h.read_at(object, 0, &mut first).unwrap();
    assert_eq!(first[0], 10);
}

#[test]
fn growth_in_another_handle_is_seen() {
    let (_dir, store, h) = real_heap();
    let other = Heap::open(&store, "/heap", Credentials::root()).unwrap();
    let object = closed_object(&h, 1024, 12);
    other.grow(object, 8192).unwrap();
    other.write_at(object, 8000, b"grown").unwrap();
    other.close_object(object).unwrap();
    assert_eq!(h.size(object).unwrap(), 8192);
    let mut buf = [0u8; 5];
    h.read_at(object, 8000, &mut buf).unwrap();
    assert_eq!(&buf, b"grown");
}

#[test]
fn a_mode_change_while_closed_decides_the_next_mapping() {
    let (_dir, store, owner) = real_heap();
    let object = closed_object(&owner, 1024, 13);
    let stranger = Heap::open(&store, "/heap", Credentials::user(2000, 2000)).unwrap();
    // 0644: the stranger may read only, so gets a read-only mapping, not
    // the writable one kept for the owner.
    assert!(!stranger.is_writable(object).unwrap());
    stranger.close_object(object).unwrap();
    store
        .transact(&[object.0], Durability::Buffered, |txn| {
            let mut onode = txn.onode(object.0)?.unwrap();
            onode.mode = (onode.mode & !0o777) | 0o600;
            txn.put_onode(object.0, &onode)
        })
        .unwrap();
    assert!(matches!(stranger.get(object), Err(HeapError::PermissionDenied { .. })));
    assert!(owner.is_writable(object).unwrap());
}

#[test]
fn the_kept_mappings_are_bounded_in_count_and_bytes() {
    let (dir, _store, h) = real_heap();
    let objects: Vec<ObjectId> = (0..CLOSED_MAPPINGS + 8).map(|_| h.alloc(4096).unwrap()).collect();
    for (i, &object) in objects.iter().enumerate() {
        h.write_at(object, 0, &[i as u8]).unwrap();
        h.close_object(object).unwrap();
        assert_eq!(h.kept_mappings(), (i + 1).min(CLOSED_MAPPINGS));
    }
    // The oldest were unmapped; every object still attaches with its bytes.
    assert_eq!(mappings_of(dir.path(), objects[0]), 0);
    assert_eq!(mappings_of(dir.path(), objects[CLOSED_MAPPINGS + 7]), 1);
    for (i, &object) in objects.iter().enumerate() {
        let mut b = [0u8; 1];
        h.read_at(object, 0, &mut b).unwrap();
        assert_eq!(b[0], i as u8);
    }
    for &object in &objects {
        h.close_object(object).unwrap();
    }
    // An object longer than the byte bound is unmapped at close.
    let big = h.alloc(CLOSED_MAPPING_BYTES + 4096).unwrap();
    let kept = h.kept_mappings();
    h.close_object(big).unwrap();
    assert_eq!(h.kept_mappings(), kept);
    // Objects that fill the byte bound push the oldest out.
    let half = h.alloc(CLOSED_MAPPING_BYTES / 2).unwrap();
    let other_half = h.alloc(CLOSED_MAPPING_BYTES / 2).unwrap();
    h.close_object(half).unwrap();
    h.close_object(other_half).unwrap();
    assert_eq!(h.kept_mappings(), 2, "the two halves fill the byte bound: every 4 KiB one was pushed out");
    let small = h.alloc(4096).unwrap();
    h.close_object(small).unwrap();
    assert_eq!(h.kept_mappings(), 2);
    assert_eq!(mappings_of(dir.path(), half), 0, "the oldest half went");
    h.get(half).unwrap();
    h.get(other_half).unwrap();
    h.get(small).unwrap();
}

#[test]
fn closing_the_heap_unmaps_the_kept_mappings() {
    let (dir, store, h) = real_heap();
    let other = heap(&store);
    let object = closed_object(&h, 1024, 14);
    h.close().unwrap();
    assert_eq!(mappings_of(dir.path(), object), 1, "another handle of the heap is open");
    assert_eq!(other.kept_mappings(), 1);
    other.close().unwrap();
    assert_eq!(mappings_of(dir.path(), object), 0, "the last handle's close unmaps");
    let h = heap(&store);
    let mut b = [0u8; 1];
    h.read_at(object, 0, &mut b).unwrap();
    assert_eq!(b[0], 14);
    h.close_object(object).unwrap();
    drop(h);
    assert_eq!(mappings_of(dir.path(), object), 0, "dropping the last handle unmaps");
    Arc::into_inner(store).map(Store::close).unwrap().unwrap();
}

/// Threads attach, read and close objects whose bytes all equal their id's
/// low byte while another frees and allocates: a reader sees an object's
/// own bytes or NotFound, never another's or a freed one's after its free.
#[test]
fn racing_attaches_closes_and_frees_never_show_freed_bytes() {
    let (_dir, _store, h) = real_heap();
    let live: parking_lot::Mutex<Vec<ObjectId>> = parking_lot::Mutex::new(Vec::new());
    let freed: parking_lot::Mutex<Vec<ObjectId>> = parking_lot::Mutex::new(Vec::new());
    let make = |h: &Heap| {
        let object = h.alloc(4096).unwrap();
        h.write_at(object, 0, &[object.0 as u8; 4096]).unwrap();
        h.close_object(object).unwrap();
        object
    };
    for _ in 0..16 {
        let object = make(&h);
        live.lock().push(object);
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for reader in 0..2u64 {
            let (h, live, freed, done) = (&h, &live, &freed, &done);
            s.spawn(move || {
                let mut n = reader;
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    n = n.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let candidates: Vec<ObjectId> = {
                        let live = live.lock();
                        let freed = freed.lock();
                        live.iter().chain(freed.iter()).copied().collect()
                    };
                    let object = candidates[(n >> 33) as usize % candidates.len()];
                    let was_freed = freed.lock().contains(&object);
                    let mut buf = [0u8; 4096];
                    match h.read_at(object, 0, &mut buf) {
                        Ok(()) => {
                            assert!(!was_freed, "object {} read after its free returned", object.0);
                            assert!(buf.iter().all(|&b| b == object.0 as u8), "object {}'s bytes", object.0);
                        }
                        Err(HeapError::NotFound { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                    let _ = h.close_object(object);
                }
            });
        }
        for round in 0..200 {
            let victim = {
                let mut live = live.lock();
                let at = round % live.len();
                live.remove(at)
            };
            h.free(victim).unwrap();
            freed.lock().push(victim);
            let object = make(&h);
            live.lock().push(object);
            if round % 50 == 49 {
                h.sync().unwrap();
            }
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    for object in freed.into_inner() {
        assert!(is_not_found(h.get(object)));
    }
}
