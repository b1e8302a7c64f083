//! On-disk layouts of the intent log (docs/format.md, section 11): the
//! segment header, the group header and the record, with explicit
//! little-endian encoders and bounds-checked decoders that never panic.
//!
//! Decoders return `Err(what)` strings; callers turn them into errors that
//! name the file and offset, or, during recovery, into "the log ends here".

use std::ops::Range;

/// The unit of writing: groups start on block boundaries and are padded to
/// whole blocks, so a block holding acknowledged records is never rewritten.
pub(crate) const BLOCK: u64 = 4096;
/// The first 8 bytes of every segment.
pub(crate) const SEGMENT_MAGIC: [u8; 8] = *b"LRDRLSEG";
/// The first 8 bytes of every group.
pub(crate) const GROUP_MAGIC: [u8; 8] = *b"LRDRLGRP";
/// The log format version this build writes and the newest it reads.
pub(crate) const LOG_FORMAT_VERSION: u32 = 1;
/// Incompatible feature bit: the segment header carries a random nonce
/// (bytes 80..92) that every group header of the segment repeats in its
/// formerly reserved field. Incompatible because an older build would
/// read such groups as invalid and silently drop acknowledged records.
pub(crate) const FEATURE_GROUP_NONCE: u64 = 1;
/// Incompatible feature bits this build understands.
pub(crate) const KNOWN_INCOMPAT: u64 = FEATURE_GROUP_NONCE;
/// Encoded size of the fixed part of a segment header, up to its crc.
pub(crate) const SEGMENT_HEADER_BYTES: usize = 80;
/// Encoded size of a segment header with the nonce extension (nonce, then
/// the crc32c of the nonce); the rest of block 0 is zero.
pub(crate) const SEGMENT_HEADER_EXT_BYTES: usize = 92;
/// Encoded size of a group header.
pub(crate) const GROUP_HEADER_BYTES: usize = 64;
/// Bytes a record adds to its payload: lsn, prev crc, length, crc.
pub(crate) const RECORD_OVERHEAD: usize = 20;

/// Why a decode failed.
pub(crate) type DecodeResult<T> = std::result::Result<T, String>;

fn crc(data: &[u8]) -> u32 {
    larder_io::codec::crc(data)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Rounds `n` up to a whole number of blocks.
pub(crate) fn align_up(n: u64) -> u64 {
    n.div_ceil(BLOCK) * BLOCK
}

/// Block 0 of a segment file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    /// The id in the file name.
    pub segment_id: u64,
    /// A value no earlier (re)start of any segment of this log used.
    pub epoch: u64,
    /// The LSN the first group of this use of the segment carries.
    pub first_lsn: u64,
    /// The durable LSN when the segment was started.
    pub acked_lsn: u64,
    /// The crc of the record before `first_lsn` (0 for a new log).
    pub prev_crc: u32,
    /// The segment's size in bytes when it was started.
    pub segment_bytes: u64,
    /// A random value chosen when the segment was started, repeated in
    /// every group header of this use, so bytes inside a record payload
    /// (which cannot know it) never pass for a group header. 0: a segment
    /// written before the nonce existed; its groups carry 0.
    pub nonce: u64,
}

/// What the first block of a segment file holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HeaderRead {
    /// All zeros: created and never started.
    Unused,
    /// Not a valid header: a torn rewrite or damage (the reason).
    Invalid(String),
    /// A newer format version (the version found).
    Newer(u32),
    /// Incompatible feature bits this build does not know.
    UnknownFeature(u64),
    /// A valid header.
    Valid(SegmentHeader),
}

impl SegmentHeader {
    /// The whole first block: the header then zeros.
    pub(crate) fn encode_block(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(BLOCK as usize);
        out.extend_from_slice(&SEGMENT_MAGIC);
        out.extend_from_slice(&LOG_FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // reserved
        out.extend_from_slice(&0u64.to_le_bytes()); // compat features
        let incompat = if self.nonce != 0 { FEATURE_GROUP_NONCE } else { 0 };
        out.extend_from_slice(&incompat.to_le_bytes());
        out.extend_from_slice(&self.segment_id.to_le_bytes());
        out.extend_from_slice(&self.epoch.to_le_bytes());
        out.extend_from_slice(&self.first_lsn.to_le_bytes());
        out.extend_from_slice(&self.acked_lsn.to_le_bytes());
        out.extend_from_slice(&self.segment_bytes.to_le_bytes());
        out.extend_from_slice(&self.prev_crc.to_le_bytes());
        let c = crc(&out);
        out.extend_from_slice(&c.to_le_bytes());
        debug_assert_eq!(out.len(), SEGMENT_HEADER_BYTES);
        if self.nonce != 0 {
            // The extension has its own crc so the fixed part keeps its
            // layout (and its crc) for every feature combination.
            out.extend_from_slice(&self.nonce.to_le_bytes());
            let c = crc(&out[SEGMENT_HEADER_BYTES..]);
            out.extend_from_slice(&c.to_le_bytes());
            debug_assert_eq!(out.len(), SEGMENT_HEADER_EXT_BYTES);
        }
        out.resize(BLOCK as usize, 0);
        out
    }

    /// Classifies the first bytes of a segment file. The checksum is checked
    /// first, then magic and version (a newer version keeps the checksum
    /// where it is), then feature flags.
    pub(crate) fn decode(b: &[u8]) -> HeaderRead {
        if b.len() < SEGMENT_HEADER_BYTES {
            // A creation cut by a crash (zeros, never started) is unused as
            // a whole one is: the clean-close open and the full recovery
            // must agree on it, or every later open recovers in full.
            if b.iter().all(|&x| x == 0) {
                return HeaderRead::Unused;
            }
            return HeaderRead::Invalid(format!("file of {} bytes is too short for a segment header", b.len()));
        }
        let full = b;
        let b = &b[..SEGMENT_HEADER_BYTES];
        if b.iter().all(|&x| x == 0) {
            return HeaderRead::Unused;
        }
        // The checksum first (every version keeps it at byte 76, over bytes
        // 0..76): a damaged header is damage, never "bad magic" or a newer
        // version, so recovery can treat the segment as free.
        let stored = u32_at(b, 76);
        let actual = crc(&b[..76]);
        if stored != actual {
            return HeaderRead::Invalid(format!("checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"));
        }
        if b[..8] != SEGMENT_MAGIC {
            return HeaderRead::Invalid("bad magic".into());
        }
        let version = u32_at(b, 8);
        if version > LOG_FORMAT_VERSION {
            return HeaderRead::Newer(version);
        }
        if version == 0 {
            return HeaderRead::Invalid("format version 0 was never written".into());
        }
        let incompat = u64_at(b, 24);
        if incompat & !KNOWN_INCOMPAT != 0 {
            return HeaderRead::UnknownFeature(incompat & !KNOWN_INCOMPAT);
        }
        let mut nonce = 0;
        if incompat & FEATURE_GROUP_NONCE != 0 {
            let Some(ext) = full.get(SEGMENT_HEADER_BYTES..SEGMENT_HEADER_EXT_BYTES) else {
                return HeaderRead::Invalid("file too short for the segment header's nonce".into());
            };
            let stored = u32_at(ext, 8);
            let actual = crc(&ext[..8]);
            if stored != actual {
                return HeaderRead::Invalid(format!(
                    "nonce checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
                ));
            }
            nonce = u64_at(ext, 0);
            if nonce == 0 {
                return HeaderRead::Invalid("nonce feature set with a zero nonce".into());
            }
        }
        HeaderRead::Valid(SegmentHeader {
            nonce,
            segment_id: u64_at(b, 32),
            epoch: u64_at(b, 40),
            first_lsn: u64_at(b, 48),
            acked_lsn: u64_at(b, 56),
            segment_bytes: u64_at(b, 64),
            prev_crc: u32_at(b, 72),
        })
    }
}

/// The header at the start of every group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GroupHeader {
    /// The segment the group was written to.
    pub segment_id: u64,
    /// The epoch of the segment header when the group was written.
    pub epoch: u64,
    /// The LSN of the group's first record.
    pub first_lsn: u64,
    /// Records in the group (at least 1).
    pub count: u32,
    /// Bytes of records after the header (before padding).
    pub body_len: u32,
    /// The highest LSN durable before this group was written.
    pub acked_lsn: u64,
    /// The segment header's nonce (0 in segments without one).
    pub nonce: u64,
}

impl GroupHeader {
    /// Appends the encoded header.
    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&GROUP_MAGIC);
        out.extend_from_slice(&LOG_FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&self.segment_id.to_le_bytes());
        out.extend_from_slice(&self.epoch.to_le_bytes());
        out.extend_from_slice(&self.first_lsn.to_le_bytes());
        out.extend_from_slice(&self.acked_lsn.to_le_bytes());
        out.extend_from_slice(&self.body_len.to_le_bytes());
        out.extend_from_slice(&self.nonce.to_le_bytes());
        let c = crc(&out[start..]);
        out.extend_from_slice(&c.to_le_bytes());
    }

    /// Decodes and checks a group header from the first bytes of `b`.
    pub(crate) fn decode(b: &[u8]) -> DecodeResult<GroupHeader> {
        if b.len() < GROUP_HEADER_BYTES {
            return Err(format!("{} bytes is too short for a group header", b.len()));
        }
        let b = &b[..GROUP_HEADER_BYTES];
        if b[..8] != GROUP_MAGIC {
            return Err(if b.iter().all(|&x| x == 0) { "no group (zeros)".into() } else { "bad group magic".into() });
        }
        let stored = u32_at(b, 60);
        let actual = crc(&b[..60]);
        if stored != actual {
            return Err(format!("group header checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"));
        }
        let version = u32_at(b, 8);
        if version != LOG_FORMAT_VERSION {
            return Err(format!("group format version {version} in a version {LOG_FORMAT_VERSION} segment"));
        }
        let h = GroupHeader {
            count: u32_at(b, 12),
            segment_id: u64_at(b, 16),
            epoch: u64_at(b, 24),
            first_lsn: u64_at(b, 32),
            acked_lsn: u64_at(b, 40),
            body_len: u32_at(b, 48),
            nonce: u64_at(b, 52),
        };
        if h.count == 0 || (h.body_len as u64) < h.count as u64 * RECORD_OVERHEAD as u64 {
            return Err(format!("group of {} records cannot fit {} bytes", h.count, h.body_len));
        }
        Ok(h)
    }

    /// Bytes the group occupies on disk, padding included.
    pub(crate) fn padded_len(&self) -> u64 {
        align_up(GROUP_HEADER_BYTES as u64 + self.body_len as u64)
    }
}

/// Appends one record; returns its crc (the next record's `prev_crc`).
pub(crate) fn encode_record(out: &mut Vec<u8>, lsn: u64, prev_crc: u32, payload: &[u8]) -> u32 {
    let start = out.len();
    out.extend_from_slice(&lsn.to_le_bytes());
    out.extend_from_slice(&prev_crc.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
    let c = crc(&out[start..]);
    out.extend_from_slice(&c.to_le_bytes());
    c
}

/// A record checked by [`decode_record`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RecordView {
    /// Where the payload lies in the buffer given.
    pub payload: Range<usize>,
    /// The record's own crc.
    pub crc: u32,
    /// Where the next record starts.
    pub end: usize,
}

/// Decodes the record at `b[pos..]` and checks that it is record `lsn`,
/// chained to `prev_crc`, intact.
pub(crate) fn decode_record(b: &[u8], pos: usize, lsn: u64, prev_crc: u32) -> DecodeResult<RecordView> {
    let head = pos.checked_add(16).filter(|&e| e <= b.len()).ok_or("record header runs past the group")?;
    let found_lsn = u64_at(b, pos);
    let found_prev = u32_at(b, pos + 8);
    let len = u32_at(b, pos + 12) as usize;
    let end = head.checked_add(len).and_then(|e| e.checked_add(4)).filter(|&e| e <= b.len());
    let Some(end) = end else { return Err(format!("record length {len} runs past the group")) };
    let stored = u32_at(b, end - 4);
    let actual = crc(&b[pos..end - 4]);
    if stored != actual {
        return Err(format!("record checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"));
    }
    if found_lsn != lsn {
        return Err(format!("record carries LSN {found_lsn}, expected {lsn}"));
    }
    if found_prev != prev_crc {
        return Err(format!("record chain broken: prev crc {found_prev:#010x}, expected {prev_crc:#010x}"));
    }
    Ok(RecordView { payload: head..end - 4, crc: stored, end })
}

/// Where (offset in the body) and why a group body stopped being valid.
pub(crate) type BodyStop = (usize, String);

/// The records of one group body, checked one by one: LSNs from
/// `first_lsn`, chained from `prev_crc`. Returns the records read before
/// the first bad one, and why it stopped early if it did.
pub(crate) fn decode_group_body(
    body: &[u8],
    h: &GroupHeader,
    prev_crc: u32,
) -> (Vec<(u64, RecordView)>, Option<BodyStop>) {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut chain = prev_crc;
    for i in 0..h.count as u64 {
        let lsn = h.first_lsn.wrapping_add(i);
        match decode_record(body, pos, lsn, chain) {
            Ok(r) => {
                chain = r.crc;
                pos = r.end;
                out.push((lsn, r));
            }
            Err(what) => return (out, Some((pos, what))),
        }
    }
    if pos != body.len() {
        return (out, Some((pos, format!("{} bytes after the last record", body.len() - pos))));
    }
    (out, None)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn seg() -> SegmentHeader {
        SegmentHeader {
            segment_id: 3,
            epoch: 9,
            first_lsn: 101,
            acked_lsn: 100,
            prev_crc: 0xdead_beef,
            segment_bytes: 1 << 16,
            nonce: 0x1234_5678_9abc_def0,
        }
    }

    fn group(payloads: &[&[u8]]) -> (GroupHeader, Vec<u8>) {
        let mut body = Vec::new();
        let mut chain = 7;
        for (i, p) in payloads.iter().enumerate() {
            chain = encode_record(&mut body, 50 + i as u64, chain, p);
        }
        let h = GroupHeader {
            segment_id: 3,
            epoch: 9,
            first_lsn: 50,
            count: payloads.len() as u32,
            body_len: body.len() as u32,
            acked_lsn: 49,
            nonce: 0x55,
        };
        let mut out = Vec::new();
        h.encode_into(&mut out);
        out.extend_from_slice(&body);
        (h, out)
    }

    #[test]
    fn segment_header_round_trips_and_refuses_flips() {
        let b = seg().encode_block();
        assert_eq!(b.len(), BLOCK as usize);
        assert_eq!(SegmentHeader::decode(&b), HeaderRead::Valid(seg()));
        for bit in 0..SEGMENT_HEADER_EXT_BYTES * 8 {
            let mut x = b.clone();
            x[bit / 8] ^= 1 << (bit % 8);
            assert!(!matches!(SegmentHeader::decode(&x), HeaderRead::Valid(_)), "bit {bit}");
        }
        assert_eq!(SegmentHeader::decode(&[0u8; 4096]), HeaderRead::Unused);
        // A header without a nonce (written before the feature) still reads.
        let old = SegmentHeader { nonce: 0, ..seg() };
        assert_eq!(SegmentHeader::decode(&old.encode_block()), HeaderRead::Valid(old));
        assert!(matches!(SegmentHeader::decode(&b[..40]), HeaderRead::Invalid(_)));
    }

    #[test]
    fn newer_version_and_unknown_features_are_classified() {
        let mut b = seg().encode_block();
        b[8] = 2;
        // Without a matching checksum a changed version is damage.
        assert!(matches!(SegmentHeader::decode(&b), HeaderRead::Invalid(_)));
        let c = crc(&b[..76]);
        b[76..80].copy_from_slice(&c.to_le_bytes());
        assert_eq!(SegmentHeader::decode(&b), HeaderRead::Newer(2));
        let mut b = seg().encode_block();
        b[24] = 0x4;
        let c = crc(&b[..76]);
        b[76..80].copy_from_slice(&c.to_le_bytes());
        assert_eq!(SegmentHeader::decode(&b), HeaderRead::UnknownFeature(4));
    }

    #[test]
    fn a_short_file_of_zeros_is_unused_and_any_other_short_file_damaged() {
        for len in [0, 1, 40, SEGMENT_HEADER_BYTES - 1] {
            assert!(matches!(SegmentHeader::decode(&vec![0u8; len]), HeaderRead::Unused), "{len} zeros");
        }
        let mut short = vec![0u8; 40];
        short[39] = 1;
        assert!(matches!(SegmentHeader::decode(&short), HeaderRead::Invalid(_)));
        let whole = seg().encode_block();
        assert!(matches!(SegmentHeader::decode(&whole[..SEGMENT_HEADER_BYTES - 1]), HeaderRead::Invalid(_)));
    }

    #[test]
    fn group_round_trips() {
        let (h, b) = group(&[b"one", b"", &[7u8; 300]]);
        assert_eq!(GroupHeader::decode(&b).unwrap(), h);
        let (recs, stop) = decode_group_body(&b[GROUP_HEADER_BYTES..], &h, 7);
        assert_eq!(stop, None);
        assert_eq!(recs.len(), 3);
        let body = &b[GROUP_HEADER_BYTES..];
        assert_eq!(&body[recs[0].1.payload.clone()], b"one");
        assert_eq!(recs[2].0, 52);
        assert_eq!(h.padded_len(), BLOCK);
    }

    #[test]
    fn any_flip_in_a_group_is_detected() {
        let (h, b) = group(&[b"alpha", b"beta"]);
        for bit in 0..b.len() * 8 {
            let mut x = b.clone();
            x[bit / 8] ^= 1 << (bit % 8);
            let ok = match GroupHeader::decode(&x) {
                Err(_) => false,
                Ok(h2) => {
                    let body = x.get(GROUP_HEADER_BYTES..GROUP_HEADER_BYTES + h2.body_len as usize);
                    body.is_some_and(|body| decode_group_body(body, &h2, 7).1.is_none())
                }
            };
            assert!(!ok, "flip of bit {bit} not detected");
        }
        let (_, stop) = decode_group_body(&b[GROUP_HEADER_BYTES..], &h, 8);
        assert!(stop.unwrap().1.contains("chain"));
    }

    #[test]
    fn truncated_bodies_stop_without_panicking() {
        let (h, b) = group(&[b"alpha", b"beta"]);
        for len in GROUP_HEADER_BYTES..b.len() {
            let (_, stop) = decode_group_body(&b[GROUP_HEADER_BYTES..len], &h, 7);
            assert!(stop.is_some(), "length {len}");
        }
    }

    #[test]
    fn align_up_rounds_to_blocks() {
        assert_eq!(align_up(0), 0);
        assert_eq!(align_up(1), BLOCK);
        assert_eq!(align_up(BLOCK), BLOCK);
        assert_eq!(align_up(BLOCK + 1), 2 * BLOCK);
    }
}
