//! Extent-map primitives inside a transaction: find the entries covering a
//! range, read their blocks checked against their crcs, cut a range out of
//! the map, and write new blocks to fresh space.

use larder_io::{read_exact_at, write_all_at, FileRef};
use larder_log::Dependency;
use larder_space::{Extent, SpaceManager};

use super::{align_up, to_usize};
use crate::error::{ObjectError, Result};
use crate::meta::extent_map::MAX_ENTRY_EXTENT_BYTES;
use crate::meta::{
    decode_fmap_key, fmap_key, fmap_prefix, verify_block, DataLocation, ExtentMapEntry, MetaLimits, Onode, BLOCK_BYTES,
};
use crate::txn::Transaction;

/// An fmap entry with the object offset of its key.
#[derive(Clone, Debug)]
pub(crate) struct Mapped {
    /// Object offset of the entry's first byte (a block boundary).
    pub(crate) offset: u64,
    /// The entry.
    pub(crate) entry: ExtentMapEntry,
}

impl Mapped {
    /// Decodes a key and value read from the fmap.
    pub(crate) fn decode(key: &[u8], value: &[u8], limits: &MetaLimits) -> Result<Mapped> {
        let (_, offset) = decode_fmap_key(key)?;
        let entry = ExtentMapEntry::decode(value, limits)?;
        entry.check_at(offset)?;
        Ok(Mapped { offset, entry })
    }

    /// The end of the object bytes the entry covers.
    pub(crate) fn end(&self) -> u64 {
        self.offset.saturating_add(self.entry.logical_len)
    }
}

/// The smallest key above `key`: the exclusive end that includes `key`.
pub(crate) fn successor(key: &[u8]) -> Vec<u8> {
    let mut k = key.to_vec();
    k.push(0);
    k
}

/// The entries of `object` overlapping `[start, end)`, in offset order, as
/// the transaction sees them (its own writes included). One backward scan
/// from `end`: entries start on blocks and never overlap, so it stops at
/// the first that starts at or before `start` (which overlaps if it ends
/// past `start`), and a write inside one entry reads one key.
pub(crate) fn overlapping(txn: &Transaction<'_>, object: u64, start: u64, end: u64) -> Result<Vec<Mapped>> {
    let limits = txn.limits();
    if start >= end {
        return Ok(Vec::new());
    }
    let starts_by_start = |key: &[u8]| decode_fmap_key(key).map_or(true, |(_, offset)| offset <= start);
    let found = txn.scan_until(&fmap_prefix(object), &fmap_key(object, end), false, starts_by_start)?;
    let mut out = Vec::with_capacity(found.len());
    for (k, v) in found.iter().rev() {
        let m = Mapped::decode(k, v, &limits)?;
        if m.end() > start {
            out.push(m);
        }
    }
    Ok(out)
}

/// The path of a container file, for errors about one that is missing.
/// The file of `extent`'s container; Corrupt, at the container's path and
/// `extent`'s offset, saying `what` referred to it, if the store has no
/// such container.
pub(super) fn container_file(space: &SpaceManager, extent: Extent, what: impl FnOnce() -> String) -> Result<FileRef> {
    space.container_file(extent.container).ok_or_else(|| ObjectError::Corrupt {
        path: space.dir().join(larder_space::container_file_name(extent.container)),
        offset: extent.offset,
        what: what(),
    })
}

/// Reads blocks `[first, first + count)` of `m`'s extent and checks each
/// against its crc32c: a mismatch is corruption naming the container file,
/// the offset and the object, never wrong data.
pub(crate) fn read_blocks(space: &SpaceManager, object: u64, m: &Mapped, first: u64, count: u64) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; to_usize(count * BLOCK_BYTES)];
    read_blocks_into(space, object, m, first, &mut buf)?;
    Ok(buf)
}

/// Reads the blocks of `m` from `first` on into `dst` (whole blocks: its
/// length is a multiple of 4096) and checks each against its crc.
fn read_blocks_into(space: &SpaceManager, object: u64, m: &Mapped, first: u64, dst: &mut [u8]) -> Result<()> {
    if m.entry.unwritten {
        // Whatever the blocks hold, the range reads as zeros.
        dst.fill(0);
        return Ok(());
    }
    let extent = m.entry.extent;
    let file = container_file(space, extent, || {
        format!("object {object}: the fmap entry at offset {} names a container that does not exist", m.offset)
    })?;
    let at = extent.offset + first * BLOCK_BYTES;
    if let Err(e) = read_exact_at(&*file, dst, at) {
        // Nothing read is checked yet: leave none of it in `dst`.
        dst.fill(0);
        return Err(e.into());
    }
    for i in 0..dst.len() as u64 / BLOCK_BYTES {
        let expected = m.entry.crcs.get(to_usize(first + i)).copied().unwrap_or_default();
        if !verify_block(dst, to_usize(i), expected) {
            // `dst` may be the caller's buffer: leave no damaged bytes in it.
            dst.fill(0);
            return Err(ObjectError::Corrupt {
                path: file.path().to_path_buf(),
                offset: at + i * BLOCK_BYTES,
                what: format!(
                    "object {object}: block at object offset {} fails its crc32c",
                    m.offset + (first + i) * BLOCK_BYTES
                ),
            });
        }
    }
    Ok(())
}

/// Copies the object bytes of `entries` (in offset order) that fall in
/// `[start, start + out.len())` into `out`, zeros where none does (holes),
/// reading and checking only the blocks needed. Whole blocks are read straight into `out` (a
/// whole-file read copies nothing twice); a partial block goes through a
/// buffer, since its crc covers bytes `out` has no room for.
pub(crate) fn copy_from_entries(
    space: &SpaceManager,
    object: u64,
    entries: &[Mapped],
    start: u64,
    out: &mut [u8],
) -> Result<()> {
    let end = start + out.len() as u64;
    // Bytes of `out` before this are written (or zeroed).
    let mut done = 0usize;
    for m in entries {
        let lo = m.offset.max(start);
        let hi = m.end().min(end);
        if lo >= hi {
            continue;
        }
        if let Some(hole) = out.get_mut(done..to_usize(lo - start)) {
            hole.fill(0);
        }
        done = to_usize(hi - start);
        let first = (lo - m.offset) / BLOCK_BYTES;
        let last = (hi - m.offset).div_ceil(BLOCK_BYTES);
        let from = to_usize(lo - m.offset - first * BLOCK_BYTES);
        let len = to_usize(hi - lo);
        let dst = to_usize(lo - start);
        let Some(d) = out.get_mut(dst..dst + len) else { continue };
        if from == 0 && len as u64 == (last - first) * BLOCK_BYTES {
            read_blocks_into(space, object, m, first, d)?;
        } else {
            let blocks = read_blocks(space, object, m, first, last - first)?;
            if let Some(s) = blocks.get(from..from + len) {
                d.copy_from_slice(s);
            }
        }
    }
    if let Some(rest) = out.get_mut(done..) {
        rest.fill(0);
    }
    Ok(())
}

/// The object's bytes `[start, start + len)` as the transaction sees them,
/// zeros for holes and past the size.
pub(crate) fn read_range(txn: &Transaction<'_>, object: u64, onode: &Onode, start: u64, len: u64) -> Result<Vec<u8>> {
    let mut out = vec![0u8; to_usize(len)];
    match &onode.location {
        DataLocation::Inline(bytes) => {
            let s = to_usize(start.min(bytes.len() as u64));
            let e = to_usize((start + len).min(bytes.len() as u64));
            if let (Some(src), Some(dst)) = (bytes.get(s..e), out.get_mut(..e - s)) {
                dst.copy_from_slice(src);
            }
        }
        // Past the size there are no entries, only zeros.
        DataLocation::Extents if start >= onode.size => {}
        DataLocation::Extents => {
            let entries = overlapping(txn, object, start, start + len)?;
            copy_from_entries(txn.store().space(), object, &entries, start, &mut out)?;
        }
        DataLocation::OwnFile { file } => {
            let n = to_usize(onode.size.saturating_sub(start).min(len));
            if let Some(dst) = out.get_mut(..n) {
                super::heap_data::read_heap_into(txn.store(), object, *file, onode.size, start, dst)?;
            }
        }
    }
    Ok(out)
}

/// The blocks `[first, first + count)` of `extent`.
fn sub_extent(extent: Extent, first: u64, count: u64) -> Extent {
    Extent { container: extent.container, offset: extent.offset + first * BLOCK_BYTES, len: count * BLOCK_BYTES }
}

/// Removes `[a0, a1)` (block-aligned) from the object's fmap: entries
/// inside it are deleted, entries crossing its edges are cut to the parts
/// outside it (which keep pointing at the same blocks, with the matching
/// crcs). The blocks no longer referenced are freed at the commit's LSN.
pub(crate) fn punch(txn: &mut Transaction<'_>, object: u64, a0: u64, a1: u64) -> Result<()> {
    let entries = overlapping(txn, object, a0, a1)?;
    punch_entries(txn, object, a0, a1, entries)
}

/// [`punch`] given the entries overlapping `[a0, a1)`, as [`overlapping`]
/// found them in this transaction.
pub(crate) fn punch_entries(
    txn: &mut Transaction<'_>,
    object: u64,
    a0: u64,
    a1: u64,
    entries: Vec<Mapped>,
) -> Result<()> {
    let limits = txn.limits();
    for m in entries {
        let extent = m.entry.extent;
        let o = m.offset;
        let blocks_end = o + extent.len;
        txn.delete(&fmap_key(object, o));
        if o < a0 {
            let n = (a0 - o) / BLOCK_BYTES;
            let head = ExtentMapEntry {
                extent: sub_extent(extent, 0, n),
                logical_len: a0 - o,
                crcs: m.entry.crcs.get(..to_usize(n)).unwrap_or_default().to_vec(),
                unwritten: m.entry.unwritten,
            };
            txn.put(&fmap_key(object, o), &head.encode(&limits)?);
        }
        if a1 < blocks_end {
            let skip = (a1 - o) / BLOCK_BYTES;
            let tail = ExtentMapEntry {
                extent: sub_extent(extent, skip, m.entry.blocks() - skip),
                logical_len: m.end() - a1,
                crcs: m.entry.crcs.get(to_usize(skip)..).unwrap_or_default().to_vec(),
                unwritten: m.entry.unwritten,
            };
            txn.put(&fmap_key(object, a1), &tail.encode(&limits)?);
        }
        let lo = (a0.max(o) - o) / BLOCK_BYTES;
        let hi = (a1.min(blocks_end) - o) / BLOCK_BYTES;
        if hi > lo {
            txn.free_after_commit(sub_extent(extent, lo, hi - lo));
        }
    }
    Ok(())
}

/// `data` (written from a block boundary) as [`write_blocks`] takes it:
/// its whole blocks as they are, and its partial last block copied and
/// zero-padded to a block (empty if there is none), since every block past
/// an entry's logical end holds zeros.
pub(crate) fn block_parts(data: &[u8]) -> (&[u8], Vec<u8>) {
    let (body, rest) = data.split_at(to_usize(super::align_down(data.len() as u64)));
    let mut tail = Vec::new();
    if !rest.is_empty() {
        tail.resize(to_usize(BLOCK_BYTES), 0);
        tail[..rest.len()].copy_from_slice(rest);
    }
    (body, tail)
}

/// Bytes of a large write copied to its container before their
/// write-back is started: one submission per 1 MiB (a Garage block is one)
/// still lets the device work while a longer write's rest is copied, and
/// each submission costs CPU of its own (a sync_file_range, the block
/// layer's plug and the virtio kick).
const WRITE_BACK_CHUNK: usize = 1 << 20;

/// Durable pieces at least this long into unwritten space have their
/// write-back started as they are copied (see [`write_piece`]).
const EAGER_WRITE_BACK_BYTES: u64 = 256 << 10;

/// Writes `body` then `tail` (together the block-aligned content of
/// `[start, ..)`, of which the first `logical_len` bytes are the object's)
/// to fresh space and maps it. `body` is whole blocks, written straight
/// from the caller's buffer; `tail` is empty or one zero-padded block, so
/// a write that starts on a block needs no copy of its data.
pub(crate) fn write_blocks(
    txn: &mut Transaction<'_>,
    object: u64,
    start: u64,
    (body, tail): (&[u8], &[u8]),
    logical_len: u64,
) -> Result<()> {
    let limits = txn.limits();
    let total = (body.len() + tail.len()) as u64;
    debug_assert!((body.len() as u64).is_multiple_of(BLOCK_BYTES) && tail.len() as u64 <= BLOCK_BYTES);
    debug_assert_eq!(total, align_up(logical_len));
    let space = txn.store().space();
    let extents = txn.store().allocate_space(total)?;
    for e in &extents {
        txn.note_allocated(*e);
    }
    let mut pos = 0u64;
    for extent in extents {
        // One entry holds at most MAX_ENTRY_EXTENT_BYTES (its crcs must
        // fit an index value); longer extents become several entries.
        let mut done = 0;
        while done < extent.len {
            let piece =
                sub_extent(extent, done / BLOCK_BYTES, (extent.len - done).min(MAX_ENTRY_EXTENT_BYTES) / BLOCK_BYTES);
            let file = container_file(space, piece, || {
                format!("object {object}: allocated space in a container that does not exist")
            })?;
            let end = pos + piece.len;
            let from_body = body.get(to_usize(pos.min(body.len() as u64))..to_usize(end.min(body.len() as u64)));
            let from_body = from_body.unwrap_or_default();
            let from_tail = tail
                .get(to_usize(pos.saturating_sub(body.len() as u64))..to_usize(end.saturating_sub(body.len() as u64)));
            let from_tail = from_tail.unwrap_or_default();
            // Space that was a hole gets its blocks only at writeback, which
            // is metadata a write-back alone does not commit.
            let write_back = txn.store().writes_back_data() && space.is_written(piece);
            // The checksums cover the logical bytes only.
            let logical = to_usize((logical_len - pos).min(piece.len));
            let body_logical = from_body.get(..logical.min(from_body.len())).unwrap_or_default();
            let tail_logical = from_tail.get(..logical - body_logical.len()).unwrap_or_default();
            // Unwritten space is made durable by its container's sync:
            // starting a large piece's write-back while the rest is copied
            // leaves that sync less to wait for.
            let eager = txn.is_durable() && (write_back || piece.len >= EAGER_WRITE_BACK_BYTES);
            // The checksums on this thread, before the copy (which then
            // reads the bytes from cache): a thread spawned for them costs
            // more CPU (35-80 µs a spawn on the 2-core test machine) than
            // the crcs of 1 MiB (about 25 µs), and a busy server has no
            // idle core for it to save wall time on.
            let entry = ExtentMapEntry::for_parts(piece, &[body_logical, tail_logical], &limits)?;
            write_piece(&*file, piece.offset, [from_body, from_tail], eager)?;
            txn.add_dependency(match write_back {
                true => Dependency::WriteBack { file, offset: piece.offset, len: piece.len },
                false => Dependency::Sync(file),
            });
            txn.put(&fmap_key(object, start + pos), &entry.encode(&limits)?);
            pos = end;
            done += piece.len;
        }
    }
    Ok(())
}

/// Copies `parts`, back to back, to `file` at `offset`. With `eager` (a
/// durable commit's data: written back, or a large piece its container's
/// sync makes durable) each chunk goes to the device as soon as it is
/// copied, so the device works while the rest is copied and the commit
/// is computed: the group's leader then mostly waits for writes already
/// under way. A buffered commit's data is left to the
/// page cache until its group is written (a file deleted soon after may
/// never reach the disk).
fn write_piece(file: &dyn larder_io::File, offset: u64, parts: [&[u8]; 2], eager: bool) -> Result<()> {
    let mut at = offset;
    for part in parts {
        if !eager {
            write_all_at(file, part, at)?;
            at += part.len() as u64;
            continue;
        }
        for chunk in part.chunks(WRITE_BACK_CHUNK) {
            write_all_at(file, chunk, at)?;
            file.start_write_back(at, chunk.len() as u64)?;
            at += chunk.len() as u64;
        }
    }
    Ok(())
}

/// Moves inline bytes to an extent at offset 0 (the caller then marks the
/// onode's location as extents).
pub(crate) fn spill_inline(txn: &mut Transaction<'_>, object: u64, bytes: &[u8]) -> Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    let mut content = bytes.to_vec();
    content.resize(to_usize(align_up(bytes.len() as u64)), 0);
    write_blocks(txn, object, 0, (&content, &[]), bytes.len() as u64)
}
