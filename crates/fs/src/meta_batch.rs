//! Batches of metadata operations applied atomically (Aerie's batched
//! journal): creates, links, removals and renames, validated one by one
//! in order, each seeing what the earlier ones did, and committed as one
//! transaction: all of them, or (on the first refusal) none.
//!
//! Locks are planned from unlocked lookups: every directory named is held
//! exclusively (so every name in it is held), and every existing object
//! an operation may link, remove or replace. Objects the batch creates
//! are its own until it commits. Under the locks, each removal checks
//! that the name still names an object the batch holds; if a concurrent
//! change made it name another, the batch is planned again. Gates of the
//! objects it may remove are held across the commit, as a single unlink
//! holds its object's, so an object still open keeps an orphan record.
//!
//! A batch may move at most one directory to another parent: the move's
//! cycle check is made under the file system's rename lock, on the state
//! before the batch, which another move in the same batch could make
//! stale.

use std::collections::{BTreeSet, HashSet};

use larder_namespace::{list, NamespaceTxn, Unlinked};
use larder_object::meta::{Dentry, Kind, Name, MODE_TYPE_MASK};
use larder_object::{Durability, LockRequest, Transaction};

use crate::attr::Attr;
use crate::cred::Cred;
use crate::error::{FsError, Result};
use crate::heap::refuse_in_heap;
use crate::names::{dir_in, link_in_txn, make_in, new_name, onode_in, shown, stored_name, touch_dir, NewObject, Step};
use crate::perm::{self, EXEC};
use crate::rename::{rename_in, Plan, RenameFlags};
use crate::Fs;

/// One operation of a batch ([`Fs::apply_batch`]); each is the call of
/// the same name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchOp {
    /// [`Fs::mkdir`].
    Mkdir {
        /// The directory.
        parent: u64,
        /// The new name.
        name: Vec<u8>,
        /// Permission bits.
        mode: u32,
    },
    /// [`Fs::mknod`]: a regular file, fifo, socket or device node.
    Mknod {
        /// The directory.
        parent: u64,
        /// The new name.
        name: Vec<u8>,
        /// Type and permission bits.
        mode: u32,
        /// Device number.
        rdev: u64,
    },
    /// [`Fs::symlink`].
    Symlink {
        /// The directory.
        parent: u64,
        /// The new name.
        name: Vec<u8>,
        /// What it points to.
        target: Vec<u8>,
    },
    /// [`Fs::link`].
    Link {
        /// The object.
        ino: u64,
        /// The directory of the new name.
        parent: u64,
        /// The new name.
        name: Vec<u8>,
    },
    /// [`Fs::unlink`].
    Unlink {
        /// The directory.
        parent: u64,
        /// The name.
        name: Vec<u8>,
    },
    /// [`Fs::rmdir`].
    Rmdir {
        /// The parent directory.
        parent: u64,
        /// The name.
        name: Vec<u8>,
    },
    /// [`Fs::rename`].
    Rename {
        /// The source directory.
        parent: u64,
        /// The source name.
        name: Vec<u8>,
        /// The target directory.
        new_parent: u64,
        /// The target name.
        new_name: Vec<u8>,
        /// How to treat the target.
        flags: RenameFlags,
    },
}

/// What one operation of an applied batch did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchDone {
    /// A create or link: the object's attributes afterwards.
    Made(Attr),
    /// A removal or rename.
    Done,
}

/// The locks and checks a batch needs, from unlocked lookups.
struct BatchPlan {
    requests: Vec<LockRequest>,
    /// Existing objects the batch may remove or replace (gated).
    victims: BTreeSet<u64>,
    /// Directories moved to another parent: (directory, new parent).
    moves: Vec<(u64, u64)>,
}

impl Fs {
    /// Applies `ops` in order as one transaction, committed with
    /// `durability`: every operation, or none. Each is checked as its own
    /// call would be (permissions with `cred`, names, kinds), on the state
    /// the earlier operations left; the first refusal refuses the batch
    /// with that operation's error, naming its position. Returns what each
    /// did.
    pub fn apply_batch(&self, cred: &Cred, ops: &[BatchOp], durability: Durability) -> Result<Vec<BatchDone>> {
        let names = check_names(ops)?;
        if ops.iter().any(|op| {
            matches!(
                op,
                BatchOp::Mkdir { .. }
                    | BatchOp::Mknod { .. }
                    | BatchOp::Symlink { .. }
                    | BatchOp::Link { .. }
                    | BatchOp::Rename { .. }
            )
        }) {
            self.store.check_room_for_name()?;
        }
        loop {
            let plan = self.plan_batch(cred, ops, &names)?;
            if plan.moves.len() > 1 {
                return Err(FsError::posix(libc::EINVAL, "a batch moves at most one directory to another parent"));
            }
            let _rename = (!plan.moves.is_empty()).then(|| self.rename_lock.lock());
            for &(dir, target) in &plan.moves {
                self.check_no_cycle(dir, target)?;
            }
            let gates = self.handles.gates(plan.victims.iter().copied());
            let open: HashSet<u64> = plan.victims.iter().copied().filter(|&v| self.handles.is_open(v)).collect();
            // A retry aborts the transaction: operations applied before the
            // one that found the state changed must not commit (the batch
            // would then find its own creates on the next attempt).
            let outcome = self.store.transact_locked(&plan.requests, durability, |txn| {
                match apply_in(txn, cred, ops, &names, &open, &plan.moves) {
                    Ok(Step::Done(applied)) => Ok(applied),
                    Ok(Step::Retry) => Err(Abort::Retry),
                    Err(e) => Err(Abort::Refused(e)),
                }
            });
            if let Ok(((_, unlinked), _)) = &outcome {
                for u in unlinked.iter().filter(|u| u.orphaned && open.contains(&u.child)) {
                    self.handles.mark_orphaned(u.child);
                }
            }
            drop(gates);
            match outcome {
                Err(Abort::Retry) => continue,
                Err(Abort::Refused(e)) => return Err(e),
                Ok(((done, unlinked), _)) => {
                    for u in unlinked.into_iter().filter(|u| u.orphaned && !open.contains(&u.child)) {
                        self.store.free_orphan(u.child, Durability::Buffered)?;
                    }
                    return Ok(done);
                }
            }
        }
    }

    /// Locks, victims and directory moves of `ops`, from the state now.
    fn plan_batch(&self, cred: &Cred, ops: &[BatchOp], names: &[(Name, Option<Name>)]) -> Result<BatchPlan> {
        let mut plan = BatchPlan { requests: Vec::new(), victims: BTreeSet::new(), moves: Vec::new() };
        let exclusive = |plan: &mut BatchPlan, ino: u64| plan.requests.push(LockRequest::Exclusive(ino));
        for (i, (op, (name, new_name))) in ops.iter().zip(names).enumerate() {
            let at = |e: FsError| in_batch(i, e);
            match op {
                BatchOp::Mkdir { parent, .. } | BatchOp::Mknod { parent, .. } | BatchOp::Symlink { parent, .. } => {
                    exclusive(&mut plan, *parent);
                }
                BatchOp::Link { ino, parent, .. } => {
                    exclusive(&mut plan, *parent);
                    exclusive(&mut plan, *ino);
                    plan.victims.insert(*ino);
                }
                BatchOp::Unlink { parent, .. } | BatchOp::Rmdir { parent, .. } => {
                    exclusive(&mut plan, *parent);
                    if let Some(d) = self.planned_entry(cred, *parent, name).map_err(at)? {
                        exclusive(&mut plan, d.child);
                        plan.victims.insert(d.child);
                    }
                }
                BatchOp::Rename { parent, new_parent, flags, .. } => {
                    exclusive(&mut plan, *parent);
                    exclusive(&mut plan, *new_parent);
                    let to = new_name.as_ref().unwrap_or(name);
                    let src = self.planned_entry(cred, *parent, name).map_err(at)?;
                    let dst = self.planned_entry(cred, *new_parent, to).map_err(at)?;
                    for d in src.iter().chain(dst.iter()) {
                        exclusive(&mut plan, d.child);
                        plan.victims.insert(d.child);
                    }
                    if parent != new_parent {
                        if let Some(s) = src.filter(|s| s.kind == Kind::Directory) {
                            plan.moves.push((s.child, *new_parent));
                        }
                        if let Some(d) = dst.filter(|d| flags.exchange && d.kind == Kind::Directory) {
                            plan.moves.push((d.child, *parent));
                        }
                    }
                }
            }
        }
        Ok(plan)
    }

    /// The entry `name` of directory `parent` now, if any (search
    /// permission needed, as for the call itself).
    fn planned_entry(&self, cred: &Cred, parent: u64, name: &Name) -> Result<Option<Dentry>> {
        let p = self.onode(parent)?;
        if p.kind != Kind::Directory {
            return Err(FsError::posix(libc::ENOTDIR, format!("object {parent}")));
        }
        perm::check(&p, parent, cred, EXEC)?;
        Ok(list::lookup(&self.store, parent, name)?)
    }
}

/// The checked names of each operation (the new name of a rename second).
fn check_names(ops: &[BatchOp]) -> Result<Vec<(Name, Option<Name>)>> {
    ops.iter()
        .enumerate()
        .map(|(i, op)| {
            let at = |e: FsError| in_batch(i, e);
            match op {
                BatchOp::Mkdir { name, .. }
                | BatchOp::Mknod { name, .. }
                | BatchOp::Symlink { name, .. }
                | BatchOp::Link { name, .. } => Ok((new_name(name).map_err(at)?, None)),
                BatchOp::Unlink { name, .. } => Ok((stored_name(name).map_err(at)?, None)),
                BatchOp::Rmdir { name, .. } => match name.as_slice() {
                    b"." => Err(at(FsError::posix(libc::EINVAL, "rmdir of \".\""))),
                    b".." => Err(at(FsError::posix(libc::ENOTEMPTY, "rmdir of \"..\""))),
                    _ => Ok((stored_name(name).map_err(at)?, None)),
                },
                BatchOp::Rename { name, new_name, flags, .. } => {
                    if flags.noreplace && flags.exchange {
                        return Err(at(FsError::posix(libc::EINVAL, "RENAME_NOREPLACE with RENAME_EXCHANGE")));
                    }
                    for n in [name, new_name] {
                        if n.as_slice() == b"." || n.as_slice() == b".." {
                            return Err(at(FsError::posix(libc::EINVAL, format!("rename of {:?}", shown(n)))));
                        }
                    }
                    Ok((stored_name(name).map_err(at)?, Some(stored_name(new_name).map_err(at)?)))
                }
            }
        })
        .collect()
}

/// `e`, saying it is the error of operation `i` of a batch.
fn in_batch(i: usize, e: FsError) -> FsError {
    match e {
        FsError::Store(_) => e,
        other => FsError::posix(other.errno(), format!("operation {i} of the batch: {other}")),
    }
}

type Applied = (Vec<BatchDone>, Vec<Unlinked>);

/// The batch inside its transaction.
fn apply_in(
    txn: &mut Transaction<'_>,
    cred: &Cred,
    ops: &[BatchOp],
    names: &[(Name, Option<Name>)],
    open: &HashSet<u64>,
    moves: &[(u64, u64)],
) -> Result<Step<Applied>> {
    let mut done = Vec::with_capacity(ops.len());
    let mut unlinked = Vec::new();
    for (i, (op, (name, new_name))) in ops.iter().zip(names).enumerate() {
        let at = |e: FsError| in_batch(i, e);
        let step = match op {
            BatchOp::Mkdir { parent, mode, .. } => {
                let new = NewObject { kind: Kind::Directory, mode: *mode, rdev: 0, target: None };
                Step::Done(BatchDone::Made(make_in(txn, cred, *parent, name, &new).map_err(at)?))
            }
            BatchOp::Mknod { parent, mode, rdev, .. } => {
                let new = special(*mode, *rdev).map_err(at)?;
                Step::Done(BatchDone::Made(make_in(txn, cred, *parent, name, &new).map_err(at)?))
            }
            BatchOp::Symlink { parent, target, .. } => {
                check_target(target).map_err(at)?;
                let new = NewObject { kind: Kind::Symlink, mode: 0o777, rdev: 0, target: Some(target) };
                Step::Done(BatchDone::Made(make_in(txn, cred, *parent, name, &new).map_err(at)?))
            }
            BatchOp::Link { ino, parent, .. } => {
                Step::Done(BatchDone::Made(link_in_txn(txn, cred, *ino, *parent, name).map_err(at)?))
            }
            BatchOp::Unlink { parent, .. } => {
                remove_in(txn, cred, *parent, name, false, open, &mut unlinked).map_err(at)?
            }
            BatchOp::Rmdir { parent, .. } => {
                remove_in(txn, cred, *parent, name, true, open, &mut unlinked).map_err(at)?
            }
            BatchOp::Rename { parent, new_parent, flags, .. } => {
                let to = new_name.as_ref().unwrap_or(name);
                rename_step(txn, cred, (*parent, name), (*new_parent, to), *flags, open, moves, &mut unlinked)
                    .map_err(at)?
            }
        };
        match step {
            Step::Done(d) => done.push(d),
            Step::Retry => return Ok(Step::Retry),
        }
    }
    Ok(Step::Done((done, unlinked)))
}

/// Why a batch's transaction was abandoned: a refusal, or a state changed
/// since the plan (planned again).
enum Abort {
    Refused(FsError),
    Retry,
}

impl From<larder_object::ObjectError> for Abort {
    fn from(e: larder_object::ObjectError) -> Abort {
        Abort::Refused(e.into())
    }
}

/// What `mknod` with `mode` and `rdev` makes.
fn special(mode: u32, rdev: u64) -> Result<NewObject<'static>> {
    let kind = if mode & MODE_TYPE_MASK == 0 {
        Kind::File
    } else {
        Kind::from_mode(mode).ok_or_else(|| FsError::posix(libc::EINVAL, format!("file type in mode {mode:o}")))?
    };
    if kind == Kind::Directory || kind == Kind::Symlink {
        return Err(FsError::posix(libc::EINVAL, "mknod makes no directories or symlinks"));
    }
    let rdev = if matches!(kind, Kind::CharDevice | Kind::BlockDevice) { rdev } else { 0 };
    Ok(NewObject { kind, mode, rdev, target: None })
}

/// A symlink target's checks, as `Fs::symlink` makes them.
fn check_target(target: &[u8]) -> Result<()> {
    if target.is_empty() {
        return Err(FsError::posix(libc::ENOENT, "an empty symlink target"));
    }
    if target.len() >= crate::PATH_MAX {
        return Err(FsError::posix(libc::ENAMETOOLONG, format!("a symlink target of {} bytes", target.len())));
    }
    if target.contains(&0) {
        return Err(FsError::posix(libc::EINVAL, "a symlink target holding NUL"));
    }
    Ok(())
}

/// An unlink (`dir` false) or rmdir inside the batch's transaction.
fn remove_in(
    txn: &mut Transaction<'_>,
    cred: &Cred,
    parent: u64,
    name: &Name,
    dir: bool,
    open: &HashSet<u64>,
    unlinked: &mut Vec<Unlinked>,
) -> Result<Step<BatchDone>> {
    let p = dir_in(txn, parent)?;
    refuse_in_heap(&p, parent, if dir { "rmdir" } else { "unlink" })?;
    perm::check(&p, parent, cred, EXEC)?;
    let d = txn.lookup(parent, name)?.ok_or_else(|| FsError::no_entry(parent, name.as_bytes()))?;
    match (dir, d.kind == Kind::Directory) {
        (false, true) => {
            return Err(FsError::posix(libc::EISDIR, format!("{:?} is a directory", shown(name.as_bytes()))))
        }
        (true, false) => {
            return Err(FsError::posix(libc::ENOTDIR, format!("{:?} is not a directory", shown(name.as_bytes()))))
        }
        _ => {}
    }
    if !txn.holds_entry(parent, name, d.child) {
        // Another object than planned, changed by someone else meanwhile.
        return Ok(Step::Retry);
    }
    let child = onode_in(txn, d.child)?;
    refuse_in_heap(&child, d.child, "rmdir of a heap directory")?;
    perm::check_remove(&p, parent, &child, cred)?;
    let u = txn.unlink(parent, name, d.child, open.contains(&d.child))?;
    touch_dir(txn, parent)?;
    unlinked.push(u);
    Ok(Step::Done(BatchDone::Done))
}

/// A rename inside the batch's transaction, on the names as the earlier
/// operations left them.
#[allow(clippy::too_many_arguments)]
fn rename_step(
    txn: &mut Transaction<'_>,
    cred: &Cred,
    (parent, from): (u64, &Name),
    (new_parent, to): (u64, &Name),
    flags: RenameFlags,
    open: &HashSet<u64>,
    moves: &[(u64, u64)],
    unlinked: &mut Vec<Unlinked>,
) -> Result<Step<BatchDone>> {
    for dir in [parent, new_parent] {
        let o = dir_in(txn, dir)?;
        perm::check(&o, dir, cred, EXEC)?;
    }
    let src = txn.lookup(parent, from)?.ok_or_else(|| FsError::no_entry(parent, from.as_bytes()))?;
    let dst = txn.lookup(new_parent, to)?;
    if dst.is_some_and(|d| d.child == src.child) {
        // POSIX: two names of one object: nothing happens.
        return Ok(Step::Done(BatchDone::Done));
    }
    for d in std::iter::once(&src).chain(dst.iter()) {
        let held = if d.child == src.child {
            txn.holds_entry(parent, from, d.child)
        } else {
            txn.holds_entry(new_parent, to, d.child)
        };
        if !held {
            return Ok(Step::Retry);
        }
    }
    if parent != new_parent {
        // A directory moved to another parent must be the move whose cycle
        // check the plan made: one the batch made or renamed itself first
        // is refused (no one else can have changed an object it holds).
        let moved = [(Some(src), new_parent), (dst.filter(|_| flags.exchange), parent)];
        for (d, target) in moved {
            if let Some(d) = d.filter(|d| d.kind == Kind::Directory) {
                if !moves.contains(&(d.child, target)) {
                    return Err(FsError::posix(
                        libc::EINVAL,
                        "a batch moves to another parent only a directory that existed under that name before it",
                    ));
                }
            }
        }
    }
    let victim_open = dst.is_some_and(|d| open.contains(&d.child));
    let plan = Plan { src, dst };
    match rename_in(txn, cred, (parent, from), (new_parent, to), &plan, flags, victim_open)? {
        Step::Retry => Ok(Step::Retry),
        Step::Done(u) => {
            unlinked.extend(u);
            Ok(Step::Done(BatchDone::Done))
        }
    }
}
