//! Orphan records: objects that exist but have no name, the value of an
//! orphans key (object id).
//!
//! An orphan record is written in the same transaction that leaves an
//! object without a name (or that starts freeing it), and deleted in the
//! transaction that frees its last piece. After a crash no handle survives,
//! so open frees every object with an orphan record: nothing is leaked and
//! nothing a handle still used was freed early.
//!
//! Layout (docs/format.md, section 13), 14 bytes: version u8 (1), reason
//! u8, since: i64 LE seconds, u32 LE nanoseconds.

use crate::error::{ObjectError, Result};

use super::codec::{version, Reader};
use super::types::Timestamp;

/// The orphan record version this build writes and the newest it reads.
pub const ORPHAN_VERSION: u8 = 1;
/// Bytes of an encoded orphan record.
pub const ORPHAN_BYTES: usize = 14;
const RECORD: &str = "orphan record";

/// Why an object has no name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OrphanReason {
    /// Its last name was removed while it was open (byte 1); freed at last
    /// close.
    Unlinked,
    /// It was created without a name (`O_TMPFILE`, byte 2); freed at last
    /// close unless linked first.
    Anonymous,
    /// It is being freed in several transactions, too large for one (byte
    /// 3); freeing resumes after a crash.
    Freeing,
}

impl OrphanReason {
    /// The stored byte (0 is never written).
    pub const fn to_u8(self) -> u8 {
        match self {
            OrphanReason::Unlinked => 1,
            OrphanReason::Anonymous => 2,
            OrphanReason::Freeing => 3,
        }
    }

    /// The reason stored as `b`, if any.
    pub fn from_u8(b: u8) -> Option<OrphanReason> {
        [OrphanReason::Unlinked, OrphanReason::Anonymous, OrphanReason::Freeing].into_iter().find(|r| r.to_u8() == b)
    }
}

/// An orphan record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Orphan {
    /// Why the object has no name.
    pub reason: OrphanReason,
    /// When it became an orphan (for `larder fsck` and stats).
    pub since: Timestamp,
}

impl Orphan {
    /// Encodes the record. Refuses nanoseconds of a second or more
    /// ([`ObjectError::InvalidRecord`]).
    pub fn encode(&self) -> Result<[u8; ORPHAN_BYTES]> {
        self.since.check("since").map_err(|what| ObjectError::InvalidRecord { record: RECORD, what })?;
        let mut b = [0u8; ORPHAN_BYTES];
        b[0] = ORPHAN_VERSION;
        b[1] = self.reason.to_u8();
        b[2..10].copy_from_slice(&self.since.secs.to_le_bytes());
        b[10..14].copy_from_slice(&self.since.nanos.to_le_bytes());
        Ok(b)
    }

    /// Decodes a record read back from the index: refuses a newer version
    /// ([`ObjectError::NewerRecord`]), and version 0, an unknown reason,
    /// bad nanoseconds or a length other than 14 ([`ObjectError::BadRecord`]).
    pub fn decode(bytes: &[u8]) -> Result<Orphan> {
        let bad = |what: String| ObjectError::BadRecord { record: RECORD, what };
        let mut r = Reader::new(bytes);
        version(&mut r, RECORD, ORPHAN_VERSION)?;
        let b = r.u8("reason").map_err(bad)?;
        let reason = OrphanReason::from_u8(b).ok_or_else(|| bad(format!("unknown reason {b}")))?;
        let since = Timestamp { secs: r.i64("since").map_err(bad)?, nanos: r.u32("since").map_err(bad)? };
        r.finish().map_err(bad)?;
        since.check("since").map_err(bad)?;
        Ok(Orphan { reason, since })
    }
}
