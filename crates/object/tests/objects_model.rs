//! Property test of the object data API against a model: several objects,
//! random writes (small and large, unaligned, past the end leaving holes,
//! overlapping), truncates, deletes and reopens, every object read back and
//! compared with a `Vec<u8>` per object after each step, and the space
//! manager checked against the extent map every few steps.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{creation, DIR};
use larder_io::{SimStorage, StorageRef};
use larder_object::meta::Kind;
use larder_object::{Durability, Store, StoreOptions};
use proptest::prelude::*;

const OBJECTS: usize = 3;

#[derive(Clone, Debug)]
enum Op {
    Write { obj: usize, offset: u64, len: usize, byte: u8, durable: bool },
    Truncate { obj: usize, size: u64 },
    Delete { obj: usize },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let obj = 0..OBJECTS;
    prop_oneof![
        // Small writes, mostly near the start (inline territory).
        6 => (obj.clone(), 0u64..3000, 1usize..600, any::<u8>(), any::<bool>())
            .prop_map(|(obj, offset, len, byte, durable)| Op::Write { obj, offset, len, byte, durable }),
        // Large and unaligned writes, possibly leaving holes.
        6 => (obj.clone(), 0u64..80_000, 1usize..20_000, any::<u8>(), any::<bool>())
            .prop_map(|(obj, offset, len, byte, durable)| Op::Write { obj, offset, len, byte, durable }),
        // Writes starting on a block (the path that writes the caller's
        // blocks without copying), ending anywhere, often inside the object.
        4 => (obj.clone(), 0u64..20, 1usize..20_000, any::<u8>(), any::<bool>())
            .prop_map(|(obj, block, len, byte, durable)| Op::Write { obj, offset: block * 4096, len, byte, durable }),
        3 => (obj.clone(), 0u64..90_000).prop_map(|(obj, size)| Op::Truncate { obj, size }),
        1 => obj.prop_map(|obj| Op::Delete { obj }),
        1 => Just(Op::Reopen),
    ]
}

fn options() -> StoreOptions {
    let mut o = common::deterministic();
    o.index.memtable_size_bytes = 32 << 10;
    o
}

fn durability(durable: bool) -> Durability {
    if durable {
        Durability::Durable
    } else {
        Durability::Buffered
    }
}

fn check(store: &Store, ids: &[u64], model: &[Vec<u8>]) {
    store.sync().unwrap();
    for (id, want) in ids.iter().zip(model) {
        let onode = store.stat(*id).unwrap().unwrap();
        assert_eq!(onode.size, want.len() as u64, "object {id} size");
        let mut buf = vec![0xAAu8; want.len() + 5000];
        let n = store.read(*id, 0, &mut buf).unwrap();
        assert_eq!(n, want.len());
        assert!(buf[..n] == want[..], "object {id} content differs");
        // An unaligned read from the middle.
        if want.len() > 10 {
            let start = want.len() / 3;
            let n = store.read(*id, start as u64, &mut buf[..5000]).unwrap();
            assert!(buf[..n] == want[start..start + n], "object {id} read from {start}");
        }
    }
}

fn run(ops: Vec<Op>) {
    let sim = SimStorage::new(7);
    let storage: StorageRef = Arc::new(sim.clone());
    let mut store = Store::create(storage.clone(), Path::new(DIR), creation(), options()).unwrap();
    let mut ids: Vec<u64> = (0..OBJECTS)
        .map(|_| common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap())
        .collect();
    let mut model = vec![Vec::new(); OBJECTS];
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Write { obj, offset, len, byte, durable } => {
                let data: Vec<u8> = (0..len).map(|i| byte.wrapping_add(i as u8)).collect();
                store.write(ids[obj], offset, &data, durability(durable)).unwrap();
                let m = &mut model[obj];
                let end = offset as usize + len;
                if m.len() < end {
                    m.resize(end, 0);
                }
                m[offset as usize..end].copy_from_slice(&data);
            }
            Op::Truncate { obj, size } => {
                store.truncate(ids[obj], size, Durability::Durable).unwrap();
                model[obj].resize(size as usize, 0);
            }
            Op::Delete { obj } => {
                store.delete_object(ids[obj], Durability::Buffered).unwrap();
                store.sync().unwrap();
                assert!(store.stat(ids[obj]).unwrap().is_none());
                ids[obj] = common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
                model[obj].clear();
            }
            Op::Reopen => {
                store.close().unwrap();
                store = Store::open(storage.clone(), Path::new(DIR), options()).unwrap();
            }
        }
        check(&store, &ids, &model);
        if step % 4 == 0 {
            let report = store.space().verify(store.used_extents().unwrap()).unwrap();
            assert!(report.is_clean(), "step {step}: {report:?}");
        }
    }
    store.close().unwrap();
    let store = Store::open(storage, Path::new(DIR), options()).unwrap();
    check(&store, &ids, &model);
    let report = store.space().verify(store.used_extents().unwrap()).unwrap();
    assert!(report.is_clean(), "at the end: {report:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn objects_match_the_model(ops in proptest::collection::vec(op(), 1..40)) {
        run(ops);
    }
}
