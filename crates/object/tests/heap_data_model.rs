//! Heap objects' bytes through the object layer against a model (a
//! `Vec<u8>`): random writes (in place, growing), truncates (growing ones
//! apply; shrinking ones are refused and change nothing), reads, and
//! reopens of the store, with the file `heap/<id>` always the model's
//! bytes.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{creation, storage, DIR};
use larder_io::{read_exact_at, SimStorage};
use larder_object::meta::HeapObject;
use larder_object::{Durability, ObjectError, Store};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Write { offset: u64, len: usize, byte: u8, durable: bool },
    Truncate { size: u64 },
    Read { offset: u64, len: usize },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..20_000, 1usize..6000, any::<u8>(), any::<bool>())
            .prop_map(|(offset, len, byte, durable)| Op::Write { offset, len, byte, durable }),
        2 => (0u64..30_000).prop_map(|size| Op::Truncate { size }),
        3 => (0u64..30_000, 0usize..9000).prop_map(|(offset, len)| Op::Read { offset, len }),
        1 => Just(Op::Reopen),
    ]
}

fn open(sim: &SimStorage) -> Store {
    Store::open(storage(sim), Path::new(DIR), common::deterministic()).unwrap()
}

fn run(ops: Vec<Op>) {
    let sim = SimStorage::new(31);
    let mut store = Store::create(storage(&sim), Path::new(DIR), creation(), common::deterministic()).unwrap();
    let id = store.allocate_object_id().unwrap();
    let record = HeapObject { heap: 1, type_id: 0, durable_size: 0, flags: 0 };
    store.transact(&[id], Durability::Durable, |txn| txn.create_heap_object(id, 100, (0o644, 0, 0), &record)).unwrap();
    let mut model = vec![0u8; 100];
    for op in ops {
        match op {
            Op::Write { offset, len, byte, durable } => {
                let data = vec![byte; len];
                let d = if durable { Durability::Durable } else { Durability::Buffered };
                store.write(id, offset, &data, d).unwrap();
                let end = offset as usize + len;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[offset as usize..end].copy_from_slice(&data);
            }
            Op::Truncate { size } => {
                let r = store.truncate(id, size, Durability::Buffered);
                if (size as usize) < model.len() {
                    assert!(matches!(r, Err(ObjectError::HeapShrink { .. })), "{r:?}");
                } else {
                    r.unwrap();
                    model.resize(size as usize, 0);
                }
            }
            Op::Read { offset, len } => {
                let mut buf = vec![0xEEu8; len];
                let n = store.read(id, offset, &mut buf).unwrap();
                let from = (offset as usize).min(model.len());
                let want = &model[from..(from + len).min(model.len())];
                assert_eq!(&buf[..n], want);
            }
            Op::Reopen => {
                store.close().unwrap();
                store = open(&sim);
            }
        }
        assert_eq!(store.stat(id).unwrap().unwrap().size, model.len() as u64);
    }
    assert_eq!(store.read_to_end(id).unwrap().unwrap(), model);
    let file = store.open_heap_file(id, false).unwrap();
    let mut on_disk = vec![0u8; model.len()];
    read_exact_at(&*file, &mut on_disk, 0).unwrap();
    assert_eq!(file.len().unwrap(), model.len() as u64, "the file is the object's bytes, no more");
    assert_eq!(on_disk, model);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn heap_object_bytes_match_the_model(ops in proptest::collection::vec(op(), 1..30)) {
        run(ops);
    }
}
