//! The maps a commit carries forward agree with the index: after every
//! step of random writes, fallocates, truncates, reads and deletes, any map
//! the cache holds for an object's current generation equals a scan of its
//! fmap entries, reads match a model, and deletes leave no entry behind
//! and no space unaccounted for.

#![allow(clippy::unwrap_used)]

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use larder_io::{SimStorage, StorageRef};
use proptest::prelude::*;

use super::CachedMap;
use crate::meta::{fmap_prefix, prefix_end, ExtentMapEntry, Kind};
use crate::objects::fmap::Mapped;
use crate::{CreationOptions, Durability, Store, StoreOptions};

const OBJECTS: usize = 3;

#[derive(Clone, Debug)]
enum Op {
    Write { obj: usize, offset: u64, len: usize, byte: u8 },
    Preallocate { obj: usize, start: u64, len: u64 },
    Truncate { obj: usize, size: u64 },
    Read { obj: usize },
    Delete { obj: usize },
}

fn op() -> impl Strategy<Value = Op> {
    let obj = 0..OBJECTS;
    prop_oneof![
        // Appends and rewrites from a block, the file server's writes.
        5 => (obj.clone(), 0u64..40, 1usize..40_000, any::<u8>())
            .prop_map(|(obj, block, len, byte)| Op::Write { obj, offset: block * 4096, len, byte }),
        // Unaligned writes, small (inline) and large, holes past the end.
        4 => (obj.clone(), 0u64..120_000, 1usize..20_000, any::<u8>())
            .prop_map(|(obj, offset, len, byte)| Op::Write { obj, offset, len, byte }),
        1 => (obj.clone(), 0u64..100_000, 1u64..60_000).prop_map(|(obj, start, len)| Op::Preallocate { obj, start, len }),
        2 => (obj.clone(), 0u64..120_000).prop_map(|(obj, size)| Op::Truncate { obj, size }),
        3 => obj.clone().prop_map(|obj| Op::Read { obj }),
        2 => obj.prop_map(|obj| Op::Delete { obj }),
    ]
}

fn store() -> Store {
    let storage: StorageRef = Arc::new(SimStorage::new(11));
    let creation = CreationOptions { container_bytes: 1 << 20, log_segment_bytes: 64 << 10, ..Default::default() };
    let mut options = StoreOptions { background_checkpoints: false, ..StoreOptions::default() };
    options.index.background_threads = false;
    options.log.buffered_sync_interval = None;
    Store::create(storage, Path::new("/store"), creation, options).unwrap()
}

fn create(store: &Store) -> u64 {
    store.transact(&[], Durability::Buffered, |txn| txn.create_object(Kind::File, 0o644, 0, 0)).unwrap().0
}

/// The object's fmap entries as the index has them: (offset, entry).
fn scanned(store: &Store, object: u64) -> Vec<(u64, ExtentMapEntry)> {
    let prefix = fmap_prefix(object);
    let end = prefix_end(&prefix).unwrap();
    let limits = store.limits();
    store
        .index()
        .range(Bound::Included(&prefix[..]), Bound::Excluded(&end[..]), true)
        .unwrap()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            let m = Mapped::decode(&k, &v, &limits).unwrap();
            (m.offset, m.entry)
        })
        .collect()
}

/// Checks every object against the model and the index; returns how many
/// objects had a whole map cached for their current generation.
fn check(store: &Store, ids: &[u64], model: &[Vec<u8>]) -> usize {
    let mut cached = 0;
    for (&id, want) in ids.iter().zip(model) {
        let onode = store.stat(id).unwrap().unwrap();
        assert_eq!(onode.size, want.len() as u64, "object {id} size");
        if let Some(CachedMap::Whole(entries)) = store.extent_cache().get(id, onode.generation) {
            let entries: Vec<(u64, ExtentMapEntry)> = entries.iter().map(|m| (m.offset, m.entry.clone())).collect();
            assert_eq!(entries, scanned(store, id), "object {id}: the cached map differs from the index");
            cached += 1;
        }
    }
    cached
}

fn read_all(store: &Store, id: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0xEE; len + 100];
    let n = store.read(id, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// Runs `ops`; returns how many checks found a cached map.
fn run(ops: &[Op]) -> usize {
    let store = store();
    let mut ids: Vec<u64> = (0..OBJECTS).map(|_| create(&store)).collect();
    let mut model = vec![Vec::new(); OBJECTS];
    let mut cached = 0;
    for op in ops {
        match *op {
            Op::Write { obj, offset, len, byte } => {
                let data: Vec<u8> = (0..len).map(|i| byte.wrapping_add(i as u8)).collect();
                store.write(ids[obj], offset, &data, Durability::Buffered).unwrap();
                let m = &mut model[obj];
                let end = offset as usize + len;
                if m.len() < end {
                    m.resize(end, 0);
                }
                m[offset as usize..end].copy_from_slice(&data);
            }
            Op::Preallocate { obj, start, len } => {
                let id = ids[obj];
                store.transact(&[id], Durability::Buffered, |txn| txn.preallocate(id, start, start + len)).unwrap();
            }
            Op::Truncate { obj, size } => {
                store.truncate(ids[obj], size, Durability::Buffered).unwrap();
                model[obj].resize(size as usize, 0);
            }
            Op::Read { obj } => {
                let got = read_all(&store, ids[obj], model[obj].len());
                assert!(got == model[obj], "object {}: read differs from the model", ids[obj]);
            }
            Op::Delete { obj } => {
                let id = ids[obj];
                store.delete_object(id, Durability::Buffered).unwrap();
                assert!(store.stat(id).unwrap().is_none());
                assert!(scanned(&store, id).is_empty(), "object {id}: fmap entries left after its delete");
                ids[obj] = create(&store);
                model[obj].clear();
            }
        }
        cached += check(&store, &ids, &model);
    }
    for (obj, &id) in ids.iter().enumerate() {
        assert!(read_all(&store, id, model[obj].len()) == model[obj], "object {id} at the end");
    }
    store.sync().unwrap();
    let report = store.space().verify(store.used_extents().unwrap()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    cached
}

/// A new file written whole, appended to, read and deleted: its map is
/// cached from its first write on (the read costs no index get), and the
/// delete, taking the map from the cache, leaves no entry and no space.
#[test]
fn a_new_files_map_is_known_from_its_first_write() {
    let store = store();
    let id = create(&store);
    let whole: Vec<u8> = (0..128 << 10).map(|i| (i % 251) as u8).collect();
    store.write(id, 0, &whole, Durability::Buffered).unwrap();
    store.write(id, whole.len() as u64, &[7u8; 16 << 10], Durability::Buffered).unwrap();
    let onode = store.stat(id).unwrap().unwrap();
    let Some(CachedMap::Whole(entries)) = store.extent_cache().get(id, onode.generation) else {
        panic!("no map cached for the written file");
    };
    assert_eq!(entries.len(), 2, "one entry per write");
    let gets = store.index().stats().gets;
    let got = read_all(&store, id, 144 << 10);
    assert_eq!(store.index().stats().gets, gets, "the read went to the index");
    assert!(got[..whole.len()] == whole[..] && got[whole.len()..].iter().all(|&b| b == 7));
    store.delete_object(id, Durability::Buffered).unwrap();
    assert!(scanned(&store, id).is_empty());
    store.sync().unwrap();
    let report = store.space().verify(store.used_extents().unwrap()).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

/// A fixed sequence through truncates (shrinking inside a block, back to
/// inline), fallocate and rewrites reaches cached maps, so the property
/// below checks them.
#[test]
fn carried_maps_are_checked() {
    let ops = [
        Op::Write { obj: 0, offset: 0, len: 40_000, byte: 1 },
        Op::Write { obj: 0, offset: 40_960, len: 8_000, byte: 2 },
        Op::Truncate { obj: 0, size: 30_001 },
        Op::Write { obj: 0, offset: 8_192, len: 4_096, byte: 3 },
        Op::Preallocate { obj: 0, start: 0, len: 60_000 },
        Op::Truncate { obj: 0, size: 60_000 },
        Op::Preallocate { obj: 0, start: 30_000, len: 30_000 },
        Op::Write { obj: 0, offset: 32_768, len: 9_000, byte: 4 },
        Op::Truncate { obj: 0, size: 100 },
        Op::Write { obj: 0, offset: 0, len: 20_000, byte: 5 },
        Op::Delete { obj: 0 },
    ];
    let cached = run(&ops);
    assert!(cached >= 8, "{cached}: too few steps had a cached map to check");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn cached_maps_match_the_index(ops in proptest::collection::vec(op(), 1..40)) {
        run(&ops);
    }
}

/// The end built in place is [`prefix_end`]'s, for prefixes ending in
/// 0xFF bytes or not, and none for a prefix of only 0xFF bytes.
#[test]
fn an_array_prefix_end_is_prefix_end() {
    for object in [0, 1, 0xFF, 0x1FF, 0xFFFF, u64::MAX >> 8, u64::MAX - 1, u64::MAX] {
        let prefix = fmap_prefix(object);
        let ours = super::array_prefix_end(prefix).map(|(end, n)| end[..n].to_vec());
        assert_eq!(ours, prefix_end(&prefix), "object {object:#x}");
    }
    assert_eq!(super::array_prefix_end([0xFFu8; 3]), None);
    assert_eq!(prefix_end(&[0xFF; 3]), None);
}
