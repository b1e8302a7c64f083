//! Entry points for the fuzz targets `heap_arena_record` and
//! `heap_arena_load` and their stable replays: arbitrary bytes must be
//! accepted or refused, never panic.

use super::{record, Arena};

/// Reads `data` as a record's key (8 bytes, little-endian) followed by the
/// record's bytes, and decodes it. Returns whether it was accepted; an
/// accepted record must re-encode to the same bytes, and a lone header
/// must also load as an arena.
pub fn record(data: &[u8]) -> bool {
    let Some((key, bytes)) = data.split_first_chunk::<8>() else { return false };
    let key = u64::from_le_bytes(*key);
    match record::decode(key, bytes) {
        Ok(decoded) => {
            assert_eq!(decoded.encode(), bytes, "an accepted arena record did not round-trip");
            if key == record::HEADER_KEY {
                assert!(Arena::load([(key, bytes)]).is_ok(), "a lone header did not load");
            }
            true
        }
        Err(_) => false,
    }
}

/// A key and record as [`record`] reads them, for seed corpora.
pub fn framed(key: u64, bytes: &[u8]) -> Vec<u8> {
    let mut out = key.to_le_bytes().to_vec();
    out.extend_from_slice(bytes);
    out
}

/// Reads `data` as a set of records, each an 8-byte little-endian key, a
/// 2-byte little-endian length and that many bytes, and loads an arena
/// from them. Returns whether the set was accepted. An accepted set must
/// give an arena that passes [`Arena::verify`], whose records are the
/// ones given, and that can still allocate and free.
pub fn records(data: &[u8]) -> bool {
    let Some(records) = split_records(data) else { return false };
    let Ok(mut arena) = Arena::load(records.iter().copied()) else { return false };
    if let Err(e) = arena.verify() {
        panic!("a loaded arena is inconsistent: {e}");
    }
    if !records.is_empty() {
        let mut given: Vec<(u64, Vec<u8>)> = records.iter().map(|&(k, v)| (k, v.to_vec())).collect();
        given.sort_unstable_by_key(|&(k, _)| k);
        assert_eq!(arena.all_records(), given, "a loaded arena's records differ from the ones it was loaded from");
    }
    // Persist a reservation, grow past every claimed byte, then allocate
    // and free a small and a large block.
    arena.take_dirty_records();
    arena.records_durable();
    let mut end = arena.claimed_ranges().last().map_or(0, |&(start, len)| start + len);
    let mut grow = |bytes: u64| -> Result<u64, super::GrowError> {
        let start = end;
        end = end.checked_add(bytes).ok_or("the object cannot grow past 2^64 bytes")?;
        Ok(start)
    };
    for size in [16, 5000] {
        if let Ok(block) = arena.alloc(size, 8, &mut grow) {
            assert!(arena.check(block.offset, size, block.generation).is_ok());
            assert!(arena.free(block.offset, block.generation).is_ok());
        }
    }
    if let Err(e) = arena.verify() {
        panic!("a loaded arena became inconsistent after an alloc and a free: {e}");
    }
    true
}

/// Splits [`records`]' input; `None` if a record is cut short.
fn split_records(mut data: &[u8]) -> Option<Vec<(u64, &[u8])>> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let (key, rest) = data.split_first_chunk::<8>()?;
        let (len, rest) = rest.split_first_chunk::<2>()?;
        let len = usize::from(u16::from_le_bytes(*len));
        if rest.len() < len {
            return None;
        }
        out.push((u64::from_le_bytes(*key), &rest[..len]));
        data = &rest[len..];
    }
    Some(out)
}

/// A set of records as [`records`] reads them, for seed corpora; `None`
/// if a record is longer than 65,535 bytes.
pub fn framed_set(records: &[(u64, Vec<u8>)]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for (key, bytes) in records {
        out.extend_from_slice(&key.to_le_bytes());
        out.extend_from_slice(&u16::try_from(bytes.len()).ok()?.to_le_bytes());
        out.extend_from_slice(bytes);
    }
    Some(out)
}
