//! Atomic write batches, kept as one encoded buffer.
//!
//! The encoding (docs/format.md, "Write batch") is what an intent log
//! stores: a batch can be rebuilt from its bytes with
//! [`WriteBatch::from_bytes`], which checks them. Adding an operation
//! appends to the buffer, so building a batch allocates nothing per entry.

use crate::codec::{put_bytes, Decoder};
use crate::entry::{RangeTombstone, Stamp};
use crate::error::{IndexError, Result};
use crate::merge::Registry;
use crate::{MAX_KEY_BYTES, MAX_VALUE_BYTES};

const TAG_PUT: u8 = 1;
const TAG_DELETE: u8 = 2;
const TAG_MERGE: u8 = 3;
const TAG_DELETE_RANGE: u8 = 4;

/// One operation of a batch, borrowing the batch's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Set a key.
    Put {
        /// The key.
        key: &'a [u8],
        /// Its new value.
        value: &'a [u8],
    },
    /// Remove a key.
    Delete {
        /// The key.
        key: &'a [u8],
    },
    /// Add a merge operand.
    Merge {
        /// The operator's registered name.
        operator: &'a str,
        /// The key.
        key: &'a [u8],
        /// The operand.
        operand: &'a [u8],
    },
    /// Remove every key in `[start, end)`.
    DeleteRange {
        /// First key removed.
        start: &'a [u8],
        /// First key kept.
        end: &'a [u8],
    },
}

/// A group of writes applied atomically: readers see all of them or none.
///
/// Operations apply in the order they were added; a later write of a key in
/// the same batch supersedes an earlier one, and a range delete removes
/// earlier writes of the batch in its range but not later ones. Limits
/// ([`MAX_KEY_BYTES`], [`MAX_VALUE_BYTES`]) are checked when the batch is
/// written, and a batch breaking one is refused whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteBatch {
    /// The operation count (u32 LE), then the operations.
    rep: Vec<u8>,
    count: u32,
    payload_bytes: u64,
}

/// Bytes of the count header.
const HEADER_BYTES: usize = 4;

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch { rep: vec![0; HEADER_BYTES], count: 0, payload_bytes: 0 }
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&mut self, tag: u8, fields: &[&[u8]]) -> &mut Self {
        self.rep.push(tag);
        for f in fields {
            put_bytes(&mut self.rep, f);
            self.payload_bytes += f.len() as u64;
        }
        self.count = self.count.saturating_add(1);
        self.rep[..HEADER_BYTES].copy_from_slice(&self.count.to_le_bytes());
        self
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.push(TAG_PUT, &[key.as_ref(), value.as_ref()])
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.push(TAG_DELETE, &[key.as_ref()])
    }

    /// Adds a merge operand for `key`, to be combined by the operator
    /// registered under `operator`.
    pub fn merge(&mut self, operator: &str, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> &mut Self {
        self.push(TAG_MERGE, &[operator.as_bytes(), key.as_ref(), operand.as_ref()])
    }

    /// Removes every key in `[start, end)`. An empty range does nothing.
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> &mut Self {
        self.push(TAG_DELETE_RANGE, &[start.as_ref(), end.as_ref()])
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of keys, values and operator names the batch carries.
    pub fn payload_bytes(&self) -> u64 {
        self.payload_bytes
    }

    /// The encoded batch (see docs/format.md).
    pub fn as_bytes(&self) -> &[u8] {
        &self.rep
    }

    /// Rebuilds a batch from its encoding, checking every field and that
    /// the operations found match the count in the header.
    pub fn from_bytes(bytes: &[u8]) -> std::result::Result<WriteBatch, String> {
        let mut d = Decoder::new(bytes);
        let declared = d.u32("operation count")?;
        let mut b = WriteBatch { rep: bytes.to_vec(), count: 0, payload_bytes: 0 };
        let mut count = 0u32;
        let mut payload = 0u64;
        let mut it = OpIter { d };
        while let Some(op) = it.next_op()? {
            count = count.checked_add(1).ok_or("batch holds more than 2^32 - 1 operations")?;
            payload += match op {
                BatchOp::Put { key, value } => key.len() + value.len(),
                BatchOp::Delete { key } => key.len(),
                BatchOp::Merge { operator, key, operand } => operator.len() + key.len() + operand.len(),
                BatchOp::DeleteRange { start, end } => start.len() + end.len(),
            } as u64;
        }
        if count != declared {
            return Err(format!("batch declares {declared} operations and holds {count}"));
        }
        b.count = count;
        b.payload_bytes = payload;
        Ok(b)
    }

    /// The operations in order.
    pub fn iter(&self) -> impl Iterator<Item = BatchOp<'_>> {
        // The buffer was built by the methods above or checked by
        // from_bytes, so decoding cannot fail here.
        let mut it = OpIter { d: Decoder::new(self.rep.get(HEADER_BYTES..).unwrap_or_default()) };
        std::iter::from_fn(move || it.next_op().ok().flatten())
    }

    /// Checks limits and resolves operator names to registry ids, in
    /// operation order (one id per merge). Changes nothing.
    pub(crate) fn check(&self, registry: &Registry) -> Result<Vec<u32>> {
        if self.count == u32::MAX {
            return Err(IndexError::TooLarge { what: "batch", len: u32::MAX.into(), limit: (u32::MAX - 1).into() });
        }
        let mut operators = Vec::new();
        for op in self.iter() {
            match op {
                BatchOp::Put { key, value } => {
                    check_key(key)?;
                    check_value(value)?;
                }
                BatchOp::Delete { key } => check_key(key)?,
                BatchOp::Merge { operator, key, operand } => {
                    check_key(key)?;
                    check_value(operand)?;
                    let id = registry
                        .id_of(operator)
                        .ok_or_else(|| IndexError::MergeOperatorNotRegistered(operator.to_string()))?;
                    operators.push(id);
                }
                BatchOp::DeleteRange { start, end } => {
                    check_key(start)?;
                    check_key(end)?;
                }
            }
        }
        Ok(operators)
    }
}

/// Decodes operations one at a time.
struct OpIter<'a> {
    d: Decoder<'a>,
}

impl<'a> OpIter<'a> {
    fn next_op(&mut self) -> std::result::Result<Option<BatchOp<'a>>, String> {
        if self.d.remaining() == 0 {
            return Ok(None);
        }
        // Field limits here only bound decoding; check() applies the real ones.
        const FIELD: usize = MAX_VALUE_BYTES;
        let d = &mut self.d;
        let op = match d.u8("operation tag")? {
            TAG_PUT => {
                BatchOp::Put { key: d.length_prefixed(FIELD, "key")?, value: d.length_prefixed(FIELD, "value")? }
            }
            TAG_DELETE => BatchOp::Delete { key: d.length_prefixed(FIELD, "key")? },
            TAG_MERGE => {
                let name = d.length_prefixed(255, "operator name")?;
                BatchOp::Merge {
                    operator: std::str::from_utf8(name).map_err(|_| "operator name is not UTF-8".to_string())?,
                    key: d.length_prefixed(FIELD, "key")?,
                    operand: d.length_prefixed(FIELD, "operand")?,
                }
            }
            TAG_DELETE_RANGE => BatchOp::DeleteRange {
                start: d.length_prefixed(FIELD, "start")?,
                end: d.length_prefixed(FIELD, "end")?,
            },
            t => return Err(format!("unknown operation tag {t}")),
        };
        Ok(Some(op))
    }
}

/// A range tombstone for a batch's delete-range at position `sub`, or None
/// for an empty range.
pub(crate) fn tombstone(start: &[u8], end: &[u8], seq: u64, sub: u32) -> Option<RangeTombstone> {
    (start < end).then(|| RangeTombstone { start: start.to_vec(), end: end.to_vec(), stamp: Stamp { seq, sub } })
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_BYTES {
        return Err(IndexError::TooLarge { what: "key", len: key.len() as u64, limit: MAX_KEY_BYTES as u64 });
    }
    Ok(())
}

fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(IndexError::TooLarge { what: "value", len: value.len() as u64, limit: MAX_VALUE_BYTES as u64 });
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips_and_refuses_damage() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v").delete(b"d").merge("op", b"m", b"1").delete_range(b"a", b"z");
        let again = WriteBatch::from_bytes(b.as_bytes()).unwrap();
        assert_eq!(again, b);
        assert_eq!(again.len(), 4);
        let ops: Vec<_> = again.iter().collect();
        assert_eq!(ops[2], BatchOp::Merge { operator: "op", key: b"m", operand: b"1" });
        for len in 0..b.as_bytes().len() {
            assert!(WriteBatch::from_bytes(&b.as_bytes()[..len]).is_err(), "cut at {len}");
        }
        assert!(WriteBatch::from_bytes(&[1, 0, 0, 0, 9]).is_err());
        assert_eq!(WriteBatch::from_bytes(WriteBatch::new().as_bytes()).unwrap(), WriteBatch::new());
    }
}
