//! Write transactions: one at a time, seeing their own writes, committed
//! as one intent-log record or not at all.
//!
//! Serializability is by construction: a write transaction holds the
//! writer lock from its start until its record is ordered in the log (and
//! applied to the index), so transactions run one after another in LSN
//! order and each reads the state the previous ones left. The lock is let
//! go before the wait for durability: a durable transaction then waits
//! for the log's sync while the next one runs, and concurrent durable
//! transactions share one sync (the log's group commit). A transaction
//! that read a write not yet durable is durable only with it: the log
//! makes records durable in LSN order.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use larder_index::WriteBatch;
use larder_object::meta::{encode_tree_record, tree_count_key};
use larder_object::Durability;

use crate::start_hint::Inserted;
use crate::writer::WriterGuard;

use crate::iter::{entry_bounds, TxIter};
use crate::tree::{check_key, check_value, entry_key, with_entry_key};
use crate::{KeyRange, Result, Shared, Tree, TreesError};

/// A tree's entry count in a transaction: as committed, and now.
#[derive(Clone, Copy, Debug)]
struct Count {
    committed: u64,
    now: u64,
}

/// The committed count of `tree`, from the trees' counts or, the first
/// time, from the index. Only under the writer lock (see `counts`).
fn committed_count(shared: &Shared, tree: u64) -> Result<u64> {
    if let Some(n) = shared.serial.counts.get(tree) {
        return Ok(n);
    }
    let n = crate::read::committed_count(&shared.store.index().get(&tree_count_key(tree))?)?;
    shared.serial.counts.set(tree, n);
    Ok(n)
}

/// A write transaction (see the module doc). Dropping it without
/// [`WriteTransaction::commit`] aborts it.
pub struct WriteTransaction<'a> {
    shared: &'a Shared,
    /// Held (for its drop) until the transaction commits or aborts.
    _writer: WriterGuard<'a>,
    durability: Durability,
    /// Pending writes by index key: `None` removes.
    pending: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Trees cleared here: their committed entries are invisible.
    cleared: BTreeSet<u64>,
    counts: HashMap<u64, Count>,
    /// Bytes of keys and values pending (for the commit size limit).
    pending_bytes: u64,
    /// The index keys inserted per tree (for the trees' start hints,
    /// told before the commit becomes visible).
    inserted: HashMap<u64, Inserted>,
}

impl<'a> WriteTransaction<'a> {
    pub(crate) fn begin(shared: &'a Shared, durability: Durability) -> Result<WriteTransaction<'a>> {
        let writer = shared.serial.writer.acquire()?;
        Ok(WriteTransaction {
            shared,
            _writer: writer,
            durability,
            pending: BTreeMap::new(),
            cleared: BTreeSet::new(),
            counts: HashMap::new(),
            pending_bytes: 0,
            inserted: HashMap::new(),
        })
    }

    /// Refuses a handle on a tree deleted since it was taken.
    fn check_tree(&self, tree: &Tree) -> Result<()> {
        if self.shared.serial.catalog.read().exists(tree.id()) {
            Ok(())
        } else {
            Err(TreesError::NoSuchTree { name: tree.name().to_string() })
        }
    }

    /// The value of `key` in `tree`, with this transaction's own writes.
    pub fn get(&self, tree: &Tree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        with_entry_key(tree.id(), key, |full| self.get_full(tree.id(), full))
    }

    fn get_full(&self, tree: u64, full: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.pending.get(full) {
            return Ok(v.clone());
        }
        if self.cleared.contains(&tree) {
            return Ok(None);
        }
        Ok(self.shared.store.index().get(full)?)
    }

    fn count(&mut self, tree: u64) -> Result<&mut Count> {
        let shared = self.shared;
        match self.counts.entry(tree) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) => {
                let committed = committed_count(shared, tree)?;
                Ok(e.insert(Count { committed, now: committed }))
            }
        }
    }

    /// The number of entries in `tree`, with this transaction's own writes
    /// (exact: counts are kept by every commit).
    pub fn len(&self, tree: &Tree) -> Result<u64> {
        if let Some(c) = self.counts.get(&tree.id()) {
            return Ok(c.now);
        }
        committed_count(self.shared, tree.id())
    }

    /// Whether `tree` has no entries, with this transaction's own writes.
    pub fn is_empty(&self, tree: &Tree) -> Result<bool> {
        Ok(self.len(tree)? == 0)
    }

    /// Sets `key` to `value` in `tree`. A key or value over its limit, or
    /// an insert that would make the transaction too large to commit
    /// ([`TreesError::TransactionTooLarge`]), is refused and changes
    /// nothing (the transaction's other writes stay).
    pub fn insert(&mut self, tree: &Tree, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key)?;
        check_value(value)?;
        self.check_tree(tree)?;
        let full = entry_key(tree.id(), key);
        // Refused now rather than at commit, so a runaway transaction does
        // not grow its pending writes without bound.
        let bytes = self.pending_bytes + (full.len() + value.len()) as u64;
        if bytes > self.shared.max_commit_bytes {
            return Err(TreesError::TransactionTooLarge { bytes, limit: self.shared.max_commit_bytes });
        }
        let existed = self.get_full(tree.id(), &full)?.is_some();
        let count = self.count(tree.id())?;
        if !existed {
            count.now += 1;
        }
        self.pending_bytes += (full.len() + value.len()) as u64;
        self.inserted.entry(tree.id()).or_default().add(&full);
        self.pending.insert(full, Some(value.to_vec()));
        Ok(())
    }

    /// Removes `key` from `tree` (nothing if it is absent).
    pub fn remove(&mut self, tree: &Tree, key: &[u8]) -> Result<()> {
        check_key(key)?;
        self.check_tree(tree)?;
        let full = entry_key(tree.id(), key);
        if self.get_full(tree.id(), &full)?.is_none() {
            return Ok(());
        }
        let count = self.count(tree.id())?;
        count.now = count.now.saturating_sub(1);
        if self.cleared.contains(&tree.id()) {
            // The clear's range delete removes the committed entry.
            self.pending.remove(&full);
        } else {
            self.pending_bytes += full.len() as u64;
            self.pending.insert(full, None);
        }
        Ok(())
    }

    /// Removes every entry of `tree`: one range delete, whatever its size.
    pub fn clear(&mut self, tree: &Tree) -> Result<()> {
        self.check_tree(tree)?;
        let (start, end) = entry_bounds(tree.id());
        let doomed: Vec<Vec<u8>> = self.pending.range(start..end).map(|(k, _)| k.clone()).collect();
        for k in doomed {
            self.pending.remove(&k);
        }
        self.cleared.insert(tree.id());
        self.count(tree.id())?.now = 0;
        Ok(())
    }

    /// The entries of `tree` in `range`, forward or backward, with this
    /// transaction's own writes as of this call. The iterator borrows the
    /// transaction, so no write can happen while it lives.
    pub fn range(&self, tree: &Tree, range: KeyRange<'_>, forward: bool) -> Result<TxIter<'_>> {
        let (start, end) = crate::iter::index_bounds(tree.id(), range)?;
        if crate::iter::is_empty_range(&start, &end) {
            return Ok(TxIter::new(Vec::new(), None, forward));
        }
        let pending: Vec<(Vec<u8>, Option<Vec<u8>>)> =
            self.pending.range((start.clone(), end.clone())).map(|(k, v)| (k.clone(), v.clone())).collect();
        let index = if self.cleared.contains(&tree.id()) {
            None
        } else {
            // The committed part may skip what the start hint knows is not
            // live (this transaction's own inserts are in `pending`).
            let mut index_start = start;
            if forward {
                let index = self.shared.store.index();
                let plan = self.shared.serial.hints.plan(tree.id(), None);
                crate::iter::raise_start(&mut index_start, plan, |key| index.get(key))?;
            }
            if crate::iter::is_empty_range(&index_start, &end) {
                None
            } else {
                Some(self.shared.store.index().range(
                    index_start.as_ref().map(Vec::as_slice),
                    end.as_ref().map(Vec::as_slice),
                    forward,
                )?)
            }
        };
        Ok(TxIter::new(pending, index, forward))
    }

    /// Every entry of `tree`, forward or backward.
    pub fn iter(&self, tree: &Tree, forward: bool) -> Result<TxIter<'_>> {
        self.range(tree, (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded), forward)
    }

    /// Commits every write as one record, atomically; returns once it is
    /// visible to every reader, and, if the transaction is durable, once it
    /// is on disk. A failed commit wrote nothing unless the store reports
    /// itself poisoned (then a reopen recovers a prefix of what was
    /// committed, as after a crash).
    pub fn commit(self) -> Result<()> {
        let durable = self.durability == Durability::Durable;
        let shared = self.shared;
        if let Some(lsn) = self.commit_unsynced()? {
            if durable {
                shared.store.sync_to(lsn)?;
            }
        }
        Ok(())
    }

    /// Commits as [`WriteTransaction::commit`] does but returns once the
    /// commit is visible, whatever the transaction's durability, with the
    /// log position (LSN) that makes it durable (`None`: nothing was
    /// written).
    /// For a caller that waits for the disk elsewhere ([`Trees::sync_to`]
    /// from a thread of its own, say) rather than in the committing thread.
    /// Later commits may read its writes before they are durable; the log
    /// makes records durable in order, so waiting for a later commit's
    /// position covers this one too.
    ///
    /// [`Trees::sync_to`]: crate::Trees::sync_to
    pub fn commit_unsynced(mut self) -> Result<Option<u64>> {
        let batch = self.batch()?;
        if batch.is_empty() {
            return Ok(None);
        }
        // Inserts reach their trees' start hints before they are visible.
        let in_flight = self.shared.serial.hints.inserting(std::mem::take(&mut self.inserted));
        let committed = self.shared.store.commit(&batch, Durability::Buffered);
        drop(in_flight);
        // Still under the writer lock: the counts as this commit left them.
        let counts = &self.shared.serial.counts;
        match committed {
            Ok(lsn) => {
                for (&tree, c) in &self.counts {
                    counts.set(tree, c.now);
                }
                // Dropping `self` releases the writer lock: the next
                // transaction may start while this one waits for the disk.
                Ok(Some(lsn))
            }
            Err(e) => {
                counts.forget(self.counts.keys().copied());
                Err(e.into())
            }
        }
    }

    fn batch(&mut self) -> Result<WriteBatch> {
        let mut batch = WriteBatch::new();
        for &tree in &self.cleared {
            let (start, end) = entry_bounds(tree);
            batch.delete_range(start, end);
        }
        for (k, v) in std::mem::take(&mut self.pending) {
            match v {
                Some(v) => batch.put(k, v),
                None => batch.delete(k),
            };
        }
        for (&tree, c) in &self.counts {
            if c.now != c.committed || self.cleared.contains(&tree) {
                batch.put(tree_count_key(tree), encode_tree_record(c.now));
            }
        }
        let bytes = batch.payload_bytes();
        if bytes > self.shared.max_commit_bytes {
            return Err(TreesError::TransactionTooLarge { bytes, limit: self.shared.max_commit_bytes });
        }
        Ok(batch)
    }

    /// The durability [`WriteTransaction::commit`] will use: the one the
    /// transaction began with unless changed by
    /// [`WriteTransaction::set_durability`].
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Changes the durability [`WriteTransaction::commit`] will use. A
    /// caller that learns only from its writes whether they must be on
    /// disk when the commit returns (derived state that a later commit or
    /// a replay of its inputs rebuilds, say) decides here, before
    /// committing. A buffered commit is still ordered in the log: every
    /// later durable commit makes it durable too, and a crash loses at most
    /// a suffix of the commits.
    pub fn set_durability(&mut self, durability: Durability) {
        self.durability = durability;
    }

    /// Aborts: writes nothing (as dropping does).
    pub fn abort(self) {}

    /// Bytes of keys and values written so far (an estimate of the
    /// commit's size, for callers splitting large jobs).
    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes
    }
}
