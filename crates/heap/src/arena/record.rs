//! The arena's persisted records (docs/format.md, section 18, "Arena
//! records"): the header, one record per small span and one per large
//! block. Each is versioned, little-endian, exactly as long as its fields
//! call for, and ends with a crc32c of all bytes before it. Decoders check
//! the length before reading (a count field is only believed once the
//! bytes it calls for are there) and refuse anything non-canonical, so a
//! record that decodes re-encodes to the same bytes.

use super::classes::{self, CLASS_COUNT, PAGE_BYTES, SPAN_BYTES};
use super::error::ArenaError;

/// Version of every arena record this build writes and the newest it reads.
pub const RECORD_VERSION: u8 = 1;

/// Key of the header record; every other record's key is its offset.
pub const HEADER_KEY: u64 = u64::MAX;

const KIND_HEADER: u8 = 1;
const KIND_SPAN: u8 = 2;
const KIND_LARGE: u8 = 3;

/// Bytes of the header before the claimed ranges.
const HEADER_FIXED: usize = 16;
/// Bytes of a small-span record before its bitmap.
const SPAN_FIXED: usize = 16;
/// Bytes of a large-block record.
const LARGE_BYTES: usize = 36;
const CRC_BYTES: usize = 4;

/// A decoded arena record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Record {
    Header { reserved: u64, claimed: Vec<(u64, u64)> },
    Span { offset: u64, class: usize, generations: Vec<u64> },
    Large { offset: u64, pages: u64, generation: u64 },
}

impl Record {
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            Record::Header { reserved, claimed } => encode_header(*reserved, claimed),
            Record::Span { offset, class, generations } => encode_span(*offset, *class, generations),
            Record::Large { offset, pages, generation } => encode_large(*offset, *pages, *generation),
        }
    }
}

fn finish(mut out: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

pub(crate) fn encode_header(reserved: u64, claimed: &[(u64, u64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_FIXED + 16 * claimed.len() + CRC_BYTES);
    out.extend_from_slice(&[RECORD_VERSION, KIND_HEADER, 0, 0]);
    out.extend_from_slice(&(claimed.len() as u32).to_le_bytes());
    out.extend_from_slice(&reserved.to_le_bytes());
    for &(start, len) in claimed {
        out.extend_from_slice(&start.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
    }
    finish(out)
}

/// `generations` has one entry per slot of the class, 0 for a free slot.
pub(crate) fn encode_span(offset: u64, class: usize, generations: &[u64]) -> Vec<u8> {
    let bitmap_bytes = generations.len().div_ceil(8);
    let live = generations.iter().filter(|&&g| g != 0).count();
    let mut out = Vec::with_capacity(SPAN_FIXED + bitmap_bytes + 8 * live + CRC_BYTES);
    out.extend_from_slice(&[RECORD_VERSION, KIND_SPAN, class as u8, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&offset.to_le_bytes());
    let bitmap_at = out.len();
    out.resize(bitmap_at + bitmap_bytes, 0);
    for (slot, &generation) in generations.iter().enumerate() {
        if generation != 0 {
            out[bitmap_at + slot / 8] |= 1 << (slot % 8);
        }
    }
    for &generation in generations.iter().filter(|&&g| g != 0) {
        out.extend_from_slice(&generation.to_le_bytes());
    }
    finish(out)
}

pub(crate) fn encode_large(offset: u64, pages: u64, generation: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(LARGE_BYTES);
    out.extend_from_slice(&[RECORD_VERSION, KIND_LARGE, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&pages.to_le_bytes());
    out.extend_from_slice(&generation.to_le_bytes());
    finish(out)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Decodes the record stored under `key`. Checks, in order: the minimum
/// length, the checksum, the version, the kind (the header under
/// [`HEADER_KEY`], a span or large block elsewhere), then the fields.
pub(crate) fn decode(key: u64, bytes: &[u8]) -> Result<Record, ArenaError> {
    let corrupt = |what| ArenaError::corrupt(key, what);
    if bytes.len() < 2 + CRC_BYTES {
        return Err(corrupt("shorter than any record"));
    }
    let body = bytes.len() - CRC_BYTES;
    if crc32c::crc32c(&bytes[..body]) != u32_at(bytes, body) {
        return Err(corrupt("checksum mismatch"));
    }
    match bytes[0] {
        0 => return Err(corrupt("version 0")),
        RECORD_VERSION => {}
        version => return Err(ArenaError::NewerRecord { key, version }),
    }
    match (bytes[1], key == HEADER_KEY) {
        (KIND_HEADER, true) => decode_header(key, bytes),
        (KIND_SPAN, false) => decode_span(key, bytes),
        (KIND_LARGE, false) => decode_large(key, bytes),
        (KIND_HEADER | KIND_SPAN | KIND_LARGE, _) => Err(corrupt("record kind does not match its key")),
        _ => Err(corrupt("unknown record kind")),
    }
}

fn decode_header(key: u64, bytes: &[u8]) -> Result<Record, ArenaError> {
    let corrupt = |what| ArenaError::corrupt(key, what);
    if bytes.len() < HEADER_FIXED + CRC_BYTES {
        return Err(corrupt("header shorter than its fixed fields"));
    }
    if bytes[2] != 0 || bytes[3] != 0 {
        return Err(corrupt("header reserved bytes are not zero"));
    }
    let count = u32_at(bytes, 4) as usize;
    if bytes.len() - HEADER_FIXED - CRC_BYTES != 16 * count {
        return Err(corrupt("header length does not match its range count"));
    }
    let reserved = u64_at(bytes, 8);
    if reserved == 0 {
        return Err(corrupt("generation reservation is 0 (generation 0 is user bytes)"));
    }
    let mut claimed = Vec::with_capacity(count);
    let mut previous_end = None;
    for i in 0..count {
        let at = HEADER_FIXED + 16 * i;
        let (start, len) = (u64_at(bytes, at), u64_at(bytes, at + 8));
        if !start.is_multiple_of(PAGE_BYTES) || !len.is_multiple_of(PAGE_BYTES) || len == 0 {
            return Err(corrupt("claimed range is not whole pages"));
        }
        let Some(end) = start.checked_add(len) else { return Err(corrupt("claimed range wraps around")) };
        if previous_end.is_some_and(|previous| start <= previous) {
            return Err(corrupt("claimed ranges are not ascending, disjoint and apart"));
        }
        previous_end = Some(end);
        claimed.push((start, len));
    }
    Ok(Record::Header { reserved, claimed })
}

fn decode_span(key: u64, bytes: &[u8]) -> Result<Record, ArenaError> {
    let corrupt = |what| ArenaError::corrupt(key, what);
    if bytes.len() < SPAN_FIXED + CRC_BYTES {
        return Err(corrupt("span record shorter than its fixed fields"));
    }
    let class = usize::from(bytes[2]);
    if class >= CLASS_COUNT {
        return Err(corrupt("span class out of range"));
    }
    if bytes[3..8].iter().any(|&b| b != 0) {
        return Err(corrupt("span reserved bytes are not zero"));
    }
    let offset = u64_at(bytes, 8);
    if offset != key {
        return Err(corrupt("span offset differs from its key"));
    }
    if !offset.is_multiple_of(PAGE_BYTES) || offset.checked_add(SPAN_BYTES).is_none() {
        return Err(corrupt("span offset is not page-aligned or the span wraps around"));
    }
    let slots = classes::slots(class) as usize;
    let bitmap_bytes = slots.div_ceil(8);
    if bytes.len() < SPAN_FIXED + bitmap_bytes + CRC_BYTES {
        return Err(corrupt("span record shorter than its bitmap"));
    }
    let bitmap = &bytes[SPAN_FIXED..SPAN_FIXED + bitmap_bytes];
    if !slots.is_multiple_of(8) && bitmap[bitmap_bytes - 1] >> (slots % 8) != 0 {
        return Err(corrupt("span bitmap marks slots past the span's end"));
    }
    let live = bitmap.iter().map(|b| b.count_ones() as usize).sum::<usize>();
    if bytes.len() != SPAN_FIXED + bitmap_bytes + 8 * live + CRC_BYTES {
        return Err(corrupt("span record length does not match its bitmap"));
    }
    let mut generations = vec![0u64; slots];
    let mut at = SPAN_FIXED + bitmap_bytes;
    for (slot, generation) in generations.iter_mut().enumerate() {
        if bitmap[slot / 8] & (1 << (slot % 8)) != 0 {
            *generation = u64_at(bytes, at);
            at += 8;
            if *generation == 0 {
                return Err(corrupt("live slot has generation 0 (generation 0 is user bytes)"));
            }
        }
    }
    Ok(Record::Span { offset, class, generations })
}

fn decode_large(key: u64, bytes: &[u8]) -> Result<Record, ArenaError> {
    let corrupt = |what| ArenaError::corrupt(key, what);
    if bytes.len() != LARGE_BYTES {
        return Err(corrupt("large-block record has the wrong length"));
    }
    if bytes[2..8].iter().any(|&b| b != 0) {
        return Err(corrupt("large-block reserved bytes are not zero"));
    }
    let (offset, pages, generation) = (u64_at(bytes, 8), u64_at(bytes, 16), u64_at(bytes, 24));
    if offset != key {
        return Err(corrupt("large-block offset differs from its key"));
    }
    let fits = pages.checked_mul(PAGE_BYTES).and_then(|len| offset.checked_add(len)).is_some();
    if !offset.is_multiple_of(PAGE_BYTES) || pages == 0 || !fits {
        return Err(corrupt("large block is not page-aligned, empty, or wraps around"));
    }
    if generation == 0 {
        return Err(corrupt("large-block generation is 0 (reserved for user bytes)"));
    }
    Ok(Record::Large { offset, pages, generation })
}
