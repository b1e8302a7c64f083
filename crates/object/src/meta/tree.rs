//! The records of transactional trees (`larder-trees`): a catalog of tree
//! names, the tree id high-water mark, a count per tree, and the entries.
//!
//! The object layer only encodes and checks them (so fsck can); the trees
//! crate writes them. Keys are in [`super::keys`] (map `0x70`). Layouts:
//! docs/format.md, section 19.
//!
//! The catalog value, the id high-water mark and the count share one
//! 13-byte layout: version u8 (1), a u64 LE, crc32c u32 LE of the first 9
//! bytes. An entry's value is the user's bytes as given.

use crate::error::{ObjectError, Result};

use super::codec::{version, Reader};

/// The tree record version this build writes and the newest it reads.
pub const TREE_RECORD_VERSION: u8 = 1;
/// Bytes of an encoded catalog value, high-water mark or count.
pub const TREE_RECORD_BYTES: usize = 13;
/// Longest tree name, in bytes (UTF-8).
pub const MAX_TREE_NAME_BYTES: usize = 255;
/// Longest key of a tree entry, in bytes (the index allows 64 KiB with
/// the map's 10 bytes of prefix; the rest is left for the index's own
/// headroom and to keep index blocks small).
pub const MAX_TREE_KEY_BYTES: usize = 16 << 10;

/// Which tree record a 13-byte value is: named in errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TreeRecordKind {
    /// A catalog value: the tree's id.
    Catalog,
    /// The tree id high-water mark: the next id to hand out.
    NextId,
    /// A tree's entry count.
    Count,
}

impl TreeRecordKind {
    /// The record's name in errors.
    pub const fn name(self) -> &'static str {
        match self {
            TreeRecordKind::Catalog => "tree catalog value",
            TreeRecordKind::NextId => "tree id high-water mark",
            TreeRecordKind::Count => "tree count",
        }
    }
}

/// Encodes a tree record holding `value` (a tree id, the next id, or a
/// count).
pub fn encode_tree_record(value: u64) -> [u8; TREE_RECORD_BYTES] {
    let mut b = [0u8; TREE_RECORD_BYTES];
    b[0] = TREE_RECORD_VERSION;
    b[1..9].copy_from_slice(&value.to_le_bytes());
    let crc = larder_io::codec::crc(&b[..9]);
    b[9..13].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a tree record of `kind` read back from the index: refuses a
/// newer version ([`ObjectError::NewerRecord`]), and version 0, a length
/// other than 13, a checksum mismatch, and a catalog id of 0 (never handed
/// out) ([`ObjectError::BadRecord`]). Never panics.
pub fn decode_tree_record(kind: TreeRecordKind, bytes: &[u8]) -> Result<u64> {
    let record = kind.name();
    let bad = |what: String| ObjectError::BadRecord { record, what };
    if bytes.len() != TREE_RECORD_BYTES {
        return Err(bad(format!("{} bytes, expected {TREE_RECORD_BYTES}", bytes.len())));
    }
    let mut r = Reader::new(bytes);
    version(&mut r, record, TREE_RECORD_VERSION)?;
    let value = r.u64("value").map_err(bad)?;
    let stored = r.u32("crc32c").map_err(bad)?;
    r.finish().map_err(bad)?;
    let actual = larder_io::codec::crc(bytes.get(..9).unwrap_or_default());
    if stored != actual {
        return Err(bad(format!("checksum mismatch: stored {stored:#010x}, computed {actual:#010x}")));
    }
    if kind == TreeRecordKind::Catalog && value == 0 {
        return Err(bad("tree id 0 is never handed out".into()));
    }
    Ok(value)
}

/// Checks a tree name: 1 to [`MAX_TREE_NAME_BYTES`] bytes of UTF-8.
/// Refused as [`ObjectError::InvalidName`] (class "tree name").
pub fn check_tree_name(name: &[u8]) -> Result<&str> {
    let invalid = |reason: &'static str| ObjectError::InvalidName {
        class: "tree name",
        name: String::from_utf8_lossy(name.get(..64).unwrap_or(name)).escape_default().to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(invalid("empty"));
    }
    if name.len() > MAX_TREE_NAME_BYTES {
        return Err(invalid("longer than 255 bytes"));
    }
    std::str::from_utf8(name).map_err(|_| invalid("not UTF-8"))
}
