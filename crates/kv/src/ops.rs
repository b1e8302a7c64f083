//! Put, get, head and delete of one key.

use larder_namespace::{list, NamespaceTxn};
use larder_object::meta::{Dentry, Kind, Name};
use larder_object::store::DerivedPath;
use larder_object::{Durability, LockRequest, Transaction};

use crate::error::Result;
use crate::find::path_key;
use crate::key::Key;
use crate::plan::{leaf_is_a_level, walk, walk_chain, with_plans, Plan, PlanKind, TxnError};
use crate::Kv;

/// Permission bits of objects the KV API creates.
pub(crate) const OBJECT_MODE: u32 = 0o644;
/// Bytes a put's batch takes besides the value: the onode's fields and
/// key, the dentry and its key, the directory's entry-count operand, the
/// batch's framing (a new level adds a little more, within a doubling).
const PUT_FRAMING_BYTES: usize = 512;

/// Permission bits of directory levels the KV API creates.
pub(crate) const LEVEL_MODE: u32 = 0o755;

/// What a key names, found without locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// The object's id.
    pub object: u64,
    /// Its size in bytes.
    pub size: u64,
}

impl Kv {
    /// Stores `value` under `key` in `bucket`, replacing any value there,
    /// creating missing directory levels; atomically (a crash leaves the
    /// old value or the new, never a mix). With [`Durability::Durable`]
    /// the new value is on disk when this returns; with
    /// [`Durability::Buffered`] it is visible at once and on disk within
    /// the log's buffered interval.
    ///
    /// Errors: [`NoSuchBucket`](crate::KvError::NoSuchBucket),
    /// [`InvalidKey`](crate::KvError::InvalidKey) (the rules in
    /// [`crate::key`]), [`KeyConflict`](crate::KvError::KeyConflict) (`a`
    /// cannot be a key while `a/b` is one), and
    /// [`Object`](crate::KvError::Object) for the store's failures (I/O; no
    /// space: see [`is_no_space`](crate::KvError::is_no_space)). A failed
    /// put changes nothing.
    ///
    /// ```
    /// use larder_kv::{Durability, Kv, KvOptions};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let kv = Kv::create(tmp.path(), KvOptions::default())?;
    /// kv.create_bucket("photos")?;
    /// kv.put("photos", "2026/beach.jpg", b"...", Durability::Durable)?;
    /// kv.put("photos", "2026/beach.jpg", b"cropped", Durability::Buffered)?;
    /// assert_eq!(kv.get("photos", "2026/beach.jpg")?, Some(b"cropped".to_vec()));
    /// assert_eq!(kv.get("photos", "2026/lake.jpg")?, None);
    /// // "2026" is a directory level now, not a key:
    /// assert!(kv.put("photos", "2026", b"x", Durability::Durable).is_err());
    /// assert!(kv.delete("photos", "2026/beach.jpg", Durability::Durable)?);
    /// assert!(!kv.delete("photos", "2026/beach.jpg", Durability::Durable)?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn put(
        &self,
        bucket: impl AsRef<[u8]>,
        key: impl AsRef<[u8]>,
        value: &[u8],
        durability: Durability,
    ) -> Result<()> {
        let bucket = self.bucket(bucket.as_ref())?;
        let key = Key::parse(key.as_ref())?;
        self.store().check_room(value.len() as u64)?;
        let owner = self.owner;
        // A key read lately has its path entry cached, holding the
        // object's onode: the put reads the onode from it.
        let path = self.store().derived_cached(&path_key(bucket.name.as_bytes(), &key.bytes));
        let mut level = bucket.id;
        with_plans(
            self.store(),
            self.open_objects(),
            &bucket,
            &[&key],
            durability,
            &[PlanKind::Put],
            &[],
            |txn, plans| {
                level = plans[0].dir;
                put_in(txn, &plans[0], &key, value, owner, path.as_ref())
            },
        )?;
        // Its plan found the bucket and the levels it walked not to be a
        // heap's.
        self.bucket_is_plain(&bucket);
        self.level_is_plain(&bucket, level);
        Ok(())
    }

    /// The value under `key` in `bucket`, or `None`: the latest value put,
    /// buffered or not. Every 4 KiB block read is checked against its
    /// checksum; a mismatch is an error naming the file, never wrong bytes.
    /// See [`Kv::put`] for an example.
    pub fn get(&self, bucket: impl AsRef<[u8]>, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(bucket, key, &mut out)?.then_some(out))
    }

    /// Like [`Kv::get`], into `out` (replaced; its allocation reused):
    /// returns whether `key` exists, leaving `out` alone if not. A small
    /// object is copied once, from the metadata cache into `out`.
    pub fn get_into(&self, bucket: impl AsRef<[u8]>, key: impl AsRef<[u8]>, out: &mut Vec<u8>) -> Result<bool> {
        let (path, object) = self.find_cached(bucket.as_ref(), key.as_ref(), true)?;
        let Some(object) = object else { return Ok(false) };
        // A delete between the lookup and the read reads as absent.
        Ok(self.store().read_to_end_via(&path, object.child, out)?)
    }

    /// Like [`Kv::get_into`], answered from the metadata cache alone:
    /// `Some(found)` when the key's path and its value were cached (a value
    /// small enough to live in its object's onode), `None` when the answer
    /// needs the disk; then call [`Kv::get_into`]. It never blocks on I/O,
    /// so a caller for whom blocking is costly (the Python bindings, which
    /// hold the interpreter lock through it) tries it first.
    pub fn get_cached_into(
        &self,
        bucket: impl AsRef<[u8]>,
        key: impl AsRef<[u8]>,
        out: &mut Vec<u8>,
    ) -> Result<Option<bool>> {
        let Some(path) = self.store().derived_cached(&path_key(bucket.as_ref(), key.as_ref())) else { return Ok(None) };
        let Some(dentry) = path.value().map(Dentry::decode).transpose()? else { return Ok(Some(false)) };
        Ok(self.store().read_cached_via(&path, dentry.child, out)?)
    }

    /// The value of `key`, whose listing named `object`, from its path
    /// entry alone: `None` unless the entry is cached, current, leads to
    /// `object` and holds its inline bytes (or its absence).
    pub(crate) fn read_path_cached(
        &self,
        bucket: &[u8],
        key: &[u8],
        object: u64,
        out: &mut Vec<u8>,
    ) -> Result<Option<bool>> {
        let Some(path) = self.store().derived_cached(&path_key(bucket, key)) else { return Ok(None) };
        match path.value().map(Dentry::decode).transpose()? {
            Some(d) if d.child == object => Ok(self.store().read_cached_via(&path, object, out)?),
            _ => Ok(None),
        }
    }

    /// Whether the path entry of `key` is cached, current, and leads to
    /// `object` (then [`Kv::read_path_cached`] answers for it).
    pub(crate) fn path_cached_leads_to(&self, bucket: &[u8], key: &[u8], object: u64) -> bool {
        let Some(path) = self.store().derived_cached(&path_key(bucket, key)) else { return false };
        path.value().and_then(|v| Dentry::decode(v).ok()).is_some_and(|d| d.child == object)
    }

    /// The object under `key` and its size, or `None`.
    pub fn head(&self, bucket: impl AsRef<[u8]>, key: impl AsRef<[u8]>) -> Result<Option<Head>> {
        let Some(d) = self.find_cached(bucket.as_ref(), key.as_ref(), false)?.1 else { return Ok(None) };
        Ok(self.store().with_attributes(d.child, |o| Head { object: d.child, size: o.size })?)
    }

    /// Removes `key` from `bucket`; returns whether it was there. Directory
    /// levels the delete leaves empty are removed (the bucket stays).
    /// Durable when it returns with [`Durability::Durable`]. Deletes work
    /// on a full store and give the space back.
    pub fn delete(&self, bucket: impl AsRef<[u8]>, key: impl AsRef<[u8]>, durability: Durability) -> Result<bool> {
        let bucket = self.bucket(bucket.as_ref())?;
        let key = Key::parse(key.as_ref())?;
        let removed = with_plans(
            self.store(),
            self.open_objects(),
            &bucket,
            &[&key],
            durability,
            &[PlanKind::Delete],
            &[],
            |txn, plans| delete_in(txn, &plans[0], &key),
        )?;
        let Some(removed) = removed else { return Ok(false) };
        self.after_delete(removed)?;
        Ok(true)
    }

    /// After a delete committed: frees a large object in steps.
    pub(crate) fn after_delete(&self, removed: Removed) -> Result<()> {
        if removed.orphaned && !removed.open {
            self.store().free_orphan(removed.object, Durability::Buffered)?;
        }
        Ok(())
    }

    /// Removes the levels of `key` left empty, deepest first, each in a
    /// transaction of its own that checks it is still empty, committed
    /// with `durability`. A batch does this for the levels its own deletes
    /// emptied (a single delete prunes in its own transaction).
    pub(crate) fn prune_levels(&self, bucket: u64, key: &Key, durability: Durability) -> Result<()> {
        let store = self.store();
        for depth in (1..=key.dirs().len()).rev() {
            let mut chain = vec![bucket];
            for part in &key.dirs()[..depth] {
                match list::lookup(store, chain[chain.len() - 1], part)? {
                    Some(d) if d.kind == Kind::Directory => chain.push(d.child),
                    _ => return Ok(()),
                }
            }
            let (parent, dir) = (chain[depth - 1], chain[depth]);
            if store.stat(dir)?.and_then(|o| o.dir).is_none_or(|i| i.entries != 0) {
                return Ok(());
            }
            let name = &key.dirs()[depth - 1];
            let requests = [
                LockRequest::Shared(parent),
                LockRequest::Name(parent, name.as_bytes().to_vec()),
                LockRequest::Exclusive(dir),
            ];
            // Held across the transaction: an open level is kept until
            // its last close through the file system sharing the store.
            let held = self.open_objects().map(|o| o.hold(&[dir]));
            let open = held.as_ref().is_some_and(|h| h.is_open(dir));
            let (pruned, _) =
                store.transact_locked(&requests, durability, |txn| remove_if_empty(txn, parent, name, dir, open))?;
            if !pruned {
                return Ok(());
            }
            if let Some(held) = held.filter(|_| open) {
                held.mark_orphaned(dir);
            }
        }
        Ok(())
    }
}

/// The put inside its transaction.
pub(crate) fn put_in(
    txn: &mut Transaction<'_>,
    plan: &Plan,
    key: &Key,
    value: &[u8],
    (uid, gid): (u32, u32),
    path: Option<&DerivedPath>,
) -> std::result::Result<(), TxnError> {
    // Room for the value and the keys and framing around it in the
    // batch at once, instead of a doubling series each copying the value.
    // A value too large to be inline goes to container space from
    // `value`: room for it would be memory as large as it, never used.
    let inline = value.len() <= txn.inline_max_bytes() as usize;
    txn.reserve_batch(if inline { value.len() } else { 0 } + PUT_FRAMING_BYTES);
    let dir = walk_owned(txn, plan, key, uid, gid)?;
    match txn.lookup(dir, key.leaf())? {
        Some(d) if d.kind == Kind::Directory => {
            // An empty level (a batch's delete or a crash can leave one)
            // holds no key: it gives way. One holding keys is a conflict.
            if txn.onode(d.child)?.and_then(|o| o.dir).is_some_and(|i| i.entries == 0) {
                txn.unlink(dir, key.leaf(), d.child, plan.unlinks_open(d.child))?;
                txn.create_absent_with_in(dir, key.leaf(), Kind::File, OBJECT_MODE, (uid, gid), value)?;
                return Ok(());
            }
            Err(leaf_is_a_level(key).into())
        }
        Some(d) => {
            // Replaced in place: one object, its bytes rewritten; its onode
            // through the key's path entry when that leads to it.
            let via =
                path.filter(|p| p.value().and_then(|v| Dentry::decode(v).ok()).is_some_and(|p| p.child == d.child));
            match via {
                Some(path) => txn.replace_via(path, d.child, value)?,
                None => txn.replace(d.child, value)?,
            }
            Ok(())
        }
        // Found absent just now, under the transaction's lock on the name.
        None => {
            txn.create_absent_with_in(dir, key.leaf(), Kind::File, OBJECT_MODE, (uid, gid), value)?;
            Ok(())
        }
    }
}

/// [`walk`] creating missing levels owned by `uid`/`gid`.
pub(crate) fn walk_owned(
    txn: &mut Transaction<'_>,
    plan: &Plan,
    key: &Key,
    uid: u32,
    gid: u32,
) -> std::result::Result<u64, TxnError> {
    walk(txn, plan, key, Some((uid, gid)))?.ok_or(TxnError::Retry)
}

/// What a delete removed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Removed {
    pub(crate) object: u64,
    /// The object awaits freeing in steps, or its last close through the
    /// file system sharing the store (`open`).
    pub(crate) orphaned: bool,
    /// A file system sharing the store has the object open: its last
    /// close frees it (marked by `with_plans`).
    pub(crate) open: bool,
}

/// The delete inside its transaction: `None` if the key is not there.
pub(crate) fn delete_in(
    txn: &mut Transaction<'_>,
    plan: &Plan,
    key: &Key,
) -> std::result::Result<Option<Removed>, TxnError> {
    let Some(chain) = walk_chain(txn, plan, key, None)? else { return Ok(None) };
    let dir = chain[chain.len() - 1];
    match txn.lookup(dir, key.leaf())? {
        Some(d) if d.kind != Kind::Directory => {
            let open = plan.unlinks_open(d.child);
            let u = txn.unlink(dir, key.leaf(), d.child, open)?;
            prune_in(txn, plan, &chain, key)?;
            Ok(Some(Removed { object: d.child, orphaned: u.orphaned, open }))
        }
        _ => Ok(None),
    }
}

/// Removes the levels of `chain` (the bucket down to the leaf's directory)
/// the delete left empty, deepest first, while the transaction holds them:
/// those its plan expected to empty (and locked), and those it created
/// itself (an earlier put of the same batch), so a later put of the batch
/// finds the name free, as after separate calls. A level a put filled
/// meanwhile stays; one open through a file system sharing the store is
/// kept, nameless, until its last close.
fn prune_in(txn: &mut Transaction<'_>, plan: &Plan, chain: &[u64], key: &Key) -> std::result::Result<(), TxnError> {
    for depth in (1..chain.len()).rev() {
        let (parent, dir, name) = (chain[depth - 1], chain[depth], &key.dirs()[depth - 1]);
        if !txn.holds_entry(parent, name, dir) || !remove_if_empty(txn, parent, name, dir, plan.level_open(dir))? {
            break;
        }
    }
    Ok(())
}

/// Removes the level `dir`, named `name` in `parent`, if it is empty and
/// still so named (all three held by the transaction); says whether it did.
/// An `open` level (through a file system sharing the store) is kept,
/// with an orphan record, for its last close to free.
fn remove_if_empty(
    txn: &mut Transaction<'_>,
    parent: u64,
    name: &Name,
    dir: u64,
    open: bool,
) -> std::result::Result<bool, larder_namespace::NamespaceError> {
    let empty = txn.onode(dir)?.and_then(|o| o.dir).is_some_and(|i| i.entries == 0);
    if !(empty && txn.lookup(parent, name)?.is_some_and(|d| d.child == dir)) {
        return Ok(false);
    }
    txn.unlink(parent, name, dir, open)?;
    Ok(true)
}
