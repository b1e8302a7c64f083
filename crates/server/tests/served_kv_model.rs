//! Property test: random KV operations through a running server and
//! `larder-client` (puts of values inline, in the data area and streamed;
//! deletes; batches; scans; reconnects) against a BTreeMap model, with the
//! rule that a key cannot also be a level of another key. The shape of
//! crates/kv/tests/kv_model.rs, over the wire.
#![allow(clippy::unwrap_used)]

mod serving;

use std::collections::BTreeMap;
use std::io::Write;

use larder_client::{Client, Durability, KvOperation, Payload};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serving::{serve, Served};

/// Keys chosen to collide: levels shared, keys that are levels of others,
/// names sorting around '/'.
const KEYS: [&str; 12] = ["a", "a/b", "a/c", "a-b", "a.b/c", "b/x/y", "b/x/z", "b/x", "c", "a/b/d", "b!", "b/y"];

#[derive(Clone, Debug)]
enum Op {
    Put(usize, usize, u8),
    Stream(usize, usize, u8),
    Delete(usize),
    Batch(Vec<(usize, Option<(usize, u8)>)>),
    Scan(usize),
    Reconnect,
}

fn value(len: usize, fill: u8) -> Vec<u8> {
    (0..len).map(|i| fill.wrapping_add(i as u8)).collect()
}

fn op() -> impl Strategy<Value = Op> {
    // Inline values, and (rarely) ones above the inline limit that go
    // through the data area.
    let len = prop_oneof![6 => 0usize..64, 3 => 1500usize..6000, 1 => 20_000usize..70_000];
    prop_oneof![
        6 => (0..KEYS.len(), len.clone(), any::<u8>()).prop_map(|(k, l, f)| Op::Put(k, l, f)),
        1 => (0..KEYS.len(), len, any::<u8>()).prop_map(|(k, l, f)| Op::Stream(k, l, f)),
        3 => (0..KEYS.len()).prop_map(Op::Delete),
        2 => prop::collection::vec((0..KEYS.len(), prop::option::of((0usize..3000, any::<u8>()))), 1..5)
            .prop_map(Op::Batch),
        2 => (0..4usize).prop_map(Op::Scan),
        1 => Just(Op::Reconnect),
    ]
}

type Model = BTreeMap<String, Vec<u8>>;

/// Whether `key` can be put: no key is a level of it, and it is a level of
/// no key.
fn conflicts(model: &Model, key: &str) -> bool {
    model.keys().any(|m| m.starts_with(&format!("{key}/")) || key.starts_with(&format!("{m}/")))
}

/// The errnos a key conflict has through the server.
fn is_conflict(errno: i32) -> bool {
    errno == libc::EEXIST || errno == libc::ENOTDIR
}

fn keys(c: &Client, bucket: &str, prefix: &str) -> Vec<String> {
    c.scan_prefix(bucket, prefix.as_bytes()).map(|e| String::from_utf8(e.unwrap().key).unwrap()).collect()
}

fn check_all(c: &Client, bucket: &str, model: &Model) {
    assert_eq!(keys(c, bucket, ""), model.keys().cloned().collect::<Vec<_>>());
    let mut buffer = c.alloc_buffer(80_000).unwrap();
    for k in KEYS {
        assert_eq!(c.get(bucket, k).unwrap().as_ref(), model.get(k), "key {k}");
        assert_eq!(c.head(bucket, k).unwrap().map(|h| h.size), model.get(k).map(|v| v.len() as u64), "head {k}");
        match (c.get_buffer(bucket, k, &mut buffer).unwrap(), model.get(k)) {
            (Some(n), Some(v)) => {
                assert!(n == v.len() as u64 && buffer.as_slice()[..v.len()] == v[..], "get_buffer {k}")
            }
            (None, None) => {}
            (got, want) => panic!("get_buffer {k}: {got:?}, model has {:?}", want.map(Vec::len)),
        }
    }
}

fn run(t: &Served, bucket: &str, ops: Vec<Op>) {
    let mut c = t.client();
    c.create_bucket(bucket).unwrap();
    let mut model = Model::new();
    for op in ops {
        match op {
            Op::Put(k, len, fill) | Op::Stream(k, len, fill) => {
                let (key, v) = (KEYS[k], value(len, fill));
                let stored = if matches!(op, Op::Stream(..)) {
                    c.writer(bucket, key, Durability::Buffered).and_then(|mut w| {
                        w.write_all(&v).unwrap();
                        w.finish()
                    })
                } else {
                    c.put(bucket, key, &v, Durability::Buffered)
                };
                match stored {
                    Ok(()) => {
                        assert!(!conflicts(&model, key), "put {key} should conflict");
                        model.insert(key.to_string(), v);
                    }
                    Err(e) if is_conflict(e.errno()) => assert!(conflicts(&model, key), "put {key} refused: {e}"),
                    Err(e) => panic!("put {key}: {e}"),
                }
            }
            Op::Delete(k) => {
                let existed = c.delete(bucket, KEYS[k], Durability::Buffered).unwrap();
                assert_eq!(existed, model.remove(KEYS[k]).is_some(), "delete {}", KEYS[k]);
            }
            Op::Batch(items) => {
                let mut operations = Vec::new();
                let mut next = model.clone();
                let mut ok = true;
                for (k, v) in &items {
                    let key = KEYS[*k].as_bytes().to_vec();
                    match v {
                        Some((len, fill)) => {
                            operations.push(KvOperation::Put { key, value: Payload::Inline(value(*len, *fill)) });
                            ok &= !conflicts(&next, KEYS[*k]);
                            next.insert(KEYS[*k].to_string(), value(*len, *fill));
                        }
                        None => {
                            operations.push(KvOperation::Delete { key });
                            next.remove(KEYS[*k]);
                        }
                    }
                }
                match c.write_batch(bucket, operations, Durability::Buffered) {
                    Ok(()) => {
                        assert!(ok, "batch {items:?} should conflict");
                        model = next;
                    }
                    Err(e) if is_conflict(e.errno()) => assert!(!ok, "batch {items:?} refused: {e}"),
                    Err(e) => panic!("batch: {e}"),
                }
            }
            Op::Scan(p) => {
                let prefix = ["", "a", "a/", "b/x"][p];
                let want: Vec<String> = model.keys().filter(|k| k.starts_with(prefix)).cloned().collect();
                assert_eq!(keys(&c, bucket, prefix), want, "scan of {prefix:?}");
            }
            Op::Reconnect => c = t.client(),
        }
    }
    check_all(&c, bucket, &model);
    for k in model.keys() {
        assert!(c.delete(bucket, k, Durability::Buffered).unwrap());
    }
    c.delete_bucket(bucket).unwrap();
}

#[test]
fn kv_through_the_server_matches_a_model() {
    // One server for every case (each in a bucket of its own): starting
    // a store per case would cost more than the cases.
    let mut t = serve();
    let mut runner = TestRunner::new(Config { cases: 64, ..Config::default() });
    let case = std::sync::atomic::AtomicU32::new(0);
    let outcome = runner.run(&prop::collection::vec(op(), 1..40), |ops| {
        let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        run(&t, &format!("b{n}"), ops);
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
    // Nothing leaks: every value of every case was deleted.
    t.wait_for_clients(0);
    assert_eq!(t.orphans(), 0);
    assert!(t.fs().store().used_extents().unwrap().is_empty());
    t.assert_fsck_clean();
}
