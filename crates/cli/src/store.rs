//! What every store command shares: opening and creating a store with
//! errors that name the path and say what to do, `BUCKET/KEY` addresses,
//! the key rules checked before anything is written, and keys shown safely
//! on one line.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use larder_io::IoError;
use larder_kv::key::MAX_KEY_BYTES;
use larder_kv::{Kv, KvError, KvOptions};
use larder_object::meta::name::file_name_error;
use larder_object::{CreationOptions, ObjectError};

/// Opens the store at `dir`, turning the failures a person can fix into
/// messages that say how.
pub(crate) fn open(dir: &Path) -> Result<Kv> {
    Kv::open(dir, KvOptions::default()).map_err(|e| opening_error(dir, e))
}

/// Creates a store at `dir`; refuses one that exists.
pub(crate) fn create(dir: &Path, creation: CreationOptions) -> Result<Kv> {
    Kv::create(dir, KvOptions { creation, ..KvOptions::default() }).map_err(|e| match e {
        KvError::Object(ObjectError::AlreadyExists { .. }) => anyhow!(
            "a store already exists at {}; use it as it is, or give `larder init` a directory without one",
            dir.display()
        ),
        other => opening_error(dir, other).context(format!("creating a store at {}", dir.display())),
    })
}

/// The message for a store that would not open, saying what to do.
pub(crate) fn opening_error(dir: &Path, e: KvError) -> anyhow::Error {
    let d = dir.display();
    match e {
        KvError::Object(ObjectError::NotAStore { .. }) => {
            anyhow!("no store at {d}; create one with `larder init {d}`")
        }
        KvError::Object(ObjectError::Io(IoError::Locked { .. })) => anyhow!(
            "the store at {d} is open in another process (it holds {d}/LOCK); \
             wait for that process to finish or stop it, then retry"
        ),
        KvError::Object(ObjectError::NewerVersion { found, supported, .. }) => anyhow!(
            "the store at {d} has format version {found}, newer than this larder reads ({supported}); \
             use a newer larder"
        ),
        KvError::Object(ObjectError::UnknownFeature { class, flags, .. }) => {
            anyhow!("the store at {d} uses {class} features this larder does not know ({flags:#x}); use a newer larder")
        }
        other => anyhow::Error::new(other).context(format!("opening the store at {d}")),
    }
}

/// Closes `kv`, making everything durable.
pub(crate) fn close(kv: Kv, dir: &Path) -> Result<()> {
    kv.close().with_context(|| format!("closing the store at {}", dir.display()))
}

/// Creates `bucket` unless it exists.
pub(crate) fn ensure_bucket(kv: &Kv, bucket: &str) -> Result<()> {
    match kv.create_bucket(bucket) {
        Ok(()) | Err(KvError::BucketExists { .. }) => Ok(()),
        Err(e) => Err(anyhow::Error::new(e).context(format!("creating bucket {bucket:?}"))),
    }
}

/// A `BUCKET/KEY` (or `BUCKET[/PREFIX]`) argument split at its first `/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Address {
    pub(crate) bucket: String,
    /// Everything after the first `/` (empty when there is none).
    pub(crate) key: String,
}

impl Address {
    /// Splits `arg` into bucket and the rest (which may be empty).
    pub(crate) fn parse(arg: &str) -> Result<Address> {
        let (bucket, key) = arg.split_once('/').unwrap_or((arg, ""));
        anyhow::ensure!(!bucket.is_empty(), "{arg:?}: no bucket name before the '/'; write BUCKET/KEY");
        if let Some(why) = file_name_error(bucket.as_bytes()) {
            bail!("{arg:?}: bucket name {bucket:?} is refused: {why}");
        }
        Ok(Address { bucket: bucket.to_string(), key: key.to_string() })
    }

    /// Splits `arg`, which must name a key, and checks the key rules.
    pub(crate) fn parse_key(arg: &str) -> Result<Address> {
        let a = Address::parse(arg)?;
        anyhow::ensure!(!a.key.is_empty(), "{arg:?} names no key; write BUCKET/KEY");
        check_key(a.key.as_bytes()).map_err(|why| anyhow!("key {:?} is refused: {why}", a.key))?;
        Ok(a)
    }
}

/// Checks `key` against the bucket rules (larder_kv::key): 1 to
/// `MAX_KEY_BYTES` bytes whose `/`-separated levels are each a valid file
/// name. The KV API checks this too, but only after the bucket exists; the
/// commands check first so a refused key changes nothing, and so `import`
/// can skip a bad name instead of failing a whole batch.
pub(crate) fn check_key(key: &[u8]) -> std::result::Result<(), String> {
    if key.is_empty() {
        return Err("a key is at least 1 byte".into());
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(format!("{} bytes, above the limit of {MAX_KEY_BYTES}", key.len()));
    }
    for (i, part) in key.split(|&b| b == b'/').enumerate() {
        if part.is_empty() {
            return Err(format!("level {} is empty (no leading, trailing or doubled '/')", i + 1));
        }
        if let Some(why) = file_name_error(part) {
            return Err(format!("level {} ({}) is not a valid name: {why}", i + 1, shown(part)));
        }
    }
    Ok(())
}

/// `key` on one line: valid UTF-8 as is except `\` and control characters,
/// which are escaped, as are bytes that are not UTF-8 (`\xNN`). Output that
/// lists keys one per line stays parseable whatever the key holds.
pub(crate) fn shown(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len());
    for chunk in key.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' || c.is_control() {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_at_the_first_slash() {
        let a = Address::parse("photos/2024/a.jpg").ok();
        assert_eq!(a, Some(Address { bucket: "photos".into(), key: "2024/a.jpg".into() }));
        let a = Address::parse("photos").ok();
        assert_eq!(a, Some(Address { bucket: "photos".into(), key: String::new() }));
        assert!(Address::parse("/key").is_err());
        assert!(Address::parse("..").is_err());
        assert!(Address::parse_key("photos").is_err(), "a bucket alone names no key");
        assert!(Address::parse_key("photos/").is_err());
        assert!(Address::parse_key("b/a//b").is_err());
        assert!(Address::parse_key("b/a b/c").is_ok());
    }

    #[test]
    fn the_key_rules_are_the_kv_layers() {
        assert!(check_key(b"a/b/c").is_ok());
        for bad in [&b""[..], b"/a", b"a/", b"a//b", b"a/./b", b"..", b"a/\0", &[b'x'; 256][..]] {
            assert!(check_key(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(check_key(&[b'a'; MAX_KEY_BYTES + 1]).is_err());
        let long: Vec<u8> = std::iter::repeat_n(b"abc/".to_vec(), 1000).flatten().chain(*b"abc").collect();
        assert!(check_key(&long).is_ok());
    }

    #[test]
    fn keys_are_shown_on_one_line() {
        assert_eq!(shown(b"a b/c.jpg"), "a b/c.jpg");
        assert_eq!(shown("d\u{e9}j\u{e0}".as_bytes()), "d\u{e9}j\u{e0}");
        assert_eq!(shown(b"a\nb\\c"), "a\\nb\\\\c");
        assert_eq!(shown(b"x\xffy"), "x\\xffy");
    }
}
