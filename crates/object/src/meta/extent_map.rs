//! Extent map (fmap) entries: where a range of an object's bytes lives in
//! the containers, with a crc32c per 4 KiB block. Layout byte by byte:
//! docs/format.md, section 13.
//!
//! The key of an entry is (object id, offset), `offset` a multiple of
//! 4096; the entry covers the object's bytes `[offset, offset +
//! logical_len)`, which live at the start of its extent. Entries of one
//! object never overlap. Ranges no entry covers are holes (sparse files)
//! and read as zeros: a hole is the absence of keys, never a record, so
//! punching a hole is deleting entries and a sparse file costs nothing
//! for its gaps. Because entries start on block boundaries and do not
//! overlap, the entry covering byte `x` is the last key at or before
//! `(object, x)`, found by one backward seek in the object's fmap prefix.
//!
//! Checksums: an extent is whole blocks, and `crcs[i]` is the crc32c of
//! the extent's block `i`, all 4096 bytes of it as stored. The last block
//! of an entry whose `logical_len` is not a multiple of 4096 is written
//! with zeros after the logical end, so its crc equals the crc of the
//! logical bytes padded with zeros; [`block_crcs`] computes exactly that
//! from the logical bytes. Checking the padding too means a later
//! extension of the object inside that block can never expose stale bytes.

use larder_space::{Extent, EXTENT_BYTES};

use crate::error::{ObjectError, Result};

use super::codec::{DecodeResult, Reader};
use super::types::MetaLimits;
use super::{BLOCK_BYTES, MAX_OBJECT_BYTES};

const RECORD: &str = "fmap entry";
/// Tag byte of an entry whose bytes are in a container extent. Tag 0 is
/// never written; other tags are reserved for later forms, which a store
/// using them marks with an incompatible feature bit.
const TAG_DATA: u8 = 1;
/// Tag byte of an unwritten entry: its extent is allocated to the object
/// (by `fallocate`) but the range reads as zeros whatever the blocks hold,
/// so it has no checksums. Stores that may hold one carry the superblock's
/// `INCOMPAT_UNWRITTEN_EXTENTS` bit.
const TAG_UNWRITTEN: u8 = 2;
/// Bytes of an encoded entry before its checksums.
pub const FMAP_ENTRY_FIXED_BYTES: usize = 1 + 8 + EXTENT_BYTES;
/// Longest extent one entry may hold (64 GiB): its value, 4 bytes of
/// checksum per block, must fit the index's value limit (256 MiB). A
/// longer range is written as several entries.
pub const MAX_ENTRY_EXTENT_BYTES: u64 = 64 << 30;

const BLOCK: usize = BLOCK_BYTES as usize;
static ZEROS: [u8; BLOCK] = [0u8; BLOCK];

/// The crc32c of one block given by its first `block.len()` bytes (at most
/// 4096), the rest being zeros.
fn block_crc(block: &[u8]) -> u32 {
    if block.len() >= BLOCK {
        return larder_io::codec::crc(block);
    }
    let mut padded = ZEROS;
    padded[..block.len()].copy_from_slice(block);
    larder_io::codec::crc(&padded)
}

/// One crc32c per 4 KiB block of `data`, the last block (if partial)
/// padded with zeros to 4096 bytes: the checksums of the blocks as written
/// to a container. Empty data has no blocks.
pub fn block_crcs(data: &[u8]) -> Vec<u32> {
    data.chunks(BLOCK).map(block_crc).collect()
}

/// Whether block `index` of `data` (4 KiB blocks, as in [`block_crcs`];
/// `data` may be the logical bytes or the whole blocks read back) has
/// crc32c `expected`. A block `data` does not reach is a mismatch.
pub fn verify_block(data: &[u8], index: usize, expected: u32) -> bool {
    let Some(start) = index.checked_mul(BLOCK).filter(|&s| s < data.len()) else { return false };
    let end = start.saturating_add(BLOCK).min(data.len());
    data.get(start..end).is_some_and(|b| block_crc(b) == expected)
}

/// Blocks in `len` bytes, as a capacity hint (saturating).
fn to_blocks(len: u64) -> usize {
    usize::try_from(len / BLOCK_BYTES).unwrap_or(usize::MAX)
}

/// Round `n` up to whole blocks, or `None` on overflow.
fn round_up(n: u64) -> Option<u64> {
    n.checked_add(BLOCK_BYTES - 1).map(|v| v / BLOCK_BYTES * BLOCK_BYTES)
}

/// An fmap entry: the object's bytes `[offset, offset + logical_len)` (the
/// offset is in the key) live in `extent`, starting at its first byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtentMapEntry {
    /// Where the bytes are: whole blocks, exactly enough for
    /// `logical_len` (`extent.len == round_up(logical_len, 4096)`), so no
    /// entry holds blocks it does not use.
    pub extent: Extent,
    /// Bytes of the object the entry covers, 1 or more.
    pub logical_len: u64,
    /// crc32c of each block of the extent, `extent.len / 4096` of them;
    /// none for an unwritten entry.
    pub crcs: Vec<u32>,
    /// The range reads as zeros: the extent is set aside for later writes,
    /// which fill it in place instead of allocating (see
    /// [`ExtentMapEntry::unwritten`]).
    pub unwritten: bool,
}

impl ExtentMapEntry {
    /// The entry for `data` written at the start of `extent`, with its
    /// block checksums. Refuses an extent not exactly fitting `data`.
    pub fn for_data(extent: Extent, data: &[u8], limits: &MetaLimits) -> Result<ExtentMapEntry> {
        Self::for_parts(extent, &[data], limits)
    }

    /// [`ExtentMapEntry::for_data`] for data given in parts written one
    /// after another; every part but the last must be whole blocks (so no
    /// block straddles two parts).
    pub fn for_parts(extent: Extent, parts: &[&[u8]], limits: &MetaLimits) -> Result<ExtentMapEntry> {
        let mut crcs = Vec::with_capacity(to_blocks(extent.len));
        let mut logical_len = 0u64;
        let parts: Vec<&[u8]> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
        for (i, part) in parts.iter().enumerate() {
            if i + 1 < parts.len() && !(part.len() as u64).is_multiple_of(BLOCK_BYTES) {
                let what = format!("part {i} of {} bytes is not whole blocks", part.len());
                return Err(ObjectError::InvalidRecord { record: RECORD, what });
            }
            crcs.extend(part.chunks(BLOCK).map(block_crc));
            logical_len += part.len() as u64;
        }
        let entry = ExtentMapEntry { extent, logical_len, crcs, unwritten: false };
        entry.check(limits).map_err(|what| ObjectError::InvalidRecord { record: RECORD, what })?;
        Ok(entry)
    }

    /// An unwritten entry for `logical_len` bytes in `extent` (exactly
    /// enough blocks): space the object owns that reads as zeros.
    pub fn unwritten(extent: Extent, logical_len: u64, limits: &MetaLimits) -> Result<ExtentMapEntry> {
        let entry = ExtentMapEntry { extent, logical_len, crcs: Vec::new(), unwritten: true };
        entry.check(limits).map_err(|what| ObjectError::InvalidRecord { record: RECORD, what })?;
        Ok(entry)
    }

    /// Number of blocks of the extent.
    pub fn blocks(&self) -> u64 {
        self.extent.len / BLOCK_BYTES
    }

    /// The end of the range the entry covers when its key offset is
    /// `offset`, or `None` if that passes the largest object.
    pub fn end(&self, offset: u64) -> Option<u64> {
        offset.checked_add(self.logical_len).filter(|&e| e <= MAX_OBJECT_BYTES)
    }

    /// Checks the entry against its key's offset: the range must end at
    /// or before the largest object. (The key decoder checks the offset's
    /// alignment.)
    pub fn check_at(&self, offset: u64) -> Result<()> {
        match self.end(offset) {
            Some(_) => Ok(()),
            None => Err(ObjectError::BadRecord {
                record: RECORD,
                what: format!(
                    "range [{offset}, +{}) passes the largest object ({MAX_OBJECT_BYTES} bytes)",
                    self.logical_len
                ),
            }),
        }
    }

    fn check(&self, limits: &MetaLimits) -> DecodeResult<()> {
        self.extent.check(limits.container_bytes).map_err(|e| format!("extent: {e}"))?;
        if self.extent.len > MAX_ENTRY_EXTENT_BYTES {
            return Err(format!(
                "extent of {} bytes is longer than an entry may hold ({MAX_ENTRY_EXTENT_BYTES})",
                self.extent.len
            ));
        }
        if self.logical_len == 0 {
            return Err("logical length 0 (an empty range has no entry)".into());
        }
        if round_up(self.logical_len) != Some(self.extent.len) {
            return Err(format!(
                "logical length {} does not fill the extent's {} bytes to its last block",
                self.logical_len, self.extent.len
            ));
        }
        let checksums = if self.unwritten { 0 } else { self.blocks() };
        if self.crcs.len() as u64 != checksums {
            return Err(format!("{} checksums for {} blocks", self.crcs.len(), self.blocks()));
        }
        Ok(())
    }

    /// Encodes the entry. Refuses ([`ObjectError::InvalidRecord`]) an
    /// entry no reader would accept.
    pub fn encode(&self, limits: &MetaLimits) -> Result<Vec<u8>> {
        self.check(limits).map_err(|what| ObjectError::InvalidRecord { record: RECORD, what })?;
        let mut b = Vec::with_capacity(FMAP_ENTRY_FIXED_BYTES + 4 * self.crcs.len());
        b.push(if self.unwritten { TAG_UNWRITTEN } else { TAG_DATA });
        b.extend_from_slice(&self.logical_len.to_le_bytes());
        b.extend_from_slice(&self.extent.encode());
        for c in &self.crcs {
            b.extend_from_slice(&c.to_le_bytes());
        }
        Ok(b)
    }

    /// Decodes an entry read back from the index ([`ObjectError::BadRecord`]
    /// on any failed check: unknown tag, malformed extent or one past
    /// `limits.container_bytes`, logical length not matching the extent,
    /// wrong number of checksums). Never panics; allocates at most the
    /// input's length.
    pub fn decode(bytes: &[u8], limits: &MetaLimits) -> Result<ExtentMapEntry> {
        Self::decode_inner(bytes, limits).map_err(|what| ObjectError::BadRecord { record: RECORD, what })
    }

    fn decode_inner(bytes: &[u8], limits: &MetaLimits) -> DecodeResult<ExtentMapEntry> {
        let mut r = Reader::new(bytes);
        let unwritten = match r.u8("tag")? {
            TAG_DATA => false,
            TAG_UNWRITTEN => true,
            0 => return Err("tag 0 is never written".into()),
            t => return Err(format!("unknown entry tag {t}")),
        };
        let logical_len = r.u64("logical length")?;
        let extent = Extent::decode(r.bytes(EXTENT_BYTES, "extent")?, limits.container_bytes)
            .map_err(|e| format!("extent: {e}"))?;
        let blocks = if unwritten { 0 } else { extent.len / BLOCK_BYTES };
        // The count comes from the checked extent; compare it with the
        // bytes present before allocating anything.
        if r.remaining() as u64 != blocks.saturating_mul(4) {
            return Err(format!("{} bytes of checksums for {blocks} blocks", r.remaining()));
        }
        let mut crcs = Vec::with_capacity(r.remaining() / 4);
        while r.remaining() > 0 {
            crcs.push(r.u32("checksum")?);
        }
        let entry = ExtentMapEntry { extent, logical_len, crcs, unwritten };
        entry.check(limits)?;
        Ok(entry)
    }
}
