//! A directory's entry count and link count as a merge operand: creating
//! or removing a name adds +1 or -1 to the directory's `DirInfo.entries`
//! (and, for a subdirectory, to its `nlink`, which counts each
//! subdirectory's `..`) blindly, without reading the onode, so creates of
//! different names in one directory do not serialize on it (DESIGN.md,
//! namespace; the index's merge operators).
//!
//! Operand layout (docs/format.md, section 13): version 2, 17 bytes:
//! version u8 (2), entries delta i64 LE, link delta i64 LE; version 1, 9
//! bytes: version u8 (1), entries delta i64 LE (read, never written). The
//! operator folds operands into the directory's onode; applying one to a
//! missing onode, to an onode that is not a directory, or one that would
//! take a count out of its range is an error (reads of the key then
//! fail), never a silent clamp.

use larder_index::MergeOperator;

use crate::error::{ObjectError, Result};

use super::codec::{version, Reader};
use super::onode::Onode;
use super::types::MetaLimits;

/// The operator's name, stored in every index run holding its operands.
pub const DIR_ENTRIES_OPERATOR: &str = "larder.dir_entries";
/// The operand version this build writes and the newest it reads.
pub const DIR_ENTRIES_VERSION: u8 = 2;
/// Bytes of an encoded (version 2) operand.
pub const DIR_ENTRIES_BYTES: usize = 17;
const RECORD: &str = "directory entry delta";

/// A change of a directory's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirDelta {
    /// Change of `DirInfo.entries`.
    pub entries: i64,
    /// Change of `nlink` (subdirectories added or removed).
    pub links: i64,
}

impl DirDelta {
    /// Whether it changes nothing.
    pub fn is_zero(&self) -> bool {
        self.entries == 0 && self.links == 0
    }
}

/// Encodes an entry-count delta (no link change).
pub fn encode_entries_delta(delta: i64) -> [u8; DIR_ENTRIES_BYTES] {
    encode_dir_delta(DirDelta { entries: delta, links: 0 })
}

/// Encodes a change of a directory's counts.
pub fn encode_dir_delta(delta: DirDelta) -> [u8; DIR_ENTRIES_BYTES] {
    let mut b = [0u8; DIR_ENTRIES_BYTES];
    b[0] = DIR_ENTRIES_VERSION;
    b[1..9].copy_from_slice(&delta.entries.to_le_bytes());
    b[9..].copy_from_slice(&delta.links.to_le_bytes());
    b
}

/// Decodes an operand of either version.
pub fn decode_dir_delta(bytes: &[u8]) -> Result<DirDelta> {
    let bad = |what: String| ObjectError::BadRecord { record: RECORD, what };
    let mut r = Reader::new(bytes);
    let v = version(&mut r, RECORD, DIR_ENTRIES_VERSION)?;
    let entries = r.i64("entries delta").map_err(bad)?;
    let links = if v >= 2 { r.i64("link delta").map_err(bad)? } else { 0 };
    r.finish().map_err(bad)?;
    Ok(DirDelta { entries, links })
}

/// Applies `delta` to a directory onode's entry and link counts.
pub fn apply_dir_delta(onode: &mut Onode, delta: DirDelta) -> Result<()> {
    let bad = |what: String| ObjectError::BadRecord { record: RECORD, what };
    let kind = onode.kind;
    let dir = onode.dir.as_mut().ok_or_else(|| bad(format!("applied to a {kind:?}, not a directory")))?;
    dir.entries = dir
        .entries
        .checked_add_signed(delta.entries)
        .ok_or_else(|| bad(format!("entry count {} {:+} is out of range", dir.entries, delta.entries)))?;
    onode.nlink = i64::from(onode.nlink)
        .checked_add(delta.links)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| bad(format!("link count {} {:+} is out of range", onode.nlink, delta.links)))?;
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
            apply_dir_delta(&mut onode, decode_dir_delta(op)?)?;
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
        MetaLimits { inline_max_bytes: 4096, container_bytes: 1 << 30, compact_onodes: true }
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
        // A version-2 operand of version-1 length, a short one, a newer one.
        assert!(decode_dir_delta(&[2, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(decode_dir_delta(&[1, 0]).is_err());
        let mut newer = encode_entries_delta(1);
        newer[0] = 3;
        assert!(matches!(decode_dir_delta(&newer), Err(ObjectError::NewerRecord { found: 3, .. })));
        let below_zero = encode_dir_delta(DirDelta { entries: 0, links: -i64::from(dir(0).nlink) - 1 });
        assert!(op.full_merge(b"k", Some(&base), &[&below_zero]).is_err());
    }

    #[test]
    fn link_deltas_fold_into_nlink_and_version_1_still_reads() {
        let op = DirEntriesOperator::new(limits());
        let base = dir(0).encode(&limits()).expect("encode");
        let subdir = encode_dir_delta(DirDelta { entries: 1, links: 1 });
        let v1: [u8; 9] = [1, 2, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(decode_dir_delta(&v1).expect("v1"), DirDelta { entries: 2, links: 0 });
        let out = op.full_merge(b"k", Some(&base), &[&subdir, &v1]).expect("merge").expect("value");
        let o = Onode::decode(&out, &limits()).expect("decode");
        assert_eq!((o.dir.map(|d| d.entries), o.nlink), (Some(3), dir(0).nlink + 1));
    }
}
