//! A committed transaction stays committed: a failure in the work that
//! follows its commit (returning the space it stopped referencing) poisons
//! the store instead of turning the commit into an error a caller would
//! retry.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use larder_index::WriteBatch;
use larder_io::SimStorage;
use larder_space::Extent;

use super::{Durability, Store, StoreOptions, ROOT_ID};
use crate::error::ObjectError;
use crate::superblock::CreationOptions;

fn deterministic() -> StoreOptions {
    let mut o = StoreOptions { background_checkpoints: false, ..StoreOptions::default() };
    o.index.background_threads = false;
    o.log.buffered_sync_interval = None;
    o
}

#[test]
fn a_failed_free_after_the_commit_returns_the_commit_and_poisons() {
    let sim = SimStorage::new(1);
    let creation = CreationOptions { container_bytes: 1 << 20, log_segment_bytes: 64 << 10, ..Default::default() };
    let store = Store::create(Arc::new(sim.clone()), Path::new("/store"), creation, deterministic()).unwrap();
    // Space in a container that does not exist: the space manager refuses
    // to free it, after the record is durable.
    let bogus = Extent { container: 7, offset: 0, len: 4096 };
    let (_, lsn) = store
        .transact(&[ROOT_ID], Durability::Durable, |txn| {
            txn.free_after_commit(bogus);
            txn.put(b"committed", b"yes");
            Ok(())
        })
        .expect("the transaction committed, so it returns its LSN");
    assert!(store.durable_lsn() >= lsn);
    let cause = store.health().poisoned.expect("the failed free poisons the store");
    assert!(cause.contains(&format!("after commit {lsn}")) && cause.contains("container 0000000000000007"), "{cause}");
    match store.commit(&WriteBatch::new(), Durability::Durable) {
        Err(ObjectError::Poisoned { cause: c }) => assert_eq!(c, cause),
        other => panic!("expected the first cause, got {other:?}"),
    }
    // The commit is there after a crash.
    let image = sim.crash();
    drop(store);
    let store = Store::open(Arc::new(image), Path::new("/store"), deterministic()).unwrap();
    assert_eq!(store.index().get(b"committed").unwrap().as_deref(), Some(&b"yes"[..]));
}
