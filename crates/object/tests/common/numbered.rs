//! Numbered durable transactions and a crash at every point of a workload
//! that commits them: transaction `t` puts key `t` and records itself as
//! the last, so a reopened store shows which were kept and whether any is
//! torn.

use std::path::Path;

use larder_index::WriteBatch;
use larder_io::SimStorage;
use larder_object::{Durability, Store, StoreOptions};

use super::{storage, DIR};

/// Transaction `t`'s own key.
pub fn key(t: u64) -> Vec<u8> {
    format!("t{t:04}").into_bytes()
}

/// Commits transaction `t` durably.
pub fn commit(store: &Store, t: u64) -> larder_object::Result<()> {
    let mut b = WriteBatch::new();
    b.put(key(t), t.to_le_bytes().repeat(30));
    b.put(b"last", t.to_le_bytes());
    store.commit(&b, Durability::Durable).map(|_| ())
}

/// Reopens a crashed image: every transaction up to the last is there
/// whole (at least `acked` of them), none after it; the store goes on, and
/// its clean close opens clean.
pub fn check(image: &SimStorage, options: &StoreOptions, acked: u64, what: &str) {
    let store = match Store::open(storage(image), Path::new(DIR), options.clone()) {
        Ok(s) => s,
        Err(larder_object::ObjectError::NotAStore { .. }) if acked == 0 => return,
        Err(e) => panic!("{what}: reopen failed: {e}"),
    };
    let last = store.index().get(b"last").unwrap().map_or(0, |v| u64::from_le_bytes(v[..8].try_into().unwrap()));
    assert!(last >= acked, "{what}: last transaction {last}, {acked} acknowledged");
    for t in 1..=last {
        assert_eq!(store.index().get(&key(t)).unwrap(), Some(t.to_le_bytes().repeat(30)), "{what}: transaction {t}");
    }
    assert_eq!(store.index().get(&key(last + 1)).unwrap(), None, "{what}: a transaction after `last` is there");
    commit(&store, last + 1).unwrap();
    store.close().unwrap();
    let again = Store::open(storage(image), Path::new(DIR), options.clone()).unwrap();
    assert!(again.log_recovery().clean, "{what}: a clean close did not open clean");
    assert!(again.index().get(&key(last + 1)).unwrap().is_some(), "{what}");
}

/// A crash at every point armed by `arm` of `workload` (which returns the
/// highest transaction acknowledged), each image checked.
pub fn crash_at_every_point(
    kind: &str,
    count: u64,
    options: &StoreOptions,
    workload: impl Fn(&SimStorage) -> u64,
    arm: impl Fn(&SimStorage, u64),
) {
    larder_io::sim::crash_at_every_point(kind, count, arm, workload, |image, acked, what| {
        check(image, options, acked, what)
    });
}
