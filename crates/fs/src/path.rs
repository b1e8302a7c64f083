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

/// A path resolved by [`Fs::resolve_walk`]: where it leads, and the
/// directory holding its last component when a cache of resolved
/// directories may keep it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walked {
    /// Where the path leads, as [`Fs::resolve`] answers.
    pub resolved: Resolved,
    /// The attributes of the directory holding the last component, as the
    /// walk read them, when the walk reached it by plain names alone (no
    /// `.`, `..` or symbolic link before the last component, and not the
    /// root) and the last component is a plain name: then the path's
    /// [`split_parent`] prefix names this directory, for this caller,
    /// until a directory on the way is renamed or removed or its mode or
    /// owners change.
    pub parent: Option<Attr>,
}

/// A path split for a cache of resolved directories: the bytes before its
/// last component (the key: a path of the directory holding that
/// component), the last component, and whether a trailing `/` demands a
/// directory. None for a path [`Fs::resolve_in`] cannot finish after a
/// cached prefix: one whose last component is `.`, `..` or too long, with
/// no directory before it but the root, too long, or holding NUL (its
/// walk from the root answers, with the walk's errors).
pub fn split_parent(path: &[u8]) -> Option<(&[u8], &[u8], bool)> {
    if path.len() >= PATH_MAX || path.contains(&0) {
        return None;
    }
    let trimmed_len = path.iter().rposition(|&b| b != b'/')? + 1;
    let trimmed = &path[..trimmed_len];
    let dir_only = trimmed_len < path.len();
    let slash = trimmed.iter().rposition(|&b| b == b'/')?;
    let (prefix, name) = (&trimmed[..slash], &trimmed[slash + 1..]);
    if name == b"." || name == b".." || name.len() > NAME_MAX || prefix.iter().all(|&b| b == b'/') {
        return None;
    }
    Some((prefix, name, dir_only))
}

/// ENOTDIR for a path component `name` that must be a directory and is not.
fn not_a_directory(name: &[u8]) -> FsError {
    FsError::posix(libc::ENOTDIR, format!("{:?} is not a directory", String::from_utf8_lossy(name)))
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
        self.resolve_walk(cred, path, follow).map(|w| w.resolved)
    }

    /// [`Fs::resolve`], saying also which directory the walk found the
    /// last component in when a cache of resolved directories may keep
    /// it ([`Walked::parent`]).
    pub fn resolve_walk(&self, cred: &Cred, path: &[u8], follow: bool) -> Result<Walked> {
        let (mut parts, mut dir_only) = components(path)?;
        let mut dir = self.root();
        // The attributes of `dir` when the walk came to it by a lookup
        // just now: the next step checks search permission on them.
        let mut dir_attr: Option<Attr> = None;
        let mut follows = 0usize;
        // No `.`, `..` or symbolic link taken so far.
        let mut plain = true;
        if parts.is_empty() {
            let resolved = Resolved { parent: dir, name: Vec::new(), attr: Some(self.getattr(dir)?) };
            return Ok(Walked { resolved, parent: None });
        }
        loop {
            let Some(part) = parts.pop_front() else {
                return Err(FsError::posix(libc::ENOENT, "an empty path"));
            };
            let last = parts.is_empty();
            let dotted = part.as_ref() == b"." || part.as_ref() == b"..";
            plain &= !dotted;
            let parent_attr = dir_attr.take();
            let looked_up = match &parent_attr {
                Some(parent) if !dotted => self.lookup_below(cred, parent, &part),
                _ => self.lookup(cred, dir, &part),
            };
            let found = match looked_up {
                Ok(a) => Some(a),
                Err(e) if e.errno() == libc::ENOENT && last => None,
                Err(e) => return Err(e),
            };
            let cacheable = |parent_attr: Option<Attr>| parent_attr.filter(|_| plain);
            let Some(attr) = found else {
                let resolved = Resolved { parent: dir, name: part.into_owned(), attr: None };
                return Ok(Walked { resolved, parent: cacheable(parent_attr) });
            };
            if attr.kind == Kind::Symlink && (!last || follow || dir_only) {
                plain = false;
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
                    return Err(not_a_directory(&part));
                }
                let resolved = Resolved { parent: dir, name: part.into_owned(), attr: Some(attr) };
                return Ok(Walked { resolved, parent: cacheable(parent_attr) });
            }
            if attr.kind != Kind::Directory {
                return Err(not_a_directory(&part));
            }
            dir = attr.ino;
            dir_attr = Some(attr);
        }
    }

    /// The last step of [`Fs::resolve`] of a path whose prefix (its
    /// [`split_parent`] key) a cache resolved to `parent`, a
    /// [`Walked::parent`] of the same caller: `name` looked up in
    /// `parent`, search permission checked on `parent`'s attributes as
    /// the walk checks it. None when the walk must go on from there (a
    /// symbolic link to follow): resolve the path from the root.
    pub fn resolve_in(
        &self,
        cred: &Cred,
        parent: &Attr,
        name: &[u8],
        follow: bool,
        dir_only: bool,
    ) -> Result<Option<Resolved>> {
        let attr = match self.lookup_below(cred, parent, name) {
            Ok(attr) => attr,
            Err(e) if e.errno() == libc::ENOENT => {
                return Ok(Some(Resolved { parent: parent.ino, name: name.to_vec(), attr: None }));
            }
            Err(e) => return Err(e),
        };
        if attr.kind == Kind::Symlink && (follow || dir_only) {
            return Ok(None);
        }
        if dir_only && attr.kind != Kind::Directory {
            return Err(not_a_directory(name));
        }
        Ok(Some(Resolved { parent: parent.ino, name: name.to_vec(), attr: Some(attr) }))
    }
}
