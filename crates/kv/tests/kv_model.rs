//! Property test: random KV operations (puts of small and large values,
//! deletes, batches, scans, reopens) against a BTreeMap model, including
//! the rule that a key cannot also be a directory level of another key.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use larder_io::SimStorage;
use larder_kv::{Durability, Kv, KvBatch, KvError};
use proptest::prelude::*;

/// Keys chosen to collide: levels shared, keys that are levels of others,
/// names sorting around '/'.
const KEYS: [&str; 12] = ["a", "a/b", "a/c", "a-b", "a.b/c", "b/x/y", "b/x/z", "b/x", "c", "a/b/d", "b!", "b/y"];

#[derive(Clone, Debug)]
enum Op {
    Put(usize, usize, u8),
    Delete(usize),
    Batch(Vec<(usize, Option<(usize, u8)>)>),
    Scan(usize),
    Reopen,
}

fn value(len: usize, fill: u8) -> Vec<u8> {
    (0..len).map(|i| fill.wrapping_add(i as u8)).collect()
}

fn op() -> impl Strategy<Value = Op> {
    // Values up to 6 KiB: inline ones and ones in container extents.
    let len = prop_oneof![0usize..64, 1500usize..6000];
    prop_oneof![
        6 => (0..KEYS.len(), len.clone(), any::<u8>()).prop_map(|(k, l, f)| Op::Put(k, l, f)),
        3 => (0..KEYS.len()).prop_map(Op::Delete),
        2 => prop::collection::vec((0..KEYS.len(), prop::option::of((0usize..3000, any::<u8>()))), 1..5)
            .prop_map(Op::Batch),
        2 => (0..4usize).prop_map(Op::Scan),
        1 => Just(Op::Reopen),
    ]
}

type Model = BTreeMap<String, Vec<u8>>;

/// Whether `key` can be put: no key is a level of it, and it is a level of
/// no key.
fn conflicts(model: &Model, key: &str) -> bool {
    model.keys().any(|m| m.starts_with(&format!("{key}/")) || key.starts_with(&format!("{m}/")))
}

fn check_all(kv: &Kv, model: &Model) {
    let got: Vec<String> =
        kv.scan_prefix("b", b"").unwrap().map(|e| String::from_utf8(e.unwrap().key).unwrap()).collect();
    let want: Vec<String> = model.keys().cloned().collect();
    assert_eq!(got, want);
    // One buffer for every `get_into`, holding the last value read (or a
    // marker a miss must leave alone).
    let mut out = b"left alone".to_vec();
    for k in KEYS {
        assert_eq!(kv.get("b", k).unwrap().as_ref(), model.get(k), "key {k}");
        let before = out.clone();
        let found = kv.get_into("b", k, &mut out).unwrap();
        match model.get(k) {
            Some(v) => assert!(found && &out == v, "get_into of key {k}"),
            None => assert!(!found && out == before, "get_into of missing key {k} changed the buffer"),
        }
    }
}

fn run(ops: Vec<Op>) {
    let sim = SimStorage::new(11);
    let mut kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    let mut model = Model::new();
    for op in ops {
        match op {
            Op::Put(k, len, fill) => {
                let (key, v) = (KEYS[k], value(len, fill));
                match kv.put("b", key, &v, Durability::Durable) {
                    Ok(()) => {
                        assert!(!conflicts(&model, key), "put {key} should conflict");
                        model.insert(key.to_string(), v);
                    }
                    Err(KvError::KeyConflict { .. }) => assert!(conflicts(&model, key), "put {key} refused"),
                    Err(e) => panic!("put {key}: {e}"),
                }
            }
            Op::Delete(k) => {
                let existed = kv.delete("b", KEYS[k], Durability::Durable).unwrap();
                assert_eq!(existed, model.remove(KEYS[k]).is_some(), "delete {}", KEYS[k]);
            }
            Op::Batch(items) => {
                let mut batch = KvBatch::new();
                let mut next = model.clone();
                let mut ok = true;
                for (k, v) in &items {
                    match v {
                        Some((len, fill)) => {
                            batch.put(KEYS[*k], value(*len, *fill));
                            ok &= !conflicts(&next, KEYS[*k]);
                            next.insert(KEYS[*k].to_string(), value(*len, *fill));
                        }
                        None => {
                            batch.delete(KEYS[*k]);
                            next.remove(KEYS[*k]);
                        }
                    }
                }
                match kv.write_batch("b", &batch, Durability::Buffered) {
                    Ok(()) => {
                        assert!(ok, "batch {items:?} should conflict");
                        model = next;
                    }
                    Err(KvError::KeyConflict { .. }) => assert!(!ok, "batch {items:?} refused"),
                    Err(e) => panic!("batch: {e}"),
                }
            }
            Op::Scan(p) => {
                let prefix = ["", "a", "a/", "b/x"][p];
                let got: Vec<String> = kv
                    .scan_prefix("b", prefix.as_bytes())
                    .unwrap()
                    .map(|e| String::from_utf8(e.unwrap().key).unwrap())
                    .collect();
                let want: Vec<String> = model.keys().filter(|k| k.starts_with(prefix)).cloned().collect();
                assert_eq!(got, want, "scan of {prefix:?}");
            }
            Op::Reopen => {
                kv.close().unwrap();
                kv = common::open(&sim);
            }
        }
    }
    check_all(&kv, &model);
    // Nothing leaks: after deleting everything, no extent is referenced
    // and only the bucket remains.
    for k in model.keys() {
        kv.delete("b", k, Durability::Durable).unwrap();
    }
    assert!(kv.store().used_extents().unwrap().is_empty());
    kv.delete_bucket("b").unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    #[test]
    fn kv_matches_a_model(ops in prop::collection::vec(op(), 1..40)) {
        run(ops);
    }
}
