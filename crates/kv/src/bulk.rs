//! Bulk creation of keys: the namespace's bulk create
//! (`larder_namespace::bulk`) once per directory level the keys lie in.
//! For loading many new keys (`larder import`): no plan, no name lock and
//! no lookup per key, and for a level that was empty no read at all.

use std::collections::BTreeMap;

use larder_namespace::bulk::{self, NewFile, NewOwner};
use larder_object::{ObjectError, Store};

use crate::error::{KvError, Result};
use crate::key::Key;
use crate::ops::{walk_owned, OBJECT_MODE};
use crate::plan::{with_plans, Plan, PlanKind};
use crate::{Durability, Kv};

/// Attempts at one level whose directory is removed under the bulk create
/// (a delete emptied it) before the create gives up.
const ATTEMPTS: usize = 16;

/// What [`Kv::create_many`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KvCreated {
    /// Keys created, in key order within each level.
    pub created: Vec<Vec<u8>>,
    /// Keys left as they were: present already (a value, or a directory
    /// level of other keys), or repeated in the call (the first occurrence
    /// is the one created). Sorted.
    pub duplicates: Vec<Vec<u8>>,
}

impl Kv {
    /// Creates every key of `items` in `bucket` with its value, except
    /// keys already there or repeated, which are returned as duplicates
    /// and left untouched (no object is left behind for them): the caller
    /// puts them ([`Kv::put`] replaces) or skips them. Every key is
    /// checked before anything is written.
    ///
    /// Keys are created one directory level at a time, each level's as one
    /// bulk create (see `larder_namespace::bulk`: large levels are written
    /// directly as index runs). Missing levels are created first. Not
    /// atomic as a whole: a crash keeps a prefix of the commits, each level
    /// whole or a prefix of its chunks; with [`Durability::Durable`]
    /// everything is durable once this returns.
    pub fn create_many(
        &self,
        bucket: impl AsRef<[u8]>,
        items: &[(&[u8], &[u8])],
        durability: Durability,
    ) -> Result<KvCreated> {
        let bucket = self.bucket(bucket.as_ref())?;
        let keys = items.iter().map(|(k, _)| Key::parse(k)).collect::<Result<Vec<_>>>()?;
        self.store().check_room(items.iter().map(|(_, v)| v.len() as u64).min().unwrap_or(0))?;
        // Keys grouped by their level (the key's bytes before the leaf).
        let mut levels: BTreeMap<&[u8], Vec<usize>> = BTreeMap::new();
        for (i, key) in keys.iter().enumerate() {
            let cut = key.bytes.len() - key.leaf().as_bytes().len();
            levels.entry(&key.bytes[..cut]).or_default().push(i);
        }
        let mut out = KvCreated::default();
        let count = levels.len();
        for (n, (prefix, members)) in levels.into_iter().enumerate() {
            let d = if n + 1 == count { durability } else { Durability::Buffered };
            let files: Vec<NewFile<'_>> =
                members.iter().map(|&i| NewFile { name: keys[i].leaf().clone(), data: items[i].1 }).collect();
            let done = self.create_in_level(&bucket, &keys[members[0]], files, d)?;
            let full = |name: Vec<u8>| [prefix, &name].concat();
            out.created.extend(done.created.into_iter().map(|(name, _)| full(name)));
            out.duplicates.extend(done.duplicates.into_iter().map(full));
        }
        out.duplicates.sort_unstable();
        Ok(out)
    }

    /// The bulk create of `files`, all in the level of `key`, creating the
    /// level if missing; again if the level is removed under it.
    fn create_in_level(
        &self,
        bucket: &crate::bucket::Bucket,
        key: &Key,
        files: Vec<NewFile<'_>>,
        durability: Durability,
    ) -> Result<bulk::BulkCreated> {
        let store = self.store();
        let new = NewOwner { mode: OBJECT_MODE, owner: self.owner };
        for _ in 0..ATTEMPTS {
            let dir = level(store, bucket, key, self.owner)?;
            match bulk::create_files(store, dir, files.clone(), durability, |_, _| Ok(new), |_| Ok(())) {
                // Emptied and removed by a delete between the walk and the
                // lock: made again.
                Err(KvError::Object(ObjectError::NoSuchObject { object })) if object == dir => continue,
                done => return done,
            }
        }
        Err(KvError::Contended { key: crate::error::lossy(&key.bytes), attempts: ATTEMPTS })
    }
}

/// The directory holding `key`'s leaf, its missing levels created (in a
/// buffered transaction of their own).
fn level(store: &Store, bucket: &crate::bucket::Bucket, key: &Key, (uid, gid): (u32, u32)) -> Result<u64> {
    let plan = Plan::make(store, bucket, key)?;
    if plan.depth == key.dirs().len() {
        return Ok(plan.dir);
    }
    with_plans(store, None, bucket, &[key], Durability::Buffered, &[PlanKind::Put], &[], |txn, plans| {
        walk_owned(txn, &plans[0], key, uid, gid)
    })
}
