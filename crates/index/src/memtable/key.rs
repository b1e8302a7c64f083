//! Memtable entries: key and payload in one shared allocation, with the
//! key's first 16 bytes inline so most comparisons never dereference.
//! Sixteen, not eight: store keys start with a map byte and a big-endian
//! object id, so the first 8 bytes of every key of the objects below 2^56
//! tie (their onodes, extents and entries), and with an 8-byte head nearly
//! every comparison of a file system's keys read the shared allocation.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::entry::{Kind, Op, OpRef, Stamp};

/// Largest scratch buffer kept between inserts.
const MAX_SCRATCH_BYTES: usize = 64 << 10;

thread_local! {
    /// Where an entry's key and payload are joined before the one copy
    /// into their shared allocation.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// One version of one key in a memtable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemKey {
    head: u128,
    key_len: u32,
    data: Arc<[u8]>,
    pub(crate) stamp: Stamp,
}

/// The key's first 16 bytes, big-endian and zero-padded. Unequal heads
/// order keys as their bytes do; equal heads say nothing.
pub(crate) fn key_head16(key: &[u8]) -> u128 {
    let mut h = [0u8; 16];
    let n = key.len().min(16);
    h[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(h)
}

impl MemKey {
    pub(crate) fn new(key: &[u8], payload: &[u8], stamp: Stamp) -> MemKey {
        // Copied through a scratch buffer so both halves move by memcpy:
        // collecting a chain of byte iterators copies one byte at a time
        // (perf: 9% of a 4 KiB durable put's CPU).
        let data: Arc<[u8]> = SCRATCH.with_borrow_mut(|buf| {
            buf.clear();
            buf.extend_from_slice(key);
            buf.extend_from_slice(payload);
            let data = Arc::from(&buf[..]);
            if buf.capacity() > MAX_SCRATCH_BYTES {
                *buf = Vec::new();
            }
            data
        });
        MemKey { head: key_head16(key), key_len: key.len() as u32, data, stamp }
    }

    pub(crate) fn key(&self) -> &[u8] {
        &self.data[..self.key_len as usize]
    }

    /// The key's first 16 bytes (see [`key_head16`]).
    pub(crate) fn head(&self) -> u128 {
        self.head
    }

    pub(crate) fn payload(&self) -> &[u8] {
        &self.data[self.key_len as usize..]
    }

    /// The key's bytes followed by the payload's, as one shared allocation.
    pub(crate) fn data(&self) -> &Arc<[u8]> {
        &self.data
    }

    /// Orders against a bare (key, stamp) in internal order.
    pub(crate) fn cmp_to(&self, head: u128, key: &[u8], stamp: Stamp) -> Ordering {
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
    op_of(k.payload(), op)
}

/// The owned operation `op` with `payload`.
pub(crate) fn op_of(payload: &[u8], op: MemOp) -> Op {
    match op.kind {
        Kind::Put => Op::Put(payload.to_vec()),
        Kind::Delete => Op::Delete,
        Kind::Merge => Op::Merge { operator: op.operator, operand: payload.to_vec() },
    }
}

/// The operation `op` with `payload`, borrowed.
pub(crate) fn op_ref_of(payload: &[u8], op: MemOp) -> OpRef<'_> {
    match op.kind {
        Kind::Put => OpRef::Put(payload),
        Kind::Delete => OpRef::Delete,
        Kind::Merge => OpRef::Merge { operator: op.operator, operand: payload },
    }
}
