//! Memtable entries: key and payload together, inline in the entry when
//! they are small and in one shared allocation otherwise, with the key's
//! first 16 bytes kept apart so most comparisons never read the bytes.
//! Sixteen, not eight: store keys start with a map byte and a big-endian
//! object id, so the first 8 bytes of every key of the objects below 2^56
//! tie (their onodes, extents and entries), and with an 8-byte head nearly
//! every comparison of a file system's keys read the shared allocation.

use std::cmp::Ordering;
use std::sync::Arc;

use super::arena::{EntryArena, SharedBytes};
use crate::entry::{Kind, Op, OpRef, Stamp};

/// Most bytes of key and payload held inside the entry itself. An entry
/// lives in a skip-list node, which is one allocation already; with a
/// second one for its bytes, malloc and free (half of the calls for the
/// bytes) were about a sixth of the writer's CPU in a profile of creates
/// (three puts of 41 to 112 bytes each), and holding the bytes inline
/// took 12% off. The skip list holds at most a sealing's worth of
/// entries, so the room unused by smaller entries is bounded.
pub(crate) const INLINE_BYTES: usize = 134;

/// Largest scratch buffer kept between inserts.
const MAX_SCRATCH_BYTES: usize = 64 << 10;

thread_local! {
    /// Where a large entry's key and payload are joined before the one
    /// copy into their shared allocation.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    /// The key bytes of this thread's last search probe of a long key,
    /// reused by the next probe of a key of the same length once the last
    /// one is dropped.
    static PROBE: std::cell::RefCell<Option<Arc<[u8]>>> = const { std::cell::RefCell::new(None) };
}

/// An entry's key and payload bytes.
#[derive(Clone, Debug)]
pub(crate) enum EntryBytes {
    /// At most [`INLINE_BYTES`], the first `len` of `bytes`.
    Inline { len: u8, bytes: [u8; INLINE_BYTES] },
    /// More than [`INLINE_BYTES`] (or a probe's reused allocation).
    Shared(SharedBytes),
}

impl EntryBytes {
    /// The key's bytes followed by the payload's.
    fn as_slice(&self) -> &[u8] {
        match self {
            EntryBytes::Inline { len, bytes } => bytes.get(..*len as usize).unwrap_or_default(),
            EntryBytes::Shared(data) => data,
        }
    }

    /// `key` then `payload` inline, if they fit.
    fn inline(key: &[u8], payload: &[u8]) -> Option<EntryBytes> {
        let len = key.len() + payload.len();
        if len > INLINE_BYTES {
            return None;
        }
        let mut bytes = [0u8; INLINE_BYTES];
        bytes[..key.len()].copy_from_slice(key);
        bytes[key.len()..len].copy_from_slice(payload);
        Some(EntryBytes::Inline { len: len as u8, bytes })
    }
}

/// Equal when the bytes are, however they are held.
impl PartialEq for EntryBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for EntryBytes {}

/// One version of one key in a memtable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemKey {
    head: u128,
    /// The key's bytes 16 to 32 ([`key_tail16`]): keys that tie on their
    /// heads (a tree's entries) are mostly ordered without a memcmp.
    tail: u128,
    key_len: u32,
    data: EntryBytes,
    pub(crate) stamp: Stamp,
}

/// The key's first 16 bytes, big-endian and zero-padded. Unequal heads
/// order keys as their bytes do; equal heads say nothing.
pub(crate) fn key_head16(key: &[u8]) -> u128 {
    // Most keys fill the head: sixteen bytes read at once, without the
    // copy of a length known only at run time (a call to memcpy).
    if let Some(head) = key.first_chunk::<16>() {
        return u128::from_be_bytes(*head);
    }
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
        Self::new_in(None, key, payload, stamp)
    }

    /// As [`MemKey::new`], with a large entry's bytes in `arena` when it
    /// takes them.
    pub(crate) fn new_in(arena: Option<&EntryArena>, key: &[u8], payload: &[u8], stamp: Stamp) -> MemKey {
        let data = EntryBytes::inline(key, payload).unwrap_or_else(|| {
            if let Some(placed) = arena.and_then(|a| a.place(key, payload)) {
                return EntryBytes::Shared(placed);
            }
            // Copied through a scratch buffer so both halves move by
            // memcpy: collecting a chain of byte iterators copies one byte
            // at a time (perf: 9% of a 4 KiB durable put's CPU).
            EntryBytes::Shared(SCRATCH.with_borrow_mut(|buf| {
                buf.clear();
                buf.extend_from_slice(key);
                buf.extend_from_slice(payload);
                let data: Arc<[u8]> = Arc::from(&buf[..]);
                if buf.capacity() > MAX_SCRATCH_BYTES {
                    *buf = Vec::new();
                }
                SharedBytes::from(data)
            }))
        });
        MemKey { head: key_head16(key), tail: key_tail16(key), key_len: key.len() as u32, data, stamp }
    }

    /// A key without payload to search for (key, stamp), as
    /// [`MemKey::new`] makes; a long one usually reuses this thread's last
    /// probe's allocation: the allocation, copy and free per get were
    /// about a tenth of a trees get answered from a memtable, in perf.
    pub(crate) fn probe(key: &[u8], stamp: Stamp) -> MemKey {
        let data = EntryBytes::inline(key, &[]).unwrap_or_else(|| {
            let data = PROBE.with_borrow_mut(|slot| {
                if let Some(reused) = slot.as_mut().filter(|d| d.len() == key.len()).and_then(Arc::get_mut) {
                    reused.copy_from_slice(key);
                } else {
                    *slot = Some(Arc::from(key));
                }
                slot.clone()
            });
            EntryBytes::Shared(SharedBytes::from(data.unwrap_or_else(|| Arc::from(key))))
        });
        MemKey { head: key_head16(key), tail: key_tail16(key), key_len: key.len() as u32, data, stamp }
    }

    pub(crate) fn key(&self) -> &[u8] {
        self.data.as_slice().get(..self.key_len as usize).unwrap_or_default()
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
        self.data.as_slice().get(self.key_len as usize..).unwrap_or_default()
    }

    /// The key's bytes followed by the payload's.
    pub(crate) fn data(&self) -> &[u8] {
        self.data.as_slice()
    }

    /// The key's and payload's shared allocation, when they have one (they
    /// are not inline).
    pub(crate) fn shared(&self) -> Option<&SharedBytes> {
        match &self.data {
            EntryBytes::Shared(data) => Some(data),
            EntryBytes::Inline { .. } => None,
        }
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
        match &self.data {
            // Its bytes are charged with their region, whole, when it opens.
            EntryBytes::Shared(bytes) if bytes.in_region() => 96,
            _ => self.data().len() + 96,
        }
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

    /// An entry of at most [`INLINE_BYTES`] of key and payload is held
    /// inline, a larger one in a shared allocation (what sealing keeps as
    /// a chunk of its own), and either gives back its key and payload.
    #[test]
    fn small_entries_are_inline_and_large_ones_shared() {
        let stamp = Stamp { seq: 1, sub: 0 };
        for total in [0, 1, INLINE_BYTES - 1, INLINE_BYTES, INLINE_BYTES + 1, 4096] {
            for key_len in [0, total / 3, total] {
                let bytes: Vec<u8> = (0..total).map(|i| (i * 7 + 1) as u8).collect();
                let (key, payload) = bytes.split_at(key_len);
                let entry = MemKey::new(key, payload, stamp);
                assert_eq!((entry.key(), entry.payload(), entry.data()), (key, payload, &bytes[..]));
                assert_eq!(entry.charge(), total + 96);
                assert_eq!(entry.shared().is_some(), total > INLINE_BYTES, "{total} bytes");
                if let Some(shared) = entry.shared() {
                    assert_eq!(&shared[..], &bytes[..]);
                }
            }
        }
        // An entry stays two cache lines and a half at most: the skip
        // list's nodes hold it whole.
        assert!(std::mem::size_of::<MemKey>() <= 192, "{} bytes", std::mem::size_of::<MemKey>());
    }

    /// Entries compare and order by their bytes, not by how they are
    /// held: a long probe (shared) finds the equal entry.
    #[test]
    fn inline_and_shared_bytes_compare_by_content() {
        let stamp = Stamp { seq: 2, sub: 0 };
        let key = vec![b'k'; INLINE_BYTES + 10];
        let inline = EntryBytes::inline(b"abc", b"").map(|b| b.as_slice().to_vec());
        assert_eq!(inline.as_deref(), Some(&b"abc"[..]));
        let shared = EntryBytes::Shared(SharedBytes::from(Arc::<[u8]>::from(&b"abc"[..])));
        assert_eq!(EntryBytes::inline(b"ab", b"c"), Some(shared));
        let stored = MemKey::new(&key, &[], stamp);
        let probe = MemKey::probe(&key, stamp);
        assert_eq!(stored.cmp(&probe), Ordering::Equal);
        assert_eq!(stored, probe);
        let short = MemKey::new(&key[..INLINE_BYTES], &[], stamp);
        assert_eq!(short.cmp(&stored), Ordering::Less);
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
