//! The directory walk of `larder import`: every regular file under a root
//! with the key its relative path makes, and what was skipped and why.
//!
//! Symbolic links are never followed (a link could lead out of the tree or
//! around in a loop), and special files (fifos, sockets, devices) have no
//! bytes to store. Entries of each directory are taken in byte order of
//! their names, so the same tree imports in the same order every time.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use indicatif::ProgressBar;

use crate::store::{check_key, shown};

/// A regular file to import.
#[derive(Debug)]
pub(crate) struct Source {
    pub(crate) path: PathBuf,
    /// Its path relative to the root, levels joined by `/`.
    pub(crate) key: Vec<u8>,
}

/// What a walk found.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    pub(crate) files: Vec<Source>,
    pub(crate) bytes: u64,
    pub(crate) symlinks: u64,
    pub(crate) special: u64,
    pub(crate) bad_names: u64,
}

impl Walk {
    /// Entries skipped, of every kind.
    pub(crate) fn skipped(&self) -> u64 {
        self.symlinks + self.special + self.bad_names
    }
}

/// A directory, as (device, inode), to leave out of the walk.
pub(crate) type Avoid = Option<(u64, u64)>;

/// Walks `root`; each skipped entry is reported on stderr as found (through
/// `pb`, so the bar stays intact). `avoid` is a directory not to enter: the
/// store itself, when it lies inside the tree being imported.
pub(crate) fn walk(root: &Path, avoid: Avoid, pb: &ProgressBar) -> Result<Walk> {
    let mut out = Walk::default();
    // Depth first: each frame holds a directory's entries still to visit,
    // reversed so the smallest name pops first, and its key prefix.
    let mut stack = vec![(listing(root)?, Vec::new())];
    while let Some((entries, prefix)) = stack.last_mut() {
        let Some(path) = entries.pop() else {
            stack.pop();
            continue;
        };
        let mut key = prefix.clone();
        key.extend_from_slice(path.file_name().map(|n| n.as_bytes()).unwrap_or_default());
        // lstat: a link is judged as the link, never by its target.
        let meta = fs::symlink_metadata(&path).with_context(|| format!("reading {}", path.display()))?;
        let kind = meta.file_type();
        let skip = |what: &str| pb.suspend(|| eprintln!("skipped {what}: {}", path.display()));
        if kind.is_symlink() {
            skip("symbolic link");
            out.symlinks += 1;
        } else if kind.is_dir() {
            if avoid == Some((meta.dev(), meta.ino())) {
                skip("the store's own directory");
                continue;
            }
            key.push(b'/');
            stack.push((listing(&path)?, key));
        } else if kind.is_file() {
            // Linux names are always valid levels; a key can still pass
            // the length limit in a deep tree.
            if let Err(why) = check_key(&key) {
                skip(&format!("name (key {} is refused: {why})", shown(&key)));
                out.bad_names += 1;
                continue;
            }
            out.bytes += meta.len();
            out.files.push(Source { path, key });
            pb.inc(1);
        } else {
            let what = if kind.is_fifo() {
                "fifo"
            } else if kind.is_socket() {
                "socket"
            } else if kind.is_block_device() || kind.is_char_device() {
                "device"
            } else {
                "special file"
            };
            skip(what);
            out.special += 1;
        }
    }
    Ok(out)
}

/// The paths in `dir`, largest name first.
fn listing(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut paths = fs::read_dir(dir)
        .and_then(|rd| rd.map(|e| e.map(|e| e.path())).collect::<std::io::Result<Vec<_>>>())
        .with_context(|| format!("reading directory {}", dir.display()))?;
    paths.sort_by(|a, b| b.file_name().cmp(&a.file_name()));
    Ok(paths)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn walks_files_in_order_and_skips_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fs::create_dir_all(root.join("b/c")).unwrap();
        fs::write(root.join("b/c/d"), b"1234").unwrap();
        fs::write(root.join("a"), b"").unwrap();
        fs::write(root.join("b/z z"), b"x").unwrap();
        std::os::unix::fs::symlink(root.join("a"), root.join("link")).unwrap();
        std::os::unix::fs::symlink(root.join("b"), root.join("dirlink")).unwrap();
        let w = walk(root, None, &ProgressBar::hidden()).unwrap();
        let keys: Vec<&[u8]> = w.files.iter().map(|s| s.key.as_slice()).collect();
        assert_eq!(keys, [&b"a"[..], b"b/c/d", b"b/z z"]);
        assert_eq!((w.bytes, w.symlinks, w.special, w.bad_names), (5, 2, 0, 0));
        assert_eq!(w.files[1].path, root.join("b/c/d"));
    }

    #[test]
    fn leaves_out_the_avoided_directory() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join("store")).unwrap();
        fs::write(tmp.path().join("store/SUPERBLOCK"), b"x").unwrap();
        fs::write(tmp.path().join("f"), b"x").unwrap();
        let m = fs::metadata(tmp.path().join("store")).unwrap();
        let w = walk(tmp.path(), Some((m.dev(), m.ino())), &ProgressBar::hidden()).unwrap();
        assert_eq!(w.files.len(), 1);
        assert_eq!(w.files[0].key, b"f");
    }
}
