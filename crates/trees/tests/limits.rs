//! Limits and refusals: a key or value over its limit, a transaction too
//! large for one log record, a bad tree name, a handle on a deleted tree:
//! each a clear error that changes nothing. And fsck finds damage to the
//! trees' records: entries of a tree the catalog lacks, a count that does
//! not match, a catalog id the high-water mark would hand out again.
#![allow(clippy::unwrap_used)]

mod common;

use larder_index::WriteBatch;
use larder_io::SimStorage;
use larder_object::meta::{encode_tree_record, tree_catalog_key, tree_count_key, tree_entry_key, tree_next_id_key};
use larder_object::{Durability, ObjectError};
use larder_trees::{TreesError, MAX_KEY_BYTES, MAX_VALUE_BYTES};

#[test]
fn oversized_keys_values_and_transactions_are_refused_and_change_nothing() {
    let sim = SimStorage::new(9);
    let trees = common::create(&sim).unwrap();
    let t = trees.open_tree("t").unwrap();
    t.insert(b"kept", b"v").unwrap();
    let big_key = vec![1u8; MAX_KEY_BYTES + 1];
    let err = t.insert(&big_key, b"v").unwrap_err();
    assert!(
        matches!(err, TreesError::KeyTooLarge { len, limit } if len == MAX_KEY_BYTES + 1 && limit == MAX_KEY_BYTES)
    );
    assert!(err.to_string().contains("over the limit"), "{err}");
    assert!(matches!(t.get(&big_key), Err(TreesError::KeyTooLarge { .. })));
    let err = t.insert(b"k", &vec![0u8; MAX_VALUE_BYTES + 1]).unwrap_err();
    assert!(matches!(err, TreesError::ValueTooLarge { .. }), "{err}");

    // The largest key is accepted (Garage needs more than LMDB's 511 bytes).
    let max_key = vec![2u8; MAX_KEY_BYTES];
    t.insert(&max_key, b"max").unwrap();
    assert_eq!(t.get(&max_key).unwrap(), Some(b"max".to_vec()));
    t.remove(&max_key).unwrap();

    // A refused insert inside a transaction leaves its earlier writes; the
    // transaction as a whole commits or not as its caller decides.
    let out = trees.transaction(Durability::Durable, |tx| {
        tx.insert(&t, b"first", b"1")?;
        tx.insert(&t, &big_key, b"2")?;
        Ok::<_, TreesError>(())
    });
    assert!(matches!(out, Err(larder_trees::TransactionError::Aborted(TreesError::KeyTooLarge { .. }))));
    assert_eq!(t.get(b"first").unwrap(), None);

    // The test store's log segments are 256 KiB: a transaction of 400 KiB
    // cannot be one record, and the insert that would pass the limit is
    // refused.
    let mut tx = trees.write(Durability::Durable).unwrap();
    let mut refused = None;
    for i in 0..100u32 {
        if let Err(e) = tx.insert(&t, &i.to_be_bytes(), &vec![3u8; 4000]) {
            refused = Some((i, e));
            break;
        }
    }
    let (at, err) = refused.expect("400 KiB fit one 256 KiB log segment");
    assert!(matches!(err, TreesError::TransactionTooLarge { .. }), "{err}");
    assert!((50..70).contains(&at), "refused at insert {at}");
    // What the transaction holds still fits: it commits; then remove it.
    tx.commit().unwrap();
    assert_eq!(t.approximate_len().unwrap(), 1 + u64::from(at));
    let mut tx = trees.write(Durability::Durable).unwrap();
    for i in 0..at {
        tx.remove(&t, &i.to_be_bytes()).unwrap();
    }
    tx.commit().unwrap();
    assert_eq!(common::state(&t).into_iter().collect::<Vec<_>>(), vec![(b"kept".to_vec(), b"v".to_vec())]);
    assert_eq!(t.approximate_len().unwrap(), 1);

    // Names.
    for bad in ["", &"n".repeat(256)] {
        let err = trees.open_tree(bad).unwrap_err();
        assert!(matches!(err, TreesError::Store(ObjectError::InvalidName { .. })), "{err}");
    }
    assert_eq!(trees.list_trees().unwrap(), vec!["t".to_string()]);
    // A handle on a deleted tree writes nothing, even once the name is
    // taken again.
    assert!(trees.delete_tree("t").unwrap());
    assert!(!trees.delete_tree("t").unwrap());
    let again = trees.open_tree("t").unwrap();
    assert!(matches!(t.insert(b"x", b"y"), Err(TreesError::NoSuchTree { .. })));
    assert!(common::state(&again).is_empty());
    common::assert_fsck_clean(&trees);
}

#[test]
fn fsck_finds_damaged_tree_records() {
    let sim = SimStorage::new(10);
    let trees = common::create(&sim).unwrap();
    let t = trees.open_tree("t").unwrap();
    t.insert(b"a", b"1").unwrap();
    common::assert_fsck_clean(&trees);
    let store = trees.store();
    let problems = |b: &WriteBatch| {
        store.commit(b, Durability::Durable).unwrap();
        let report = larder_fsck::check(store, &mut |_| {}).unwrap();
        report.problems.iter().map(|p| p.to_string()).collect::<Vec<_>>()
    };
    // An entry of tree 99, which the catalog lacks.
    let mut b = WriteBatch::new();
    b.put(tree_entry_key(99, b"stray"), b"v");
    let found = problems(&b);
    assert!(found.iter().any(|p| p.contains("tree 99 has entries")), "{found:?}");
    let mut b = WriteBatch::new();
    b.delete(tree_entry_key(99, b"stray"));
    assert!(problems(&b).is_empty());

    // An entry written behind the count's back.
    let mut b = WriteBatch::new();
    b.put(tree_entry_key(t.id(), b"b"), b"2");
    let found = problems(&b);
    assert!(found.iter().any(|p| p.contains("records 1 entries but has 2")), "{found:?}");
    let mut b = WriteBatch::new();
    b.put(tree_count_key(t.id()), encode_tree_record(2));
    assert!(problems(&b).is_empty());

    // A catalog id at the high-water mark, and a damaged count record.
    let mut b = WriteBatch::new();
    b.put(tree_catalog_key("late"), encode_tree_record(5));
    b.put(tree_next_id_key(), encode_tree_record(5));
    let mut damaged = encode_tree_record(2);
    damaged[3] ^= 1;
    b.put(tree_count_key(t.id()), damaged);
    let found = problems(&b);
    assert!(found.iter().any(|p| p.contains("not below the tree id high-water mark 5")), "{found:?}");
    assert!(found.iter().any(|p| p.contains("checksum mismatch")), "{found:?}");
}

#[test]
fn a_second_write_on_the_thread_holding_one_is_refused_not_deadlocked() {
    let sim = SimStorage::new(11);
    let trees = common::create(&sim).unwrap();
    let t = trees.open_tree("t").unwrap();
    let mut tx = trees.write(Durability::Durable).unwrap();
    tx.insert(&t, b"in-tx", b"1").unwrap();
    assert!(matches!(t.insert(b"k", b"v"), Err(TreesError::NestedWrite)));
    assert!(matches!(trees.write(Durability::Buffered), Err(TreesError::NestedWrite)));
    assert!(matches!(trees.open_tree("new"), Err(TreesError::NestedWrite)));
    assert!(matches!(trees.delete_tree("t"), Err(TreesError::NestedWrite)));
    // An existing tree's handle needs no lock.
    assert_eq!(trees.open_tree("t").unwrap().id(), t.id());
    // Another thread waits for the transaction instead of failing.
    std::thread::scope(|s| {
        let other = s.spawn(|| t.insert(b"other", b"2"));
        tx.commit().unwrap();
        other.join().unwrap().unwrap();
    });
    t.insert(b"k", b"v").unwrap();
    assert_eq!(t.approximate_len().unwrap(), 3);
    common::assert_fsck_clean(&trees);
}

#[test]
fn trees_opened_twice_on_one_store_share_the_writer_and_the_catalog() {
    let sim = SimStorage::new(12);
    let first = common::create(&sim).unwrap();
    let second = larder_trees::Trees::open(first.store().clone()).unwrap();
    // A tree made through one is there for the other.
    let made = first.open_tree("shared").unwrap();
    assert_eq!(second.tree("shared").unwrap().map(|t| t.id()), Some(made.id()));
    // One writer lock: while this thread's transaction on the first runs,
    // a write through the second is this thread's second write.
    let mut tx = first.write(Durability::Durable).unwrap();
    tx.insert(&made, b"k", b"1").unwrap();
    assert!(matches!(second.write(Durability::Durable), Err(TreesError::NestedWrite)));
    tx.commit().unwrap();
    let through_second = second.tree("shared").unwrap().unwrap();
    through_second.insert(b"k2", b"2").unwrap();
    assert_eq!(made.approximate_len().unwrap(), 2);
    common::assert_fsck_clean(&second);
}
