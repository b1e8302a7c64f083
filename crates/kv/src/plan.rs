//! Finding a key's place, first without locks (a plan: which locks to
//! take), then again inside the transaction under those locks.
//!
//! A plan walks the key's directory levels down from the bucket as far as
//! they exist: the deepest existing level `dir` and the next name there
//! (`next`, the first missing level or the leaf). The transaction holds
//! `dir` shared and the name `next` exclusively, plus the leaf's object
//! exclusively when it exists. Under those locks the walk is repeated: a
//! level another transaction created meanwhile, or a leaf that changed, is
//! not covered by the locks, and the transaction is retried with a new plan
//! (the object layer refuses a touch of anything not locked, which is how
//! a stale plan shows).

use std::collections::HashMap;

use larder_namespace::{list, NamespaceError, NamespaceTxn};
use larder_object::meta::onode::FLAG_HEAP;
use larder_object::meta::{Dentry, DentryKey, Kind, Name};
use larder_object::{LockRequest, ObjectError, Store, Transaction, ROOT_ID};

use crate::bucket::Bucket;
use crate::error::{KvError, Result};
use crate::key::Key;
use crate::open::OpenObjects;

/// How far a key's levels exist.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// The deepest existing directory level.
    pub(crate) dir: u64,
    /// How many of the key's directory levels exist (`dir` is the last).
    pub(crate) depth: usize,
    /// The leaf's entry, when every level exists and the leaf does too.
    pub(crate) leaf: Option<Dentry>,
    /// The directories from the bucket down to `dir`.
    pub(crate) chain: Vec<u64>,
    /// The bucket's name in the root.
    pub(crate) bucket_name: Name,
    /// Levels a delete of the leaf would leave empty, deepest first, with
    /// their parents (filled by [`Plan::with_prune`]).
    pub(crate) prune: Vec<(u64, u64)>,
    /// For a change that may leave the leaf's object without a name, when
    /// a file system shares the store: whether it has that object open,
    /// read under its gate, which stays held across the transaction
    /// (`None`: not asked, the leaf removed as nobody's open). A put's
    /// leaf is asked about only when it is a directory: an empty level
    /// the put replaces by the key.
    pub(crate) leaf_open: Option<bool>,
    /// The levels of every plan's `prune` (a batch's delete may remove a
    /// level another plan locked) that a file system sharing the store
    /// has open, read under their gates, held across the transaction as
    /// the leaf's are: removing one keeps it, nameless, until its last
    /// close.
    pub(crate) open_levels: Vec<u64>,
}

impl Plan {
    /// Whether `object`, the leaf this plan's transaction found and is
    /// about to unlink, is open through a file system sharing the store.
    /// Another object than the plan's leaf is nobody's open: one made
    /// earlier in the same transaction (a batch's put) is not committed,
    /// and one made by another since the plan is not locked, which the
    /// object layer refuses to touch (the transaction is retried).
    pub(crate) fn unlinks_open(&self, object: u64) -> bool {
        self.leaf_open == Some(true) && self.leaf.is_some_and(|l| l.child == object)
    }

    /// Whether level `dir`, which the plan's transaction is about to
    /// remove, is open through a file system sharing the store.
    pub(crate) fn level_open(&self, dir: u64) -> bool {
        self.open_levels.contains(&dir)
    }
}

impl Plan {
    /// Walks `key` down from `bucket` without locks. Refuses a key inside
    /// a heap ([`KvError::InHeap`]): every plan is for a change, and a
    /// heap's directories change only through the heap. Their flag never
    /// changes, so checking it without locks is enough.
    pub(crate) fn make(store: &Store, bucket: &Bucket, key: &Key) -> Result<Plan> {
        let bucket_name = bucket.name.clone();
        let mut dir = bucket.id;
        let mut chain = vec![bucket.id];
        if !bucket.plain {
            refuse_in_heap(store, dir, key)?;
        }
        for (depth, part) in key.dirs().iter().enumerate() {
            match list::lookup(store, dir, part)? {
                Some(d) if d.kind == Kind::Directory => {
                    dir = d.child;
                    if dir != bucket.plain_level {
                        refuse_in_heap(store, dir, key)?;
                    }
                }
                // Missing, or a key where a level should be: the walk under
                // locks decides (an earlier operation of a batch may change it).
                _ => {
                    return Ok(Plan {
                        dir,
                        depth,
                        leaf: None,
                        chain,
                        bucket_name,
                        prune: Vec::new(),
                        leaf_open: None,
                        open_levels: Vec::new(),
                    })
                }
            }
            chain.push(dir);
        }
        let leaf = list::lookup(store, dir, key.leaf())?;
        Ok(Plan {
            dir,
            depth: key.dirs().len(),
            leaf,
            chain,
            bucket_name,
            prune: Vec::new(),
            leaf_open: None,
            open_levels: Vec::new(),
        })
    }

    /// For a delete: the levels (not the bucket) that removing the leaf
    /// may empty, as seen now, so the delete locks and removes them in its
    /// own transaction (if a put fills one meanwhile, it stays). A level is
    /// a candidate when its entry count is at most `deletes(level)`, the
    /// number of deletes of the transaction under it (1 for a lone delete).
    pub(crate) fn with_prune(mut self, store: &Store, deletes: impl Fn(u64) -> u64) -> Result<Plan> {
        if self.leaf.is_none() {
            return Ok(self);
        }
        for i in (1..self.chain.len()).rev() {
            let entries = store.stat(self.chain[i])?.and_then(|o| o.dir).map(|d| d.entries);
            if entries.is_none_or(|e| e > deletes(self.chain[i])) {
                break;
            }
            self.prune.push((self.chain[i - 1], self.chain[i]));
        }
        Ok(self)
    }

    /// The name the plan's transaction changes in `dir`.
    pub(crate) fn next<'k>(&self, key: &'k Key) -> &'k Name {
        key.parts.get(self.depth).unwrap_or_else(|| key.leaf())
    }

    /// The locks a transaction on this plan takes.
    pub(crate) fn requests(&self, key: &Key, out: &mut Vec<LockRequest>) {
        out.push(LockRequest::Shared(self.dir));
        out.push(LockRequest::Name(self.dir, self.next(key).as_bytes().to_vec()));
        if let Some(d) = self.leaf {
            out.push(LockRequest::Exclusive(d.child));
        }
        for (depth, &(parent, dir)) in (0..self.depth).rev().zip(&self.prune) {
            out.push(LockRequest::Exclusive(dir));
            out.push(LockRequest::Shared(parent));
            out.push(LockRequest::Name(parent, key.dirs()[depth].as_bytes().to_vec()));
        }
    }
}

/// [`KvError::InHeap`] when directory `dir` belongs to a heap.
fn refuse_in_heap(store: &Store, dir: u64, key: &Key) -> Result<()> {
    if store.with_attributes(dir, |o| o.flags & FLAG_HEAP != 0)?.unwrap_or(false) {
        return Err(KvError::InHeap { key: crate::error::lossy(&key.bytes), dir });
    }
    Ok(())
}

pub(crate) fn level_is_a_key(key: &Key, levels: usize) -> KvError {
    KvError::KeyConflict {
        key: crate::error::lossy(&key.bytes),
        other: key.shown_prefix(levels),
        what: "that level is a key, so it cannot also be a directory level",
    }
}

pub(crate) fn leaf_is_a_level(key: &Key) -> KvError {
    KvError::KeyConflict {
        key: crate::error::lossy(&key.bytes),
        other: format!("{}/...", crate::error::lossy(&key.bytes)),
        what: "other keys use it as a directory level",
    }
}

/// What a transaction does to a key, for its plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PlanKind {
    /// A put.
    Put,
    /// A delete; it also removes the levels it empties, in the same
    /// transaction (its plan locks them).
    Delete,
    /// A put that replaces the key's object by another (a streamed value).
    Replace,
}

impl PlanKind {
    /// Whether it may leave the key's old object, `leaf`, without a name:
    /// a delete or replace of a key, or a put over an empty level.
    fn unlinks(self, leaf: &Dentry) -> bool {
        match self {
            PlanKind::Delete | PlanKind::Replace => leaf.kind != Kind::Directory,
            PlanKind::Put => leaf.kind == Kind::Directory,
        }
    }
}

/// An error inside a KV transaction: a stale plan (retry) or a real one.
#[derive(Debug)]
pub(crate) enum TxnError {
    Retry,
    Kv(KvError),
}

impl From<ObjectError> for TxnError {
    fn from(e: ObjectError) -> Self {
        match e {
            // The plan's locks do not cover what the key now needs.
            ObjectError::NotLocked { .. } | ObjectError::NameNotLocked { .. } => TxnError::Retry,
            other => TxnError::Kv(KvError::Object(other)),
        }
    }
}

impl From<NamespaceError> for TxnError {
    fn from(e: NamespaceError) -> Self {
        match e {
            NamespaceError::Object(o) => o.into(),
            other => TxnError::Kv(other.into()),
        }
    }
}

impl From<KvError> for TxnError {
    fn from(e: KvError) -> Self {
        TxnError::Kv(e)
    }
}

/// The walk under locks: the directory holding the key's leaf, creating
/// missing levels (mode 0755) owned by `create`'s (uid, gid) when given,
/// else `None` when one is missing.
pub(crate) fn walk(
    txn: &mut Transaction<'_>,
    plan: &Plan,
    key: &Key,
    create: Option<(u32, u32)>,
) -> std::result::Result<Option<u64>, TxnError> {
    Ok(walk_chain(txn, plan, key, create)?.and_then(|chain| chain.last().copied()))
}

/// [`walk`], returning every level from the bucket down to the leaf's
/// directory.
pub(crate) fn walk_chain(
    txn: &mut Transaction<'_>,
    plan: &Plan,
    key: &Key,
    create: Option<(u32, u32)>,
) -> std::result::Result<Option<Vec<u64>>, TxnError> {
    // The plan's directory may have been removed (emptied by a delete)
    // before the locks were taken; a removed directory never comes back.
    let (mut dir, mut depth) = (plan.dir, plan.depth);
    while !named_directory(txn, plan, key, depth)? {
        // The level is gone: removed by an earlier delete of this batch
        // (whose plan locked its parent and name), or by another
        // transaction before the locks were taken (then the parent is not
        // held, and the touch below asks for a new plan).
        if depth == 0 {
            return Err(TxnError::Retry);
        }
        depth -= 1;
        dir = plan.chain[depth];
    }
    let mut chain = plan.chain[..=depth].to_vec();
    for (i, part) in key.dirs().iter().enumerate().skip(depth) {
        dir = match txn.lookup(dir, part)? {
            Some(d) if d.kind == Kind::Directory => d.child,
            Some(_) if create.is_some() => return Err(level_is_a_key(key, i + 1).into()),
            Some(_) => return Ok(None),
            None => match create {
                Some((uid, gid)) => txn.create_in(dir, part, Kind::Directory, crate::ops::LEVEL_MODE, uid, gid)?,
                None => return Ok(None),
            },
        };
        chain.push(dir);
    }
    Ok(Some(chain))
}

/// Whether the plan's level at `depth` still exists: its parent still
/// names it (checked on the parent's dentry, not the level's onode, whose
/// entry count may be a chain of operands to fold). Safe without the
/// parent's lock: removing the level takes it exclusively, which the plan
/// holds shared (or, for a level the transaction removed itself, the
/// pending write shows), and the lock made any earlier removal visible.
fn named_directory(txn: &Transaction<'_>, plan: &Plan, key: &Key, depth: usize) -> Result<bool> {
    let level = plan.chain[depth];
    let (parent, name) = match depth {
        0 => (ROOT_ID, &plan.bucket_name),
        d => (plan.chain[d - 1], &key.dirs()[d - 1]),
    };
    let dentry = txn.get(DentryKey::of(parent, name).as_bytes())?.map(|v| Dentry::decode(&v)).transpose()?;
    Ok(dentry.is_some_and(|d| d.child == level && d.kind == Kind::Directory))
}

/// Runs `f` in a transaction planned for `keys`, retrying while plans are
/// stale. `f` gets the plans in the order of `keys`; `kinds[i]` says what
/// is done to key `i`; `extra` are locks to take as well.
/// With `open`, the objects a file system sharing the store has open, the
/// gates of the leaves that a delete, replace or put may leave nameless
/// (a put: an empty level in the key's place) and of the levels a delete
/// may remove are held from the plan to after the commit, each plan says
/// whether its leaf and levels are open (`Plan::leaf_open`,
/// `Plan::open_levels`), and an open one the transaction left without a
/// name is marked orphaned, for its last close to free.
#[allow(clippy::too_many_arguments)]
pub(crate) fn with_plans<R>(
    store: &Store,
    open: Option<&dyn OpenObjects>,
    bucket: &Bucket,
    keys: &[&Key],
    durability: larder_object::Durability,
    kinds: &[PlanKind],
    extra: &[LockRequest],
    mut f: impl FnMut(&mut Transaction<'_>, &[Plan]) -> std::result::Result<R, TxnError>,
) -> Result<R> {
    const ATTEMPTS: usize = 64;
    for _ in 0..ATTEMPTS {
        let mut plans = keys.iter().map(|k| Plan::make(store, bucket, k)).collect::<Result<Vec<_>>>()?;
        // How many of the deletes lie under each level, for pruning.
        let mut under: HashMap<u64, u64> = HashMap::new();
        for (plan, kind) in plans.iter().zip(kinds) {
            if *kind == PlanKind::Delete && plan.leaf.is_some() {
                for &dir in &plan.chain {
                    *under.entry(dir).or_insert(0) += 1;
                }
            }
        }
        for (plan, kind) in plans.iter_mut().zip(kinds) {
            if *kind == PlanKind::Delete {
                *plan = plan.clone().with_prune(store, |dir| under.get(&dir).copied().unwrap_or(1))?;
            }
        }
        let mut requests = extra.to_vec();
        for (p, k) in plans.iter().zip(keys) {
            p.requests(k, &mut requests);
        }
        // The leaves and levels the transaction may leave without a name.
        let gated: Vec<u64> = match open {
            Some(_) => plans
                .iter()
                .zip(kinds)
                .flat_map(|(p, kind)| {
                    let leaf = p.leaf.filter(|l| kind.unlinks(l)).map(|l| l.child);
                    leaf.into_iter().chain(p.prune.iter().map(|&(_, dir)| dir))
                })
                .collect(),
            None => Vec::new(),
        };
        let held = open.filter(|_| !gated.is_empty()).map(|o| o.hold(&gated));
        // The open levels of every plan, known to each: a delete prunes a
        // level another plan of the batch locked, too.
        let mut open_levels = Vec::new();
        if let Some(held) = &held {
            for (plan, kind) in plans.iter_mut().zip(kinds) {
                plan.leaf_open = plan.leaf.filter(|l| kind.unlinks(l)).map(|l| held.is_open(l.child));
                open_levels.extend(plan.prune.iter().map(|&(_, dir)| dir).filter(|&dir| held.is_open(dir)));
            }
            open_levels.sort_unstable();
            open_levels.dedup();
            for plan in &mut plans {
                plan.open_levels.clone_from(&open_levels);
            }
        }
        match store.transact_locked(&requests, durability, |txn| f(txn, &plans)) {
            Ok((r, _)) => {
                if let Some(held) = &held {
                    // Still under the gates: an open leaf or level the
                    // commit left without a name is freed by its last close.
                    let leaves = plans.iter().filter(|p| p.leaf_open == Some(true)).filter_map(|p| p.leaf);
                    for object in leaves.map(|l| l.child).chain(open_levels.iter().copied()) {
                        if store.with_attributes(object, |o| o.nlink == 0)?.unwrap_or(false) {
                            held.mark_orphaned(object);
                        }
                    }
                }
                return Ok(r);
            }
            Err(TxnError::Retry) => continue,
            Err(TxnError::Kv(e)) => return Err(e),
        }
    }
    let key = keys.first().map(|k| crate::error::lossy(&k.bytes)).unwrap_or_default();
    Err(KvError::Contended { key, attempts: ATTEMPTS })
}
