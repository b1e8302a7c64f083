//! Internal entries: a user key with the sequence number that wrote it.
//!
//! Entries sort by user key ascending, then newest first: sequence number
//! descending, then position within the batch (`sub`) descending, so the
//! first entry of a key is its newest version.

use std::cmp::Ordering;

/// The kind byte of an entry, as stored in run files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Put = 1,
    Delete = 2,
    Merge = 3,
}

impl Kind {
    pub(crate) fn from_u8(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Put),
            2 => Some(Kind::Delete),
            3 => Some(Kind::Merge),
            _ => None,
        }
    }
}

/// What an entry does to its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Sets the value.
    Put(Vec<u8>),
    /// Removes the key.
    Delete,
    /// A merge operand for the operator with this registry id.
    Merge { operator: u32, operand: Vec<u8> },
}

/// An [`Op`] borrowing its payload: what run files are written from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpRef<'a> {
    Put(&'a [u8]),
    Delete,
    Merge { operator: u32, operand: &'a [u8] },
}

impl OpRef<'_> {
    pub(crate) fn kind(&self) -> Kind {
        match self {
            OpRef::Put(_) => Kind::Put,
            OpRef::Delete => Kind::Delete,
            OpRef::Merge { .. } => Kind::Merge,
        }
    }

    /// Bytes of payload (for accounting).
    pub(crate) fn payload_len(&self) -> usize {
        match self {
            OpRef::Put(v) => v.len(),
            OpRef::Delete => 0,
            OpRef::Merge { operand, .. } => operand.len(),
        }
    }

    pub(crate) fn to_owned(self) -> Op {
        match self {
            OpRef::Put(v) => Op::Put(v.to_vec()),
            OpRef::Delete => Op::Delete,
            OpRef::Merge { operator, operand } => Op::Merge { operator, operand: operand.to_vec() },
        }
    }
}

impl Op {
    pub(crate) fn borrowed(&self) -> OpRef<'_> {
        match self {
            Op::Put(v) => OpRef::Put(v),
            Op::Delete => OpRef::Delete,
            Op::Merge { operator, operand } => OpRef::Merge { operator: *operator, operand },
        }
    }
}

/// An entry borrowing its key and payload (from a run's block, a
/// memtable, or an owned [`Entry`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct EntryRef<'a> {
    pub key: &'a [u8],
    pub stamp: Stamp,
    pub op: OpRef<'a>,
}

/// The version stamp of an entry: the batch's sequence number and the
/// operation's position within the batch, so later operations of one batch
/// supersede earlier ones on the same key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Stamp {
    pub seq: u64,
    pub sub: u32,
}

impl Ord for Stamp {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.seq, self.sub).cmp(&(other.seq, other.sub))
    }
}

impl PartialOrd for Stamp {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One version of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: Vec<u8>,
    pub stamp: Stamp,
    pub op: Op,
}

/// Orders (key, stamp) pairs: key ascending, then newest stamp first.
pub(crate) fn cmp_internal(a_key: &[u8], a: Stamp, b_key: &[u8], b: Stamp) -> Ordering {
    a_key.cmp(b_key).then_with(|| b.cmp(&a))
}

/// A range tombstone: deletes every version of every key in `[start, end)`
/// whose stamp is below `stamp` (earlier batches, and earlier operations of
/// the same batch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RangeTombstone {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
    pub stamp: Stamp,
}

impl RangeTombstone {
    pub(crate) fn covers(&self, key: &[u8]) -> bool {
        self.start.as_slice() <= key && key < self.end.as_slice()
    }

    /// Whether `[start, end)` intersects the tombstone.
    pub(crate) fn overlaps(&self, start: std::ops::Bound<&[u8]>, end: std::ops::Bound<&[u8]>) -> bool {
        use std::ops::Bound::*;
        let before_end = match end {
            Included(e) => self.start.as_slice() <= e,
            Excluded(e) => self.start.as_slice() < e,
            Unbounded => true,
        };
        let after_start = match start {
            Included(s) | Excluded(s) => self.end.as_slice() > s,
            Unbounded => true,
        };
        before_end && after_start
    }
}

/// The newest stamp among `tombstones` that covers `key` and is visible at
/// `read_seq`; versions older than it are deleted.
pub(crate) fn max_covering<'a>(
    tombstones: impl IntoIterator<Item = &'a RangeTombstone>,
    key: &[u8],
    read_seq: u64,
) -> Option<Stamp> {
    tombstones.into_iter().filter(|t| t.stamp.seq <= read_seq && t.covers(key)).map(|t| t.stamp).max()
}
