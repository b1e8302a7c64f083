//! Truncate and delete: the changes that drop bytes. Both allocate at most
//! one block (a truncate cutting inside a block rewrites that block, so its
//! tail reads as zeros), and free what they drop at the commit's LSN.

use super::extent_cache::CachedMap;
use super::fmap::{overlapping, punch, read_range, spill_inline, write_blocks};
use super::heap_data::{heap_file, truncate_heap};
use super::{align_down, align_up, data_onode, to_usize, touch_data};
use crate::error::{ObjectError, Result};
use std::ops::Bound;

use crate::meta::{
    decode_orphan_key, fmap_key, fmap_prefix, heap_image_prefix, heap_name_prefix, heap_object_key, heap_span_prefix,
    map_prefix, orphan_key, prefix_end, xattr_prefix, DataLocation, Map, Onode, BLOCK_BYTES, MAX_OBJECT_BYTES,
};
use crate::store::{Durability, Store};
use crate::txn::Transaction;

impl Store {
    /// Sets the size of `object`: bytes past `size` are dropped, and a
    /// grown object reads as zeros past its old size. An object whose new
    /// size fits `inline_max_bytes` keeps its bytes inline again.
    pub fn truncate(&self, object: u64, size: u64, durability: Durability) -> Result<()> {
        if size > MAX_OBJECT_BYTES {
            return Err(ObjectError::TooLarge { object, end: size, max: MAX_OBJECT_BYTES });
        }
        self.transact(&[object], durability, |txn| truncate_in(txn, object, size))?;
        Ok(())
    }

    /// Deletes `object`: its onode, fmap entries, extended attributes and
    /// any orphan record, in one transaction; its space is freed at the
    /// commit's LSN.
    pub fn delete_object(&self, object: u64, durability: Durability) -> Result<()> {
        self.transact(&[object], durability, |txn| delete_in(txn, object))?;
        Ok(())
    }
}

pub(crate) fn truncate_in(txn: &mut Transaction<'_>, object: u64, size: u64) -> Result<()> {
    let mut onode = data_onode(txn, object)?;
    if let Some(file) = heap_file(&onode) {
        return truncate_heap(txn, object, onode, file, size);
    }
    let old = onode.size;
    let inline_max = u64::from(txn.limits().inline_max_bytes);
    match &mut onode.location {
        DataLocation::Inline(bytes) if size <= inline_max => bytes.resize(to_usize(size), 0),
        DataLocation::Inline(bytes) => {
            let bytes = std::mem::take(bytes);
            spill_inline(txn, object, &bytes)?;
            onode.location = DataLocation::Extents;
        }
        DataLocation::Extents if size <= inline_max => {
            let bytes = read_range(txn, object, &onode, 0, size.min(old))?;
            let mut bytes = bytes;
            bytes.resize(to_usize(size), 0);
            punch(txn, object, 0, align_up(old))?;
            onode.location = DataLocation::Inline(bytes);
        }
        DataLocation::Extents if size < old => shrink(txn, object, &onode, size)?,
        // Growing: bytes past the old size are already zeros (a heap
        // object took its own path above).
        DataLocation::Extents | DataLocation::OwnFile { .. } => {}
    }
    onode.size = size;
    touch_data(&mut onode);
    txn.put_onode(object, &onode)
}

/// Drops an extent-mapped object's bytes from `size` on.
fn shrink(txn: &mut Transaction<'_>, object: u64, onode: &Onode, size: u64) -> Result<()> {
    let b = align_down(size);
    let end = align_up(onode.size);
    if b == size || overlapping(txn, object, b, size)?.is_empty() {
        // Nothing maps the block holding the new end (or the end is on a
        // block boundary): dropping whole blocks is enough.
        return punch(txn, object, b, end);
    }
    // The block holding the new end is rewritten with zeros after it, so
    // a later growth reads zeros there (and its crc keeps saying so).
    let mut block = read_range(txn, object, onode, b, BLOCK_BYTES)?;
    if let Some(tail) = block.get_mut(to_usize(size - b)..) {
        tail.fill(0);
    }
    punch(txn, object, b, end)?;
    write_blocks(txn, object, b, (&block, &[]), size - b)
}

pub(crate) fn delete_in(txn: &mut Transaction<'_>, object: u64) -> Result<()> {
    let Some(onode) = txn.onode(object)? else {
        return Err(ObjectError::NoSuchObject { object });
    };
    if !drop_cached_fmap_entries(txn, object, &onode) {
        drop_fmap_entries(txn, object, usize::MAX)?;
    }
    delete_rest(txn, object, is_heap(&onode), may_be_orphan(&onode))
}

/// Whether an object whose onode (as the deleting transaction sees it) is
/// `onode` may have an orphan record: records exist only while an object
/// has no name (they are written with its last link's removal or its
/// anonymous birth, and removed when it is linked or freed), so a named
/// object's delete (an unlink of its last name deletes the object in the
/// same transaction, its onode not rewritten) writes no tombstone for one.
fn may_be_orphan(onode: &Onode) -> bool {
    onode.nlink == 0
}

/// Drops the object's fmap entries as the extent cache has them for its
/// onode's generation, without scanning the index; false (nothing done)
/// when the cache does not hold its whole map or the transaction already
/// changed the map. `onode` is the transaction's view of the object,
/// which it holds exclusively: a generation the cache knows is a
/// committed one (maps are cached only once committed, and generations
/// only grow), and with no fmap write of its own the transaction sees
/// exactly that generation's map.
fn drop_cached_fmap_entries(txn: &mut Transaction<'_>, object: u64, onode: &Onode) -> bool {
    if !matches!(onode.location, DataLocation::Extents) {
        return false;
    }
    let prefix = fmap_prefix(object);
    let Some(end) = prefix_end(&prefix) else { return false };
    if txn.pending_in(&prefix, &end).next().is_some() {
        return false;
    }
    let Some(CachedMap::Whole(entries)) = txn.store().extent_cache().get(object, onode.generation) else {
        return false;
    };
    for m in entries.iter() {
        txn.delete(&fmap_key(object, m.offset));
        txn.free_after_commit(m.entry.extent);
    }
    true
}

/// Whether the object is a heap object (with heap records to drop).
fn is_heap(onode: &Onode) -> bool {
    matches!(onode.location, DataLocation::OwnFile { .. })
}

/// Drops up to `limit` of the object's fmap entries, their space freed at
/// the commit; true when none is left.
fn drop_fmap_entries(txn: &mut Transaction<'_>, object: u64, limit: usize) -> Result<bool> {
    let limits = txn.limits();
    let prefix = fmap_prefix(object);
    let end = prefix_end(&prefix).unwrap_or_default();
    let entries = txn.scan(&prefix, &end, true, limit.saturating_add(1))?;
    for (k, v) in entries.iter().take(limit) {
        let m = super::fmap::Mapped::decode(k, v, &limits)?;
        txn.delete(k);
        txn.free_after_commit(m.entry.extent);
    }
    Ok(entries.len() <= limit)
}

/// Deletes what is left of an object whose fmap is gone: its extended
/// attributes, heap records (a heap object's table entry, names, arena
/// spans and page images; its file, then without a record, is removed at the next open),
/// orphan record and onode.
fn delete_rest(txn: &mut Transaction<'_>, object: u64, heap: bool, orphan: bool) -> Result<()> {
    let mut prefixes = Vec::new();
    let xattrs = xattr_prefix(object);
    if may_have_xattrs(txn, &xattrs) {
        prefixes.push(xattrs.to_vec());
    }
    if heap {
        prefixes.extend([heap_name_prefix(object), heap_span_prefix(object), heap_image_prefix(object)]);
        txn.delete(&heap_object_key(object));
    }
    for prefix in prefixes {
        txn.delete_prefix(&prefix)?;
    }
    if orphan {
        txn.delete(&orphan_key(object));
    }
    txn.delete_onode(object)
}

/// Whether the object whose xattr keys start with `prefix` may have an
/// extended attribute: one this transaction set, or any in a store where
/// one may exist (while none does, the scan for them is skipped).
fn may_have_xattrs(txn: &Transaction<'_>, prefix: &[u8]) -> bool {
    if txn.store().xattrs_may_exist() {
        return true;
    }
    prefix_end(prefix).is_none_or(|end| txn.pending_in(prefix, &end).next().is_some())
}

/// Fmap entries one step of freeing an orphan removes: a bounded record,
/// so freeing a huge object never holds up other commits for long.
pub const FREE_STEP_ENTRIES: usize = 256;

impl Store {
    /// Frees `object`, an orphan (it has an orphan record and no name), in
    /// steps of at most 256 extents per transaction, so a
    /// huge object does not make one huge record that other commits wait
    /// behind. The orphan record stays until the last step, so a crash
    /// between steps leaves an orphan that the next open finishes freeing.
    /// The last step commits with `durability`, the others buffered.
    pub fn free_orphan(&self, object: u64, durability: Durability) -> Result<()> {
        loop {
            let (done, _) = self.transact(&[object], Durability::Buffered, |txn| free_step(txn, object))?;
            if done {
                break;
            }
        }
        if durability == Durability::Durable {
            self.sync()?;
        }
        Ok(())
    }

    /// Frees every orphan: after a crash (or at open) no handle is open,
    /// so no orphan is still in use. Returns how many were freed.
    pub fn reclaim_orphans(&self) -> Result<usize> {
        let start = map_prefix(Map::Orphans);
        let end = prefix_end(&start).unwrap_or_default();
        let mut ids = Vec::new();
        for kv in self.index().range(Bound::Included(&start[..]), Bound::Excluded(&end[..]), true)? {
            let (k, _) = kv?;
            ids.push(decode_orphan_key(&k)?);
        }
        for &id in &ids {
            self.free_orphan(id, Durability::Buffered)?;
        }
        if !ids.is_empty() {
            self.sync()?;
        }
        Ok(ids.len())
    }
}

/// One step of [`Store::free_orphan`]: true once the object is gone.
fn free_step(txn: &mut Transaction<'_>, object: u64) -> Result<bool> {
    let Some(onode) = txn.onode(object)? else {
        // Already gone (a step raced nothing; orphan record left by a
        // damaged store): drop the record.
        txn.delete(&orphan_key(object));
        return Ok(true);
    };
    if onode.nlink != 0 || txn.get(&orphan_key(object))?.is_none() {
        return Err(ObjectError::NotAnOrphan { object, nlink: onode.nlink });
    }
    if !drop_fmap_entries(txn, object, FREE_STEP_ENTRIES)? {
        // The map changed: so does the generation (the extent cache's tag).
        let mut onode = onode;
        onode.generation = onode.generation.wrapping_add(1);
        txn.put_onode(object, &onode)?;
        return Ok(false);
    }
    delete_rest(txn, object, is_heap(&onode), true)?;
    Ok(true)
}
