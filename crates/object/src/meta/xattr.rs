//! Extended attribute values: the value of an xattr key (object id, name).
//!
//! Layout (docs/format.md, section 13): tag u8 (1: the value follows
//! inline), then the value's bytes, 0 to 65,536 of them (Linux's
//! XATTR_SIZE_MAX). Other tags are reserved, e.g. for values kept out of
//! line in an object of their own.

use crate::error::{ObjectError, Result};

/// Largest extended attribute value, in bytes.
pub const MAX_XATTR_VALUE_BYTES: usize = 64 << 10;
const TAG_INLINE: u8 = 1;
const RECORD: &str = "xattr value";

/// An extended attribute's value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct XattrValue(pub Vec<u8>);

impl XattrValue {
    /// Encodes the value. Refuses one above [`MAX_XATTR_VALUE_BYTES`]
    /// ([`ObjectError::InvalidRecord`]).
    pub fn encode(&self) -> Result<Vec<u8>> {
        if self.0.len() > MAX_XATTR_VALUE_BYTES {
            return Err(ObjectError::InvalidRecord {
                record: RECORD,
                what: format!("{} bytes, above the limit of {MAX_XATTR_VALUE_BYTES}", self.0.len()),
            });
        }
        let mut b = Vec::with_capacity(1 + self.0.len());
        b.push(TAG_INLINE);
        b.extend_from_slice(&self.0);
        Ok(b)
    }

    /// Decodes a value read back from the index ([`ObjectError::BadRecord`]
    /// on an empty input, an unknown tag or a value above the limit).
    pub fn decode(bytes: &[u8]) -> Result<XattrValue> {
        let bad = |what: String| ObjectError::BadRecord { record: RECORD, what };
        match bytes.split_first() {
            None => Err(bad("empty value (no tag)".into())),
            Some((&TAG_INLINE, v)) if v.len() > MAX_XATTR_VALUE_BYTES => {
                Err(bad(format!("{} bytes, above the limit of {MAX_XATTR_VALUE_BYTES}", v.len())))
            }
            Some((&TAG_INLINE, v)) => Ok(XattrValue(v.to_vec())),
            Some((t, _)) => Err(bad(format!("unknown tag {t}"))),
        }
    }
}
