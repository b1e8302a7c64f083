//! Data blocks: sorted entries with an offset table for binary search.
//!
//! Layout (see docs/format.md): entries, then `count` u32 offsets of the
//! entries from the block start, then `count` as u32, then a crc32c of all
//! preceding bytes. An entry starts with its key so a binary search reads
//! only keys. Every version of one key lives in one block.
//!
//! A block is checked completely once, when it is read from disk; lookups
//! in a checked block then use accessors that cannot fail.

use std::cmp::Ordering;

use crate::codec::{check_trailing_crc, put_u32, put_u64, put_varint, read_varint_unchecked, Decoder};
use crate::entry::{cmp_internal, Kind, Op, OpRef, Stamp};
use crate::{MAX_KEY_BYTES, MAX_VALUE_BYTES};

/// Appends entries into one block's bytes, at the end of a buffer the
/// caller keeps (a run writer's write buffer: a finished block is not
/// copied again on its way to the file).
pub(crate) struct BlockBuilder {
    /// Where the block starts in the buffer (while it holds an entry).
    start: usize,
    offsets: Vec<u32>,
}

impl BlockBuilder {
    pub(crate) fn new() -> Self {
        BlockBuilder { start: 0, offsets: Vec::new() }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Bytes the finished block would take, `out` the buffer it is in.
    pub(crate) fn estimated_len(&self, out: &[u8]) -> usize {
        let entries = if self.is_empty() { 0 } else { out.len().saturating_sub(self.start) };
        entries + 4 * self.offsets.len() + 8
    }

    /// Adds an entry at the end of `out` (where the block's earlier
    /// entries are); `run_op_id` is the merge operator's id in this run's
    /// operator table (ignored for other kinds).
    pub(crate) fn add(&mut self, out: &mut Vec<u8>, key: &[u8], stamp: Stamp, op: OpRef<'_>, run_op_id: u32) {
        if self.offsets.is_empty() {
            self.start = out.len();
        }
        self.offsets.push((out.len() - self.start) as u32);
        let b = out;
        put_varint(b, key.len() as u64);
        b.extend_from_slice(key);
        b.push(op.kind() as u8);
        put_u64(b, stamp.seq);
        put_varint(b, stamp.sub.into());
        if let OpRef::Merge { .. } = op {
            put_varint(b, run_op_id.into());
        }
        match op {
            OpRef::Put(v) => {
                put_varint(b, v.len() as u64);
                b.extend_from_slice(v);
            }
            OpRef::Merge { operand, .. } => {
                put_varint(b, operand.len() as u64);
                b.extend_from_slice(operand);
            }
            OpRef::Delete => {}
        }
    }

    /// Finishes the block in `out`: appends offsets, count and checksum;
    /// resets the builder. Returns where the block starts in `out` (it
    /// runs to the end).
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) -> usize {
        let start = if self.is_empty() { out.len() } else { self.start };
        for o in &self.offsets {
            put_u32(out, *o);
        }
        put_u32(out, self.offsets.len() as u32);
        let c = crate::codec::crc(&out[start..]);
        put_u32(out, c);
        self.offsets.clear();
        start
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

/// Where an entry's parts lie in its block's bytes ([`BlockRef::span`]).
#[derive(Debug, Clone)]
pub(crate) struct EntrySpan {
    pub key: std::ops::Range<usize>,
    pub stamp: Stamp,
    pub kind: Kind,
    /// Operator id in the run's table (merge only).
    pub run_op_id: u32,
    pub payload: std::ops::Range<usize>,
}

/// A checked data block.
#[derive(Debug)]
pub(crate) struct Block {
    /// The entries and the offset table (count and checksum cut off).
    data: Vec<u8>,
    /// Where the offset table starts.
    table: usize,
    count: usize,
}

/// A data block's bytes, borrowed: from a [`Block`], or straight from a
/// mapped run file. Every accessor stays within the bytes whatever they
/// hold (lengths saturate, missing bytes read as empty), so a block whose
/// checks passed once may be viewed again unchecked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockRef<'a> {
    /// The entries and the offset table (count and checksum cut off).
    data: &'a [u8],
    /// Where the offset table starts.
    table: usize,
    count: usize,
}

/// Where a viewed block's parts lie ([`BlockRef::shape`]): kept by a
/// cursor, it views the block's bytes again ([`BlockRef::with_shape`])
/// without reading its entry count at every entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// The bytes of the entries and the offset table.
    len: usize,
    table: usize,
    count: usize,
}

impl Shape {
    /// The bytes of the entries and the offset table.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Parses one entry from `bytes` (exactly the entry), checking everything.
fn parse_checked(bytes: &[u8], operators: usize) -> Result<RawEntry<'_>, String> {
    let mut d = Decoder::new(bytes);
    let key = d.length_prefixed(MAX_KEY_BYTES, "key")?;
    let kind_byte = d.u8("kind")?;
    let kind = Kind::from_u8(kind_byte).ok_or_else(|| format!("unknown kind {kind_byte}"))?;
    let seq = d.u64("sequence number")?;
    let sub = u32::try_from(d.varint("sub")?).map_err(|_| "sub out of range".to_string())?;
    let mut run_op_id = 0;
    let mut payload: &[u8] = &[];
    if kind == Kind::Merge {
        run_op_id = u32::try_from(d.varint("operator id")?).map_err(|_| "operator id out of range".to_string())?;
        if run_op_id as usize >= operators {
            return Err(format!("names operator {run_op_id} of a table of {operators}"));
        }
    }
    if kind != Kind::Delete {
        payload = d.length_prefixed(MAX_VALUE_BYTES, "value")?;
    }
    if d.remaining() != 0 {
        return Err(format!("{} trailing bytes", d.remaining()));
    }
    Ok(RawEntry { key, stamp: Stamp { seq, sub }, kind, run_op_id, payload })
}

impl Block {
    /// Checks a block read from disk: its checksum and offset table, so
    /// every accessor stays within the block. Entry contents are covered by
    /// the checksum; [`Block::verify_entries`] checks them one by one.
    pub(crate) fn decode(mut raw: Vec<u8>) -> Result<Block, String> {
        let BlockRef { data, table, count } = BlockRef::check(&raw)?;
        let len = data.len();
        raw.truncate(len);
        Ok(Block { data: raw, table, count })
    }

    /// The block's bytes as a view.
    pub(crate) fn view(&self) -> BlockRef<'_> {
        BlockRef { data: &self.data, table: self.table, count: self.count }
    }

    /// Checks every entry's encoding, its operator id against a run table
    /// of `operators` names, and the entries' order. Merges and fsck run
    /// this before trusting a block's contents.
    pub(crate) fn verify_entries(&self, operators: usize) -> Result<(), String> {
        self.view().verify_entries(operators)
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    pub(crate) fn size_bytes(&self) -> usize {
        self.data.len()
    }

    /// The i-th entry (see [`BlockRef::entry`]).
    pub(crate) fn entry(&self, i: usize) -> RawEntry<'_> {
        self.view().entry(i)
    }

    /// Index of the first entry not before (key, stamp) in internal order.
    pub(crate) fn seek(&self, key: &[u8], stamp: Stamp) -> usize {
        self.view().seek(key, stamp)
    }
}

impl<'a> BlockRef<'a> {
    /// Checks a block's bytes as [`Block::decode`] does (checksum, then an
    /// offset table in order and in bounds) and views them.
    pub(crate) fn check(raw: &'a [u8]) -> Result<BlockRef<'a>, String> {
        let body = check_trailing_crc(raw)?;
        let body_len = body.len();
        if body_len < 4 {
            return Err("block too short for its entry count".into());
        }
        let mut d = Decoder::new(&body[body_len - 4..]);
        let count = d.u32("entry count")? as usize;
        let table = count
            .checked_mul(4)
            .and_then(|t| (body_len - 4).checked_sub(t))
            .ok_or_else(|| format!("entry count {count} does not fit a {body_len}-byte block"))?;
        if count == 0 {
            return Err("block holds no entries".into());
        }
        let block = BlockRef { data: &body[..body_len - 4], table, count };
        let mut prev_end = None;
        for i in 0..count {
            let start = block.offset(i);
            let ok = match prev_end {
                None => start == 0,
                Some(p) => start > p,
            };
            if !ok || start >= table {
                return Err(format!("entry {i} offset {start} is out of place"));
            }
            prev_end = Some(start);
        }
        Ok(block)
    }

    /// Views a block's bytes whose [`BlockRef::check`] passed before,
    /// without checking again. Bytes that changed since view as a block of
    /// no entries, or read wrong but in bounds: never a panic.
    pub(crate) fn trusted(raw: &'a [u8]) -> BlockRef<'a> {
        let empty = BlockRef { data: &[], table: 0, count: 0 };
        let Some(body_len) = raw.len().checked_sub(4) else { return empty };
        let Some(count_at) = body_len.checked_sub(4) else { return empty };
        let count = raw.get(count_at..body_len).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        match count.checked_mul(4).and_then(|t| count_at.checked_sub(t)) {
            Some(table) => BlockRef { data: &raw[..count_at], table, count },
            None => empty,
        }
    }

    /// Checks every entry's encoding, its operator id against a run table
    /// of `operators` names, and the entries' order (see
    /// [`Block::verify_entries`]).
    pub(crate) fn verify_entries(&self, operators: usize) -> Result<(), String> {
        let mut prev: Option<RawEntry<'_>> = None;
        for i in 0..self.count {
            let end = if i + 1 < self.count { self.offset(i + 1) } else { self.table };
            let bytes = self.data.get(self.offset(i)..end).ok_or_else(|| format!("entry {i} out of bounds"))?;
            let e = parse_checked(bytes, operators).map_err(|w| format!("entry {i}: {w}"))?;
            if let Some(p) = prev {
                if cmp_internal(p.key, p.stamp, e.key, e.stamp) != Ordering::Less {
                    return Err(format!("entry {i} is out of order"));
                }
            }
            prev = Some(e);
        }
        Ok(())
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Where this view's parts lie.
    pub(crate) fn shape(&self) -> Shape {
        Shape { len: self.data.len(), table: self.table, count: self.count }
    }

    /// Views `data` (what [`BlockRef::bytes`] gave for `shape`) again as
    /// the block `shape` was taken from; a block of no entries if `data`
    /// is not as long as it was.
    pub(crate) fn with_shape(data: &'a [u8], shape: Shape) -> BlockRef<'a> {
        if data.len() != shape.len {
            return BlockRef { data: &[], table: 0, count: 0 };
        }
        BlockRef { data, table: shape.table, count: shape.count }
    }

    fn offset(&self, i: usize) -> usize {
        let at = self.table.saturating_add(i.saturating_mul(4));
        self.data.get(at..).and_then(<[u8]>::first_chunk::<4>).map_or(0, |b| u32::from_le_bytes(*b) as usize)
    }

    /// The key of entry `i` (checked at decode).
    fn key_at(&self, i: usize) -> (&'a [u8], usize) {
        let data = self.data;
        let mut pos = self.offset(i);
        let len = usize::try_from(read_varint_unchecked(data, &mut pos)).unwrap_or(usize::MAX);
        let end = pos.saturating_add(len).min(data.len());
        (data.get(pos..end).unwrap_or_default(), end)
    }

    fn stamp_at(&self, after_key: usize) -> Stamp {
        let seq = self
            .data
            .get(after_key.saturating_add(1)..)
            .and_then(<[u8]>::first_chunk::<8>)
            .map_or(0, |b| u64::from_le_bytes(*b));
        let mut pos = after_key.saturating_add(9);
        let sub = read_varint_unchecked(self.data, &mut pos) as u32;
        Stamp { seq, sub }
    }

    /// The i-th entry. In a block whose entries were verified this is exact;
    /// in any other block it stays in bounds (lengths saturate, missing
    /// bytes read as empty), so crafted bytes cannot cause a panic.
    pub(crate) fn entry(&self, i: usize) -> RawEntry<'a> {
        let span = self.span(i);
        let data = self.data;
        RawEntry {
            key: data.get(span.key).unwrap_or_default(),
            stamp: span.stamp,
            kind: span.kind,
            run_op_id: span.run_op_id,
            payload: data.get(span.payload).unwrap_or_default(),
        }
    }

    /// Where the i-th entry's key and payload lie in [`BlockRef::bytes`]
    /// (ranges that may fall outside them in a block not verified: slice
    /// with `get`), so a cursor can keep them instead of decoding again.
    pub(crate) fn span(&self, i: usize) -> EntrySpan {
        let data = self.data;
        let mut pos = self.offset(i);
        let len = usize::try_from(read_varint_unchecked(data, &mut pos)).unwrap_or(usize::MAX);
        let after_key = pos.saturating_add(len).min(data.len());
        let key = pos..after_key;
        let kind = data.get(after_key).copied().and_then(Kind::from_u8).unwrap_or(Kind::Delete);
        let stamp = self.stamp_at(after_key);
        let mut pos = after_key.saturating_add(9);
        read_varint_unchecked(data, &mut pos);
        let mut run_op_id = 0;
        let mut payload = 0..0;
        if kind == Kind::Merge {
            run_op_id = read_varint_unchecked(data, &mut pos) as u32;
        }
        if kind != Kind::Delete {
            let len = usize::try_from(read_varint_unchecked(data, &mut pos)).unwrap_or(usize::MAX);
            payload = pos..pos.saturating_add(len);
        }
        EntrySpan { key, stamp, kind, run_op_id, payload }
    }

    /// The block's entries and offset table (what [`BlockRef::span`]'s
    /// ranges index).
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.data
    }

    /// Where a point read at `read_seq` finds `key` here: None if the block
    /// holds no version of it, else the key's newest version (newer than
    /// the read or not: it says the filter was right) and the index of the
    /// first the read sees (the entry after the key's versions if none).
    /// One search when the newest is visible, as it is to most reads.
    pub(crate) fn visible(&self, key: &[u8], read_seq: u64) -> Option<(RawEntry<'a>, usize)> {
        let first = self.seek(key, Stamp { seq: u64::MAX, sub: u32::MAX });
        let newest = (first < self.count).then(|| self.entry(first)).filter(|e| e.key == key)?;
        let newest_visible = Stamp { seq: read_seq, sub: u32::MAX };
        if newest.stamp > newest_visible {
            return Some((newest, self.seek(key, newest_visible)));
        }
        Some((newest, first))
    }

    /// Index of the first entry not before (key, stamp) in internal order.
    pub(crate) fn seek(&self, key: &[u8], stamp: Stamp) -> usize {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let (k, after) = self.key_at(mid);
            let less = match compare_keys(k, key) {
                Ordering::Less => true,
                Ordering::Greater => false,
                // Same key: newer stamps sort first.
                Ordering::Equal => self.stamp_at(after) > stamp,
            };
            if less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// `a.cmp(b)`, deciding by the first 8 bytes of each, read as one
/// big-endian word, where they differ: a block's search compares a key
/// with about five others, and the call to memcmp for each took 4% of a
/// point get.
fn compare_keys(a: &[u8], b: &[u8]) -> Ordering {
    if let (Some(x), Some(y)) = (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        let (x, y) = (u64::from_be_bytes(*x), u64::from_be_bytes(*y));
        if x != y {
            return x.cmp(&y);
        }
    }
    a.cmp(b)
}

impl RawEntry<'_> {
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
        let (mut b, mut out) = (BlockBuilder::new(), b"bytes before the block".to_vec());
        for i in 0..50u32 {
            let k = format!("key{i:03}");
            b.add(&mut out, k.as_bytes(), Stamp { seq: 9, sub: 1 }, OpRef::Put(&[i as u8; 3]), 0);
            b.add(&mut out, k.as_bytes(), Stamp { seq: 5, sub: 0 }, OpRef::Merge { operator: 0, operand: &[1] }, 2);
        }
        let estimate = b.estimated_len(&out);
        let start = b.finish(&mut out);
        assert_eq!((start, out.len() - start), (22, estimate));
        let block = Block::decode(out[start..].to_vec()).unwrap();
        block.verify_entries(3).unwrap();
        assert_eq!(block.len(), 100);
        let i = block.seek(b"key010", Stamp { seq: 7, sub: u32::MAX });
        let e = block.entry(i);
        assert_eq!(e.key, b"key010");
        assert_eq!(e.stamp.seq, 5);
        assert_eq!(e.kind, Kind::Merge);
        assert_eq!(e.run_op_id, 2);
        assert_eq!(e.payload, &[1]);
        let e = block.entry(block.seek(b"key010", Stamp { seq: 9, sub: 1 }));
        assert_eq!((e.stamp.seq, e.kind, e.payload), (9, Kind::Put, &[10u8, 10, 10][..]));
        assert_eq!(block.seek(b"zzz", Stamp { seq: 0, sub: 0 }), 100);
        assert_eq!(block.seek(b"", Stamp { seq: 0, sub: 0 }), 0);
    }

    /// The cases random keys rarely draw: keys equal in their first 8
    /// bytes that differ after them, a key that is a prefix of another at
    /// and around 8 bytes, the empty key, and bytes whose order a
    /// little-endian word (or a signed byte) would reverse.
    #[test]
    fn compare_keys_orders_ties_prefixes_and_high_bytes_as_the_bytes() {
        let keys: [&[u8]; 14] = [
            b"",
            b"\x00",
            b"\x00\x00\x00\x00\x00\x00\x00\x00",
            b"\x00\x00\x00\x00\x00\x00\x00\x00\x00",
            b"abcdefg",
            b"abcdefgh",
            b"abcdefgh\x00",
            b"abcdefgha",
            b"abcdefghb",
            b"abcdefgi",
            b"\x01\x00\x00\x00\x00\x00\x00\x02",
            b"\x02\x00\x00\x00\x00\x00\x00\x01",
            b"\x7f\xff\xff\xff\xff\xff\xff\xff",
            b"\x80\x00\x00\x00\x00\x00\x00\x00",
        ];
        for a in keys {
            for b in keys {
                assert_eq!(compare_keys(a, b), a.cmp(b), "{a:?} against {b:?}");
            }
        }
    }

    proptest::proptest! {
        /// Keys compared by their first words order as their bytes do.
        #[test]
        fn compare_keys_agrees_with_the_bytes(
            a in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xfe, 0xff]), 0..20),
            b in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xfe, 0xff]), 0..20),
        ) {
            proptest::prop_assert_eq!(compare_keys(&a, &b), a.cmp(&b));
            proptest::prop_assert_eq!(compare_keys(&a, &a), std::cmp::Ordering::Equal);
        }
    }

    /// A read sees the newest version at or below its sequence number,
    /// past newer ones, and none when every version is newer.
    #[test]
    fn visible_skips_versions_newer_than_the_read() {
        let (mut b, mut out) = (BlockBuilder::new(), Vec::new());
        b.add(&mut out, b"a", Stamp { seq: 3, sub: 0 }, OpRef::Put(b"a3"), 0);
        for seq in [9, 7, 5] {
            b.add(&mut out, b"k", Stamp { seq, sub: 0 }, OpRef::Put(format!("k{seq}").as_bytes()), 0);
        }
        b.add(&mut out, b"z", Stamp { seq: 1, sub: 0 }, OpRef::Delete, 0);
        let start = b.finish(&mut out);
        let block = BlockRef::check(&out[start..]).unwrap();
        let seen = |key: &[u8], read: u64| {
            block.visible(key, read).map(|(newest, i)| {
                let e = block.entry(i);
                (newest.stamp.seq, (e.key == key).then_some(e.payload))
            })
        };
        assert_eq!(seen(b"k", 100), Some((9, Some(&b"k9"[..]))));
        assert_eq!(seen(b"k", 9), Some((9, Some(&b"k9"[..]))));
        assert_eq!(seen(b"k", 8), Some((9, Some(&b"k7"[..]))));
        assert_eq!(seen(b"k", 5), Some((9, Some(&b"k5"[..]))));
        assert_eq!(seen(b"k", 4), Some((9, None)));
        assert_eq!(seen(b"b", 100), None);
        assert_eq!(seen(b"zz", 100), None);
        assert_eq!(seen(b"a", 2), Some((3, None)));
    }

    proptest::proptest! {
        /// Seeks agree with a scan of the entries, with
        /// keys that tie on their first 16 bytes, end within them, or differ
        /// only past them, and several versions per key.
        #[test]
        fn seeks_agree_with_a_scan(
            mut keys in proptest::collection::vec((0u8..3, 0usize..20, proptest::num::u8::ANY), 1..60),
            probe in (0u8..3, 0usize..20, proptest::num::u8::ANY),
            seq in 0u64..4,
        ) {
            // A key: a shared prefix of `len` bytes, then one distinguishing byte.
            let key = |(first, len, last): (u8, usize, u8)| -> Vec<u8> {
                let mut k = vec![first; len];
                k.push(last);
                k
            };
            keys.sort_by_key(|&k| key(k));
            keys.dedup_by_key(|k| key(*k));
            let (mut b, mut out) = (BlockBuilder::new(), Vec::new());
            let mut all = Vec::new();
            for &k in &keys {
                for s in [3u64, 1] {
                    let stamp = Stamp { seq: s, sub: 0 };
                    b.add(&mut out, &key(k), stamp, OpRef::Put(b"v"), 0);
                    all.push((key(k), stamp));
                }
            }
            b.finish(&mut out);
            let block = Block::decode(out).unwrap();
            let (pk, ps) = (key(probe), Stamp { seq, sub: 0 });
            let want = all.iter().position(|(k, st)| cmp_internal(k, *st, &pk, ps) != Ordering::Less).unwrap_or(all.len());
            proptest::prop_assert_eq!(block.seek(&pk, ps), want);
        }
    }

    #[test]
    fn crafted_lengths_stay_in_bounds() {
        // Found by fuzzing: huge key and value lengths behind a valid crc.
        for hex in [
            "ffffffffffffffffff010000000001000000f5fd93b6",
            "0001000000000000000000ffffffffffffffffff010000000001000000dd695d96",
        ] {
            let raw: Vec<u8> =
                (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
            if let Ok(b) = Block::decode(raw) {
                let e = b.entry(0);
                let _ = b.seek(e.key, e.stamp);
                assert!(b.verify_entries(1).is_err());
            }
        }
    }

    #[test]
    fn every_bit_flip_and_truncation_is_refused() {
        let (mut b, mut raw) = (BlockBuilder::new(), Vec::new());
        b.add(&mut raw, b"a", Stamp { seq: 1, sub: 0 }, OpRef::Put(b"v"), 0);
        b.add(&mut raw, b"b", Stamp { seq: 1, sub: 1 }, OpRef::Delete, 0);
        b.add(&mut raw, b"c", Stamp { seq: 1, sub: 2 }, OpRef::Merge { operator: 0, operand: b"o" }, 0);
        b.finish(&mut raw);
        Block::decode(raw.clone()).unwrap().verify_entries(1).unwrap();
        assert!(Block::decode(raw.clone()).unwrap().verify_entries(0).is_err(), "operator outside the run's table");
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
