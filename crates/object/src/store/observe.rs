//! Telling an observer what committed batches changed, so a cache outside
//! the store (the kernel's, behind a FUSE mount) can drop stale copies
//! when another interface (the KV API in the same process) changes an
//! object.

use std::cell::Cell;
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

thread_local! {
    /// Set on threads whose commits the observer is not told of.
    static UNOBSERVED: Cell<bool> = const { Cell::new(false) };
}

/// From now on, commits made on this thread are not told to the change
/// observer: for the threads of a cache that learns of their changes from
/// the changes themselves (a FUSE mount's request threads, whose replies
/// update the kernel's copies), so that their commits gather no list of
/// changes that nobody reads.
pub fn unobserved_thread() {
    UNOBSERVED.with(|u| u.set(true));
}

/// Whether commits made on this thread are told to the observer.
pub(crate) fn observed_thread() -> bool {
    !UNOBSERVED.with(|u| u.get())
}

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
