//! What an intent-log record carries for the object layer.
//!
//! Layout (docs/format.md, "Log record payloads"): a tag byte, then the
//! tag's body. Tag 1 is an index batch: the encoded `WriteBatch` that the
//! record applies, after-images and merge operands only, never an
//! operation to re-execute. Later tags (large writes with extents and their
//! block checksums) extend this without changing tag 1.

use larder_index::WriteBatch;

/// Tag of a record applying one index batch.
const TAG_BATCH: u8 = 1;

/// A decoded record payload.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Payload {
    /// Apply this batch to the index at the record's LSN.
    Batch(WriteBatch),
}

/// Encodes a batch record.
pub(crate) fn encode_batch(batch: &WriteBatch) -> Vec<u8> {
    let bytes = batch.as_bytes();
    let mut out = Vec::with_capacity(1 + bytes.len());
    out.push(TAG_BATCH);
    out.extend_from_slice(bytes);
    out
}

/// Decodes a payload; the error says what is wrong (the caller names the LSN).
pub(crate) fn decode(bytes: &[u8]) -> Result<Payload, String> {
    match bytes.split_first() {
        Some((&TAG_BATCH, body)) => Ok(Payload::Batch(WriteBatch::from_bytes(body)?)),
        Some((tag, _)) => Err(format!("unknown record tag {tag}")),
        None => Err("empty record".into()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_garbage() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v").delete(b"d");
        assert_eq!(decode(&encode_batch(&b)).unwrap(), Payload::Batch(b.clone()));
        assert!(decode(&[]).is_err());
        assert!(decode(&[9, 0, 0, 0, 0]).is_err());
        let enc = encode_batch(&b);
        for len in 1..enc.len() {
            assert!(decode(&enc[..len]).is_err(), "cut at {len}");
        }
    }
}
