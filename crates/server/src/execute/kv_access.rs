//! Who may do what through the KV API: the fs layer's rules applied to
//! the directories and files a bucket and key are made of (docs/server.md,
//! "KV through the server"). A bucket is a directory in the store's root
//! and a key a path under it, so a KV call is checked as the file system
//! calls doing the same would be: with `Fs::lookup` (search permission on
//! each directory passed), `Fs::access` and `larder_fs::perm`.

use std::collections::HashMap;

use larder_fs::{perm, Attr, FsError, Kind};
use larder_kv::KvError;

use super::{Call, Refusal};

/// Where a key leads, found with the client's credentials.
pub(super) struct KeyPath {
    /// The bucket's directory, then each level of the key that exists, top
    /// down.
    pub(super) dirs: Vec<u64>,
    /// A level of the key is a value (a put or delete there is ENOTDIR).
    pub(super) blocked: bool,
    /// The object the key names, if every level and it exist (a
    /// directory when the key names a level).
    pub(super) leaf: Option<Attr>,
}

impl KeyPath {
    /// The value's object, if the key names one.
    pub(super) fn value(&self) -> Option<&Attr> {
        self.leaf.as_ref().filter(|a| a.kind != Kind::Directory)
    }

    /// The directory holding the key's last level found.
    fn deepest(&self) -> u64 {
        self.dirs.last().copied().unwrap_or_default()
    }
}

/// How a write changes the key it names.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    /// A put: an existing value is rewritten in place (as
    /// `open(O_WRONLY | O_TRUNC)` would).
    Put,
    /// A writer's finish: an existing value is replaced by another object
    /// (as a rename over it would).
    Replace,
    /// A delete: the value's name is removed (as `unlink` would).
    Delete,
}

/// The directory of `bucket`: search permission on the root needed.
pub(super) fn bucket(call: &Call<'_>, bucket: &[u8]) -> Result<u64, Refusal> {
    larder_kv::key::check_bucket(bucket)?;
    let missing = || KvError::NoSuchBucket { bucket: String::from_utf8_lossy(bucket).into_owned() };
    match call.fs.lookup(call.cred, call.fs.root(), bucket) {
        Ok(a) if a.kind == Kind::Directory => Ok(a.ino),
        Ok(_) => Err(missing().into()),
        Err(e) if e.errno() == libc::ENOENT => Err(missing().into()),
        Err(e) => Err(e.into()),
    }
}

/// Walks `key` of `bucket` as the client may: search permission on the
/// bucket and every level passed.
pub(super) fn walk(call: &Call<'_>, bucket_name: &[u8], key: &[u8]) -> Result<KeyPath, Refusal> {
    let dir = bucket(call, bucket_name)?;
    larder_kv::key::check_key(key)?;
    let parts: Vec<&[u8]> = key.split(|&b| b == b'/').collect();
    let Some((leaf, levels)) = parts.split_last() else {
        return Err(KvError::InvalidKey { key: String::new(), reason: "an empty key".into() }.into());
    };
    let mut path = KeyPath { dirs: vec![dir], blocked: false, leaf: None };
    for part in levels {
        match call.fs.lookup(call.cred, path.deepest(), part) {
            Ok(a) if a.kind == Kind::Directory => path.dirs.push(a.ino),
            Ok(_) => {
                path.blocked = true;
                return Ok(path);
            }
            Err(e) if e.errno() == libc::ENOENT => return Ok(path),
            Err(e) => return Err(e.into()),
        }
    }
    path.leaf = match call.fs.lookup(call.cred, path.deepest(), leaf) {
        Ok(a) => Some(a),
        Err(e) if e.errno() == libc::ENOENT => None,
        Err(e) => return Err(e.into()),
    };
    Ok(path)
}

/// The level of `key` that is a value, when `path` (its walk) is
/// blocked: the walk stopped there, one level below its last directory.
pub(super) fn blocking_value<'k>(key: &'k [u8], path: &KeyPath) -> &'k [u8] {
    // `dirs` holds the bucket and the levels above the blocking one.
    let levels = path.dirs.len();
    let mut slashes = 0;
    for (at, &byte) in key.iter().enumerate() {
        if byte == b'/' {
            slashes += 1;
            if slashes == levels {
                return &key[..at];
            }
        }
    }
    key
}

/// A read of the value (get, reader): read permission on its object.
pub(super) fn check_read(call: &Call<'_>, path: &KeyPath) -> Result<(), Refusal> {
    if let Some(value) = path.value() {
        call.fs.access(call.cred, value.ino, perm::READ)?;
    }
    Ok(())
}

/// A write of the key: write and search permission on the bucket and on
/// every existing level (a put may add a level to any of them, a delete
/// may remove the levels it empties), and for an existing value what
/// `change` does to it.
pub(super) fn check_write(call: &Call<'_>, path: &KeyPath, change: Change) -> Result<(), Refusal> {
    for &dir in &path.dirs {
        call.fs.access(call.cred, dir, perm::WRITE | perm::EXEC)?;
    }
    if path.blocked && change != Change::Delete {
        return Err(FsError::posix(libc::ENOTDIR, "a level of the key is a value, not a directory").into());
    }
    match (&path.leaf, change) {
        // A put rewrites the value's object in place: only a regular file
        // may be written so (a symlink or device is not a value to
        // rewrite; through the file system it would be followed or
        // refused, never rewritten).
        (Some(leaf), Change::Put) if leaf.kind == Kind::File => call.fs.access(call.cred, leaf.ino, perm::WRITE)?,
        (Some(leaf), Change::Put) if leaf.kind != Kind::Directory => {
            return Err(FsError::posix(libc::EPERM, "the key names a symbolic link or special file, not a value").into())
        }
        // An empty level the key names gives way to the value (the KV
        // layer removes it): a removal, under the sticky bit's rule.
        (Some(leaf), Change::Put | Change::Replace) if leaf.kind == Kind::Directory => {
            check_remove(call, path.deepest(), leaf.ino)?
        }
        (Some(leaf), Change::Replace | Change::Delete) => check_remove(call, path.deepest(), leaf.ino)?,
        _ => {}
    }
    if change == Change::Delete && path.value().is_some() {
        check_emptied_levels(call, path)?;
    }
    Ok(())
}

/// A delete removes the levels it empties, bottom up: each is a removal
/// of a directory from its parent, under the sticky bit's rule. A level
/// is emptied when the key's chain is its only entry.
fn check_emptied_levels(call: &Call<'_>, path: &KeyPath) -> Result<(), Refusal> {
    let store = call.fs.store();
    // dirs[0] is the bucket, never removed by a delete.
    for i in (1..path.dirs.len()).rev() {
        let level = path.dirs[i];
        let entries = store.stat(level).map_err(KvError::from)?.and_then(|o| o.dir).map_or(0, |d| d.entries);
        if entries != 1 {
            break;
        }
        check_remove(call, path.dirs[i - 1], level)?;
    }
    Ok(())
}

/// The removal of `child`'s name from directory `dir`: write and search
/// on it, and the sticky bit's rule.
pub(super) fn check_remove(call: &Call<'_>, dir: u64, child: u64) -> Result<(), Refusal> {
    let store = call.fs.store();
    let gone = |ino: u64| FsError::posix(libc::ENOENT, format!("object {ino}"));
    let d = store.stat(dir).map_err(KvError::from)?.ok_or_else(|| gone(dir))?;
    let c = store.stat(child).map_err(KvError::from)?.ok_or_else(|| gone(child))?;
    perm::check_remove(&d, dir, &c, call.cred)?;
    Ok(())
}

/// The levels a scan's keys pass, checked once each: read and search on
/// each (a scan lists them, as `ls -R` would).
pub(super) struct ScanLevels {
    bucket: u64,
    checked: HashMap<Vec<u8>, u64>,
}

impl ScanLevels {
    /// The levels of a scan of bucket directory `bucket`, which the caller
    /// has checked.
    pub(super) fn new(bucket: u64) -> ScanLevels {
        ScanLevels { bucket, checked: HashMap::new() }
    }

    /// Checks the levels of `key`; `false` if one vanished since the scan
    /// listed it (the key is skipped, as a key deleted meanwhile is).
    pub(super) fn check(&mut self, call: &Call<'_>, key: &[u8]) -> Result<bool, Refusal> {
        let mut dir = self.bucket;
        let mut prefix = Vec::new();
        let parts: Vec<&[u8]> = key.split(|&b| b == b'/').collect();
        for part in parts.iter().take(parts.len().saturating_sub(1)) {
            prefix.extend_from_slice(part);
            prefix.push(b'/');
            if let Some(&ino) = self.checked.get(&prefix) {
                dir = ino;
                continue;
            }
            let level = match call.fs.lookup(call.cred, dir, part) {
                Ok(a) => a.ino,
                Err(e) if e.errno() == libc::ENOENT => return Ok(false),
                Err(e) => return Err(e.into()),
            };
            call.fs.access(call.cred, level, perm::READ | perm::EXEC)?;
            self.checked.insert(prefix.clone(), level);
            dir = level;
        }
        Ok(true)
    }
}
