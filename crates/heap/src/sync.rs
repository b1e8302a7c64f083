//! `sync` and `close`: mapped bytes, files and metadata made durable, in
//! the order docs/heap.md gives, so that after a crash everything before
//! the last `sync` is there.

use std::collections::BTreeMap;

use larder_io::MapAccess;
use larder_object::{Durability, LockRequest};

use crate::error::Result;

/// Bytes an object's durable-size update adds to a log record, about (key,
/// value and the batch's framing).
const RECORD_BYTES: u64 = 64;
use crate::Heap;

impl Heap {
    /// Returns once every object's mapped bytes and every metadata change
    /// made before the call are on disk: (1) every writable attached
    /// object's bytes are written back (msync), (2) the files created,
    /// grown or written since the last sync are synced, (3) the `heap/`
    /// directory is synced if files were created, (4) one durable
    /// transaction records each synced object's durable size (and commits
    /// every earlier transaction with it). Files of freed objects are then
    /// removed, their frees being durable.
    pub fn sync(&self) -> Result<()> {
        let _one = self.sync_lock.lock();
        let (mut files, dir_changed) = {
            let mut pending = self.pending.lock();
            let taken = (std::mem::take(&mut pending.files), pending.dir_changed);
            pending.dir_changed = false;
            taken
        };
        let attached: Vec<_> = self.attached.read().values().cloned().collect();
        // Sizes are read before the bytes are written back: what is synced
        // covers at least them.
        let mut sizes: BTreeMap<u64, u64> = BTreeMap::new();
        for a in &attached {
            if a.access == MapAccess::ReadWrite {
                files.insert(a.id);
            }
        }
        for &id in &files {
            if let Some(onode) = self.store.stat(id)? {
                sizes.insert(id, onode.size);
            }
        }
        let restore = |files: &std::collections::BTreeSet<u64>| {
            let mut pending = self.pending.lock();
            pending.files.extend(files.iter().copied());
            pending.dir_changed |= dir_changed;
        };
        let synced = (|| -> Result<()> {
            for a in attached.iter().filter(|a| a.access == MapAccess::ReadWrite) {
                a.flush()?;
            }
            for &id in sizes.keys() {
                match self.store.open_heap_file(id, true) {
                    Ok(file) => file.sync_data()?,
                    // Freed meanwhile: nothing to keep.
                    Err(larder_object::ObjectError::Io(e)) if e.is_not_found() => {}
                    Err(e) => return Err(e.into()),
                }
            }
            if dir_changed {
                self.store.sync_heap_dir()?;
            }
            self.commit_durable_sizes(&sizes)
        })();
        if let Err(e) = synced {
            restore(&files);
            return Err(e);
        }
        self.remove_freed_files()
    }

    /// Step 4 of `sync`: durable transactions raising the durable size of
    /// each object synced (skipping objects freed meanwhile), in records
    /// small enough for the log: every one but the last buffered, the last
    /// durable, so all are durable when it returns (the log is ordered).
    fn commit_durable_sizes(&self, sizes: &BTreeMap<u64, u64>) -> Result<()> {
        let per_record = (larder_namespace::bulk::record_budget(&self.store) / RECORD_BYTES).max(1) as usize;
        let ids: Vec<u64> = sizes.keys().copied().collect();
        let chunks: Vec<&[u64]> = ids.chunks(per_record).collect();
        if chunks.is_empty() {
            // Nothing to record: the log's sync still makes every earlier
            // transaction durable.
            return Ok(self.store.sync()?);
        }
        for (i, chunk) in chunks.iter().enumerate() {
            let durability = if i + 1 == chunks.len() { Durability::Durable } else { Durability::Buffered };
            let locks: Vec<LockRequest> = chunk.iter().map(|&id| LockRequest::Exclusive(id)).collect();
            self.store.transact_locked(&locks, durability, |txn| -> Result<()> {
                for id in chunk.iter() {
                    let Some(mut record) = txn.heap_object(*id)? else { continue };
                    let size = sizes[id];
                    if record.durable_size < size {
                        record.durable_size = size;
                        txn.put_heap_object(*id, &record)?;
                    }
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Removes the files of freed objects whose free is durable, and makes
    /// the removals durable.
    fn remove_freed_files(&self) -> Result<()> {
        let durable = self.store.durable_lsn();
        let ready: Vec<(u64, u64)> = {
            let mut pending = self.pending.lock();
            let (ready, later) = pending.removals.drain(..).partition(|(lsn, _)| *lsn <= durable);
            pending.removals = later;
            ready
        };
        if ready.is_empty() {
            return Ok(());
        }
        for (_, id) in &ready {
            self.store.remove_heap_file(*id)?;
        }
        self.store.sync_heap_dir()?;
        Ok(())
    }

    /// Syncs the heap and unmaps every object (PSHFS's mfclose). Dropping a
    /// heap without closing it unmaps without syncing: what was not synced
    /// may be lost in a crash.
    pub fn close(self) -> Result<()> {
        self.sync()?;
        let ids: Vec<u64> = self.attached.read().keys().copied().collect();
        for id in ids {
            self.detach(id)?;
        }
        Ok(())
    }
}
