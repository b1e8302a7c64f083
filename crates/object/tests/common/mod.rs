//! Setup shared by the object tests: a small store on the simulated
//! storage, with options each test adjusts.
#![allow(dead_code, clippy::unwrap_used)]

pub mod numbered;

use std::sync::Arc;

use larder_io::{SimStorage, StorageRef};
use larder_object::{CreationOptions, Store, StoreOptions};

/// Where the tests put their store.
pub const DIR: &str = "/store";

/// Small containers and log segments, so tests reach reuse quickly.
pub fn creation() -> CreationOptions {
    CreationOptions { container_bytes: 1 << 20, log_segment_bytes: 64 << 10, ..CreationOptions::default() }
}

/// No background threads anywhere: every write happens in the calling
/// thread, so crash points are exact and runs repeat.
pub fn deterministic() -> StoreOptions {
    let mut o = StoreOptions { background_checkpoints: false, ..StoreOptions::default() };
    o.index.background_threads = false;
    o.log.buffered_sync_interval = None;
    o
}

/// The simulated storage as a store's storage.
pub fn storage(sim: &SimStorage) -> StorageRef {
    Arc::new(sim.clone())
}

/// Creates an object as the namespace's `create` does, named `o<id>` in
/// the root directory, so it lives across reopens
/// (`Store::create_object` makes an anonymous orphan, which the next open
/// frees).
pub fn create_named(
    store: &larder_object::Store,
    kind: larder_object::meta::Kind,
    mode: u32,
    uid: u32,
    gid: u32,
    durability: larder_object::Durability,
) -> larder_object::Result<u64> {
    use larder_object::meta::{Dentry, DirDelta, Kind, Name};
    use larder_object::ROOT_ID;
    let created = store.transact(&[ROOT_ID], durability, |txn| {
        let id = txn.create_object_as(kind, mode, uid, gid, |o| {
            o.nlink = 1;
            if let Some(info) = o.dir.as_mut() {
                info.parent = ROOT_ID;
            }
        })?;
        txn.put_dentry(ROOT_ID, &Name::new(format!("o{id}"))?, &Dentry { child: id, kind })?;
        txn.change_dir(ROOT_ID, DirDelta { entries: 1, links: i64::from(kind == Kind::Directory) })?;
        Ok(id)
    })?;
    Ok(created.0)
}

/// Asserts the space manager's free space agrees with the extent map.
pub fn assert_consistent(store: &Store, what: &str) {
    let used = store.used_extents().unwrap();
    let report = store.space().verify(used).unwrap();
    assert!(report.is_clean(), "{what}: {report:?}");
}
