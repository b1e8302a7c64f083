//! Namespace operations inside a transaction: the dmap's (directory, name)
//! entries, directories' entry counts and objects' link counts kept in step.
//!
//! Locks (see `larder_object::LockRequest`): an operation on name N in
//! directory D needs N's name lock (or D exclusively) and D held (shared is
//! enough: the entry count changes by a merge operand); the object whose
//! link count changes must be held exclusively. Directories have exactly
//! one name; removing one needs it held exclusively, so every create in it
//! has finished and none can start.

use larder_object::meta::{orphan_key, DataLocation};
use larder_object::meta::{Dentry, DirDelta, Kind, Name, Orphan, OrphanReason, Timestamp};
use larder_object::Transaction;

use crate::error::{lossy, NamespaceError, Result};

/// Objects at least this large (in container extents) are freed after
/// their unlink commits, in steps (`Store::free_orphan`), rather than in
/// the unlink's own record.
pub const FREE_LATER_BYTES: u64 = 64 << 20;

/// What an unlink left behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unlinked {
    /// The object the name referred to.
    pub child: u64,
    /// Its kind.
    pub kind: Kind,
    /// Its link count afterwards.
    pub nlink: u32,
    /// The object has no name left and an orphan record: the caller frees
    /// it (`Store::free_orphan`) once the unlink commits and no handle
    /// uses it.
    pub orphaned: bool,
}

/// Namespace operations on a [`Transaction`].
pub trait NamespaceTxn {
    /// The entry `name` in directory `dir` (held), if any.
    fn lookup(&self, dir: u64, name: &Name) -> Result<Option<Dentry>>;

    /// Names `child` (held exclusively) `name` in `dir`: a new dentry, the
    /// directory's entry count +1, the child's link count +1. Fails with
    /// [`NamespaceError::Exists`] if the name is taken, and refuses a
    /// second name for a directory.
    fn link(&mut self, dir: u64, name: &Name, child: u64) -> Result<()>;

    /// Creates an object of `kind` named `name` in `dir`, or fails with
    /// [`NamespaceError::Exists`] at once. Returns its id.
    fn create(&mut self, dir: u64, name: &Name, kind: Kind, mode: u32, uid: u32, gid: u32) -> Result<u64>;

    /// [`NamespaceTxn::link`] into a `dir` the caller has checked is an
    /// existing directory under its locks: the directory's onode is not
    /// read (in a busy directory it may be a chain of operands to fold).
    fn link_in(&mut self, dir: u64, name: &Name, child: u64) -> Result<()>;

    /// [`NamespaceTxn::create`] into a `dir` checked as for
    /// [`NamespaceTxn::link_in`].
    fn create_in(&mut self, dir: u64, name: &Name, kind: Kind, mode: u32, uid: u32, gid: u32) -> Result<u64>;

    /// [`NamespaceTxn::create_in`] of an object holding `data` (a file or
    /// symlink), as a create then a write at 0 would leave it, with the
    /// onode of a small object written once
    /// ([`Transaction::create_object_with`]).
    fn create_with_in(
        &mut self,
        dir: u64,
        name: &Name,
        kind: Kind,
        mode: u32,
        owner: (u32, u32),
        data: &[u8],
    ) -> Result<u64>;

    /// [`NamespaceTxn::create_with_in`] of a `name` the caller found absent
    /// in `dir` in this transaction, under its lock on the name: the name
    /// is not looked up again (for an absent name, a metadata-cache or
    /// memtable search).
    fn create_absent_with_in(
        &mut self,
        dir: u64,
        name: &Name,
        kind: Kind,
        mode: u32,
        owner: (u32, u32),
        data: &[u8],
    ) -> Result<u64>;

    /// Creates a regular file for each of `names` in `dir` (checked as for
    /// [`NamespaceTxn::link_in`]), holding the bytes of `contents` at the
    /// same position, with consecutive ids in `names`' order, returned.
    /// For bulk creation: the names must be distinct and absent from `dir`
    /// (the caller checked), since nothing here reads them, and the new
    /// dentries and onodes are written blind (this transaction does not
    /// read them back).
    fn create_files_in(
        &mut self,
        dir: u64,
        names: &[&Name],
        contents: &[&[u8]],
        mode: u32,
        owner: (u32, u32),
    ) -> Result<std::ops::Range<u64>>;

    /// Removes the entry `name` from `dir`; the object it names (`child`,
    /// held exclusively) loses a link. A directory must be empty. An object
    /// left without a name is deleted in this transaction, unless `open`
    /// (a handle still uses it) or it is large ([`FREE_LATER_BYTES`]): then
    /// it gets an orphan record and [`Unlinked::orphaned`] is set.
    fn unlink(&mut self, dir: u64, name: &Name, child: u64, open: bool) -> Result<Unlinked>;
}

fn directory(txn: &Transaction<'_>, dir: u64) -> Result<()> {
    match txn.onode(dir)? {
        Some(o) if o.kind == Kind::Directory => Ok(()),
        Some(_) => Err(NamespaceError::NotADirectory { object: dir }),
        None => Err(larder_object::ObjectError::NoSuchObject { object: dir }.into()),
    }
}

/// Names in `dir` the new object `make` creates (born with that name:
/// one onode write, and no orphan record to delete, since a new object
/// never had one): the name checked first, so that a taken name
/// allocates no id; then its dentry and `dir`'s counts.
fn create_named(
    txn: &mut Transaction<'_>,
    dir: u64,
    name: &Name,
    kind: Kind,
    make: impl FnOnce(&mut Transaction<'_>) -> Result<u64>,
) -> Result<u64> {
    if txn.dentry(dir, name)?.is_some() {
        return Err(NamespaceError::Exists { dir, name: lossy(name.as_bytes()) });
    }
    create_unchecked(txn, dir, name, kind, make)
}

/// [`create_named`] of a name the caller has found absent in `dir` in this
/// transaction, under its lock on the name.
fn create_unchecked(
    txn: &mut Transaction<'_>,
    dir: u64,
    name: &Name,
    kind: Kind,
    make: impl FnOnce(&mut Transaction<'_>) -> Result<u64>,
) -> Result<u64> {
    let id = make(txn)?;
    txn.put_dentry(dir, name, &Dentry { child: id, kind })?;
    txn.change_dir(dir, DirDelta { entries: 1, links: subdir(kind) })?;
    Ok(id)
}

/// Shapes a new object named in `dir`: one link, and `dir` as a
/// directory's parent.
fn born_in(onode: &mut larder_object::meta::Onode, dir: u64) {
    onode.nlink = 1;
    if let Some(info) = onode.dir.as_mut() {
        info.parent = dir;
    }
}

/// 1 for a directory (its `..` is a link of its parent), else 0.
pub fn subdir(kind: Kind) -> i64 {
    i64::from(kind == Kind::Directory)
}

fn change_nlink(object: u64, nlink: u32, delta: i64) -> Result<u32> {
    i64::from(nlink).checked_add(delta).and_then(|n| u32::try_from(n).ok()).ok_or(NamespaceError::LinkCount {
        object,
        nlink,
        delta,
    })
}

impl NamespaceTxn for Transaction<'_> {
    fn lookup(&self, dir: u64, name: &Name) -> Result<Option<Dentry>> {
        Ok(self.dentry(dir, name)?)
    }

    fn link(&mut self, dir: u64, name: &Name, child: u64) -> Result<()> {
        directory(self, dir)?;
        self.link_in(dir, name, child)
    }

    fn link_in(&mut self, dir: u64, name: &Name, child: u64) -> Result<()> {
        if self.dentry(dir, name)?.is_some() {
            return Err(NamespaceError::Exists { dir, name: lossy(name.as_bytes()) });
        }
        let mut onode = self.onode(child)?.ok_or(larder_object::ObjectError::NoSuchObject { object: child })?;
        if let Some(info) = onode.dir.as_mut() {
            if onode.nlink > 0 || child == larder_object::ROOT_ID {
                return Err(NamespaceError::DirectoryLink { dir: child });
            }
            info.parent = dir;
        }
        if onode.nlink == 0 {
            // It had no name: it was an orphan (or brand new).
            self.delete(&orphan_key(child));
        }
        onode.nlink = change_nlink(child, onode.nlink, 1)?;
        onode.ctime = Timestamp::now();
        self.put_onode(child, &onode)?;
        self.put_dentry(dir, name, &Dentry { child, kind: onode.kind })?;
        self.change_dir(dir, DirDelta { entries: 1, links: subdir(onode.kind) })?;
        Ok(())
    }

    fn create(&mut self, dir: u64, name: &Name, kind: Kind, mode: u32, uid: u32, gid: u32) -> Result<u64> {
        directory(self, dir)?;
        self.create_in(dir, name, kind, mode, uid, gid)
    }

    fn create_in(&mut self, dir: u64, name: &Name, kind: Kind, mode: u32, uid: u32, gid: u32) -> Result<u64> {
        create_named(self, dir, name, kind, |txn| Ok(txn.create_object_as(kind, mode, uid, gid, |o| born_in(o, dir))?))
    }

    fn create_with_in(
        &mut self,
        dir: u64,
        name: &Name,
        kind: Kind,
        mode: u32,
        owner: (u32, u32),
        data: &[u8],
    ) -> Result<u64> {
        create_named(self, dir, name, kind, |txn| {
            Ok(txn.create_object_with(kind, mode, owner, |o| born_in(o, dir), data)?)
        })
    }

    fn create_absent_with_in(
        &mut self,
        dir: u64,
        name: &Name,
        kind: Kind,
        mode: u32,
        owner: (u32, u32),
        data: &[u8],
    ) -> Result<u64> {
        debug_assert!(matches!(self.dentry(dir, name), Ok(None)), "the caller found the name absent");
        create_unchecked(self, dir, name, kind, |txn| {
            Ok(txn.create_object_with(kind, mode, owner, |o| born_in(o, dir), data)?)
        })
    }

    fn create_files_in(
        &mut self,
        dir: u64,
        names: &[&Name],
        contents: &[&[u8]],
        mode: u32,
        owner: (u32, u32),
    ) -> Result<std::ops::Range<u64>> {
        debug_assert_eq!(names.len(), contents.len());
        // An empty file's onode and dentry, with their keys and the
        // batch's framing, take under 88 bytes besides the name.
        let names_bytes: usize = names.iter().map(|n| n.as_bytes().len()).sum();
        self.reserve_batch(names.len() * 88 + names_bytes);
        // As create_in does for one: born named, no orphan record.
        let ids = self.create_files_blind(contents, mode, owner, |o| o.nlink = 1)?;
        for (name, child) in names.iter().zip(ids.clone()) {
            self.put_dentry_blind(dir, name, &Dentry { child, kind: Kind::File })?;
        }
        self.change_dir(dir, DirDelta { entries: names.len() as i64, links: 0 })?;
        Ok(ids)
    }

    fn unlink(&mut self, dir: u64, name: &Name, child: u64, open: bool) -> Result<Unlinked> {
        let not_found = || NamespaceError::NotFound { dir, name: lossy(name.as_bytes()) };
        let dentry = self.dentry(dir, name)?.ok_or_else(not_found)?;
        if dentry.child != child {
            // The caller locked another object than the name now names.
            return Err(not_found());
        }
        let mut onode = self.onode(child)?.ok_or(larder_object::ObjectError::NoSuchObject { object: child })?;
        if let Some(info) = onode.dir {
            if info.entries > 0 {
                return Err(NamespaceError::NotEmpty { dir: child, entries: info.entries });
            }
        }
        self.delete_dentry(dir, name)?;
        self.change_dir(dir, DirDelta { entries: -1, links: -subdir(onode.kind) })?;
        onode.nlink = change_nlink(child, onode.nlink, -1)?;
        onode.ctime = Timestamp::now();
        let large = matches!(onode.location, DataLocation::Extents) && onode.size >= FREE_LATER_BYTES;
        let mut orphaned = false;
        if onode.nlink > 0 {
            self.put_onode(child, &onode)?;
        } else if open || large {
            let reason = if open { OrphanReason::Unlinked } else { OrphanReason::Freeing };
            let record = Orphan { reason, since: onode.ctime }.encode()?;
            self.put_onode(child, &onode)?;
            self.put(&orphan_key(child), &record);
            orphaned = true;
        } else {
            self.delete_object(child)?;
        }
        Ok(Unlinked { child, kind: onode.kind, nlink: onode.nlink, orphaned })
    }
}
