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
    /// The key bytes of this thread's last search probe, reused by the next
    /// probe of a key of the same length once the last one is dropped.
    static PROBE: std::cell::RefCell<Option<Arc<[u8]>>> = const { std::cell::RefCell::new(None) };
}

/// One version of one key in a memtable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemKey {
    head: u128,
    /// The key's bytes 16 to 32 ([`key_tail16`]): keys that tie on their
    /// heads (a tree's entries) are mostly ordered without a memcmp.
    tail: u128,
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

/// The key's bytes 16 to 32, big-endian and zero-padded: between keys of
/// equal heads, unequal tails order the keys as their bytes do (a key of
/// at most 16 bytes has tail 0 and is a prefix of any key it ties with),
/// equal tails say nothing.
pub(crate) fn key_tail16(key: &[u8]) -> u128 {
    key_head16(key.get(16..).unwrap_or_default())
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
        MemKey { head: key_head16(key), tail: key_tail16(key), key_len: key.len() as u32, data, stamp }
    }

    /// A key without payload to search for (key, stamp), as
    /// [`MemKey::new`] makes, whose bytes usually reuse this thread's last
    /// probe's allocation: the allocation, copy and free per get were
    /// about a tenth of a trees get answered from a memtable, in perf.
    pub(crate) fn probe(key: &[u8], stamp: Stamp) -> MemKey {
        let data = PROBE.with_borrow_mut(|slot| {
            if let Some(reused) = slot.as_mut().filter(|d| d.len() == key.len()).and_then(Arc::get_mut) {
                reused.copy_from_slice(key);
            } else {
                *slot = Some(Arc::from(key));
            }
            slot.clone()
        });
        let data = data.unwrap_or_else(|| Arc::from(key));
        MemKey { head: key_head16(key), tail: key_tail16(key), key_len: key.len() as u32, data, stamp }
    }

    pub(crate) fn key(&self) -> &[u8] {
        &self.data[..self.key_len as usize]
    }

    /// The key's first 16 bytes (see [`key_head16`]).
    pub(crate) fn head(&self) -> u128 {
        self.head
    }

    /// The key's bytes 16 to 32 (see [`key_tail16`]).
    pub(crate) fn tail(&self) -> u128 {
        self.tail
    }

    pub(crate) fn payload(&self) -> &[u8] {
        &self.data[self.key_len as usize..]
    }

    /// The key's bytes followed by the payload's, as one shared allocation.
    pub(crate) fn data(&self) -> &Arc<[u8]> {
        &self.data
    }

    /// Orders against a bare (key, stamp), given its head and tail, in
    /// internal order.
    pub(crate) fn cmp_to(&self, (head, tail): (u128, u128), key: &[u8], stamp: Stamp) -> Ordering {
        self.head
            .cmp(&head)
            .then(self.tail.cmp(&tail))
            .then_with(|| self.key().cmp(key))
            .then_with(|| stamp.cmp(&self.stamp))
    }

    /// Bytes charged to the memtable budget for this entry.
    pub(crate) fn charge(&self) -> usize {
        self.data.len() + 96
    }
}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_to((other.head, other.tail), other.key(), other.stamp)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe holds its own key whether its allocation is reused (the
    /// last probe dropped) or not (the last probe still held, or another
    /// length).
    #[test]
    fn probes_hold_their_keys_when_reused_or_not() {
        let stamp = Stamp { seq: 3, sub: 0 };
        let first = MemKey::probe(b"key-one", stamp);
        let held = MemKey::probe(b"key-two", stamp);
        assert_eq!((first.key(), held.key()), (&b"key-one"[..], &b"key-two"[..]));
        drop(first);
        let shorter = MemKey::probe(b"k", stamp);
        drop(shorter);
        drop(held);
        let reused = MemKey::probe(b"key-new", stamp);
        let again = MemKey::probe(b"key-xyz", stamp);
        assert_eq!((reused.key(), again.key()), (&b"key-new"[..], &b"key-xyz"[..]));
        assert_eq!(reused, MemKey::new(b"key-new", &[], stamp));
        assert!(reused.payload().is_empty());
    }

    proptest::proptest! {
        /// Ordering by (head, tail, bytes) is the bytes' order, whatever
        /// prefix the keys share and however short they are.
        #[test]
        fn head_and_tail_order_keys_as_their_bytes(
            shared in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            a in proptest::collection::vec(0u8..3, 0..24),
            b in proptest::collection::vec(0u8..3, 0..24),
        ) {
            let (mut x, mut y) = (shared.clone(), shared);
            x.extend(a);
            y.extend(b);
            let by_parts = key_head16(&x)
                .cmp(&key_head16(&y))
                .then(key_tail16(&x).cmp(&key_tail16(&y)))
                .then_with(|| x.cmp(&y));
            proptest::prop_assert_eq!(by_parts, x.cmp(&y));
            if key_head16(&x) == key_head16(&y) && key_tail16(&x) != key_tail16(&y) {
                proptest::prop_assert_eq!(key_tail16(&x).cmp(&key_tail16(&y)), x.cmp(&y));
            }
        }
    }
}
