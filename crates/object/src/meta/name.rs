//! Validated names: directory entry names, extended attribute names and
//! store metadata names. Each is a byte string checked once, when it is
//! made, so keys built from it always decode again.

use std::fmt;

use crate::error::{ObjectError, Result};

/// Longest file name, extended attribute name or store metadata name, in
/// bytes (Linux's NAME_MAX and XATTR_NAME_MAX).
pub const MAX_NAME_BYTES: usize = 255;

/// The name as an error shows it: non-printable bytes escaped, cut after
/// 64 bytes so a hostile name cannot flood a log.
pub(super) fn shown(bytes: &[u8]) -> String {
    let cut = bytes.get(..64).unwrap_or(bytes);
    let mut s = cut.escape_ascii().to_string();
    if cut.len() < bytes.len() {
        s.push_str(&format!("... ({} bytes)", bytes.len()));
    }
    s
}

/// Why `bytes` is not a valid file name, if it is not: an extended
/// attribute name's rules, plus no `/` and not `.` or `..`.
pub fn file_name_error(bytes: &[u8]) -> Option<&'static str> {
    xattr_name_error(bytes).or_else(|| {
        if bytes.contains(&b'/') {
            Some("contains '/'")
        } else if bytes == b"." || bytes == b".." {
            Some("'.' and '..' are not stored names")
        } else {
            None
        }
    })
}

/// Why `bytes` is not a valid extended attribute name, if it is not. The
/// namespace prefix (`user.`, `trusted.`, ...) is the file system layer's
/// business; here a name is 1 to 255 bytes without NUL.
pub fn xattr_name_error(bytes: &[u8]) -> Option<&'static str> {
    if bytes.is_empty() {
        Some("empty")
    } else if bytes.len() > MAX_NAME_BYTES {
        Some("longer than 255 bytes")
    } else if bytes.contains(&0) {
        Some("contains a NUL byte")
    } else {
        None
    }
}

/// Why `bytes` is not a valid store metadata name, if it is not: 1 to 255
/// bytes of `a-z`, `0-9`, `_` and `.`, so the names stay readable in dumps.
pub fn store_name_error(bytes: &[u8]) -> Option<&'static str> {
    if bytes.is_empty() {
        Some("empty")
    } else if bytes.len() > MAX_NAME_BYTES {
        Some("longer than 255 bytes")
    } else if !bytes.iter().all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.') {
        Some("only a-z, 0-9, '_' and '.' are allowed")
    } else {
        None
    }
}

macro_rules! name_type {
    ($(#[$doc:meta])* $ty:ident, $check:ident, $class:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $ty(Vec<u8>);

        impl $ty {
            /// Checks `bytes` and makes the name, or says why it is refused
            /// ([`ObjectError::InvalidName`]).
            pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self> {
                let bytes = bytes.into();
                match $check(&bytes) {
                    None => Ok($ty(bytes)),
                    Some(reason) => Err(ObjectError::InvalidName { class: $class, name: shown(&bytes), reason }),
                }
            }

            /// The name's bytes.
            pub fn as_bytes(&self) -> &[u8] {
                &self.0
            }

            /// The name's bytes, owned.
            pub fn into_bytes(self) -> Vec<u8> {
                self.0
            }
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}(\"{}\")", stringify!($ty), self.0.escape_ascii())
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0.escape_ascii())
            }
        }

        impl TryFrom<&[u8]> for $ty {
            type Error = ObjectError;
            fn try_from(b: &[u8]) -> Result<Self> {
                $ty::new(b)
            }
        }

        impl TryFrom<&str> for $ty {
            type Error = ObjectError;
            fn try_from(s: &str) -> Result<Self> {
                $ty::new(s.as_bytes())
            }
        }

        impl AsRef<[u8]> for $ty {
            fn as_ref(&self) -> &[u8] {
                &self.0
            }
        }
    };
}

name_type!(
    /// A directory entry name: 1 to 255 bytes, no NUL, no `/`, not `.` or
    /// `..` (those are answered from the directory's onode, never stored).
    /// Any other bytes are allowed (names need not be UTF-8). Ordered as
    /// bytes, which is the order a directory scan returns.
    Name,
    file_name_error,
    "file name"
);

name_type!(
    /// An extended attribute name: 1 to 255 bytes, no NUL.
    XattrName,
    xattr_name_error,
    "xattr name"
);

name_type!(
    /// The name of a store-wide metadata entry (such as
    /// [`NEXT_OBJECT_ID`](super::keys::NEXT_OBJECT_ID)): 1 to 255 bytes of
    /// `a-z`, `0-9`, `_` and `.`.
    StoreName,
    store_name_error,
    "store metadata name"
);
