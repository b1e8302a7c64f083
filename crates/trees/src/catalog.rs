//! The catalog of trees: names to ids, kept in memory and in the index
//! (catalog records, the id high-water mark, a count record per tree).
//!
//! Catalog changes take the writer lock like a write transaction and are
//! always durable: a tree handed out exists after a crash. Ids are never
//! reused, so a handle on a deleted tree can never write into a tree made
//! later under the same name.

use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;

use larder_index::WriteBatch;
use larder_object::meta::{
    check_tree_name, decode_tree_key, decode_tree_record, encode_tree_record, prefix_end, tree_catalog_key,
    tree_count_key, tree_entry_prefix, tree_kind_prefix, tree_next_id_key, MetaKey, TreeRecord, TreeRecordKind,
};
use larder_object::{Durability, ObjectError, Store};

use crate::{Result, Shared};

/// The trees that exist.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    by_name: BTreeMap<String, u64>,
    ids: HashSet<u64>,
    /// The next id to hand out (ids start at 1).
    next_id: u64,
}

impl Catalog {
    /// Reads the catalog from the store's index.
    pub(crate) fn load(store: &Store) -> Result<Catalog> {
        let start = tree_kind_prefix(TreeRecord::Catalog);
        let end = prefix_end(&start).unwrap_or_default();
        let mut catalog = Catalog { next_id: 1, ..Catalog::default() };
        for kv in store.index().range(Bound::Included(&start), Bound::Excluded(&end), true)? {
            let (key, value) = kv?;
            let MetaKey::TreeCatalog { name } = decode_tree_key(&key)? else {
                return Err(ObjectError::BadRecord { record: "tree key", what: "not a catalog key".into() }.into());
            };
            let id = decode_tree_record(TreeRecordKind::Catalog, &value)?;
            catalog.ids.insert(id);
            catalog.by_name.insert(name, id);
        }
        if let Some(v) = store.index().get(&tree_next_id_key())? {
            catalog.next_id = decode_tree_record(TreeRecordKind::NextId, &v)?;
        }
        Ok(catalog)
    }

    /// The id of the tree named `name`.
    pub(crate) fn id(&self, name: &str) -> Option<u64> {
        self.by_name.get(name).copied()
    }

    /// Whether tree `id` exists.
    pub(crate) fn exists(&self, id: u64) -> bool {
        self.ids.contains(&id)
    }

    /// Every name, in byte order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.by_name.keys().cloned().collect()
    }
}

/// Creates the tree `name` unless it exists; its id.
pub(crate) fn create(shared: &Shared, name: &str) -> Result<u64> {
    check_tree_name(name.as_bytes())?;
    let _writer = shared.serial.writer.acquire()?;
    let next_id = {
        let c = shared.serial.catalog.read();
        if let Some(id) = c.id(name) {
            return Ok(id);
        }
        c.next_id
    };
    let id = next_id;
    let mut batch = WriteBatch::new();
    batch.put(tree_catalog_key(name), encode_tree_record(id));
    batch.put(tree_next_id_key(), encode_tree_record(id + 1));
    batch.put(tree_count_key(id), encode_tree_record(0));
    shared.store.commit(&batch, Durability::Durable)?;
    let mut c = shared.serial.catalog.write();
    c.by_name.insert(name.to_string(), id);
    c.ids.insert(id);
    c.next_id = id + 1;
    Ok(id)
}

/// Deletes the tree `name` and its entries; false if it did not exist.
pub(crate) fn delete(shared: &Shared, name: &str) -> Result<bool> {
    let _writer = shared.serial.writer.acquire()?;
    let Some(id) = shared.serial.catalog.read().id(name) else {
        return Ok(false);
    };
    let mut batch = WriteBatch::new();
    let prefix = tree_entry_prefix(id);
    batch.delete_range(prefix, prefix_end(&prefix).unwrap_or_default());
    batch.delete(tree_count_key(id));
    batch.delete(tree_catalog_key(name));
    shared.store.commit(&batch, Durability::Durable)?;
    let mut c = shared.serial.catalog.write();
    c.by_name.remove(name);
    c.ids.remove(&id);
    shared.serial.hints.forget(id);
    shared.serial.counts.forget([id]);
    Ok(true)
}
