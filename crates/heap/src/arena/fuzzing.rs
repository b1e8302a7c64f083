//! Entry points for the fuzz target `heap_arena_record` and its stable
//! replay: arbitrary bytes must be accepted or refused, never panic.

use super::record;

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
                assert!(super::Arena::load([(key, bytes)]).is_ok(), "a lone header did not load");
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
