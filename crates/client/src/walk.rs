//! Path walks through the lease cache: each directory's lookups are kept
//! under that directory's lease (Aerie's directory leases), so a path
//! whose directories the client walked before resolves without a round
//! trip, and a change in one directory revokes only that directory's
//! lease.
//!
//! The walk handles plain paths only: names, separated by one or more
//! `/`. A path with `.` or `..`, a trailing `/`, a symbolic link on the
//! way, or a lookup the server refuses is resolved by the server
//! (`Resolve`), whose answer says what such paths mean.

use std::path::Path;

use larder_protocol::message::{FileKind, Request, Response};

use crate::cache::CachedPath;
use crate::error::Result;
use crate::paths::path_bytes;
use crate::Client;

/// Longest path and name the walk takes (the fs layer's limits; longer
/// ones get the server's error).
const PATH_MAX: usize = 4096;
const NAME_MAX: usize = 255;

impl Client {
    /// The object `path` names (following symbolic links), walked through
    /// the lease cache; `None` when the cache is off or the path is one
    /// the server must resolve.
    pub(crate) fn walk(&self, path: &Path) -> Result<Option<CachedPath>> {
        let cache = self.connection.cache();
        if !cache.enabled() {
            return Ok(None);
        }
        let bytes = path_bytes(path);
        if bytes.is_empty() || bytes.len() >= PATH_MAX || bytes.contains(&0) || bytes.ends_with(b"/") {
            return Ok(None);
        }
        let parts: Vec<&[u8]> = bytes.split(|b| *b == b'/').filter(|c| !c.is_empty()).collect();
        if parts.is_empty() || parts.iter().any(|p| *p == b"." || *p == b".." || p.len() > NAME_MAX) {
            return Ok(None);
        }
        let mut dir = match cache.root() {
            Some(root) => root,
            None => match self.resolve(Path::new("/"), true)?.attributes {
                Some(root) => {
                    cache.set_root(root.ino);
                    root.ino
                }
                None => return Ok(None),
            },
        };
        for (i, part) in parts.iter().enumerate() {
            let found = match cache.lookup(&self.connection, dir, part) {
                Some(found) => found,
                None => {
                    let Some(version) = cache.file_version(&self.connection, dir) else { return Ok(None) };
                    let request = Request::Lookup { parent: dir, name: part.to_vec() };
                    let attributes = match self.connection.call(&request) {
                        Ok(Response::Attributes(attributes)) => attributes,
                        _ => return Ok(None),
                    };
                    let found = CachedPath { ino: attributes.ino, kind: attributes.kind };
                    cache.insert_lookup(&self.connection, dir, version, part, found);
                    found
                }
            };
            if found.kind == FileKind::Symlink {
                return Ok(None);
            }
            if i + 1 == parts.len() {
                return Ok(Some(found));
            }
            if found.kind != FileKind::Directory {
                return Ok(None);
            }
            dir = found.ino;
        }
        Ok(None)
    }
}
