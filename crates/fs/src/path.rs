//! Paths for embedded callers: resolved from the root one component at a
//! time, with search permission checked on every directory passed, `.`
//! and `..` (the root is its own parent), symbolic links followed (every
//! one before the last component, the last when asked) up to
//! [`MAX_SYMLINK_FOLLOWS`], and Linux's limits and errors.

use std::borrow::Cow;
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

/// A path's components: borrowed from the path asked for, owned when a
/// symbolic link's target put them there.
type Parts<'p> = VecDeque<Cow<'p, [u8]>>;

fn components(path: &[u8]) -> Result<(Parts<'_>, bool)> {
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
        parts.push_back(Cow::Borrowed(c));
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
        // The attributes of `dir` when the walk came to it by a lookup
        // just now: the next step checks search permission on them.
        let mut dir_attr: Option<Attr> = None;
        let mut follows = 0usize;
        if parts.is_empty() {
            return Ok(Resolved { parent: dir, name: Vec::new(), attr: Some(self.getattr(dir)?) });
        }
        loop {
            let Some(part) = parts.pop_front() else {
                return Err(FsError::posix(libc::ENOENT, "an empty path"));
            };
            let last = parts.is_empty();
            let looked_up = match dir_attr.take() {
                Some(parent) if part.as_ref() != b"." && part.as_ref() != b".." => {
                    self.lookup_below(cred, &parent, &part)
                }
                _ => self.lookup(cred, dir, &part),
            };
            let found = match looked_up {
                Ok(a) => Some(a),
                Err(e) if e.errno() == libc::ENOENT && last => None,
                Err(e) => return Err(e),
            };
            let Some(attr) = found else {
                return Ok(Resolved { parent: dir, name: part.into_owned(), attr: None });
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
                    parts.push_front(Cow::Borrowed(&b"."[..]));
                }
                for p in inner.into_iter().rev() {
                    parts.push_front(Cow::Owned(p.into_owned()));
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
                return Ok(Resolved { parent: dir, name: part.into_owned(), attr: Some(attr) });
            }
            if attr.kind != Kind::Directory {
                return Err(FsError::posix(
                    libc::ENOTDIR,
                    format!("{:?} is not a directory", String::from_utf8_lossy(&part)),
                ));
            }
            dir = attr.ino;
            dir_attr = Some(attr);
        }
    }
}
