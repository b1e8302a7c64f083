//! Object data API basics on the simulated storage: inline objects, the
//! conversion to extents and back through truncate, holes, deletes, stat,
//! and a flipped bit in a container block read back as corruption naming
//! the file.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{creation, DIR};
use larder_io::{SimStorage, StorageRef};
use larder_object::meta::{DataLocation, Kind};
use larder_object::{Durability, ObjectError, Store, StoreOptions};

fn options() -> StoreOptions {
    common::deterministic()
}

fn store(sim: &SimStorage) -> Store {
    let storage: StorageRef = Arc::new(sim.clone());
    Store::create(storage, Path::new(DIR), creation(), options()).unwrap()
}

fn read_all(store: &Store, id: u64) -> Vec<u8> {
    let size = store.stat(id).unwrap().unwrap().size;
    let mut buf = vec![0xEEu8; size as usize + 10];
    let n = store.read(id, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

fn assert_clean(store: &Store) {
    let report = store.space().verify(store.used_extents().unwrap()).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn inline_to_extents_and_back_through_truncate() {
    let sim = SimStorage::new(1);
    let store = store(&sim);
    let anonymous = store.create_object(Kind::File, 0o644, 1, 2, Durability::Durable).unwrap();
    let o = store.stat(anonymous).unwrap().unwrap();
    assert_eq!((o.size, o.nlink, o.generation, o.mode, o.uid, o.gid), (0, 0, 1, 0o100_644, 1, 2));
    // Named, so it outlives the reopen below (the anonymous one does not).
    let id = common::create_named(&store, Kind::File, 0o644, 1, 2, Durability::Durable).unwrap();
    store.write(id, 10, b"hello", Durability::Durable).unwrap();
    assert_eq!(read_all(&store, id), b"\0\0\0\0\0\0\0\0\0\0hello");
    assert!(matches!(store.stat(id).unwrap().unwrap().location, DataLocation::Inline(_)));
    // Past inline_max_bytes (2048): the inline bytes move to extents, the
    // gap between is a hole.
    store.write(id, 9000, &[7u8; 100], Durability::Durable).unwrap();
    let o = store.stat(id).unwrap().unwrap();
    assert_eq!((o.size, o.location.clone()), (9100, DataLocation::Extents));
    let mut want = vec![0u8; 9100];
    want[10..15].copy_from_slice(b"hello");
    want[9000..].fill(7);
    assert_eq!(read_all(&store, id), want);
    assert_clean(&store);
    // Reads at and past the end, and short at the end.
    let mut buf = [1u8; 50];
    assert_eq!(store.read(id, 9100, &mut buf).unwrap(), 0);
    assert_eq!(store.read(id, 9090, &mut buf).unwrap(), 10);
    // Shrink inside a block, then grow: the dropped bytes read as zeros.
    store.truncate(id, 9050, Durability::Durable).unwrap();
    store.truncate(id, 12000, Durability::Durable).unwrap();
    want.truncate(9050);
    want.resize(12000, 0);
    assert_eq!(read_all(&store, id), want);
    assert_clean(&store);
    // Back inline.
    store.truncate(id, 12, Durability::Durable).unwrap();
    let o = store.stat(id).unwrap().unwrap();
    assert_eq!(o.location, DataLocation::Inline(want[..12].to_vec()));
    assert_eq!(store.used_extents().unwrap(), Vec::new());
    store.close().unwrap();
    let store = Store::open(Arc::new(sim.clone()), Path::new(DIR), options()).unwrap();
    assert_eq!(read_all(&store, id), &want[..12]);
    assert_clean(&store);
}

#[test]
fn overwrites_shadow_and_deletes_free_everything() {
    let sim = SimStorage::new(2);
    let store = store(&sim);
    let id = common::create_named(&store, Kind::File, 0o600, 0, 0, Durability::Durable).unwrap();
    let big: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    store.write(id, 0, &big, Durability::Durable).unwrap();
    let before = store.used_extents().unwrap();
    store.write(id, 5000, &[9u8; 3000], Durability::Buffered).unwrap();
    store.sync().unwrap();
    let mut want = big.clone();
    want[5000..8000].fill(9);
    assert_eq!(read_all(&store, id), want);
    // Shadowing: the rewritten blocks went to space the object did not use.
    let after = store.used_extents().unwrap();
    let disjoint = |a: &larder_space::Extent, b: &larder_space::Extent| {
        a.container != b.container || a.end() <= b.offset || b.end() <= a.offset
    };
    assert!(after.iter().any(|a| before.iter().all(|b| disjoint(a, b))), "{before:?} -> {after:?}");
    assert_clean(&store);
    store.delete_object(id, Durability::Durable).unwrap();
    assert!(store.stat(id).unwrap().is_none());
    assert!(matches!(store.read(id, 0, &mut [0u8; 4]), Err(ObjectError::NoSuchObject { .. })));
    assert_eq!(store.used_extents().unwrap(), Vec::new());
    assert_clean(&store);
    let dir = common::create_named(&store, Kind::Directory, 0o755, 0, 0, Durability::Durable).unwrap();
    assert!(matches!(store.write(dir, 0, b"x", Durability::Durable), Err(ObjectError::NoData { .. })));
}

/// An orphan record goes with its object, whichever way it is deleted;
/// a named object (which can have none) is deleted without a tombstone
/// for one: of two objects of the same bytes, the anonymous one's delete
/// writes exactly the record's key more.
#[test]
fn deletes_drop_orphan_records_only_where_one_may_exist() {
    use larder_object::meta::orphan_key;
    let sim = SimStorage::new(2);
    let store = store(&sim);
    let written = || store.index().stats().user_bytes_written;
    let delete = |id: u64| {
        store.write(id, 0, &[7u8; 20_000], Durability::Buffered).unwrap();
        let before = written();
        store.delete_object(id, Durability::Durable).unwrap();
        assert!(store.stat(id).unwrap().is_none());
        assert_eq!(store.index().get(&orphan_key(id)).unwrap(), None);
        written() - before
    };
    let anonymous = store.create_object(Kind::File, 0o644, 1, 2, Durability::Durable).unwrap();
    assert!(store.index().get(&orphan_key(anonymous)).unwrap().is_some(), "an anonymous object is an orphan");
    let with_record = delete(anonymous);
    let named = common::create_named(&store, Kind::File, 0o644, 1, 2, Durability::Durable).unwrap();
    let without = delete(named);
    assert_eq!(with_record - without, orphan_key(anonymous).len() as u64);
    assert_eq!(store.used_extents().unwrap(), Vec::new());
    assert_clean(&store);
}

/// Reads `len` bytes at `offset`.
fn read_at(store: &Store, id: u64, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0xEEu8; len];
    let n = store.read(id, offset, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn reads_again_after_every_change_see_it_small_maps_and_large() {
    let sim = SimStorage::new(4);
    let store = store(&sim);
    // One extent-map entry per block written apart: 3 entries, then 40
    // (more than a cached map holds).
    for entries in [3u64, 40] {
        let id = common::create_named(&store, Kind::File, 0o600, 0, 0, Durability::Durable).unwrap();
        let mut want = vec![0u8; ((entries * 2 - 1) * 4096) as usize];
        for i in 0..entries {
            let at = (i * 2 * 4096) as usize;
            want[at..at + 4096].fill(i as u8 + 1);
            store.write(id, at as u64, &want[at..at + 4096], Durability::Buffered).unwrap();
        }
        // Each read twice (the second from whatever the first cached),
        // whole and in part, after each kind of change.
        let check = |want: &[u8], what: &str| {
            for _ in 0..2 {
                assert!(read_all(&store, id) == want, "{entries} entries, whole, {what}");
                assert_eq!(read_at(&store, id, 4000, 5000), want[4000..9000], "{entries} entries, part, {what}");
            }
        };
        check(&want, "as written");
        store.write(id, 4096, &[0xAB; 4096], Durability::Buffered).unwrap();
        want[4096..8192].fill(0xAB);
        check(&want, "after an overwrite");
        let cut = want.len() - 6000;
        store.truncate(id, cut as u64, Durability::Buffered).unwrap();
        want.truncate(cut);
        check(&want, "after a truncate");
        store.write(id, cut as u64 + 100, b"tail", Durability::Buffered).unwrap();
        want.resize(cut + 100, 0);
        want.extend_from_slice(b"tail");
        check(&want, "after growing");
        store.delete_object(id, Durability::Buffered).unwrap();
        assert!(matches!(store.read(id, 0, &mut [0u8; 4]), Err(ObjectError::NoSuchObject { .. })));
    }
    assert_clean(&store);
}

#[test]
fn a_flipped_bit_in_a_container_block_is_corruption_naming_the_file() {
    let sim = SimStorage::new(3);
    let store = store(&sim);
    let id = common::create_named(&store, Kind::File, 0o600, 0, 0, Durability::Durable).unwrap();
    store.write(id, 0, &[5u8; 3 * 4096], Durability::Durable).unwrap();
    let extents = store.used_extents().unwrap();
    assert_eq!(extents.len(), 1);
    let e = extents[0];
    let path = store.space().dir().join(larder_space::container_file_name(e.container));
    sim.corrupt(&path, e.offset + 4096 + 100, 0x10).unwrap();
    let mut buf = vec![0u8; 3 * 4096];
    match store.read(id, 0, &mut buf) {
        Err(ObjectError::Corrupt { path: p, offset, what }) => {
            assert_eq!(p, path);
            assert_eq!(offset, e.offset + 4096);
            assert!(what.contains(&format!("object {id}")), "{what}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    // The whole-block read went straight into `buf`: the damaged block's
    // bytes must not be left there.
    assert!(!buf.contains(&(5 ^ 0x10)), "damaged bytes left in the caller's buffer");
    // Blocks around it still read.
    assert_eq!(store.read(id, 0, &mut buf[..4096]).unwrap(), 4096);
    assert_eq!(store.read(id, 8192, &mut buf[..4096]).unwrap(), 4096);
    // A write whose read-modify-write needs the bad block refuses too.
    assert!(matches!(store.write(id, 4200, b"x", Durability::Durable), Err(ObjectError::Corrupt { .. })));
    assert_clean(&store);
}
