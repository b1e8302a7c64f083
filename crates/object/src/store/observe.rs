//! Telling an observer what committed batches changed, so a cache outside
//! the store (the kernel's, behind a FUSE mount) can drop stale copies
//! when another interface (the KV API in the same process) changes an
//! object.

use std::collections::BTreeSet;
use std::sync::Arc;

use larder_index::{BatchOp, WriteBatch};

use crate::meta::MetaKey;

/// One thing a committed batch changed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MetaChange {
    /// An object's attributes, data or extended attributes.
    Object(u64),
    /// The entry `name` of directory `dir` (created, replaced or removed).
    Entry {
        /// The directory.
        dir: u64,
        /// The name.
        name: Vec<u8>,
    },
}

/// Called after each commit that changed objects or entries, on the
/// committing thread, with the changes in order; it must not block on the
/// store.
pub type ChangeObserver = Arc<dyn Fn(&[MetaChange]) + Send + Sync>;

/// The changes `batch` makes, each once.
pub(crate) fn changes(batch: &WriteBatch) -> Vec<MetaChange> {
    let mut out = BTreeSet::new();
    for op in batch.iter() {
        let key = match op {
            BatchOp::Put { key, .. } | BatchOp::Delete { key } | BatchOp::Merge { key, .. } => key,
            BatchOp::DeleteRange { .. } => continue,
        };
        match MetaKey::decode(key) {
            Ok(MetaKey::Onode { object } | MetaKey::Extent { object, .. } | MetaKey::Xattr { object, .. }) => {
                out.insert(MetaChange::Object(object));
            }
            Ok(MetaKey::Dentry { parent, name }) => {
                out.insert(MetaChange::Entry { dir: parent, name: name.into_bytes() });
            }
            _ => {}
        }
    }
    out.into_iter().collect()
}
