//! Reads and writes of heap objects' bytes (`DataLocation::OwnFile`)
//! through the object layer, so the file system and the KV API reach them.
//!
//! A heap object's bytes are the whole of its file `heap/<id>`, which
//! programs map: so writes here go in place (the one exception to
//! shadowing), or a mapping would not see them. A write past the end grows
//! the file before the transaction naming the new size commits (recovery
//! cuts a file longer than its committed size back, docs/heap.md), and the
//! file's data is a sync dependency of the record, so a durable commit
//! returns with the written bytes on disk. A write in place is not atomic:
//! after a crash a part of it may be there. Heap objects never shrink, so
//! a truncate below the size is refused.

use larder_io::{read_exact_at, write_all_at, IoError};
use larder_log::Dependency;

use super::touch_data;
use crate::error::{ObjectError, Result};
use crate::meta::{heap_image_prefix, DataLocation, Onode, HEAP_OBJECT_RECYCLED, MAX_OBJECT_BYTES};
use crate::store::Store;
use crate::txn::Transaction;

/// Copies `out.len()` bytes of heap object `object` (its file `file`, its
/// size `size`) from `offset` into `out`; the caller keeps the range
/// inside the size. A file shorter than the range (shrunk outside Larder)
/// is [`ObjectError::Corrupt`], never zeros made up.
pub(crate) fn read_heap_into(
    store: &Store,
    object: u64,
    file: u64,
    size: u64,
    offset: u64,
    out: &mut [u8],
) -> Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    let handle = store.open_heap_file(file, false)?;
    match read_exact_at(&*handle, out, offset) {
        Ok(()) => Ok(()),
        // No stat of the file first: a short read says it is short.
        Err(IoError::UnexpectedEof { path, offset: at }) => Err(ObjectError::Corrupt {
            path,
            offset: at,
            what: format!(
                "heap object {object}'s file ends at {at}, before its size {size} (shrunk outside Larder); run fsck"
            ),
        }),
        Err(e) => Err(e.into()),
    }
}

/// Whether `onode` is a heap object's, and its file id.
pub(crate) fn heap_file(onode: &Onode) -> Option<u64> {
    match onode.location {
        DataLocation::OwnFile { file } => Some(file),
        _ => None,
    }
}

/// The write of `data` at `offset` (ending at `end`) of heap object
/// `object`, whose onode is `onode`, in place in its file (see the module
/// doc).
pub(crate) fn write_heap(
    txn: &mut Transaction<'_>,
    object: u64,
    mut onode: Onode,
    file: u64,
    offset: u64,
    data: &[u8],
    end: u64,
) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let handle = txn.store().open_heap_file(file, true)?;
    write_all_at(&*handle, data, offset)?;
    txn.add_dependency(Dependency::Sync(handle));
    settle_recycled(txn, object)?;
    drop_images(txn, object)?;
    onode.size = onode.size.max(end);
    touch_data(&mut onode);
    txn.put_onode(object, &onode)
}

/// Clears `HEAP_OBJECT_RECYCLED` on heap object `object` in a transaction
/// whose file sync makes the object's bytes durable: recovery must not
/// empty bytes this write made durable.
fn settle_recycled(txn: &mut Transaction<'_>, object: u64) -> Result<()> {
    if let Some(mut record) = txn.heap_object(object)?.filter(|r| r.is_recycled()) {
        record.flags &= !HEAP_OBJECT_RECYCLED;
        txn.put_heap_object(object, &record)?;
    }
    Ok(())
}

/// Deletes heap object `object`'s page images in a transaction whose file
/// sync makes the object's bytes durable: recovery must not write an image
/// a heap's one-flush sync took earlier over the bytes this write made
/// durable (the sync keeps bytes of every page as they are now). Images
/// may be all that makes a new object's file again (a whole object's first
/// sync: docs/heap.md): where a file's sync does not keep its name, the
/// name is made durable first.
fn drop_images(txn: &mut Transaction<'_>, object: u64) -> Result<()> {
    let store = txn.store();
    if store.has_heap_images(object)? && !store.heap_file_sync_keeps_entry()? {
        store.sync_heap_dir()?;
    }
    txn.delete_prefix(&heap_image_prefix(object))
}

/// Sets heap object `object`'s size to `size`: growing extends its file
/// with zeros; shrinking is refused ([`ObjectError::HeapShrink`]).
pub(crate) fn truncate_heap(
    txn: &mut Transaction<'_>,
    object: u64,
    mut onode: Onode,
    file: u64,
    size: u64,
) -> Result<()> {
    if size < onode.size {
        return Err(ObjectError::HeapShrink { object, size: onode.size, asked: size });
    }
    if size > onode.size {
        let handle = txn.store().open_heap_file(file, true)?;
        if handle.len()? < size {
            handle.set_len(size)?;
        }
        txn.add_dependency(Dependency::Sync(handle));
        settle_recycled(txn, object)?;
    }
    onode.size = size;
    touch_data(&mut onode);
    txn.put_onode(object, &onode)
}

/// Sets space aside for `[start, end)` of heap object `object` (inside its
/// size): the file's blocks there are allocated, so writes in place there
/// cannot fail for want of space. Returns the bytes of the range.
pub(crate) fn preallocate_heap(txn: &mut Transaction<'_>, file: u64, size: u64, start: u64, end: u64) -> Result<u64> {
    let end = end.min(size).min(MAX_OBJECT_BYTES);
    if start >= end {
        return Ok(0);
    }
    let handle = txn.store().open_heap_file(file, true)?;
    handle.allocate(start, end - start)?;
    txn.add_dependency(Dependency::Sync(handle));
    Ok(end - start)
}
