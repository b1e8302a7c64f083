//! Atomic write batches.

use crate::entry::{Op, RangeTombstone, Stamp};
use crate::error::{IndexError, Result};
use crate::merge::Registry;
use crate::{MAX_KEY_BYTES, MAX_VALUE_BYTES};

/// One operation of a batch, before merge operators are resolved.
#[derive(Clone, Debug)]
pub(crate) enum BatchOp {
    Put { key: Vec<u8>, value: Vec<u8> },
    Delete { key: Vec<u8> },
    Merge { operator: String, key: Vec<u8>, operand: Vec<u8> },
    DeleteRange { start: Vec<u8>, end: Vec<u8> },
}

/// A group of writes applied atomically: readers see all of them or none.
///
/// Operations apply in the order they were added; a later write of a key in
/// the same batch supersedes an earlier one, and a range delete removes
/// earlier writes of the batch in its range but not later ones.
#[derive(Clone, Debug, Default)]
pub struct WriteBatch {
    pub(crate) ops: Vec<BatchOp>,
    pub(crate) payload_bytes: u64,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> &mut Self {
        let (key, value) = (key.into(), value.into());
        self.payload_bytes += (key.len() + value.len()) as u64;
        self.ops.push(BatchOp::Put { key, value });
        self
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: impl Into<Vec<u8>>) -> &mut Self {
        let key = key.into();
        self.payload_bytes += key.len() as u64;
        self.ops.push(BatchOp::Delete { key });
        self
    }

    /// Adds a merge operand for `key`, to be combined by the operator
    /// registered under `operator`.
    pub fn merge(&mut self, operator: &str, key: impl Into<Vec<u8>>, operand: impl Into<Vec<u8>>) -> &mut Self {
        let (key, operand) = (key.into(), operand.into());
        self.payload_bytes += (key.len() + operand.len()) as u64;
        self.ops.push(BatchOp::Merge { operator: operator.to_string(), key, operand });
        self
    }

    /// Removes every key in `[start, end)`. An empty range does nothing.
    pub fn delete_range(&mut self, start: impl Into<Vec<u8>>, end: impl Into<Vec<u8>>) -> &mut Self {
        let (start, end) = (start.into(), end.into());
        self.payload_bytes += (start.len() + end.len()) as u64;
        self.ops.push(BatchOp::DeleteRange { start, end });
        self
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Bytes of keys and values the batch carries.
    pub fn payload_bytes(&self) -> u64 {
        self.payload_bytes
    }

    /// Checks limits and resolves operator names; changes nothing on error.
    pub(crate) fn resolve(&self, seq: u64, registry: &Registry) -> Result<Resolved> {
        if self.ops.len() > u32::MAX as usize {
            return Err(IndexError::TooLarge { what: "batch", len: self.ops.len() as u64, limit: u32::MAX.into() });
        }
        let mut points = Vec::with_capacity(self.ops.len());
        let mut ranges = Vec::new();
        for (i, op) in self.ops.iter().enumerate() {
            let stamp = Stamp { seq, sub: i as u32 };
            match op {
                BatchOp::Put { key, value } => {
                    check_key(key)?;
                    check_value(value)?;
                    points.push((key.clone(), stamp, Op::Put(value.clone())));
                }
                BatchOp::Delete { key } => {
                    check_key(key)?;
                    points.push((key.clone(), stamp, Op::Delete));
                }
                BatchOp::Merge { operator, key, operand } => {
                    check_key(key)?;
                    check_value(operand)?;
                    let id = registry
                        .id_of(operator)
                        .ok_or_else(|| IndexError::MergeOperatorNotRegistered(operator.clone()))?;
                    points.push((key.clone(), stamp, Op::Merge { operator: id, operand: operand.clone() }));
                }
                BatchOp::DeleteRange { start, end } => {
                    check_key(start)?;
                    check_key(end)?;
                    if start < end {
                        ranges.push(RangeTombstone { start: start.clone(), end: end.clone(), stamp });
                    }
                }
            }
        }
        Ok(Resolved { points, ranges })
    }
}

/// A batch with stamps assigned and operators resolved.
pub(crate) struct Resolved {
    pub points: Vec<(Vec<u8>, Stamp, Op)>,
    pub ranges: Vec<RangeTombstone>,
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
