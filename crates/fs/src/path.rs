//! Paths for embedded callers: resolved from the root one component at a
//! time, with search permission checked on every directory passed, `.`
//! and `..` (the root is its own parent), symbolic links followed (every
//! one before the last component, the last when asked) up to
//! [`MAX_SYMLINK_FOLLOWS`], and Linux's limits and errors.

use std::collections::VecDeque;

use larder_object::meta::Kind;

use crate::attr::Attr;
use crate::cred::Cred;
use crate::error::{FsError, Result};
use crate::{Fs, MAX_SYMLINK_FOLLOWS, NAME_MAX, PATH_MAX};

/// Where a path leads: its parent directory and last name, and the object
/// there if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The directory holding the last component (the root for `/`).
    pub parent: u64,
    /// The last component (empty for `/`).
    pub name: Vec<u8>,
    /// The object the path names, if it exists.
    pub attr: Option<Attr>,
}

fn components(path: &[u8]) -> Result<(VecDeque<Vec<u8>>, bool)> {
    if path.len() >= PATH_MAX {
        return Err(FsError::posix(libc::ENAMETOOLONG, format!("a path of {} bytes", path.len())));
    }
    if path.is_empty() {
        return Err(FsError::posix(libc::ENOENT, "an empty path"));
    }
    if path.contains(&0) {
        return Err(FsError::posix(libc::EINVAL, "a path holding NUL"));
    }
    let mut parts = VecDeque::new();
    for c in path.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
        if c.len() > NAME_MAX {
            return Err(FsError::posix(libc::ENAMETOOLONG, format!("a path component of {} bytes", c.len())));
        }
        parts.push_back(c.to_vec());
    }
    let dir_only = path.ends_with(b"/");
    Ok((parts, dir_only))
}

impl Fs {
    /// Resolves `path` (from the root; a leading `/` is optional) for
    /// `cred`. `follow` says whether a symlink as the last component is
    /// followed. A trailing `/` demands a directory.
    pub fn resolve(&self, cred: &Cred, path: &[u8], follow: bool) -> Result<Resolved> {
        let (mut parts, mut dir_only) = components(path)?;
        let mut dir = self.root();
        let mut follows = 0usize;
        if parts.is_empty() {
            return Ok(Resolved { parent: dir, name: Vec::new(), attr: Some(self.getattr(dir)?) });
        }
        loop {
            let Some(part) = parts.pop_front() else {
                return Err(FsError::posix(libc::ENOENT, "an empty path"));
            };
            let last = parts.is_empty();
            let found = match self.lookup(cred, dir, &part) {
                Ok(a) => Some(a),
                Err(e) if e.errno() == libc::ENOENT && last => None,
                Err(e) => return Err(e),
            };
            let Some(attr) = found else {
                return Ok(Resolved { parent: dir, name: part, attr: None });
            };
            if attr.kind == Kind::Symlink && (!last || follow || dir_only) {
                follows += 1;
                if follows > MAX_SYMLINK_FOLLOWS {
                    return Err(FsError::posix(libc::ELOOP, "too many levels of symbolic links"));
                }
                let target = self.readlink(attr.ino)?;
                let (inner, inner_dir_only) = components(&target)?;
                if target.starts_with(b"/") {
                    dir = self.root();
                }
                if inner.is_empty() {
                    // A link to `/`.
                    parts.push_front(b".".to_vec());
                }
                for p in inner.into_iter().rev() {
                    parts.push_front(p);
                }
                if last && inner_dir_only {
                    // A trailing slash of the target counts like ours.
                    dir_only = true;
                }
                continue;
            }
            if last {
                if dir_only && attr.kind != Kind::Directory {
                    return Err(FsError::posix(
                        libc::ENOTDIR,
                        format!("{:?} is not a directory", String::from_utf8_lossy(&part)),
                    ));
                }
                return Ok(Resolved { parent: dir, name: part, attr: Some(attr) });
            }
            if attr.kind != Kind::Directory {
                return Err(FsError::posix(
                    libc::ENOTDIR,
                    format!("{:?} is not a directory", String::from_utf8_lossy(&part)),
                ));
            }
            dir = attr.ino;
        }
    }
}
