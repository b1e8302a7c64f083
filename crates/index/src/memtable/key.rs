//! Memtable entries: key and payload in one shared allocation, with the
//! key's first 8 bytes inline so most comparisons never dereference.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::entry::{Kind, Op, Stamp};

/// One version of one key in a memtable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemKey {
    head: u64,
    key_len: u32,
    data: Arc<[u8]>,
    pub(crate) stamp: Stamp,
}

/// The key's first 8 bytes, big-endian and zero-padded. Unequal heads
/// order keys as their bytes do; equal heads say nothing.
pub(crate) fn key_head(key: &[u8]) -> u64 {
    let mut h = [0u8; 8];
    let n = key.len().min(8);
    h[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(h)
}

impl MemKey {
    pub(crate) fn new(key: &[u8], payload: &[u8], stamp: Stamp) -> MemKey {
        // One allocation: a chain of slice iterators has an exact length.
        let data: Arc<[u8]> = key.iter().chain(payload.iter()).copied().collect();
        MemKey { head: key_head(key), key_len: key.len() as u32, data, stamp }
    }

    pub(crate) fn key(&self) -> &[u8] {
        &self.data[..self.key_len as usize]
    }

    pub(crate) fn payload(&self) -> &[u8] {
        &self.data[self.key_len as usize..]
    }

    /// Orders against a bare (key, stamp) in internal order.
    pub(crate) fn cmp_to(&self, head: u64, key: &[u8], stamp: Stamp) -> Ordering {
        self.head.cmp(&head).then_with(|| self.key().cmp(key)).then_with(|| stamp.cmp(&self.stamp))
    }

    /// Bytes charged to the memtable budget for this entry.
    pub(crate) fn charge(&self) -> usize {
        self.data.len() + 96
    }
}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_to(other.head, other.key(), other.stamp)
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// What an entry does, beside its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MemOp {
    pub kind: Kind,
    pub operator: u32,
}

/// The owned operation an entry stands for.
pub(crate) fn to_op(k: &MemKey, op: MemOp) -> Op {
    match op.kind {
        Kind::Put => Op::Put(k.payload().to_vec()),
        Kind::Delete => Op::Delete,
        Kind::Merge => Op::Merge { operator: op.operator, operand: k.payload().to_vec() },
    }
}
