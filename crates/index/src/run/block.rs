//! Data blocks: sorted entries with an offset table for binary search.
//!
//! Layout (see docs/format.md): entries, then `count` u32 offsets of the
//! entries from the block start, then `count` as u32, then a crc32c of all
//! preceding bytes. Every version of one key lives in one block.

use std::cmp::Ordering;

use crate::codec::{check_trailing_crc, put_u32, put_u64, put_varint, Decoder};
use crate::entry::{cmp_internal, Entry, Kind, Op, Stamp};
use crate::{MAX_KEY_BYTES, MAX_VALUE_BYTES};

/// Appends entries into one block's bytes.
pub(crate) struct BlockBuilder {
    buf: Vec<u8>,
    offsets: Vec<u32>,
}

impl BlockBuilder {
    pub(crate) fn new() -> Self {
        BlockBuilder { buf: Vec::with_capacity(8192), offsets: Vec::new() }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Bytes the finished block would take.
    pub(crate) fn estimated_len(&self) -> usize {
        self.buf.len() + 4 * self.offsets.len() + 8
    }

    /// Adds an entry; `op_ids` maps the registry id of a merge operator to
    /// its id in this run's operator table.
    pub(crate) fn add(&mut self, key: &[u8], stamp: Stamp, op: &Op, run_op_id: u32) {
        self.offsets.push(self.buf.len() as u32);
        let b = &mut self.buf;
        put_varint(b, key.len() as u64);
        put_varint(b, op.payload_len() as u64);
        b.push(op.kind() as u8);
        put_u64(b, stamp.seq);
        put_varint(b, stamp.sub.into());
        if let Op::Merge { .. } = op {
            put_varint(b, run_op_id.into());
        }
        b.extend_from_slice(key);
        match op {
            Op::Put(v) => b.extend_from_slice(v),
            Op::Merge { operand, .. } => b.extend_from_slice(operand),
            Op::Delete => {}
        }
    }

    /// Finishes the block: appends offsets, count and checksum; resets the builder.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::replace(&mut self.buf, Vec::with_capacity(8192));
        for o in &self.offsets {
            put_u32(&mut out, *o);
        }
        put_u32(&mut out, self.offsets.len() as u32);
        let c = crate::codec::crc(&out);
        put_u32(&mut out, c);
        self.offsets.clear();
        out
    }
}

/// A decoded entry borrowing the block's bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawEntry<'a> {
    pub key: &'a [u8],
    pub stamp: Stamp,
    pub kind: Kind,
    /// Operator id in the run's table (merge only).
    pub run_op_id: u32,
    pub payload: &'a [u8],
}

/// A verified data block (checksum already checked, offsets validated).
#[derive(Debug)]
pub(crate) struct Block {
    data: Vec<u8>,
    /// Where the offset table starts.
    table: usize,
    count: usize,
}

impl Block {
    /// Verifies and wraps a block read from disk. The returned error text
    /// says what is wrong; the caller names the file and offset.
    pub(crate) fn decode(mut raw: Vec<u8>) -> Result<Block, String> {
        let body_len = check_trailing_crc(&raw)?.len();
        raw.truncate(body_len);
        if body_len < 4 {
            return Err("block too short for its entry count".into());
        }
        let mut d = Decoder::new(&raw[body_len - 4..]);
        let count = d.u32("entry count")? as usize;
        let table = count
            .checked_mul(4)
            .and_then(|t| (body_len - 4).checked_sub(t))
            .ok_or_else(|| format!("entry count {count} does not fit a {body_len}-byte block"))?;
        if count == 0 {
            return Err("block holds no entries".into());
        }
        let block = Block { data: raw, table, count };
        // Validate every entry once so later reads cannot fail on structure.
        let mut prev: Option<(usize, Stamp)> = None;
        for i in 0..count {
            let e = block.entry_checked(i)?;
            if let Some((pi, ps)) = prev {
                let pk = block.entry_checked(pi)?.key;
                if cmp_internal(pk, ps, e.key, e.stamp) != Ordering::Less {
                    return Err(format!("entry {i} is out of order"));
                }
            }
            prev = Some((i, e.stamp));
        }
        Ok(block)
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Checks every merge entry names an operator of the run's table.
    pub(crate) fn check_operator_ids(&self, operators: usize) -> Result<(), String> {
        for i in 0..self.count {
            let e = self.entry(i);
            if e.kind == Kind::Merge && e.run_op_id as usize >= operators {
                return Err(format!("entry {i} names operator {} of a table of {operators}", e.run_op_id));
            }
        }
        Ok(())
    }

    pub(crate) fn size_bytes(&self) -> usize {
        self.data.len()
    }

    fn offset(&self, i: usize) -> Result<usize, String> {
        let at = self.table + 4 * i;
        let mut d = Decoder::new(self.data.get(at..at + 4).ok_or("offset table truncated")?);
        let o = d.u32("entry offset")? as usize;
        if o >= self.table {
            return Err(format!("entry {i} offset {o} points past the entries"));
        }
        Ok(o)
    }

    fn entry_checked(&self, i: usize) -> Result<RawEntry<'_>, String> {
        let start = self.offset(i)?;
        let end = if i + 1 < self.count { self.offset(i + 1)? } else { self.table };
        let bytes = self.data.get(start..end).ok_or_else(|| format!("entry {i} bounds {start}..{end} invalid"))?;
        let mut d = Decoder::new(bytes);
        let key_len = d.len(MAX_KEY_BYTES, "key length")?;
        let val_len = d.len(MAX_VALUE_BYTES, "value length")?;
        let kind_byte = d.u8("kind")?;
        let kind = Kind::from_u8(kind_byte).ok_or_else(|| format!("entry {i} has unknown kind {kind_byte}"))?;
        let seq = d.u64("sequence number")?;
        let sub = u32::try_from(d.varint("sub")?).map_err(|_| format!("entry {i} sub out of range"))?;
        let run_op_id = if kind == Kind::Merge {
            u32::try_from(d.varint("operator id")?).map_err(|_| format!("entry {i} operator id out of range"))?
        } else {
            0
        };
        if kind == Kind::Delete && val_len != 0 {
            return Err(format!("entry {i} is a delete with a {val_len}-byte value"));
        }
        let key = d.bytes(key_len, "key")?;
        let payload = d.bytes(val_len, "value")?;
        if d.remaining() != 0 {
            return Err(format!("entry {i} has {} trailing bytes", d.remaining()));
        }
        Ok(RawEntry { key, stamp: Stamp { seq, sub }, kind, run_op_id, payload })
    }

    /// The i-th entry. Blocks are validated at decode, so this cannot fail
    /// for `i < len()`; an out-of-range index yields an empty delete.
    pub(crate) fn entry(&self, i: usize) -> RawEntry<'_> {
        self.entry_checked(i).unwrap_or(RawEntry {
            key: &[],
            stamp: Stamp { seq: 0, sub: 0 },
            kind: Kind::Delete,
            run_op_id: 0,
            payload: &[],
        })
    }

    /// Index of the first entry not before (key, stamp) in internal order.
    pub(crate) fn seek(&self, key: &[u8], stamp: Stamp) -> usize {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let e = self.entry(mid);
            if cmp_internal(e.key, e.stamp, key, stamp) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

impl RawEntry<'_> {
    /// An owned entry, mapping the run's operator id through `op_map`.
    pub(crate) fn to_entry(self, op_map: &[u32]) -> Entry {
        Entry { key: self.key.to_vec(), stamp: self.stamp, op: self.to_op(op_map) }
    }

    pub(crate) fn to_op(self, op_map: &[u32]) -> Op {
        match self.kind {
            Kind::Put => Op::Put(self.payload.to_vec()),
            Kind::Delete => Op::Delete,
            Kind::Merge => Op::Merge {
                operator: op_map.get(self.run_op_id as usize).copied().unwrap_or(u32::MAX),
                operand: self.payload.to_vec(),
            },
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_seek() {
        let mut b = BlockBuilder::new();
        for i in 0..50u32 {
            let k = format!("key{i:03}");
            b.add(k.as_bytes(), Stamp { seq: 9, sub: 1 }, &Op::Put(vec![i as u8; 3]), 0);
            b.add(k.as_bytes(), Stamp { seq: 5, sub: 0 }, &Op::Merge { operator: 0, operand: vec![1] }, 2);
        }
        let block = Block::decode(b.finish()).unwrap();
        assert_eq!(block.len(), 100);
        let i = block.seek(b"key010", Stamp { seq: 7, sub: u32::MAX });
        let e = block.entry(i);
        assert_eq!(e.key, b"key010");
        assert_eq!(e.stamp.seq, 5);
        assert_eq!(e.kind, Kind::Merge);
        assert_eq!(e.run_op_id, 2);
        assert_eq!(block.seek(b"zzz", Stamp { seq: 0, sub: 0 }), 100);
    }

    #[test]
    fn every_bit_flip_is_refused() {
        let mut b = BlockBuilder::new();
        b.add(b"a", Stamp { seq: 1, sub: 0 }, &Op::Put(b"v".to_vec()), 0);
        b.add(b"b", Stamp { seq: 1, sub: 1 }, &Op::Delete, 0);
        let raw = b.finish();
        for bit in 0..raw.len() * 8 {
            let mut x = raw.clone();
            x[bit / 8] ^= 1 << (bit % 8);
            assert!(Block::decode(x).is_err(), "bit {bit}");
        }
        for len in 0..raw.len() {
            assert!(Block::decode(raw[..len].to_vec()).is_err());
        }
    }
}
