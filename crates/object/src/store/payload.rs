//! What an intent-log record carries for the object layer.
//!
//! Layout (docs/format.md, "Log record payloads"): a tag byte, then the
//! tag's body. Tag 1 is an index batch: the encoded `WriteBatch` that the
//! record applies, after-images and merge operands only, never an
//! operation to re-execute. Tag 2 marks a batch that went into the index
//! as a run of its own (`Store::commit_ingest`): the index holds it once
//! its manifest names the run, so replaying the marker means the batch
//! never committed. Later tags extend this without changing these.

use larder_index::WriteBatch;

/// Tag of a record applying one index batch.
const TAG_BATCH: u8 = 1;
/// Tag of a record marking an ingested batch.
const TAG_INGESTED: u8 = 2;

/// A decoded record payload.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Payload {
    /// Apply this batch to the index at the record's LSN.
    Batch(WriteBatch),
    /// A batch ingested as index run `run` (None: it wrote no entry).
    Ingested { run: Option<u64> },
}

/// Encodes a batch record.
pub(crate) fn encode_batch(batch: &WriteBatch) -> Vec<u8> {
    let bytes = batch.as_bytes();
    let mut out = Vec::with_capacity(1 + bytes.len());
    out.push(TAG_BATCH);
    out.extend_from_slice(bytes);
    out
}

/// Encodes an ingest marker: the tag, then the run id + 1 (u64 LE; 0 for
/// no run).
pub(crate) fn encode_ingested(run: Option<u64>) -> Vec<u8> {
    let mut out = vec![TAG_INGESTED];
    out.extend_from_slice(&run.map_or(0, |r| r.saturating_add(1)).to_le_bytes());
    out
}

/// Decodes a payload; the error says what is wrong (the caller names the LSN).
pub(crate) fn decode(bytes: &[u8]) -> Result<Payload, String> {
    match bytes.split_first() {
        Some((&TAG_BATCH, body)) => Ok(Payload::Batch(WriteBatch::from_bytes(body)?)),
        Some((&TAG_INGESTED, body)) => {
            let raw: [u8; 8] = body.try_into().map_err(|_| format!("ingest marker of {} bytes, not 8", body.len()))?;
            let run = u64::from_le_bytes(raw).checked_sub(1);
            Ok(Payload::Ingested { run })
        }
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
        for run in [None, Some(0), Some(7)] {
            assert_eq!(decode(&encode_ingested(run)).unwrap(), Payload::Ingested { run });
            assert!(decode(&encode_ingested(run)[..8]).is_err());
        }
        assert!(decode(&[]).is_err());
        assert!(decode(&[9, 0, 0, 0, 0]).is_err());
        let enc = encode_batch(&b);
        for len in 1..enc.len() {
            assert!(decode(&enc[..len]).is_err(), "cut at {len}");
        }
    }
}
