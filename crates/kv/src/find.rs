//! Finding the dentry a key names, through the store's path entries: the
//! path entry's key, and the derivation of a path not cached.
//!
//! Both run on every get, so neither allocates what it need not: the path
//! key is built on the stack when short (every ordinary key), and a path
//! not cached is derived from the bucket and key bytes with each dentry
//! key built in place ([`DentryKey`]), checked as the parsed forms
//! ([`Name`](larder_object::meta::Name), [`Key`]) check them, with the
//! same errors. Parsing them first cost a dozen allocations per get of a
//! key read anew.

use larder_object::meta::name::file_name_error;
use larder_object::meta::{Dentry, DentryKey, Kind};
use larder_object::store::DerivedPath;
use larder_object::ROOT_ID;

use crate::error::{lossy, KvError, Result};
use crate::key::{bucket_name, Key, MAX_KEY_BYTES};
use crate::Kv;

/// Longest path key kept on the stack.
const SHORT_PATH: usize = 96;

/// A path entry's key (see [`path_key`]): on the stack when short.
pub(crate) enum PathKey {
    Short { len: usize, bytes: [u8; SHORT_PATH] },
    Long(Vec<u8>),
}

impl std::ops::Deref for PathKey {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            PathKey::Short { len, bytes } => &bytes[..*len],
            PathKey::Long(v) => v,
        }
    }
}

/// The path entry's key of `key` in `bucket`: the bucket's length (two
/// bytes, little-endian), the bucket, the key; so that no two (bucket,
/// key) pairs share one.
pub(crate) fn path_key(bucket: &[u8], key: &[u8]) -> PathKey {
    let length = u16::try_from(bucket.len()).unwrap_or(u16::MAX).to_le_bytes();
    let len = 2 + bucket.len() + key.len();
    if len > SHORT_PATH {
        return PathKey::Long([&length[..], bucket, key].concat());
    }
    let mut bytes = [0u8; SHORT_PATH];
    bytes[..2].copy_from_slice(&length);
    bytes[2..2 + bucket.len()].copy_from_slice(bucket);
    bytes[2 + bucket.len()..len].copy_from_slice(key);
    PathKey::Short { len, bytes }
}

impl Kv {
    /// The dentry `key` of `bucket` names (a file, not a level), through the
    /// store's path entries: one cache lookup while the namespace is
    /// unchanged, instead of one per level. Only a bucket and key that
    /// checked and resolved are ever cached, so a hit needs no checks.
    /// Returns the path's cache handle too, whose entry holds the object's
    /// onode once read through it: the key's one entry in the cache. With
    /// `for_read` the caller reads the object next through the handle,
    /// and a path found anew enters the cache then, with the onode.
    pub(crate) fn find_cached(
        &self,
        bucket: &[u8],
        key: &[u8],
        for_read: bool,
    ) -> Result<(DerivedPath, Option<Dentry>)> {
        let path = path_key(bucket, key);
        let derive = |reads: &mut Vec<Vec<u8>>| -> Result<Option<Vec<u8>>> {
            let found = self.find_unkept(bucket, key, reads)?;
            Ok(found.map(|d| d.encode()).transpose()?.map(|b| b.to_vec()))
        };
        let found = if for_read {
            self.store().derived_for_read(&path, derive)?
        } else {
            self.store().derived_from_names(&path, derive)?
        };
        let dentry = found.value().map(Dentry::decode).transpose()?;
        Ok((found, dentry))
    }

    /// The dentry `key` names in `bucket` (a file, not a level), not
    /// keeping the leaf's dentry in the metadata cache if it was not
    /// there: the path entry a get derives holds it (the bucket and the
    /// levels above are kept, shared by many keys). The key of every
    /// dentry read is pushed onto `reads`. The bucket is checked and found
    /// first, then every part of the key is checked, before anything else
    /// is read, with the errors of `Kv::bucket` and [`Key::parse`].
    fn find_unkept(&self, bucket: &[u8], key: &[u8], reads: &mut Vec<Vec<u8>>) -> Result<Option<Dentry>> {
        let store = self.store();
        let Ok(root) = DentryKey::new(ROOT_ID, bucket) else {
            bucket_name(bucket)?;
            return Err(KvError::InvalidBucket { bucket: lossy(bucket), reason: "not a file name".into() });
        };
        let mut dir = match store.get_meta(root.as_bytes())?.map(|v| Dentry::decode(&v)).transpose()? {
            Some(d) if d.kind == Kind::Directory => d.child,
            _ => return Err(KvError::NoSuchBucket { bucket: lossy(bucket) }),
        };
        if key.is_empty()
            || key.len() > MAX_KEY_BYTES
            || key.split(|&b| b == b'/').any(|p| file_name_error(p).is_some())
        {
            Key::parse(key)?;
            return Err(KvError::InvalidKey { key: lossy(key), reason: "not a path of file names".into() });
        }
        reads.push(root.as_bytes().to_vec());
        let mut parts = key.split(|&b| b == b'/').peekable();
        while let Some(part) = parts.next() {
            let name = DentryKey::new(dir, part)?;
            reads.push(name.as_bytes().to_vec());
            if parts.peek().is_none() {
                let leaf = store.get_meta_unkept(name.as_bytes())?.map(|v| Dentry::decode(&v)).transpose()?;
                return Ok(leaf.filter(|d| d.kind != Kind::Directory));
            }
            match store.get_meta(name.as_bytes())?.map(|v| Dentry::decode(&v)).transpose()? {
                Some(d) if d.kind == Kind::Directory => dir = d.child,
                _ => return Ok(None),
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_keys_are_the_same_bytes_short_or_long() {
        for (bucket, key) in [(&b"b"[..], &b"k"[..]), (b"usertable", b"user1234567890"), (b"b", &[b'x'; 200][..])] {
            let expected = [&(bucket.len() as u16).to_le_bytes()[..], bucket, key].concat();
            let built = path_key(bucket, key);
            assert_eq!(&*built, &expected[..]);
            assert_eq!(matches!(built, PathKey::Short { .. }), expected.len() <= SHORT_PATH);
        }
        let edge = vec![b'e'; SHORT_PATH - 3];
        assert!(matches!(path_key(b"b", &edge), PathKey::Short { .. }));
        assert!(matches!(path_key(b"bb", &edge), PathKey::Long(_)));
    }
}
