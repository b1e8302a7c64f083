//! `Trees::snapshot`: a consistent copy of every tree as a new store.
//!
//! The copy is read from one index snapshot, so it holds exactly the
//! transactions committed before the call, none half. It is written into
//! a new store beside `path` (a `.partial` directory), closed (everything
//! durable and flushed), then renamed to `path` and the parent directory
//! synced: `path` holds the whole copy or does not exist.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use larder_index::WriteBatch;
use larder_io::Storage;
use larder_object::meta::{map_prefix, prefix_end, Map};
use larder_object::{CreationOptions, Durability, Store, StoreOptions};

use crate::{Result, Trees, TreesError};

/// Bytes a commit of the copy carries at most: well within any log
/// segment (64 KiB and up).
const COPY_BATCH_BYTES: u64 = 24 << 10;

/// Writes the copy (see the module doc).
pub(crate) fn write(trees: &Trees, path: &Path) -> Result<()> {
    let storage = larder_io::RealStorage::new();
    if storage.exists(path)? {
        return Err(TreesError::SnapshotExists { path: path.to_path_buf() });
    }
    let partial = partial_path(path);
    if storage.exists(&partial)? {
        // Left by a snapshot a crash interrupted: never a store in use.
        std::fs::remove_dir_all(&partial).map_err(|e| larder_io::IoError::os("remove", &partial, e))?;
    }
    let source = trees.store();
    let creation: CreationOptions = source.superblock().options;
    let copy = Store::create(Arc::new(larder_io::RealStorage::new()), &partial, creation, StoreOptions::default())?;
    let snapshot = source.index().snapshot();
    let start = map_prefix(Map::Trees);
    let end = prefix_end(&start).unwrap_or_default();
    let mut batch = WriteBatch::new();
    for kv in snapshot.range(Bound::Included(&start), Bound::Excluded(&end), true)? {
        let (k, v) = kv?;
        batch.put(k, v);
        if batch.payload_bytes() >= COPY_BATCH_BYTES {
            copy.commit(&std::mem::take(&mut batch), Durability::Buffered)?;
        }
    }
    if !batch.is_empty() {
        copy.commit(&batch, Durability::Buffered)?;
    }
    copy.close()?;
    std::fs::rename(&partial, path).map_err(|e| larder_io::IoError::os("rename", path, e))?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        storage.sync_dir(parent)?;
    }
    Ok(())
}

fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".partial");
    path.with_file_name(name)
}
