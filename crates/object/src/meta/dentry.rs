//! Directory entries: the value of a dmap key (parent id, name).
//!
//! Layout (docs/format.md, section 13), 10 bytes: version u8 (1), kind u8,
//! child id u64 LE. The kind is copied from the child's onode so that
//! listing a directory with types (`readdir`'s `d_type`) reads only the
//! dmap. There is no generation: object ids are never reused, so an id
//! alone cannot name a later object.

use crate::error::{ObjectError, Result};

use super::codec::{version, Reader};
use super::types::Kind;

/// The dentry version this build writes and the newest it reads.
pub const DENTRY_VERSION: u8 = 1;
/// Bytes of an encoded dentry.
pub const DENTRY_BYTES: usize = 10;
const RECORD: &str = "dentry";

/// What a name in a directory refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dentry {
    /// The object named; never 0 (id 0 is never allocated).
    pub child: u64,
    /// The object's kind, as in its onode.
    pub kind: Kind,
}

impl Dentry {
    /// Encodes the dentry. Refuses child id 0 ([`ObjectError::InvalidRecord`]).
    pub fn encode(&self) -> Result<[u8; DENTRY_BYTES]> {
        if self.child == 0 {
            return Err(ObjectError::InvalidRecord { record: RECORD, what: "child id 0 is never allocated".into() });
        }
        let mut b = [0u8; DENTRY_BYTES];
        b[0] = DENTRY_VERSION;
        b[1] = self.kind.to_u8();
        b[2..10].copy_from_slice(&self.child.to_le_bytes());
        Ok(b)
    }

    /// Decodes a dentry read back from the index: refuses a newer version
    /// ([`ObjectError::NewerRecord`]), and version 0, an unknown kind,
    /// child id 0 or a length other than 10 ([`ObjectError::BadRecord`]).
    pub fn decode(bytes: &[u8]) -> Result<Dentry> {
        let bad = |what: String| ObjectError::BadRecord { record: RECORD, what };
        let mut r = Reader::new(bytes);
        version(&mut r, RECORD, DENTRY_VERSION)?;
        let k = r.u8("kind").map_err(bad)?;
        let kind = Kind::from_u8(k).ok_or_else(|| bad(format!("unknown kind {k}")))?;
        let child = r.u64("child id").map_err(bad)?;
        r.finish().map_err(bad)?;
        if child == 0 {
            return Err(bad("child id 0 is never allocated".into()));
        }
        Ok(Dentry { child, kind })
    }
}
