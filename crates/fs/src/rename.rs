//! Rename: atomic, of files and directories, over an existing target, with
//! RENAME_NOREPLACE and RENAME_EXCHANGE. A rename that moves a directory
//! to another parent holds the file system's rename lock across its cycle
//! check and commit, so no other such rename can make the check stale
//! (DESIGN.md, namespace).

use larder_namespace::{list, subdir, NamespaceTxn, Unlinked};
use larder_object::meta::{Dentry, DirDelta, Kind, Name, Timestamp};
use larder_object::{Durability, LockRequest, Transaction};

use crate::cred::Cred;
use crate::error::{FsError, Result};
use crate::heap::refuse_in_heap;
use crate::names::{dir_in, onode_in, shown, stored_name, touch_dir, Step};
use crate::perm::{self, EXEC, WRITE};
use crate::Fs;

/// `renameat2` flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenameFlags {
    /// Fail with EEXIST if the target exists.
    pub noreplace: bool,
    /// Swap source and target, which must both exist.
    pub exchange: bool,
}

/// A rename's plan from unlocked lookups, re-checked under the locks.
pub(crate) struct Plan {
    pub(crate) src: Dentry,
    pub(crate) dst: Option<Dentry>,
}

impl Fs {
    /// Renames `name` in `parent` to `new_name` in `new_parent`.
    pub fn rename(
        &self,
        cred: &Cred,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        if flags.noreplace && flags.exchange {
            return Err(FsError::posix(libc::EINVAL, "RENAME_NOREPLACE with RENAME_EXCHANGE"));
        }
        for n in [name, new_name] {
            if n == b"." || n == b".." {
                return Err(FsError::posix(libc::EINVAL, format!("rename of {:?}", shown(n))));
            }
        }
        let (from, to) = (stored_name(name)?, stored_name(new_name)?);
        loop {
            let plan = self.plan(cred, parent, &from, new_parent, &to)?;
            if plan.dst.is_some_and(|d| d.child == plan.src.child) {
                // POSIX: two names of one object: nothing happens.
                return Ok(());
            }
            let moves_dir = parent != new_parent
                && (plan.src.kind == Kind::Directory
                    || (flags.exchange && plan.dst.is_some_and(|d| d.kind == Kind::Directory)));
            let _rename = moves_dir.then(|| self.rename_lock.lock());
            if moves_dir {
                self.check_no_cycle(plan.src.child, new_parent)?;
                if let Some(d) = plan.dst.filter(|d| flags.exchange && d.kind == Kind::Directory) {
                    self.check_no_cycle(d.child, parent)?;
                }
            }
            let victim = plan.dst.filter(|_| !flags.exchange).map(|d| d.child);
            let gate = victim.map(|v| self.handles.gate(v));
            let open = victim.is_some_and(|v| self.handles.is_open(v));
            let mut requests = vec![
                LockRequest::Exclusive(parent),
                LockRequest::Exclusive(new_parent),
                LockRequest::Name(parent, from.as_bytes().to_vec()),
                LockRequest::Name(new_parent, to.as_bytes().to_vec()),
                LockRequest::Exclusive(plan.src.child),
            ];
            requests.extend(plan.dst.map(|d| LockRequest::Exclusive(d.child)));
            let (step, _) = self.store.transact_locked(&requests, Durability::Buffered, |txn| {
                rename_in(txn, cred, (parent, &from), (new_parent, &to), &plan, flags, open)
            })?;
            if let Step::Done(Some(u)) = &step {
                if u.orphaned && open {
                    self.handles.mark_orphaned(u.child);
                }
            }
            drop(gate);
            match step {
                Step::Retry => continue,
                Step::Done(unlinked) => {
                    if let Some(u) = unlinked.filter(|u| u.orphaned && !open) {
                        self.store.free_orphan(u.child, Durability::Buffered)?;
                    }
                    return Ok(());
                }
            }
        }
    }

    fn plan(&self, cred: &Cred, parent: u64, from: &Name, new_parent: u64, to: &Name) -> Result<Plan> {
        for dir in [parent, new_parent] {
            let o = self.onode(dir)?;
            if o.kind != Kind::Directory {
                return Err(FsError::posix(libc::ENOTDIR, format!("object {dir}")));
            }
            perm::check(&o, dir, cred, EXEC)?;
        }
        let src = list::lookup(&self.store, parent, from)?.ok_or_else(|| FsError::no_entry(parent, from.as_bytes()))?;
        let dst = list::lookup(&self.store, new_parent, to)?;
        Ok(Plan { src, dst })
    }

    /// EINVAL if directory `dir` is `target` or one of its ancestors (a
    /// move there would make a cycle). Called under the rename lock.
    pub(crate) fn check_no_cycle(&self, dir: u64, target: u64) -> Result<()> {
        let mut at = target;
        loop {
            if at == dir {
                return Err(FsError::posix(libc::EINVAL, format!("directory {dir} cannot move below itself")));
            }
            let parent = self.onode(at)?.dir.map(|d| d.parent).unwrap_or(self.root());
            if parent == at {
                return Ok(());
            }
            at = parent;
        }
    }
}

/// The rename inside its transaction: `Retry` if a name changed since
/// the plan; `Done` with what an overwritten target's unlink left.
pub(crate) fn rename_in(
    txn: &mut Transaction<'_>,
    cred: &Cred,
    (parent, from): (u64, &Name),
    (new_parent, to): (u64, &Name),
    plan: &Plan,
    flags: RenameFlags,
    open: bool,
) -> Result<Step<Option<Unlinked>>> {
    let p1 = dir_in(txn, parent)?;
    let p2 = dir_in(txn, new_parent)?;
    refuse_in_heap(&p1, parent, "rename")?;
    refuse_in_heap(&p2, new_parent, "rename")?;
    let src = txn.lookup(parent, from)?;
    let dst = txn.lookup(new_parent, to)?;
    if src != Some(plan.src) || dst != plan.dst {
        return Ok(Step::Retry);
    }
    let s = onode_in(txn, plan.src.child)?;
    refuse_in_heap(&s, plan.src.child, "rename of a heap directory")?;
    perm::check_remove(&p1, parent, &s, cred)?;
    perm::check(&p2, new_parent, cred, WRITE | EXEC)?;
    if let Some(d) = plan.dst {
        let t = onode_in(txn, d.child)?;
        refuse_in_heap(&t, d.child, "rename over a heap directory")?;
        perm::check_remove(&p2, new_parent, &t, cred)?;
        if flags.noreplace {
            return Err(FsError::posix(libc::EEXIST, format!("{:?} in directory {new_parent}", shown(to.as_bytes()))));
        }
        if flags.exchange && t.kind == Kind::Directory && parent != new_parent && !cred.is_root() {
            perm::check(&t, d.child, cred, WRITE)?;
        }
    } else if flags.exchange {
        return Err(FsError::no_entry(new_parent, to.as_bytes()));
    }
    if s.kind == Kind::Directory && parent != new_parent && !cred.is_root() {
        // Its `..` changes.
        perm::check(&s, plan.src.child, cred, WRITE)?;
    }
    let mut unlinked = None;
    if flags.exchange {
        let d = plan.dst.ok_or_else(|| FsError::posix(libc::ENOENT, "exchange target"))?;
        txn.put_dentry(parent, from, &d)?;
        txn.put_dentry(new_parent, to, &plan.src)?;
        if parent != new_parent {
            // Each parent's link count follows the directory it now holds.
            let moved = subdir(plan.src.kind) - subdir(d.kind);
            txn.change_dir(parent, DirDelta { entries: 0, links: -moved })?;
            txn.change_dir(new_parent, DirDelta { entries: 0, links: moved })?;
        }
        reparent(txn, d.child, parent)?;
        reparent(txn, plan.src.child, new_parent)?;
    } else {
        if let Some(d) = plan.dst {
            match (s.kind == Kind::Directory, d.kind == Kind::Directory) {
                (true, false) => {
                    return Err(FsError::posix(libc::ENOTDIR, format!("{:?} is not a directory", shown(to.as_bytes()))))
                }
                (false, true) => {
                    return Err(FsError::posix(libc::EISDIR, format!("{:?} is a directory", shown(to.as_bytes()))))
                }
                _ => {}
            }
            unlinked = Some(txn.unlink(new_parent, to, d.child, open)?);
        }
        let links = subdir(plan.src.kind);
        txn.delete_dentry(parent, from)?;
        txn.change_dir(parent, DirDelta { entries: -1, links: -links })?;
        txn.put_dentry(new_parent, to, &plan.src)?;
        txn.change_dir(new_parent, DirDelta { entries: 1, links })?;
        reparent(txn, plan.src.child, new_parent)?;
    }
    touch_dir(txn, parent)?;
    if new_parent != parent {
        touch_dir(txn, new_parent)?;
    }
    Ok(Step::Done(unlinked))
}

/// Records that `child` is now named in `dir`: a directory's parent
/// changes; every object's ctime does.
fn reparent(txn: &mut Transaction<'_>, child: u64, dir: u64) -> Result<()> {
    let mut o = onode_in(txn, child)?;
    if let Some(info) = o.dir.as_mut() {
        info.parent = dir;
    }
    o.ctime = Timestamp::now();
    Ok(txn.put_onode(child, &o)?)
}
