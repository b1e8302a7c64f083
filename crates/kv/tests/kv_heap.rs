//! Heaps through the KV API (docs/heap.md, "What a heap is"): a heap
//! object reads under any of its keys; a put or delete inside a heap is
//! refused with `KvError::InHeap` and changes nothing.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "../../object/tests/heap_fixture/mod.rs"]
mod heap_fixture;

use larder_io::SimStorage;
use larder_kv::{Durability, KvBatch, KvError};

#[test]
fn heap_objects_read_under_their_keys_and_refuse_changes() {
    let sim = SimStorage::new(21);
    let kv = common::create(&sim);
    let heap = heap_fixture::create_heap(kv.store(), larder_object::ROOT_ID, "heap");
    let id = heap_fixture::add_object(kv.store(), &heap, b"heap bytes", &["name"]);
    kv.create_bucket("plain").unwrap();
    kv.put("plain", "k", b"v", Durability::Durable).unwrap();

    assert_eq!(kv.get("heap", "names/name").unwrap().unwrap(), b"heap bytes");
    assert_eq!(kv.get("heap", format!("objects/{id}")).unwrap().unwrap(), b"heap bytes");
    assert_eq!(kv.head("heap", "names/name").unwrap().unwrap().size, 10);
    let before = common::bucket_state(&kv, "heap");
    assert_eq!(before.len(), 2);

    refused(kv.put("heap", "names/name", b"over", Durability::Durable));
    refused(kv.put("heap", "names/new", b"x", Durability::Durable));
    refused(kv.put("heap", "new", b"x", Durability::Durable));
    refused(kv.put("heap", "objects/sub/x", b"x", Durability::Durable));
    refused(kv.delete("heap", "names/name", Durability::Durable).map(drop));
    refused(kv.delete("heap", format!("objects/{id}"), Durability::Durable).map(drop));
    let mut batch = KvBatch::new();
    batch.put("k2", b"fine".to_vec());
    batch.delete("names/name");
    refused(kv.write_batch("heap", &batch, Durability::Durable));
    refused(kv.create_many("heap", &[(b"names/bulk", b"x")], Durability::Durable).map(drop));
    refused(kv.writer("heap", "names/streamed", Durability::Durable).map(drop));

    assert_eq!(common::bucket_state(&kv, "heap"), before, "nothing changed");
    assert_eq!(kv.get("plain", "k").unwrap().unwrap(), b"v", "other buckets unaffected");
    kv.put("plain", "k2", b"w", Durability::Durable).unwrap();
    let report = larder_fsck::check(kv.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[track_caller]
fn refused(r: larder_kv::Result<()>) {
    let err = r.unwrap_err();
    assert!(matches!(err, KvError::InHeap { .. }), "{err}");
    assert!(err.to_string().contains("inside a heap"), "{err}");
}

/// A bucket a put has found not to be a heap's is not checked again, but
/// the levels under it still are: a heap made inside it later refuses
/// puts, and a heap bucket put to right after a plain one still refuses.
#[test]
fn a_heap_inside_a_bucket_already_put_to_refuses_puts() {
    let sim = SimStorage::new(22);
    let kv = common::create(&sim);
    kv.create_bucket("plain").unwrap();
    kv.put("plain", "k", b"v", Durability::Durable).unwrap();
    let plain = child(&kv, larder_object::ROOT_ID, "plain");
    heap_fixture::create_heap(kv.store(), plain, "h");
    refused(kv.put("plain", "h/names/x", b"x", Durability::Durable));
    refused(kv.put("plain", "h/new", b"x", Durability::Durable));
    kv.put("plain", "k2", b"w", Durability::Durable).unwrap();
    heap_fixture::create_heap(kv.store(), larder_object::ROOT_ID, "heap");
    refused(kv.put("heap", "new", b"x", Durability::Durable));
    kv.put("plain", "k3", b"w", Durability::Durable).unwrap();
    refused(kv.put("heap", "new", b"x", Durability::Durable));
    let report = larder_fsck::check(kv.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

/// A level a put has found not to be a heap's is not checked again, but
/// a heap made later under it, or in its place once it is removed, is a
/// directory of its own and refuses puts.
#[test]
fn a_heap_under_or_in_place_of_a_level_already_put_to_refuses_puts() {
    let sim = SimStorage::new(23);
    let kv = common::create(&sim);
    kv.create_bucket("plain").unwrap();
    let plain = child(&kv, larder_object::ROOT_ID, "plain");
    let level = |name: &str| child(&kv, plain, name);
    kv.put("plain", "lvl/k", b"v", Durability::Durable).unwrap();
    kv.put("plain", "lvl/k2", b"v", Durability::Durable).unwrap();
    let lvl = level("lvl");
    heap_fixture::create_heap(kv.store(), lvl, "h");
    refused(kv.put("plain", "lvl/h/x", b"x", Durability::Durable));
    kv.put("plain", "lvl/k3", b"v", Durability::Durable).unwrap();

    // The level emptied and removed, a heap made under its name.
    kv.put("plain", "gone/k", b"v", Durability::Durable).unwrap();
    kv.put("plain", "gone/k2", b"v", Durability::Durable).unwrap();
    let gone = level("gone");
    assert!(kv.delete("plain", "gone/k", Durability::Durable).unwrap());
    assert!(kv.delete("plain", "gone/k2", Durability::Durable).unwrap());
    heap_fixture::create_heap(kv.store(), plain, "gone");
    assert_ne!(level("gone"), gone);
    refused(kv.put("plain", "gone/new", b"x", Durability::Durable));
    let report = larder_fsck::check(kv.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

/// The id of the directory entry `name` in directory `dir`.
fn child(kv: &larder_kv::Kv, dir: u64, name: &str) -> u64 {
    larder_namespace::list::lookup(kv.store(), dir, &larder_object::meta::Name::new(name).unwrap())
        .unwrap()
        .unwrap()
        .child
}
