//! Directory listings: each open directory reads one index snapshot,
//! taken at `opendir` and renewed on a rewind (offset 0), so an entry
//! present throughout is returned exactly once however others come and
//! go. Offsets (cookies) are positions in that snapshot: 0 is `.`, 1 is
//! `..`, 2 + i is the i-th entry in name order.

use std::ops::Bound;

use larder_index::Snapshot;
use larder_object::meta::{decode_dentry_key, dentry_key, dmap_prefix, prefix_end, Dentry, Kind, Name, Onode};
use larder_object::{Durability, ROOT_ID};

use crate::cred::Cred;
use crate::error::{FsError, Result};
use crate::handles::Closed;
use crate::perm::{self, READ};
use crate::Fs;

/// One entry of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's object.
    pub ino: u64,
    /// What it is.
    pub kind: Kind,
    /// Its name.
    pub name: Vec<u8>,
    /// The offset to pass to continue after this entry.
    pub next: u64,
}

/// An open directory's state.
pub(crate) struct Listing {
    ino: u64,
    parent: u64,
    snapshot: Snapshot,
    /// Where the last read stopped: (next position, last name returned),
    /// so a continuing read resumes by key instead of counting.
    cursor: Option<(u64, Vec<u8>)>,
}

impl Fs {
    /// Opens directory `ino` for listing (read permission needed). The
    /// open keeps the directory: removed meanwhile (by `rmdir`, or by the
    /// KV API over the same store), it lasts, nameless, until the last of
    /// its handles is released, as on Linux: its attributes read, its
    /// listing is empty and nothing can be made in it (ENOENT).
    pub fn opendir(&self, cred: &Cred, ino: u64) -> Result<u64> {
        let _gate = self.handles.gate(ino);
        let o = self.onode(ino)?;
        let parent = dir_parent(&o, ino)?;
        if removed_dir(&o, ino) && !self.handles.is_open(ino) {
            return Err(FsError::posix(libc::ENOENT, format!("directory {ino} was removed")));
        }
        perm::check(&o, ino, cred, READ)?;
        let snapshot = self.store.index().snapshot();
        Ok(self.handles.add_dir(ino, Listing { ino, parent, snapshot, cursor: None }))
    }

    /// Up to `max` entries of open directory `dh` from `offset`: `.` at
    /// offset 0, `..` at 1, then the names in byte order; pass the last
    /// entry's [`DirEntry::next`] to continue, and an empty result means
    /// the end. A directory removed since it was opened lists nothing,
    /// not even `.` and `..` (as on Linux). EBADF for a handle
    /// [`Fs::opendir`] did not return.
    ///
    /// ```
    /// use larder_fs::{Cred, Fs, FsOptions};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let fs = Fs::create(tmp.path(), FsOptions::default())?;
    /// let cred = Cred::root();
    /// fs.mkdir(&cred, fs.root(), b"src", 0o755)?;
    /// fs.symlink(&cred, fs.root(), b"latest", b"src")?;
    /// let dh = fs.opendir(&cred, fs.root())?;
    /// let mut names = Vec::new();
    /// let mut offset = 0;
    /// loop {
    ///     let entries = fs.readdir(dh, offset, 2)?;
    ///     let Some(last) = entries.last() else { break };
    ///     offset = last.next;
    ///     names.extend(entries.into_iter().map(|e| e.name));
    /// }
    /// fs.releasedir(dh)?;
    /// assert_eq!(names, [&b"."[..], b"..", b"latest", b"src"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn readdir(&self, dh: u64, offset: u64, max: usize) -> Result<Vec<DirEntry>> {
        let listing =
            self.handles.dir(dh).ok_or_else(|| FsError::posix(libc::EBADF, format!("directory handle {dh}")))?;
        let mut l = listing.lock();
        // Read now, not from the snapshot: a directory removed since it
        // was opened lists nothing, whatever the snapshot held.
        if self.store.with_attributes(l.ino, |o| removed_dir(o, l.ino))?.unwrap_or(true) {
            return Ok(Vec::new());
        }
        if offset == 0 && l.cursor.is_some() {
            // A rewind sees the directory as it is now.
            if let Ok(o) = self.onode(l.ino) {
                l.parent = dir_parent(&o, l.ino).unwrap_or(l.parent);
            }
            l.snapshot = self.store.index().snapshot();
            l.cursor = None;
        }
        let mut out = Vec::new();
        let mut pos = offset;
        while pos < 2 && out.len() < max {
            let (ino, name) = if pos == 0 { (l.ino, &b"."[..]) } else { (l.parent, &b".."[..]) };
            out.push(DirEntry { ino, kind: Kind::Directory, name: name.to_vec(), next: pos + 1 });
            pos += 1;
        }
        if out.len() == max {
            return Ok(out);
        }
        let prefix = dmap_prefix(l.ino);
        let end = prefix_end(&prefix).unwrap_or_default();
        let (start, mut skip) = match &l.cursor {
            Some((next, last)) if *next == pos => (Bound::Excluded(last.clone()), 0),
            _ => (Bound::Included(prefix.to_vec()), pos - 2),
        };
        let start_ref = match &start {
            Bound::Included(k) => Bound::Included(&k[..]),
            Bound::Excluded(k) => Bound::Excluded(&k[..]),
            Bound::Unbounded => Bound::Unbounded,
        };
        for kv in l.snapshot.range(start_ref, Bound::Excluded(&end[..]), true)? {
            if out.len() == max {
                break;
            }
            let (k, v) = kv?;
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let (_, name) = decode_dentry_key(&k)?;
            let d = Dentry::decode(&v)?;
            pos += 1;
            out.push(DirEntry { ino: d.child, kind: d.kind, name: name.into_bytes(), next: pos });
        }
        if let Some(last) = out.last().filter(|e| e.next > 2) {
            let name = Name::new(last.name.clone())?;
            l.cursor = Some((pos, dentry_key(l.ino, &name)));
        }
        Ok(out)
    }

    /// Closes directory handle `dh`. The last close of a directory
    /// removed while open frees it.
    pub fn releasedir(&self, dh: u64) -> Result<()> {
        let not_open = || FsError::posix(libc::EBADF, format!("directory handle {dh} is not open"));
        let ino = self.handles.dir_ino(dh).ok_or_else(not_open)?;
        let _gate = self.handles.gate(ino);
        // Checked again under the gate: a concurrent release may have won.
        let closed = self.handles.remove_dir(dh).ok_or_else(not_open)?;
        if closed == Closed::LastOfOrphan {
            self.store.free_orphan(ino, Durability::Buffered)?;
        }
        Ok(())
    }

    /// Makes every change so far durable (for `fsyncdir`).
    pub fn fsyncdir(&self, dh: u64) -> Result<()> {
        if self.handles.dir(dh).is_none() {
            return Err(FsError::posix(libc::EBADF, format!("directory handle {dh} is not open")));
        }
        self.sync()
    }
}

/// Whether `o`, object `ino`, is a directory removed while open: no
/// name left (the root has none and is never removed).
pub(crate) fn removed_dir(o: &Onode, ino: u64) -> bool {
    o.kind == Kind::Directory && o.nlink == 0 && ino != ROOT_ID
}

fn dir_parent(o: &Onode, ino: u64) -> Result<u64> {
    o.dir.map(|d| d.parent).ok_or_else(|| FsError::posix(libc::ENOTDIR, format!("object {ino}")))
}
