//! Truncate and delete: the changes that drop bytes. Both allocate at most
//! one block (a truncate cutting inside a block rewrites that block, so its
//! tail reads as zeros), and free what they drop at the commit's LSN.

use super::fmap::{overlapping, punch, read_range, spill_inline, write_blocks};
use super::{align_down, align_up, data_onode, to_usize, touch_data};
use crate::error::{ObjectError, Result};
use crate::meta::{
    fmap_prefix, orphan_key, prefix_end, xattr_prefix, DataLocation, Onode, BLOCK_BYTES, MAX_OBJECT_BYTES,
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

fn truncate_in(txn: &mut Transaction<'_>, object: u64, size: u64) -> Result<()> {
    let mut onode = data_onode(txn, object)?;
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
        // Growing: bytes past the old size are already zeros.
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
    write_blocks(txn, object, b, &block, size - b)
}

fn delete_in(txn: &mut Transaction<'_>, object: u64) -> Result<()> {
    if txn.onode(object)?.is_none() {
        return Err(ObjectError::NoSuchObject { object });
    }
    let limits = txn.limits();
    let prefix = fmap_prefix(object);
    let end = prefix_end(&prefix).unwrap_or_default();
    for (k, v) in txn.scan(&prefix, &end, true, usize::MAX)? {
        let m = super::fmap::Mapped::decode(&k, &v, &limits)?;
        txn.delete(&k);
        txn.free_after_commit(m.entry.extent);
    }
    let prefix = xattr_prefix(object);
    let end = prefix_end(&prefix).unwrap_or_default();
    for (k, _) in txn.scan(&prefix, &end, true, usize::MAX)? {
        txn.delete(&k);
    }
    txn.delete(&orphan_key(object));
    txn.delete_onode(object)
}
