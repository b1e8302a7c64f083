//! Merge operators: caller-registered functions that combine a base value
//! with operands written blindly (counters, link counts, blind creates).
//!
//! A key's value is the fold of its operands, oldest first, over the newest
//! put or delete below them: `v = op.full_merge(key, v, operands)`. An
//! operator may return `None` to delete the key.

use std::sync::Arc;

use crate::error::{IndexError, Result};

/// A named, caller-supplied merge function.
///
/// The name is stored with every run that holds its operands; opening an
/// index whose runs name an operator that is not registered is refused.
pub trait MergeOperator: Send + Sync {
    /// A stable name (at most 255 bytes), stored on disk.
    fn name(&self) -> &str;

    /// Applies `operands` (oldest first) to `existing` (None if the key is
    /// absent or deleted). Returns the new value, or None to delete the key.
    /// An `Err` explains why the operands cannot be applied; reads of the
    /// key then fail with [`IndexError::MergeFailed`].
    fn full_merge(
        &self,
        key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> std::result::Result<Option<Vec<u8>>, String>;
}

/// The registered operators; an operator's id is its position.
#[derive(Clone, Default)]
pub(crate) struct Registry {
    operators: Vec<Arc<dyn MergeOperator>>,
}

impl Registry {
    pub(crate) fn new(operators: Vec<Arc<dyn MergeOperator>>) -> Result<Self> {
        if operators.len() > usize::from(u16::MAX) {
            return Err(IndexError::InvalidOption {
                name: "merge_operators",
                reason: "at most 65535 operators".into(),
            });
        }
        for (i, a) in operators.iter().enumerate() {
            if a.name().is_empty() || a.name().len() > 255 {
                return Err(IndexError::InvalidOption {
                    name: "merge_operators",
                    reason: format!("operator name {:?} must be 1 to 255 bytes", a.name()),
                });
            }
            if operators[..i].iter().any(|b| b.name() == a.name()) {
                return Err(IndexError::InvalidOption {
                    name: "merge_operators",
                    reason: format!("operator {:?} is registered twice", a.name()),
                });
            }
        }
        Ok(Registry { operators })
    }

    pub(crate) fn id_of(&self, name: &str) -> Option<u32> {
        self.operators.iter().position(|o| o.name() == name).map(|i| i as u32)
    }

    pub(crate) fn name_of(&self, id: u32) -> &str {
        self.operators.get(id as usize).map(|o| o.name()).unwrap_or("<unregistered>")
    }

    /// Folds `operands` (oldest first, each with its operator id) over `base`.
    pub(crate) fn fold(&self, key: &[u8], base: Option<Vec<u8>>, operands: &[(u32, &[u8])]) -> Result<Option<Vec<u8>>> {
        let mut value = base;
        let mut i = 0;
        while i < operands.len() {
            // Hand consecutive operands of one operator over in one call.
            let id = operands[i].0;
            let run_len = operands[i..].iter().take_while(|(o, _)| *o == id).count();
            let slice: Vec<&[u8]> = operands[i..i + run_len].iter().map(|(_, b)| *b).collect();
            let op = self
                .operators
                .get(id as usize)
                .ok_or_else(|| IndexError::MergeOperatorNotRegistered(format!("id {id}")))?;
            value = op.full_merge(key, value.as_deref(), &slice).map_err(|reason| IndexError::MergeFailed {
                name: op.name().to_string(),
                key: String::from_utf8_lossy(key).into_owned(),
                reason,
            })?;
            i += run_len;
        }
        Ok(value)
    }
}

/// A ready-made operator: values are little-endian i64 counters and
/// operands are i64 deltas; a result of zero deletes the key.
#[derive(Debug, Default, Clone, Copy)]
pub struct CounterOperator;

impl CounterOperator {
    /// The operator's registered name.
    pub const NAME: &'static str = "larder.counter.i64";

    /// Encodes a delta operand.
    pub fn operand(delta: i64) -> [u8; 8] {
        delta.to_le_bytes()
    }

    /// Decodes a counter value.
    pub fn decode(value: &[u8]) -> Option<i64> {
        <[u8; 8]>::try_from(value).ok().map(i64::from_le_bytes)
    }
}

impl MergeOperator for CounterOperator {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> std::result::Result<Option<Vec<u8>>, String> {
        let mut total = match existing {
            Some(v) => Self::decode(v).ok_or_else(|| format!("existing value is {} bytes, not 8", v.len()))?,
            None => 0,
        };
        for o in operands {
            let d = Self::decode(o).ok_or_else(|| format!("operand is {} bytes, not 8", o.len()))?;
            total = total.wrapping_add(d);
        }
        Ok((total != 0).then(|| total.to_le_bytes().to_vec()))
    }
}
