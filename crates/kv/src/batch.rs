//! Batches: puts and deletes of several keys of one bucket, committed as
//! one transaction (all or none, after a crash too).

use crate::error::Result;
use crate::key::Key;
use crate::ops::{delete_in, put_in};
use crate::plan::{with_plans, PlanKind};
use crate::{Durability, Kv};

/// Puts and deletes applied in order, atomically ([`Kv::write_batch`]).
#[derive(Clone, Debug, Default)]
pub struct KvBatch {
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl KvBatch {
    /// An empty batch.
    pub fn new() -> Self {
        KvBatch::default()
    }

    /// Adds a put of `value` under `key`.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push((key.as_ref().to_vec(), Some(value.into())));
        self
    }

    /// Adds a delete of `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.ops.push((key.as_ref().to_vec(), None));
        self
    }

    /// Operations in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

impl Kv {
    /// Bytes of values a batch should hold at most: values up to the
    /// store's inline limit travel in the batch's one log record, which a
    /// larger batch could overflow (refused as too large).
    pub fn batch_budget_bytes(&self) -> u64 {
        larder_namespace::bulk::record_budget(self.store())
    }

    /// Applies `batch` to `bucket` in one transaction: every operation or
    /// none, also across a crash. Every key is checked before anything is
    /// written; a refused key or a conflict fails the whole batch. Durable
    /// when it returns with [`Durability::Durable`].
    ///
    /// ```
    /// use larder_kv::{Durability, Kv, KvBatch, KvOptions};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let kv = Kv::create(tmp.path(), KvOptions::default())?;
    /// kv.create_bucket("accounts")?;
    /// kv.put("accounts", "alice", b"100", Durability::Durable)?;
    /// let mut batch = KvBatch::new();
    /// batch.delete("alice").put("archive/alice", b"100".to_vec());
    /// kv.write_batch("accounts", &batch, Durability::Durable)?;
    /// assert_eq!(kv.get("accounts", "alice")?, None);
    /// assert_eq!(kv.get("accounts", "archive/alice")?, Some(b"100".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn write_batch(&self, bucket: impl AsRef<[u8]>, batch: &KvBatch, durability: Durability) -> Result<()> {
        let bucket = self.bucket(bucket.as_ref())?;
        let keys = batch.ops.iter().map(|(k, _)| Key::parse(k)).collect::<Result<Vec<_>>>()?;
        // A batch of deletes only must go through on a full file system.
        if let Some(smallest) = batch.ops.iter().filter_map(|(_, v)| v.as_ref().map(|v| v.len() as u64)).min() {
            self.store().check_room(smallest)?;
        }
        let refs: Vec<&Key> = keys.iter().collect();
        let owner = self.owner;
        let kinds: Vec<PlanKind> =
            batch.ops.iter().map(|(_, v)| if v.is_some() { PlanKind::Put } else { PlanKind::Delete }).collect();
        let removed =
            with_plans(self.store(), self.open_objects(), &bucket, &refs, durability, &kinds, &[], |txn, plans| {
                let mut removed = Vec::new();
                for ((plan, key), (_, value)) in plans.iter().zip(&keys).zip(&batch.ops) {
                    match value {
                        Some(v) => put_in(txn, plan, key, v, owner, None)?,
                        None => {
                            if let Some(r) = delete_in(txn, plan, key)? {
                                removed.push((key, r));
                            }
                        }
                    }
                }
                Ok(removed)
            })?;
        for (key, r) in removed {
            self.after_delete(r)?;
            self.prune_levels(bucket.id, key, durability)?;
        }
        Ok(())
    }
}
