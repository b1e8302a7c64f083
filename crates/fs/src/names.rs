//! Names: lookup, attributes, and creating and removing entries (files,
//! device nodes, fifos, sockets, directories, symlinks, hard links).
//!
//! Each change is one transaction holding the directory exclusively (its
//! times change with every entry), the name, and the object whose link
//! count changes; permissions are checked inside it, on the state the
//! locks protect.

use larder_namespace::{list, NamespaceError, NamespaceTxn};
use larder_object::meta::{Kind, Name, Onode, Timestamp, MODE_PERM_MASK, MODE_TYPE_MASK};
use larder_object::{Durability, LockRequest, ObjectError, Transaction};

use crate::attr::{Attr, SetAttr, SetTime};
use crate::cred::Cred;
use crate::error::{FsError, Result};
use crate::heap::{is_heap_directory, refuse_heap_link, refuse_in_heap};
use crate::perm::{self, EXEC, S_ISGID, S_ISUID, WRITE};
use crate::{Fs, LINK_MAX, NAME_MAX, PATH_MAX};

/// A transaction's outcome when a name changed between the unlocked
/// lookup and the locks: the caller looks it up again.
pub(crate) enum Step<T> {
    Done(T),
    Retry,
}

/// `bytes` as a name to create or remove: ENAMETOOLONG past NAME_MAX,
/// EINVAL for a `/` or NUL, EEXIST for `.` and `..` (they always exist).
pub(crate) fn new_name(bytes: &[u8]) -> Result<Name> {
    if bytes == b"." || bytes == b".." {
        return Err(FsError::posix(libc::EEXIST, format!("{:?} always exists", shown(bytes))));
    }
    stored_name(bytes)
}

/// `bytes` as a stored name (not `.` or `..`).
pub(crate) fn stored_name(bytes: &[u8]) -> Result<Name> {
    check_length(bytes)?;
    Name::new(bytes.to_vec()).map_err(|e| FsError::posix(libc::EINVAL, e.to_string()))
}

/// ENAMETOOLONG past NAME_MAX, ENOENT for an empty name: the errors a
/// name gets before its bytes are checked (EINVAL, as [`stored_name`]).
fn check_length(bytes: &[u8]) -> Result<()> {
    if bytes.len() > NAME_MAX {
        return Err(FsError::posix(libc::ENAMETOOLONG, format!("a name of {} bytes", bytes.len())));
    }
    if bytes.is_empty() {
        return Err(FsError::posix(libc::ENOENT, "an empty name"));
    }
    Ok(())
}

pub(crate) fn shown(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The onode of `ino` in `txn`, or ENOENT.
pub(crate) fn onode_in(txn: &Transaction<'_>, ino: u64) -> Result<Onode> {
    txn.onode(ino)?.ok_or_else(|| missing(ino))
}

/// The onode of directory `dir` in `txn`: ENOENT, or ENOTDIR.
pub(crate) fn dir_in(txn: &Transaction<'_>, dir: u64) -> Result<Onode> {
    let o = onode_in(txn, dir)?;
    if o.kind != Kind::Directory {
        return Err(FsError::posix(libc::ENOTDIR, format!("object {dir}")));
    }
    refuse_removed(&o, dir)?;
    Ok(o)
}

/// ENOENT for directory `dir` (onode `o`) if it was removed while open:
/// nothing is made in it, or moved into it (Linux's dead directory).
pub(crate) fn refuse_removed(o: &Onode, dir: u64) -> Result<()> {
    if crate::dirs::removed_dir(o, dir) {
        return Err(FsError::posix(libc::ENOENT, format!("directory {dir} was removed")));
    }
    Ok(())
}

/// Marks directory `dir` changed (mtime and ctime now).
pub(crate) fn touch_dir(txn: &mut Transaction<'_>, dir: u64) -> Result<()> {
    let mut o = onode_in(txn, dir)?;
    let now = Timestamp::now();
    o.mtime = now;
    o.ctime = now;
    Ok(txn.put_onode(dir, &o)?)
}

/// What a new object is made of.
pub(crate) struct NewObject<'a> {
    pub(crate) kind: Kind,
    /// Permission bits (type bits ignored).
    pub(crate) mode: u32,
    pub(crate) rdev: u64,
    /// A symlink's target.
    pub(crate) target: Option<&'a [u8]>,
}

/// Gives `ino` the name `name` in `parent` inside `txn`, which holds all
/// three.
pub(crate) fn link_in_txn(txn: &mut Transaction<'_>, cred: &Cred, ino: u64, parent: u64, name: &Name) -> Result<Attr> {
    let p = dir_in(txn, parent)?;
    let o = onode_in(txn, ino)?;
    refuse_in_heap(&p, parent, "link")?;
    refuse_heap_link(&o, ino)?;
    if o.kind == Kind::Directory {
        return Err(FsError::posix(libc::EPERM, format!("object {ino} is a directory")));
    }
    if o.nlink == 0 {
        return Err(FsError::posix(libc::ENOENT, format!("object {ino} has no name left")));
    }
    if o.nlink >= LINK_MAX {
        return Err(FsError::posix(libc::EMLINK, format!("object {ino} has {} names", o.nlink)));
    }
    // In the kernel's order: the new name's lookup (search, then EEXIST),
    // the source's protection, the directory's write.
    perm::check(&p, parent, cred, EXEC)?;
    if txn.lookup(parent, name)?.is_some() {
        return Err(taken(parent, name));
    }
    perm::check_link(&o, ino, cred)?;
    perm::check(&p, parent, cred, WRITE | EXEC)?;
    txn.link_in(parent, name, ino)?;
    touch_dir(txn, parent)?;
    Ok(Attr::from_onode(ino, &onode_in(txn, ino)?))
}

/// EEXIST: `name` is taken in `parent`.
fn taken(parent: u64, name: &Name) -> FsError {
    FsError::posix(libc::EEXIST, format!("{:?} in directory {parent}", shown(name.as_bytes())))
}

/// ENOENT for object `ino`, which does not exist.
fn missing(ino: u64) -> FsError {
    FsError::posix(libc::ENOENT, format!("object {ino}"))
}

impl Fs {
    /// The onode of `ino`, or ENOENT.
    pub(crate) fn onode(&self, ino: u64) -> Result<Onode> {
        self.store.stat(ino)?.ok_or_else(|| missing(ino))
    }

    /// `f` of the onode of `ino` borrowed from the cache (no copy; an
    /// inline location without its bytes), or ENOENT.
    pub(crate) fn with_onode<T>(&self, ino: u64, f: impl FnOnce(&Onode) -> T) -> Result<T> {
        self.store.with_attributes(ino, f)?.ok_or_else(|| missing(ino))
    }

    /// The attributes of `ino`.
    pub fn getattr(&self, ino: u64) -> Result<Attr> {
        self.with_onode(ino, |o| Attr::from_onode(ino, o))
    }

    /// Looks `name` up in directory `parent` (`.` and `..` included);
    /// needs search permission on it.
    pub fn lookup(&self, cred: &Cred, parent: u64, name: &[u8]) -> Result<Attr> {
        let info = self.with_onode(parent, |p| {
            let info = p.dir.ok_or_else(|| FsError::posix(libc::ENOTDIR, format!("object {parent}")))?;
            perm::check(p, parent, cred, EXEC).map(|()| info)
        })??;
        let child = match name {
            b"." => parent,
            b".." => info.parent,
            _ => {
                check_length(name)?;
                let found = list::lookup_attributes(&self.store, parent, name, |d, o| Attr::from_onode(d.child, o))
                    .map_err(|e| match e {
                        NamespaceError::Object(ObjectError::InvalidName { .. }) => {
                            FsError::posix(libc::EINVAL, e.to_string())
                        }
                        e => e.into(),
                    })?;
                let (dentry, attr) = found.ok_or_else(|| FsError::no_entry(parent, name))?;
                return attr.ok_or_else(|| missing(dentry.child));
            }
        };
        self.getattr(child)
    }

    /// [`Fs::lookup`] of `name` (neither `.` nor `..`) in directory
    /// `parent`, whose attributes the caller has just read (a path walk
    /// has them from the step before): the search permission is checked
    /// on them rather than on a second read of the same onode.
    pub(crate) fn lookup_below(&self, cred: &Cred, parent: &Attr, name: &[u8]) -> Result<Attr> {
        if parent.kind != Kind::Directory {
            return Err(FsError::posix(libc::ENOTDIR, format!("object {}", parent.ino)));
        }
        if !perm::allowed_by(parent.kind, parent.mode, parent.uid, parent.gid, cred, EXEC) {
            return Err(perm::refused(parent.ino, cred, EXEC));
        }
        check_length(name)?;
        let found = list::lookup_attributes(&self.store, parent.ino, name, |d, o| Attr::from_onode(d.child, o))
            .map_err(|e| match e {
                NamespaceError::Object(ObjectError::InvalidName { .. }) => FsError::posix(libc::EINVAL, e.to_string()),
                e => e.into(),
            })?;
        let (dentry, attr) = found.ok_or_else(|| FsError::no_entry(parent.ino, name))?;
        attr.ok_or_else(|| missing(dentry.child))
    }

    /// Creates a regular file, device node, fifo or socket (`mode` carries
    /// the type bits; none means a regular file) named `name` in `parent`.
    pub fn mknod(&self, cred: &Cred, parent: u64, name: &[u8], mode: u32, rdev: u64) -> Result<Attr> {
        let kind = if mode & MODE_TYPE_MASK == 0 {
            Kind::File
        } else {
            Kind::from_mode(mode).ok_or_else(|| FsError::posix(libc::EINVAL, format!("file type in mode {mode:o}")))?
        };
        if kind == Kind::Directory || kind == Kind::Symlink {
            return Err(FsError::posix(libc::EINVAL, "mknod makes no directories or symlinks"));
        }
        let rdev = if matches!(kind, Kind::CharDevice | Kind::BlockDevice) { rdev } else { 0 };
        self.make(cred, parent, name, NewObject { kind, mode, rdev, target: None })
    }

    /// Creates directory `name` in `parent`.
    pub fn mkdir(&self, cred: &Cred, parent: u64, name: &[u8], mode: u32) -> Result<Attr> {
        self.make(cred, parent, name, NewObject { kind: Kind::Directory, mode, rdev: 0, target: None })
    }

    /// Creates symbolic link `name` in `parent` pointing at `target`.
    pub fn symlink(&self, cred: &Cred, parent: u64, name: &[u8], target: &[u8]) -> Result<Attr> {
        if target.is_empty() {
            return Err(FsError::posix(libc::ENOENT, "an empty symlink target"));
        }
        if target.len() >= PATH_MAX {
            return Err(FsError::posix(libc::ENAMETOOLONG, format!("a symlink target of {} bytes", target.len())));
        }
        if target.contains(&0) {
            return Err(FsError::posix(libc::EINVAL, "a symlink target holding NUL"));
        }
        self.make(cred, parent, name, NewObject { kind: Kind::Symlink, mode: 0o777, rdev: 0, target: Some(target) })
    }

    /// The target of symlink `ino`.
    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>> {
        let o = self.onode(ino)?;
        if o.kind != Kind::Symlink {
            return Err(FsError::posix(libc::EINVAL, format!("object {ino} is not a symlink")));
        }
        self.store.read_to_end(ino)?.ok_or_else(|| missing(ino))
    }

    /// Creates `new` named `name` in `parent`; EEXIST at once if taken.
    pub(crate) fn make(&self, cred: &Cred, parent: u64, name: &[u8], new: NewObject<'_>) -> Result<Attr> {
        let name = new_name(name)?;
        // A new name and onode live in the log and the index: refused at
        // the store's reserve, which is kept for deletes.
        self.store.check_room_for_name()?;
        let requests = [LockRequest::Exclusive(parent), LockRequest::Name(parent, name.as_bytes().to_vec())];
        let (attr, _) = self
            .store
            .transact_locked(&requests, Durability::Buffered, |txn| make_in(txn, cred, parent, &name, &new))?;
        Ok(attr)
    }

    /// Gives object `ino` (not a directory) another name, `name` in
    /// `parent`.
    pub fn link(&self, cred: &Cred, ino: u64, parent: u64, name: &[u8]) -> Result<Attr> {
        let name = new_name(name)?;
        self.store.check_room_for_name()?;
        let requests = [
            LockRequest::Exclusive(parent),
            LockRequest::Name(parent, name.as_bytes().to_vec()),
            LockRequest::Exclusive(ino),
        ];
        let (attr, _) = self
            .store
            .transact_locked(&requests, Durability::Buffered, |txn| link_in_txn(txn, cred, ino, parent, &name))?;
        Ok(attr)
    }

    /// Removes the name `name` (not a directory) from `parent`. An object
    /// left without a name is freed, at once or, if a handle has it open,
    /// at its last release.
    pub fn unlink(&self, cred: &Cred, parent: u64, name: &[u8]) -> Result<()> {
        self.remove(cred, parent, name, false)
    }

    /// Removes the empty directory `name` from `parent`.
    pub fn rmdir(&self, cred: &Cred, parent: u64, name: &[u8]) -> Result<()> {
        match name {
            b"." => return Err(FsError::posix(libc::EINVAL, "rmdir of \".\"")),
            b".." => return Err(FsError::posix(libc::ENOTEMPTY, "rmdir of \"..\"")),
            _ => {}
        }
        self.remove(cred, parent, name, true)
    }

    fn remove(&self, cred: &Cred, parent: u64, name: &[u8], dir: bool) -> Result<()> {
        let name = stored_name(name)?;
        loop {
            let p = self.onode(parent)?;
            if p.kind != Kind::Directory {
                return Err(FsError::posix(libc::ENOTDIR, format!("object {parent}")));
            }
            perm::check(&p, parent, cred, EXEC)?;
            let d =
                list::lookup(&self.store, parent, &name)?.ok_or_else(|| FsError::no_entry(parent, name.as_bytes()))?;
            match (dir, d.kind == Kind::Directory) {
                (false, true) => {
                    return Err(FsError::posix(libc::EISDIR, format!("{:?} is a directory", shown(name.as_bytes()))))
                }
                (true, false) => {
                    return Err(FsError::posix(
                        libc::ENOTDIR,
                        format!("{:?} is not a directory", shown(name.as_bytes())),
                    ))
                }
                _ => {}
            }
            let gate = self.handles.gate(d.child);
            let open = self.handles.is_open(d.child);
            let requests = [
                LockRequest::Exclusive(parent),
                LockRequest::Name(parent, name.as_bytes().to_vec()),
                LockRequest::Exclusive(d.child),
            ];
            let (step, _) = self.store.transact_locked(&requests, Durability::Buffered, |txn| -> Result<_> {
                let p = dir_in(txn, parent)?;
                refuse_in_heap(&p, parent, if dir { "rmdir" } else { "unlink" })?;
                match txn.lookup(parent, &name)? {
                    Some(now) if now.child == d.child => {}
                    _ => return Ok(Step::Retry),
                }
                let child = onode_in(txn, d.child)?;
                refuse_in_heap(&child, d.child, "rmdir of a heap directory")?;
                perm::check_remove(&p, parent, &child, cred)?;
                let u = txn.unlink(parent, &name, d.child, open)?;
                touch_dir(txn, parent)?;
                Ok(Step::Done(u))
            })?;
            if let Step::Done(u) = &step {
                if u.orphaned && open {
                    self.handles.mark_orphaned(d.child);
                }
            }
            drop(gate);
            match step {
                Step::Retry => continue,
                Step::Done(u) => {
                    if u.orphaned && !open {
                        // Large: freed in steps after the unlink commits.
                        self.store.free_orphan(d.child, Durability::Buffered)?;
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Changes the attributes `set` names, as `chmod`, `chown`,
    /// `truncate` and `utimensat` would. `handle` is the open file a
    /// `ftruncate` goes through (write access was checked at open).
    pub fn setattr(&self, cred: &Cred, ino: u64, set: &SetAttr, handle: Option<u64>) -> Result<Attr> {
        let through_handle = match handle.map(|fh| self.handles.file(fh)) {
            Some(Some(h)) if h.ino == ino => h.write,
            Some(_) => return Err(FsError::posix(libc::EBADF, format!("handle {handle:?} is not open on {ino}"))),
            None => false,
        };
        let (attr, _) = self.store.transact_locked(
            &[LockRequest::Exclusive(ino)],
            Durability::Buffered,
            |txn| -> Result<Attr> {
                let now = Timestamp::now();
                let before = onode_in(txn, ino)?;
                let owner = perm::owns(&before, cred);
                if let Some(mode) = set.mode {
                    let may_write = through_handle || perm::allowed(&before, cred, WRITE);
                    if !owner && !perm::may_drop_privileges(&before, cred, mode, may_write) {
                        return Err(FsError::posix(libc::EPERM, format!("chmod of object {ino} by uid {}", cred.uid)));
                    }
                }
                if let Some(size) = set.size {
                    let o = &before;
                    match o.kind {
                        Kind::File => {}
                        Kind::Directory => {
                            return Err(FsError::posix(libc::EISDIR, format!("truncate of directory {ino}")))
                        }
                        _ => return Err(FsError::posix(libc::EINVAL, format!("truncate of object {ino}, not a file"))),
                    }
                    if !through_handle {
                        perm::check(o, ino, cred, WRITE)?;
                    }
                    txn.truncate(ino, size)?;
                    let mut o = onode_in(txn, ino)?;
                    // A truncate to the same size changes nothing else; Linux
                    // still marks the times.
                    o.mtime = now;
                    o.ctime = now;
                    if let Some(mode) = perm::kill_suid(&o, cred) {
                        o.mode = mode;
                    }
                    txn.put_onode(ino, &o)?;
                }
                let mut o = onode_in(txn, ino)?;
                if let Some(mode) = set.mode {
                    if owner {
                        let mut bits = mode & MODE_PERM_MASK;
                        if !cred.is_root() && !cred.in_group(o.gid) {
                            bits &= !S_ISGID;
                        }
                        o.mode = (o.mode & MODE_TYPE_MASK) | bits;
                    } else {
                        // Checked above: it only drops setuid and setgid
                        // bits, which a truncate here may have dropped
                        // already.
                        o.mode &= !(before.mode & !mode & MODE_PERM_MASK);
                    }
                    o.ctime = now;
                }
                if set.uid.is_some() || set.gid.is_some() {
                    let uid = set.uid.unwrap_or(o.uid);
                    let gid = set.gid.unwrap_or(o.gid);
                    if !cred.is_root() && (uid != o.uid || cred.uid != o.uid || (gid != o.gid && !cred.in_group(gid))) {
                        return Err(FsError::posix(
                            libc::EPERM,
                            format!("chown of object {ino} to {uid}:{gid} by uid {}", cred.uid),
                        ));
                    }
                    if o.kind != Kind::Directory {
                        // Linux drops setuid, and setgid with group execute, on
                        // any chown of a non-directory.
                        o.mode &= !S_ISUID;
                        if o.mode & 0o010 != 0 {
                            o.mode &= !S_ISGID;
                        }
                    }
                    o.uid = uid;
                    o.gid = gid;
                    o.ctime = now;
                }
                for (time, field) in [(set.atime, 0), (set.mtime, 1)] {
                    let Some(time) = time else { continue };
                    let value = match time {
                        SetTime::Now => {
                            if !perm::owns(&o, cred) && !perm::allowed(&o, cred, WRITE) {
                                return Err(FsError::posix(
                                    libc::EACCES,
                                    format!("touch of object {ino} by uid {}", cred.uid),
                                ));
                            }
                            now
                        }
                        SetTime::At(t) => {
                            if !perm::owns(&o, cred) {
                                return Err(FsError::posix(
                                    libc::EPERM,
                                    format!("utimes of object {ino} by uid {}", cred.uid),
                                ));
                            }
                            t
                        }
                    };
                    if field == 0 {
                        o.atime = value;
                    } else {
                        o.mtime = value;
                    }
                    o.ctime = now;
                }
                txn.put_onode(ino, &o)?;
                Ok(Attr::from_onode(ino, &o))
            },
        )?;
        Ok(attr)
    }
}

/// The create inside its transaction (directory and name held).
pub(crate) fn make_in(
    txn: &mut Transaction<'_>,
    cred: &Cred,
    parent: u64,
    name: &Name,
    new: &NewObject<'_>,
) -> Result<Attr> {
    let p = dir_in(txn, parent)?;
    if is_heap_directory(&p) && txn.lookup(parent, name)?.is_some() {
        // A name that exists is EEXIST, as anywhere: open(O_CREAT) then
        // opens the heap object, which is allowed.
        return Err(taken(parent, name));
    }
    refuse_in_heap(&p, parent, "create")?;
    if let Err(refused) = perm::check(&p, parent, cred, WRITE | EXEC) {
        // Linux looks the name up before it checks write permission: a
        // taken name is EEXIST for anyone who may search the directory.
        if perm::allowed(&p, cred, EXEC) && txn.lookup(parent, name)?.is_some() {
            return Err(taken(parent, name));
        }
        return Err(refused);
    }
    let (mode, gid) = perm::new_owner(&p, cred, new.kind, new.mode & MODE_PERM_MASK);
    // create_in refuses a taken name (EEXIST) before allocating anything:
    // one point read of the name, not two.
    let id = txn.create_in(parent, name, new.kind, mode, cred.uid, gid)?;
    if new.rdev != 0 {
        let mut o = onode_in(txn, id)?;
        o.rdev = new.rdev;
        txn.put_onode(id, &o)?;
    }
    if let Some(target) = new.target {
        txn.write(id, 0, target)?;
    }
    touch_dir(txn, parent)?;
    Ok(Attr::from_onode(id, &onode_in(txn, id)?))
}
