//! Keys and bucket names: a key is a path inside its bucket whose `/`
//! separates directory levels (DESIGN.md, kv), so the same objects appear
//! unchanged in the file system.
//!
//! Rules: a key is 1 to [`MAX_KEY_BYTES`] bytes; split at `/`, every part
//! is a valid file name (1 to 255 bytes, no NUL, not `.` or `..`): so no
//! leading, trailing or doubled `/`. A bucket name is one valid file name.

use larder_object::meta::Name;

use crate::error::{lossy, KvError, Result};

/// Longest key, in bytes: a path a file system can pass (PATH_MAX 4096
/// including the NUL), less room for the bucket and mount point is the
/// caller's concern.
pub const MAX_KEY_BYTES: usize = 4095;

/// A checked key: its parts, each a valid file name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) bytes: Vec<u8>,
    pub(crate) parts: Vec<Name>,
}

impl Key {
    /// Checks `key` against the rules.
    pub(crate) fn parse(key: &[u8]) -> Result<Key> {
        let refuse = |reason: String| KvError::InvalidKey { key: lossy(key), reason };
        if key.is_empty() {
            return Err(refuse("a key is at least 1 byte".into()));
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(refuse(format!("{} bytes, above the limit of {MAX_KEY_BYTES}", key.len())));
        }
        let mut parts = Vec::new();
        for (i, part) in key.split(|&b| b == b'/').enumerate() {
            let name = Name::new(part).map_err(|e| match e {
                larder_object::ObjectError::InvalidName { reason, .. } => refuse(format!(
                    "level {} ({:?}) is not a valid name: {reason}{}",
                    i + 1,
                    lossy(part),
                    if part.is_empty() { " (no leading, trailing or doubled '/')" } else { "" }
                )),
                other => KvError::Object(other),
            })?;
            parts.push(name);
        }
        Ok(Key { bytes: key.to_vec(), parts })
    }

    /// The directory levels (every part but the last).
    pub(crate) fn dirs(&self) -> &[Name] {
        &self.parts[..self.parts.len() - 1]
    }

    /// The last part: the object's name in its directory.
    pub(crate) fn leaf(&self) -> &Name {
        &self.parts[self.parts.len() - 1]
    }

    /// The key's first `n` parts joined, for messages.
    pub(crate) fn shown_prefix(&self, n: usize) -> String {
        let v: Vec<&[u8]> = self.parts.iter().take(n).map(|p| p.as_bytes()).collect();
        lossy(&v.join(&b'/'))
    }
}

/// Checks `key` against the rules, as every call taking a key does
/// first: [`KvError::InvalidKey`] says which rule it breaks.
pub fn check_key(key: &[u8]) -> Result<()> {
    Key::parse(key).map(|_| ())
}

/// Checks a bucket name against the rules: [`KvError::InvalidBucket`]
/// says which it breaks.
pub fn check_bucket(bucket: &[u8]) -> Result<()> {
    bucket_name(bucket).map(|_| ())
}

/// Checks a bucket name.
pub(crate) fn bucket_name(bucket: &[u8]) -> Result<Name> {
    Name::new(bucket).map_err(|e| match e {
        larder_object::ObjectError::InvalidName { reason, .. } => {
            KvError::InvalidBucket { bucket: lossy(bucket), reason: reason.to_string() }
        }
        other => KvError::Object(other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_bucket_rules() {
        assert_eq!(Key::parse(b"a/b/c").map(|k| k.parts.len()).ok(), Some(3));
        assert!(Key::parse(b"plain").is_ok());
        for bad in [&b""[..], b"/a", b"a/", b"a//b", b"a/./b", b"..", b"a/\0", &[b'x'; 256][..]] {
            assert!(matches!(Key::parse(bad), Err(KvError::InvalidKey { .. })), "{bad:?} was accepted");
        }
        assert!(Key::parse(&[b'a'; MAX_KEY_BYTES + 1]).is_err());
        let long: Vec<u8> = std::iter::repeat_n(b"abc/".to_vec(), 1000).flatten().chain(*b"abc").collect();
        assert!(Key::parse(&long).is_ok());
    }

    #[test]
    fn bucket_names_are_file_names() {
        assert!(bucket_name(b"photos").is_ok());
        assert!(matches!(bucket_name(b"a/b"), Err(KvError::InvalidBucket { .. })));
        assert!(matches!(bucket_name(b"."), Err(KvError::InvalidBucket { .. })));
    }
}
