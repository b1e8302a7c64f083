//! Path walks through the lease cache: each directory's lookups are kept
//! under that directory's lease (Aerie's directory leases), so a path
//! whose directories the client walked before resolves without a round
//! trip, and a change in one directory revokes only that directory's
//! lease.
//!
//! The walk handles plain paths only: names, separated by one or more
//! `/`. A path with `.` or `..`, a trailing `/`, a symbolic link on the
//! way, or a lookup the server refuses is resolved by the server
//! (`Resolve`, or `OpenPath` for an open), whose answer says what such
//! paths mean. An open whose last name is not cached asks for it and the
//! open in one request (`OpenPath`) and caches the name from the answer.

use std::path::Path;

use larder_protocol::message::{FileKind, Request, Response};

use crate::cache::CachedPath;
use crate::error::Result;
use crate::Client;

/// Longest path and name the walk takes (the fs layer's limits; longer
/// ones get the server's error).
const PATH_MAX: usize = 4096;
const NAME_MAX: usize = 255;

/// How far a path walks through the cache without asking the server for
/// its last name.
pub(crate) enum Walked {
    /// The object the path names.
    Found(CachedPath),
    /// Every directory walked, under their leases; the last name is not
    /// cached in `dir`, whose entry was at `version` before the caller
    /// asks the server (to cache the answer as `Cache::insert_lookup`
    /// does).
    Last { dir: u64, version: u64, name: Vec<u8> },
    /// Not a path the cache walks (the cache is off, `.`, `..`, a trailing
    /// `/`, a symbolic link or a non-directory on the way, a refused lookup
    /// or lease): the server resolves it.
    No,
}

impl Client {
    /// The object `path` names (following symbolic links), walked through
    /// the lease cache; `None` when the cache is off or the path is one
    /// the server must resolve.
    pub(crate) fn walk(&self, path: &Path) -> Result<Option<CachedPath>> {
        match self.walk_to_last(path)? {
            Walked::Found(found) => Ok(Some(found)),
            Walked::No => Ok(None),
            Walked::Last { dir, version, name } => Ok(self.look_up(dir, version, &name)),
        }
    }

    /// Looks `name` up in `dir` and caches the answer as of `version`.
    fn look_up(&self, dir: u64, version: u64, name: &[u8]) -> Option<CachedPath> {
        let request = Request::Lookup { parent: dir, name: name.to_vec() };
        let attributes = match self.connection.call(&request) {
            Ok(Response::Attributes(attributes)) => attributes,
            _ => return None,
        };
        let found = CachedPath { ino: attributes.ino, kind: attributes.kind };
        self.connection.cache().insert_lookup(&self.connection, dir, version, name, found);
        (found.kind != FileKind::Symlink).then_some(found)
    }

    /// Walks `path` through the lease cache, looking up directories the
    /// cache does not hold yet, and stops before asking for the last name
    /// when the cache does not hold it (an open by path asks for it and
    /// the open at once).
    pub(crate) fn walk_to_last(&self, path: &Path) -> Result<Walked> {
        let cache = self.connection.cache();
        if !cache.enabled() {
            return Ok(Walked::No);
        }
        let Some((bytes, count)) = plain_path(path) else { return Ok(Walked::No) };
        // The components, borrowed from the path (no list of them is made:
        // a cached open walks every path it opens).
        let parts = || components(bytes);
        // A path walked before, under leases that hold: one lock, one look
        // at the clock.
        if let Some(found) = cache.walk_held(&self.connection, parts(), count) {
            return Ok(Walked::Found(found));
        }
        let mut dir = match cache.root() {
            Some(root) => root,
            None => match self.resolve(Path::new("/"), true)?.attributes {
                Some(root) => {
                    cache.set_root(root.ino);
                    root.ino
                }
                None => return Ok(Walked::No),
            },
        };
        for (i, part) in parts().enumerate() {
            let last = i + 1 == count;
            let found = match cache.lookup(&self.connection, dir, part) {
                Some(found) => found,
                None => {
                    let Some(version) = cache.file_version(&self.connection, dir) else { return Ok(Walked::No) };
                    if last {
                        return Ok(Walked::Last { dir, version, name: part.to_vec() });
                    }
                    match self.look_up(dir, version, part) {
                        Some(found) => found,
                        None => return Ok(Walked::No),
                    }
                }
            };
            if found.kind == FileKind::Symlink {
                return Ok(Walked::No);
            }
            if last {
                return Ok(Walked::Found(found));
            }
            if found.kind != FileKind::Directory {
                return Ok(Walked::No);
            }
            dir = found.ino;
        }
        Ok(Walked::No)
    }
}

/// The bytes of `path` and the count of its names, if it is a plain path
/// the cache walks: names of at most NAME_MAX bytes separated by `/`, no
/// `.` or `..`, no trailing `/`, no NUL, shorter than PATH_MAX.
pub(crate) fn plain_path(path: &Path) -> Option<(&[u8], usize)> {
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes()
    };
    if bytes.is_empty() || bytes.len() >= PATH_MAX || bytes.contains(&0) || bytes.ends_with(b"/") {
        return None;
    }
    let count = components(bytes).count();
    if count == 0 || components(bytes).any(|p| p == b"." || p == b".." || p.len() > NAME_MAX) {
        return None;
    }
    Some((bytes, count))
}

/// The names of a path, borrowed from it.
pub(crate) fn components(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|b| *b == b'/').filter(|c| !c.is_empty())
}
