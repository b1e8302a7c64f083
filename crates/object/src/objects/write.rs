//! Writes: small objects rewrite their inline bytes (the data travels in
//! the log record, one sync); larger ones take the large path, writing the
//! block-aligned range the write covers to fresh space (shadowing) and
//! flipping the fmap in the record, whose commit syncs the data with it.
//! Blocks set aside by `fallocate` (unwritten entries) are filled in place
//! instead (`prealloc`).

use super::fmap::{block_parts, overlapping, punch_entries, read_range, spill_inline, write_blocks};
use super::heap_data::{heap_file, write_heap};
use super::prealloc::fill_unwritten;
use super::{align_down, align_up, data_onode, to_usize, touch_data};
use crate::error::Result;
use crate::meta::{DataLocation, BLOCK_BYTES};
use crate::store::{Durability, Store};
use crate::txn::Transaction;

impl Store {
    /// Writes `data` at `offset` of `object`, growing it if the write ends
    /// past its size (a gap becomes a hole, reading as zeros). Atomic: after
    /// a crash either all of it or none of it is there, and with
    /// [`Durability::Durable`] all of it once this returns.
    pub fn write(&self, object: u64, offset: u64, data: &[u8], durability: Durability) -> Result<()> {
        self.transact(&[object], durability, |txn| txn.write(object, offset, data))?;
        Ok(())
    }
}

/// The write inside its transaction (see [`Store::write`]).
pub(crate) fn write_in(txn: &mut Transaction<'_>, object: u64, offset: u64, data: &[u8], end: u64) -> Result<()> {
    let mut onode = data_onode(txn, object)?;
    if let Some(file) = heap_file(&onode) {
        return write_heap(txn, object, onode, file, offset, data, end);
    }
    if data.is_empty() {
        // POSIX: a write of nothing changes nothing, not even the times.
        return Ok(());
    }
    let new_size = onode.size.max(end);
    let inline_max = u64::from(txn.limits().inline_max_bytes);
    match &mut onode.location {
        DataLocation::Inline(bytes) if new_size <= inline_max => {
            bytes.resize(to_usize(new_size), 0);
            if let Some(dst) = bytes.get_mut(to_usize(offset)..to_usize(end)) {
                dst.copy_from_slice(data);
            }
        }
        _ => {
            let a0 = align_down(offset);
            let a1 = align_up(end);
            if let DataLocation::Inline(bytes) = &onode.location {
                // Inline bytes the written blocks do not cover move to an
                // extent of their own; those they cover are read below.
                if a0 > 0 && !bytes.is_empty() {
                    let bytes = bytes.clone();
                    spill_inline(txn, object, &bytes)?;
                }
            }
            // Entries never end past the size, and their blocks hold zeros
            // after their logical end. So blocks from the size's block end
            // on have no entry to punch: a write there (a new file's first,
            // an append from a block boundary) skips the extent-map scan.
            let logical_end = a1.min(new_size);
            let mapped = a0 < align_up(onode.size);
            if offset == a0 && (end == a1 || end >= onode.size) {
                // Nothing of the old content survives in the written
                // blocks: write the caller's whole blocks as they are and
                // copy only a partial last block.
                let (body, tail) = block_parts(data);
                let entries = if mapped { overlapping(txn, object, a0, a1)? } else { Vec::new() };
                if !fill_unwritten(txn, object, a0, (body, &tail), logical_end - a0, &entries)? {
                    punch_entries(txn, object, a0, a1, entries)?;
                    write_blocks(txn, object, a0, (body, &tail), logical_end - a0)?;
                }
                onode.location = DataLocation::Extents;
                onode.size = new_size;
                touch_data(&mut onode);
                return txn.put_onode(object, &onode);
            }
            let mut content = vec![0u8; to_usize(a1 - a0)];
            // Read-modify-write of partial head and tail blocks; the
            // blocks in between are wholly overwritten.
            let head_partial = offset > a0;
            if head_partial {
                let head = read_range(txn, object, &onode, a0, BLOCK_BYTES)?;
                if let Some(dst) = content.get_mut(..head.len()) {
                    dst.copy_from_slice(&head);
                }
            }
            if end < a1 && !(head_partial && a1 - BLOCK_BYTES == a0) {
                let tail = read_range(txn, object, &onode, a1 - BLOCK_BYTES, BLOCK_BYTES)?;
                let at = content.len() - tail.len();
                if let Some(dst) = content.get_mut(at..) {
                    dst.copy_from_slice(&tail);
                }
            }
            if let Some(dst) = content.get_mut(to_usize(offset - a0)..to_usize(end - a0)) {
                dst.copy_from_slice(data);
            }
            if let Some(pad) = content.get_mut(to_usize(logical_end - a0)..) {
                pad.fill(0);
            }
            let entries = if mapped { overlapping(txn, object, a0, a1)? } else { Vec::new() };
            if !fill_unwritten(txn, object, a0, (&content, &[]), logical_end - a0, &entries)? {
                punch_entries(txn, object, a0, a1, entries)?;
                write_blocks(txn, object, a0, (&content, &[]), logical_end - a0)?;
            }
            onode.location = DataLocation::Extents;
        }
    }
    onode.size = new_size;
    touch_data(&mut onode);
    txn.put_onode(object, &onode)
}
