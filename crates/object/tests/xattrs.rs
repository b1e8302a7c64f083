//! Extended attributes: set, get, list, remove, kept across reopen, gone
//! with their object, refused for a missing object or a bad name.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{creation, deterministic, storage, DIR};
use larder_io::SimStorage;
use larder_object::meta::{Kind, XattrName};
use larder_object::{Durability, ObjectError, Store};

#[test]
fn xattrs_round_trip_and_go_with_their_object() {
    let sim = SimStorage::new(1);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), deterministic()).unwrap();
    let id = common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
    let (a, b) = (XattrName::new("user.a").unwrap(), XattrName::new("user.b").unwrap());
    store.set_xattr(id, &b, b"two", Durability::Durable).unwrap();
    store.set_xattr(id, &a, b"one", Durability::Buffered).unwrap();
    assert_eq!(store.get_xattr(id, &a).unwrap().as_deref(), Some(&b"one"[..]));
    assert_eq!(store.list_xattrs(id).unwrap(), vec![a.clone(), b.clone()]);
    assert!(store.remove_xattr(id, &a, Durability::Durable).unwrap());
    assert!(!store.remove_xattr(id, &a, Durability::Durable).unwrap());
    store.close().unwrap();
    let store = Store::open(storage(&sim), Path::new(DIR), deterministic()).unwrap();
    assert_eq!(store.list_xattrs(id).unwrap(), vec![b.clone()]);
    assert_eq!(store.get_xattr(id, &b).unwrap().as_deref(), Some(&b"two"[..]));
    store.delete_object(id, Durability::Durable).unwrap();
    assert!(store.list_xattrs(id).unwrap().is_empty());
    assert!(matches!(store.set_xattr(id, &b, b"x", Durability::Durable), Err(ObjectError::NoSuchObject { .. })));
    assert!(XattrName::new("").is_err());
    let big = vec![0u8; (64 << 10) + 1];
    let id = common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
    assert!(store.set_xattr(id, &b, &big, Durability::Durable).is_err());
    assert!(store.list_xattrs(id).unwrap().is_empty(), "a refused value changes nothing");
}

/// A store that has never held an attribute deletes objects without
/// looking for any; the first attribute set (committed, or only pending in
/// the deleting transaction itself) is still found and removed with its
/// object, and so is one found in the index at the next open.
#[test]
fn attributes_are_deleted_with_their_object_from_the_first_one_on() {
    let sim = SimStorage::new(3);
    let store = Store::create(storage(&sim), Path::new(DIR), creation(), deterministic()).unwrap();
    let name = XattrName::new("user.first").unwrap();
    let plain = common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
    store.delete_object(plain, Durability::Durable).unwrap();
    assert!(store.stat(plain).unwrap().is_none());

    // Set and deleted in one transaction, before any attribute entered
    // the index.
    let id = common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
    store
        .transact(&[id], Durability::Durable, |txn| {
            txn.set_xattr(id, &name, b"pending")?;
            txn.delete_object(id)
        })
        .unwrap();
    assert!(store.list_xattrs(id).unwrap().is_empty(), "the pending attribute went with its object");
    assert_eq!(store.get_xattr(id, &name).unwrap(), None);

    // Committed first, deleted by a later transaction.
    let id = common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
    store.set_xattr(id, &name, b"committed", Durability::Durable).unwrap();
    store.delete_object(id, Durability::Durable).unwrap();
    assert!(store.list_xattrs(id).unwrap().is_empty());

    // Found in the index at open.
    let kept = common::create_named(&store, Kind::File, 0o644, 0, 0, Durability::Durable).unwrap();
    store.set_xattr(kept, &name, b"kept", Durability::Durable).unwrap();
    store.close().unwrap();
    let store = Store::open(storage(&sim), Path::new(DIR), deterministic()).unwrap();
    store.delete_object(kept, Durability::Durable).unwrap();
    assert!(store.list_xattrs(kept).unwrap().is_empty());
    assert_eq!(store.get_xattr(kept, &name).unwrap(), None);
}
