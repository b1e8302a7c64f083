//! Space set aside for an object's later writes (`fallocate`): unwritten
//! extent map entries. Preallocating allocates extents for the holes of a
//! range and maps them as unwritten (reading as zeros); a later write whose
//! blocks all lie in unwritten entries fills those blocks in place and
//! maps them as data, allocating nothing. So once `fallocate` returned, a
//! write inside its range cannot fail for want of space, even on a full
//! store (the first write of each block; a block written once is shadowed
//! by the next write, as any other).
//!
//! Writing in place is safe here where it would not be for data: until the
//! record that maps the blocks as data commits, the entry says they read
//! as zeros whatever they hold, so a crash in between loses nothing. The
//! commit syncs the container first (a sync dependency), as a shadowed
//! write's does.

use larder_io::write_all_at;
use larder_log::Dependency;
use larder_space::Extent;

use super::fmap::{container_file, overlapping, spill_inline, Mapped};
use super::heap_data::{heap_file, preallocate_heap};
use super::{align_down, align_up, data_onode, to_usize};
use crate::error::Result;
use crate::meta::extent_map::MAX_ENTRY_EXTENT_BYTES;
use crate::meta::{fmap_key, DataLocation, ExtentMapEntry, BLOCK_BYTES};
use crate::txn::Transaction;

/// The blocks `[first, first + count)` of `extent`.
fn sub_extent(extent: Extent, first: u64, count: u64) -> Extent {
    Extent { container: extent.container, offset: extent.offset + first * BLOCK_BYTES, len: count * BLOCK_BYTES }
}

impl Transaction<'_> {
    /// Sets space aside for `[start, end)` of `object` (held exclusively):
    /// every hole of the range inside the object's size gets extents of
    /// its own, mapped as unwritten, so later writes there need no new
    /// space. Returns the bytes set aside. The size does not change (grow
    /// it first to set space aside past it); ranges already mapped keep
    /// their entries.
    pub fn preallocate(&mut self, object: u64, start: u64, end: u64) -> Result<u64> {
        let mut onode = data_onode(self, object)?;
        if let Some(file) = heap_file(&onode) {
            return preallocate_heap(self, file, onode.size, start, end);
        }
        let end = end.min(onode.size);
        if start >= end {
            return Ok(0);
        }
        if let DataLocation::Inline(bytes) = &onode.location {
            // Unwritten entries need the object's bytes in extents.
            let bytes = bytes.clone();
            spill_inline(self, object, &bytes)?;
            onode.location = DataLocation::Extents;
        }
        let (a0, a1) = (align_down(start), align_up(end));
        let mut holes = Vec::new();
        let mut at = a0;
        for m in overlapping(self, object, a0, a1)? {
            if m.offset > at {
                holes.push((at, m.offset));
            }
            at = at.max(m.offset + m.entry.extent.len);
        }
        if at < a1 {
            holes.push((at, a1));
        }
        let limits = self.limits();
        let space = self.store().space();
        let mut set_aside = 0;
        for (h0, h1) in holes {
            let extents = self.store().allocate_space(h1 - h0)?;
            for e in &extents {
                self.note_allocated(*e);
            }
            let mut pos = h0;
            for extent in extents {
                // The host file system's blocks too, where the container
                // has none (punched space), so filling them cannot fail.
                space.allocate_on_host(extent)?;
                if !space.is_written(extent) {
                    // Space past the container's filled part (taken with
                    // `fallocate`, which extends the file) or punched: the
                    // record that maps it must not be durable before the
                    // container's length and blocks are, or a crash keeps an
                    // extent in use past the end of the file.
                    let file =
                        container_file(space, extent, || format!("object {object}: space allocated in no container"))?;
                    self.add_dependency(Dependency::Sync(file));
                }
                let mut done = 0;
                while done < extent.len {
                    let len = (extent.len - done).min(MAX_ENTRY_EXTENT_BYTES);
                    let piece = sub_extent(extent, done / BLOCK_BYTES, len / BLOCK_BYTES);
                    // Entries never end past the size.
                    let logical = len.min(onode.size - pos);
                    let entry = ExtentMapEntry::unwritten(piece, logical, &limits)?;
                    self.put(&fmap_key(object, pos), &entry.encode(&limits)?);
                    set_aside += len;
                    pos += len;
                    done += len;
                }
            }
        }
        // The map changed: cached copies of it must miss (extent_cache).
        onode.generation = onode.generation.wrapping_add(1);
        self.put_onode(object, &onode)?;
        Ok(set_aside)
    }
}

/// Writes `body` then `tail` (the block-aligned content of `[a0, ..)`,
/// of which the first `logical_len` bytes are the object's, as
/// [`super::fmap::write_blocks`] takes them) in place, if every block of
/// it lies in an unwritten entry: the blocks become data, the rest of those
/// entries stays unwritten. Returns false, changing nothing, otherwise.
/// `entries` are those overlapping the written blocks (from
/// [`overlapping`]).
pub(crate) fn fill_unwritten(
    txn: &mut Transaction<'_>,
    object: u64,
    a0: u64,
    (body, tail): (&[u8], &[u8]),
    logical_len: u64,
    entries: &[Mapped],
) -> Result<bool> {
    let a1 = a0 + (body.len() + tail.len()) as u64;
    let mut at = a0;
    for m in entries {
        if !m.entry.unwritten || m.offset > at {
            return Ok(false);
        }
        at = m.offset + m.entry.extent.len;
    }
    if at < a1 {
        return Ok(false);
    }
    let limits = txn.limits();
    let space = txn.store().space();
    let logical_end = a0 + logical_len;
    for m in entries {
        let blocks_end = m.offset + m.entry.extent.len;
        let (lo, hi) = (m.offset.max(a0), blocks_end.min(a1));
        let piece = sub_extent(m.entry.extent, (lo - m.offset) / BLOCK_BYTES, (hi - lo) / BLOCK_BYTES);
        let file = container_file(space, piece, || {
            format!("object {object}: the unwritten entry at offset {} names no container", m.offset)
        })?;
        let (from_body, from_tail) = parts(body, tail, lo - a0, hi - a0);
        write_all_at(&*file, from_body, piece.offset)?;
        write_all_at(&*file, from_tail, piece.offset + from_body.len() as u64)?;
        // The checksums cover the logical bytes only.
        let logical = to_usize(logical_end.min(hi) - lo);
        let body_logical = from_body.get(..logical.min(from_body.len())).unwrap_or_default();
        let tail_logical = from_tail.get(..logical - body_logical.len()).unwrap_or_default();
        let data = ExtentMapEntry::for_parts(piece, &[body_logical, tail_logical], &limits)?;
        txn.add_dependency(Dependency::Sync(file));
        replace_unwritten(txn, object, m, (lo, hi), &data)?;
    }
    Ok(true)
}

/// The bytes `[from, to)` of `body` followed by `tail`, as the part in
/// `body` and the part in `tail`.
fn parts<'d>(body: &'d [u8], tail: &'d [u8], from: u64, to: u64) -> (&'d [u8], &'d [u8]) {
    let b = body.len() as u64;
    let in_body = body.get(to_usize(from.min(b))..to_usize(to.min(b))).unwrap_or_default();
    let in_tail = tail.get(to_usize(from.saturating_sub(b))..to_usize(to.saturating_sub(b))).unwrap_or_default();
    (in_body, in_tail)
}

/// Maps the blocks `[lo, hi)` of unwritten entry `m` as `data`; the parts
/// of `m` before and after stay unwritten, on the same blocks.
fn replace_unwritten(
    txn: &mut Transaction<'_>,
    object: u64,
    m: &Mapped,
    (lo, hi): (u64, u64),
    data: &ExtentMapEntry,
) -> Result<()> {
    let limits = txn.limits();
    let extent = m.entry.extent;
    txn.delete(&fmap_key(object, m.offset));
    if m.offset < lo {
        let head =
            ExtentMapEntry::unwritten(sub_extent(extent, 0, (lo - m.offset) / BLOCK_BYTES), lo - m.offset, &limits)?;
        txn.put(&fmap_key(object, m.offset), &head.encode(&limits)?);
    }
    if hi < m.end() {
        let skip = (hi - m.offset) / BLOCK_BYTES;
        let tail = ExtentMapEntry::unwritten(sub_extent(extent, skip, m.entry.blocks() - skip), m.end() - hi, &limits)?;
        txn.put(&fmap_key(object, hi), &tail.encode(&limits)?);
    }
    txn.put(&fmap_key(object, lo), &data.encode(&limits)?);
    Ok(())
}
