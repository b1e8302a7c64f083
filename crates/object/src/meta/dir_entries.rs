//! The directory entry count as a merge operand: creating or removing a
//! name adds +1 or -1 to the directory's `DirInfo.entries` blindly, without
//! reading the onode, so creates of different names in one directory do not
//! serialize on it (DESIGN.md, namespace; the index's merge operators).
//!
//! Operand layout (docs/format.md, section 13), 9 bytes: version u8 (1),
//! delta i64 LE. The operator folds operands into the directory's onode;
//! applying one to a missing onode, to an onode that is not a directory, or
//! one that would take the count below 0 or above u64 is an error (reads of
//! the key then fail), never a silent clamp.

use larder_index::MergeOperator;

use crate::error::{ObjectError, Result};

use super::codec::{version, Reader};
use super::onode::Onode;
use super::types::MetaLimits;

/// The operator's name, stored in every index run holding its operands.
pub const DIR_ENTRIES_OPERATOR: &str = "larder.dir_entries";
/// The operand version this build writes and the newest it reads.
pub const DIR_ENTRIES_VERSION: u8 = 1;
/// Bytes of an encoded operand.
pub const DIR_ENTRIES_BYTES: usize = 9;
const RECORD: &str = "directory entry delta";

/// Encodes an entry-count delta.
pub fn encode_entries_delta(delta: i64) -> [u8; DIR_ENTRIES_BYTES] {
    let mut b = [0u8; DIR_ENTRIES_BYTES];
    b[0] = DIR_ENTRIES_VERSION;
    b[1..].copy_from_slice(&delta.to_le_bytes());
    b
}

/// Decodes an entry-count delta.
pub fn decode_entries_delta(bytes: &[u8]) -> Result<i64> {
    let bad = |what: String| ObjectError::BadRecord { record: RECORD, what };
    let mut r = Reader::new(bytes);
    version(&mut r, RECORD, DIR_ENTRIES_VERSION)?;
    let delta = r.i64("delta").map_err(bad)?;
    r.finish().map_err(bad)?;
    Ok(delta)
}

/// Applies `delta` to a directory onode's entry count.
pub fn apply_entries_delta(onode: &mut Onode, delta: i64) -> Result<()> {
    let bad = |what: String| ObjectError::BadRecord { record: RECORD, what };
    let dir = onode.dir.as_mut().ok_or_else(|| bad(format!("applied to a {:?}, not a directory", onode.kind)))?;
    dir.entries = dir
        .entries
        .checked_add_signed(delta)
        .ok_or_else(|| bad(format!("entry count {} {delta:+} is out of range", dir.entries)))?;
    Ok(())
}

/// The merge operator folding entry-count deltas into directory onodes.
pub struct DirEntriesOperator {
    limits: MetaLimits,
}

impl DirEntriesOperator {
    /// The operator for a store with these limits (onodes are decoded and
    /// re-encoded against them).
    pub fn new(limits: MetaLimits) -> Self {
        DirEntriesOperator { limits }
    }

    fn fold(&self, existing: Option<&[u8]>, operands: &[&[u8]]) -> Result<Vec<u8>> {
        let bytes = existing.ok_or_else(|| ObjectError::BadRecord {
            record: RECORD,
            what: "applied to a directory with no onode".into(),
        })?;
        let mut onode = Onode::decode(bytes, &self.limits)?;
        for op in operands {
            apply_entries_delta(&mut onode, decode_entries_delta(op)?)?;
        }
        onode.encode(&self.limits)
    }
}

impl MergeOperator for DirEntriesOperator {
    fn name(&self) -> &str {
        DIR_ENTRIES_OPERATOR
    }

    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> std::result::Result<Option<Vec<u8>>, String> {
        self.fold(existing, operands).map(Some).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::{DataLocation, DirInfo, Kind, Timestamp};

    fn dir(entries: u64) -> Onode {
        let t = Timestamp { secs: 1, nanos: 0 };
        Onode {
            kind: Kind::Directory,
            flags: 0,
            size: 0,
            mode: Kind::Directory.mode_bits() | 0o755,
            uid: 0,
            gid: 0,
            nlink: 1,
            generation: 1,
            atime: t,
            mtime: t,
            ctime: t,
            btime: t,
            rdev: 0,
            location: DataLocation::Inline(Vec::new()),
            dir: Some(DirInfo { parent: 1, entries }),
        }
    }

    fn limits() -> MetaLimits {
        MetaLimits { inline_max_bytes: 4096, container_bytes: 1 << 30 }
    }

    #[test]
    fn deltas_fold_into_the_count() {
        let op = DirEntriesOperator::new(limits());
        let base = dir(3).encode(&limits()).expect("encode");
        let (a, b) = (encode_entries_delta(2), encode_entries_delta(-4));
        let out = op.full_merge(b"k", Some(&base), &[&a, &b]).expect("merge").expect("value");
        assert_eq!(Onode::decode(&out, &limits()).expect("decode").dir.map(|d| d.entries), Some(1));
    }

    #[test]
    fn impossible_folds_are_errors() {
        let op = DirEntriesOperator::new(limits());
        let base = dir(0).encode(&limits()).expect("encode");
        assert!(op.full_merge(b"k", Some(&base), &[&encode_entries_delta(-1)]).is_err());
        assert!(op.full_merge(b"k", None, &[&encode_entries_delta(1)]).is_err());
        let mut file = dir(0);
        file.kind = Kind::File;
        file.mode = Kind::File.mode_bits();
        file.dir = None;
        let file = file.encode(&limits()).expect("encode");
        assert!(op.full_merge(b"k", Some(&file), &[&encode_entries_delta(1)]).is_err());
        assert!(decode_entries_delta(&[2, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(decode_entries_delta(&[1, 0]).is_err());
    }
}
