//! Atomic write batches, kept as one encoded buffer.
//!
//! The encoding (docs/format.md, "Write batch") is what an intent log
//! stores: a batch can be rebuilt from its bytes with
//! [`WriteBatch::from_bytes`], which checks them. Adding an operation
//! appends to the buffer, so building a batch allocates nothing per entry.
//!
//! Beside the bytes a batch keeps a summary of them (longest key and
//! value, where its merges are, the first bytes of its keys), so that
//! checking its limits and asking which key spaces it writes do not decode
//! every operation again: a bulk create's batch of 2M operations was
//! decoded four times on its way into the index.

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
    summary: Summary,
}

/// What a batch holds, kept as operations are added (derived from the
/// bytes alone, so equal batches have equal summaries).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Summary {
    /// Longest key, range bound included.
    max_key: usize,
    /// Longest value or merge operand.
    max_value: usize,
    /// Where each merge's operator name lies in `rep`, in order.
    merges: Vec<std::ops::Range<usize>>,
    /// Bit `b` set: a put or merge writes a key whose first byte is `b`.
    written_first: [u64; 4],
    /// Bit `b` set: a delete removes a key whose first byte is `b`.
    deleted_first: [u64; 4],
    /// The batch holds a range delete.
    ranges: bool,
}

/// Sets the bit of `key`'s first byte (none for an empty key).
fn mark_first(bits: &mut [u64; 4], key: &[u8]) {
    if let Some(&b) = key.first() {
        bits[usize::from(b >> 6)] |= 1 << (b & 63);
    }
}

fn first_marked(bits: &[u64; 4], b: u8) -> bool {
    bits[usize::from(b >> 6)] & (1 << (b & 63)) != 0
}

impl Summary {
    /// Notes operation `op`, starting at `at` in the batch's bytes.
    fn note(&mut self, op: &BatchOp<'_>, at: usize) {
        let (key, value) = match *op {
            BatchOp::Put { key, value } => {
                mark_first(&mut self.written_first, key);
                (key.len(), value.len())
            }
            BatchOp::Delete { key } => {
                mark_first(&mut self.deleted_first, key);
                (key.len(), 0)
            }
            BatchOp::Merge { operator, key, operand } => {
                mark_first(&mut self.written_first, key);
                // After the tag, the name's length as a varint, then the name.
                let len = operator.len();
                let start = at + 1 + (usize::BITS - len.leading_zeros()).max(1).div_ceil(7) as usize;
                self.merges.push(start..start + len);
                (key.len(), operand.len())
            }
            BatchOp::DeleteRange { start, end } => {
                self.ranges = true;
                (start.len().max(end.len()), 0)
            }
        };
        self.max_key = self.max_key.max(key);
        self.max_value = self.max_value.max(value);
    }
}

/// Bytes of the count header.
const HEADER_BYTES: usize = 4;

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch { rep: vec![0; HEADER_BYTES], count: 0, payload_bytes: 0, summary: Summary::default() }
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch with room for `bytes` bytes of operations: one
    /// allocation for a caller that knows about how much it will add,
    /// instead of the doubling series (each copying the batch) that a
    /// batch grown from its header makes.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut rep = Vec::with_capacity(HEADER_BYTES + bytes);
        rep.extend_from_slice(&[0; HEADER_BYTES]);
        WriteBatch { rep, count: 0, payload_bytes: 0, summary: Summary::default() }
    }

    fn push(&mut self, op: BatchOp<'_>) -> &mut Self {
        let at = self.rep.len();
        self.summary.note(&op, at);
        let (tag, fields): (u8, &[&[u8]]) = match &op {
            BatchOp::Put { key, value } => (TAG_PUT, &[key, value]),
            BatchOp::Delete { key } => (TAG_DELETE, &[key]),
            BatchOp::Merge { operator, key, operand } => (TAG_MERGE, &[operator.as_bytes(), key, operand]),
            BatchOp::DeleteRange { start, end } => (TAG_DELETE_RANGE, &[start, end]),
        };
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
        self.push(BatchOp::Put { key: key.as_ref(), value: value.as_ref() })
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.push(BatchOp::Delete { key: key.as_ref() })
    }

    /// Adds a merge operand for `key`, to be combined by the operator
    /// registered under `operator`.
    pub fn merge(&mut self, operator: &str, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> &mut Self {
        self.push(BatchOp::Merge { operator, key: key.as_ref(), operand: operand.as_ref() })
    }

    /// Removes every key in `[start, end)`. An empty range does nothing.
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> &mut Self {
        self.push(BatchOp::DeleteRange { start: start.as_ref(), end: end.as_ref() })
    }

    /// Empties the batch, keeping its allocation: a caller writing batch
    /// after batch of millions of operations reuses pages it faulted in
    /// once.
    pub fn clear(&mut self) {
        self.rep.truncate(HEADER_BYTES);
        self.rep[..HEADER_BYTES].fill(0);
        self.count = 0;
        self.payload_bytes = 0;
        self.summary = Summary::default();
    }

    /// Makes room for `additional` more bytes of operations, for a caller
    /// about to add many (one allocation instead of a doubling series,
    /// each copying what the batch holds).
    pub fn reserve(&mut self, additional: usize) {
        self.rep.reserve(additional);
    }

    /// Whether a put or merge of this batch writes a key whose first byte
    /// is `first` (without decoding the batch).
    pub fn writes_first_byte(&self, first: u8) -> bool {
        first_marked(&self.summary.written_first, first)
    }

    /// Whether this batch may change a key whose first byte is `first`: a
    /// put, merge or delete of one, or any range delete (without decoding
    /// the batch).
    pub fn may_change_first_byte(&self, first: u8) -> bool {
        self.summary.ranges || self.writes_first_byte(first) || first_marked(&self.summary.deleted_first, first)
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
        let mut b = WriteBatch { rep: bytes.to_vec(), count: 0, payload_bytes: 0, summary: Summary::default() };
        let mut count = 0u32;
        let mut payload = 0u64;
        let mut it = OpIter { d };
        loop {
            let at = bytes.len() - it.d.remaining();
            let Some(op) = it.next_op()? else { break };
            b.summary.note(&op, at);
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
    /// operation order (one id per merge). Changes nothing. Decodes only
    /// the merges: the summary holds the longest key and value.
    pub(crate) fn check(&self, registry: &Registry) -> Result<Vec<u32>> {
        if self.count == u32::MAX {
            return Err(IndexError::TooLarge { what: "batch", len: u32::MAX.into(), limit: (u32::MAX - 1).into() });
        }
        check_key(self.summary.max_key)?;
        check_value(self.summary.max_value)?;
        let mut operators = Vec::with_capacity(self.summary.merges.len());
        for range in &self.summary.merges {
            let name = self.rep.get(range.clone()).unwrap_or_default();
            let id = std::str::from_utf8(name)
                .ok()
                .and_then(|n| registry.id_of(n))
                .ok_or_else(|| IndexError::MergeOperatorNotRegistered(String::from_utf8_lossy(name).into_owned()))?;
            operators.push(id);
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

fn check_key(len: usize) -> Result<()> {
    if len > MAX_KEY_BYTES {
        return Err(IndexError::TooLarge { what: "key", len: len as u64, limit: MAX_KEY_BYTES as u64 });
    }
    Ok(())
}

fn check_value(len: usize) -> Result<()> {
    if len > MAX_VALUE_BYTES {
        return Err(IndexError::TooLarge { what: "value", len: len as u64, limit: MAX_VALUE_BYTES as u64 });
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// A batch given room up front is the batch grown from its header,
    /// and holds what it was given room for without growing.
    #[test]
    fn a_batch_with_room_is_a_new_batch_and_does_not_grow() {
        let mut roomy = WriteBatch::with_capacity(64);
        assert!(roomy.is_empty());
        assert_eq!(roomy, WriteBatch::new());
        let room = roomy.rep.capacity();
        let mut grown = WriteBatch::new();
        for b in [&mut roomy, &mut grown] {
            b.put(b"key", b"value").delete(b"gone").merge("op", b"m", b"1");
        }
        assert_eq!(roomy, grown);
        assert_eq!(roomy.as_bytes(), grown.as_bytes());
        assert_eq!(roomy.rep.capacity(), room, "{} bytes fit in 64 bytes of room", roomy.as_bytes().len());
    }

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

    #[test]
    fn the_summary_answers_as_decoding_every_operation_would() {
        use crate::merge::{CounterOperator, MergeOperator};
        let registry = Registry::new(vec![Arc::new(CounterOperator) as Arc<dyn MergeOperator>]).unwrap();
        let counter = CounterOperator::NAME;
        // An operator name of 200 bytes takes a two-byte length.
        let long_name = "x".repeat(200);
        let mut b = WriteBatch::new();
        b.put(b"a1", b"v").merge(counter, b"c", CounterOperator::operand(1)).delete(b"d");
        b.merge(counter, b"e", CounterOperator::operand(2));
        let id = registry.id_of(counter).unwrap();
        assert_eq!(b.check(&registry).unwrap(), [id, id]);
        // Rebuilt from its bytes: the same summary (compared by ==).
        assert_eq!(WriteBatch::from_bytes(b.as_bytes()).unwrap(), b);
        assert!(b.writes_first_byte(b'a') && b.writes_first_byte(b'c') && b.writes_first_byte(b'e'));
        assert!(!b.writes_first_byte(b'd') && b.may_change_first_byte(b'd'));
        assert!(!b.may_change_first_byte(b'z'));
        b.delete_range(b"y", b"z");
        assert!(b.may_change_first_byte(b'z') && !b.writes_first_byte(b'z'));

        let mut unknown = WriteBatch::new();
        unknown.put(b"k", b"v").merge(&long_name, b"k", b"1");
        assert!(matches!(unknown.check(&registry), Err(IndexError::MergeOperatorNotRegistered(n)) if n == long_name));
        assert_eq!(WriteBatch::from_bytes(unknown.as_bytes()).unwrap(), unknown);

        let mut long_key = WriteBatch::new();
        long_key.delete_range(b"a", vec![0; crate::MAX_KEY_BYTES + 1]);
        assert!(matches!(long_key.check(&registry), Err(IndexError::TooLarge { what: "key", .. })));
    }
}
