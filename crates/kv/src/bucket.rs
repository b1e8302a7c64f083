//! Buckets: directories under the store's root.

use std::sync::atomic::Ordering;

use larder_namespace::{list, NamespaceError, NamespaceTxn};
use larder_object::meta::{Kind, Name};
use larder_object::{Durability, LockRequest, ROOT_ID};

use crate::error::{lossy, KvError, Result};
use crate::key::bucket_name;
use crate::Kv;

/// A bucket: its directory and its name in the root.
#[derive(Clone, Debug)]
pub(crate) struct Bucket {
    pub(crate) id: u64,
    pub(crate) name: Name,
    /// Known not to be a heap's directory ([`Kv::bucket_is_plain`]):
    /// a plan need not check it.
    pub(crate) plain: bool,
    /// A directory level known not to be a heap's ([`Kv::level_is_plain`],
    /// 0: none): a plan need not check it.
    pub(crate) plain_level: u64,
}

impl Kv {
    /// Creates bucket `bucket` (durably).
    pub fn create_bucket(&self, bucket: impl AsRef<[u8]>) -> Result<()> {
        let name = bucket_name(bucket.as_ref())?;
        self.store().check_room(0)?;
        let requests = [LockRequest::Shared(ROOT_ID), LockRequest::Name(ROOT_ID, name.as_bytes().to_vec())];
        let (uid, gid) = self.owner;
        let made = self.store().transact_locked(&requests, Durability::Durable, |txn| {
            txn.create(ROOT_ID, &name, Kind::Directory, 0o755, uid, gid)
        });
        match made {
            Ok(_) => Ok(()),
            Err(NamespaceError::Exists { .. }) => Err(KvError::BucketExists { bucket: lossy(name.as_bytes()) }),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes the empty bucket `bucket` (durably). A bucket open as a
    /// directory through a file system sharing the store is kept,
    /// nameless, until that open's last close, as after `rmdir(2)`.
    pub fn delete_bucket(&self, bucket: impl AsRef<[u8]>) -> Result<()> {
        let name = bucket_name(bucket.as_ref())?;
        let id = self.bucket_id(&name)?;
        let requests = [
            LockRequest::Shared(ROOT_ID),
            LockRequest::Name(ROOT_ID, name.as_bytes().to_vec()),
            LockRequest::Exclusive(id),
        ];
        // Held across the transaction: a bucket open through a file system
        // sharing the store is kept, nameless, until its last close there.
        let held = self.open_objects().map(|o| o.hold(&[id]));
        let open = held.as_ref().is_some_and(|h| h.is_open(id));
        let done =
            self.store().transact_locked(&requests, Durability::Durable, |txn| txn.unlink(ROOT_ID, &name, id, open));
        match done {
            Ok((u, _)) => {
                if let Some(held) = held.filter(|_| open && u.orphaned) {
                    held.mark_orphaned(id);
                }
                Ok(())
            }
            Err(NamespaceError::NotEmpty { .. }) => Err(KvError::BucketNotEmpty { bucket: lossy(name.as_bytes()) }),
            Err(NamespaceError::NotFound { .. }) => Err(KvError::NoSuchBucket { bucket: lossy(name.as_bytes()) }),
            Err(e) => Err(e.into()),
        }
    }

    /// Every bucket's name, in byte order.
    pub fn buckets(&self) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        let mut after: Option<Name> = None;
        loop {
            let page = list::list(self.store(), ROOT_ID, after.as_ref(), 1024)?;
            let Some((last, _)) = page.last() else { break };
            after = Some(last.clone());
            out.extend(page.into_iter().filter(|(_, d)| d.kind == Kind::Directory).map(|(n, _)| n.into_bytes()));
        }
        Ok(out)
    }

    /// The directory of bucket `name`.
    pub(crate) fn bucket_id(&self, name: &Name) -> Result<u64> {
        match list::lookup(self.store(), ROOT_ID, name)? {
            Some(d) if d.kind == Kind::Directory => Ok(d.child),
            _ => Err(KvError::NoSuchBucket { bucket: lossy(name.as_bytes()) }),
        }
    }

    /// Bucket `bucket`, checking its name.
    pub(crate) fn bucket(&self, bucket: &[u8]) -> Result<Bucket> {
        let name = bucket_name(bucket)?;
        let id = self.bucket_id(&name)?;
        Ok(Bucket {
            id,
            name,
            plain: self.plain_bucket.load(Ordering::Relaxed) == id,
            plain_level: self.plain_level.load(Ordering::Relaxed),
        })
    }

    /// Remembers that a plan found `bucket` not to be a heap's directory.
    pub(crate) fn bucket_is_plain(&self, bucket: &Bucket) {
        if !bucket.plain {
            self.plain_bucket.store(bucket.id, Ordering::Relaxed);
        }
    }

    /// Remembers that a plan found level `dir` under `bucket` not to be a
    /// heap's directory (a plan checks every level it walks, or finds it
    /// remembered).
    pub(crate) fn level_is_plain(&self, bucket: &Bucket, dir: u64) {
        if dir != bucket.id && dir != bucket.plain_level {
            self.plain_level.store(dir, Ordering::Relaxed);
        }
    }
}
