//! `sync` and `close`: mapped bytes, files and metadata made durable, in
//! the order docs/heap.md gives, so that after a crash everything before
//! the last `sync` is there.

use std::collections::BTreeMap;
use std::sync::Arc;

use larder_io::MapAccess;
use larder_object::meta::{HEAP_OBJECT_ARENA, HEAP_OBJECT_RECYCLED};
use larder_object::{Durability, LockRequest};

use crate::arena_glue::Staged;
use crate::error::Result;
use crate::heap::Spare;
use crate::images::{ImageChanges, OneFlush};
use crate::limits::{MIN_RESERVE_BYTES, SPARE_FILES, SPARE_KEPT_BYTES, SPARE_KEPT_FILE_BYTES, SPARE_MAPPINGS};

/// Bytes an object's durable-size update adds to a log record, about (key,
/// value and the batch's framing).
const RECORD_BYTES: u64 = 64;
use crate::Heap;

impl Heap {
    /// Returns once every object's mapped bytes and every metadata change
    /// made before the call are on disk: (1) every writable attached
    /// object's bytes are written back (msync), (2) the files created,
    /// grown or written since the last sync are synced (but for those a
    /// real mapping's msync covered whole), (3) the `heap/`
    /// directory is synced if files were created, unless the storage says
    /// step 1 or 2's sync of a new file made its name durable too (ext4)
    /// and no file was recycled (renamed),
    /// (4) one durable
    /// transaction records each synced object's durable size (and commits
    /// every earlier transaction with it). Files of freed objects are then
    /// removed (or kept emptied for reuse), their frees being durable.
    ///
    /// When no file was created, grown, written or closed since the last
    /// sync and every object it syncs is attached writable and hole-free,
    /// steps 1-3 are replaced by images of the pages that changed, carried
    /// in step 4's transaction and written into the files at recovery: one
    /// device flush instead of two (docs/heap.md, "One flush per sync").
    /// So too when the only files changed are of objects created since
    /// their last sync, each small enough to image every page of
    /// ("whole objects"): recovery makes their files again from the images.
    pub fn sync(&self) -> Result<()> {
        self.sync_flushing(false)
    }

    /// [`Heap::sync`]; with `twice`, never with one flush (`close`: it
    /// leaves no page image for the next open to replay).
    fn sync_flushing(&self, twice: bool) -> Result<()> {
        let _one = self.shared.sync_lock.lock();
        let (mut ids, mut dir_changed, mut renamed, mut whole) = {
            let mut pending = self.shared.pending.lock();
            let ids = std::mem::take(&mut pending.files);
            let dir_changed = std::mem::take(&mut pending.dir_changed);
            let renamed = std::mem::take(&mut pending.renamed);
            // Files created since their last sync and nothing else changed
            // (no rename: a recycled file's old name may outlive a crash):
            // they may be imaged whole.
            let whole = !twice && !renamed && !ids.is_empty() && ids.is_subset(&pending.created);
            (ids, dir_changed, renamed, whole)
        };
        let taken = ids.clone();
        ids.extend(self.dirty_arenas());
        let attached: Vec<_> = self.shared.attached.read().values().cloned().collect();
        {
            // An object made (a file created, or a spare renamed for it)
            // after `pending` was taken is synced too, being attached or its
            // allocator dirty: the directory's sync makes its name durable
            // with the size this sync commits.
            let pending = self.shared.pending.lock();
            let made_since = |id: &u64| pending.created.contains(id) && !taken.contains(id);
            if ids.iter().chain(attached.iter().map(|a| &a.id)).any(made_since) {
                dir_changed = true;
                renamed = true;
                whole = false;
            }
        }
        // Files created, grown, written or closed since the last sync need
        // their own sync: this one flushes twice, unless they are all new
        // objects imaged whole.
        let files_changed = !taken.is_empty() || dir_changed || renamed;
        // Files whose data or length changed outside a real mapping are
        // synced; a real mapping's msync(MS_SYNC) makes its bytes durable
        // itself (an emulated region's flush only writes them).
        let mut to_sync = ids.clone();
        for a in attached.iter().filter(|a| a.access == MapAccess::ReadWrite) {
            ids.insert(a.id);
            if a.region().is_emulated() {
                to_sync.insert(a.id);
            }
        }
        // Sizes are read before the bytes are written back: what is synced
        // covers at least them. An attached object may be ahead of its
        // onode (allocator growth, committed here).
        let mut sizes: BTreeMap<u64, u64> = BTreeMap::new();
        for &id in &ids {
            if let Some(onode) = self.shared.store.stat(id)? {
                let in_memory = self.shared.attached.read().get(&id).map_or(0, |a| a.size());
                sizes.insert(id, onode.size.max(in_memory));
            }
        }
        let mut staged = BTreeMap::new();
        if !twice && (!files_changed || whole) && !sizes.is_empty() {
            // The files changed are imaged whole, or there are none.
            let outcome = self.try_one_flush(&attached, &sizes, &taken);
            if whole && !matches!(outcome, Ok(OneFlush::Fallback(_))) {
                // Done: their files are still not synced, so the next sync
                // flushes twice (it syncs them, their names, and deletes
                // their images). Failed: as if this sync had not run.
                let mut pending = self.shared.pending.lock();
                pending.files.extend(taken.iter().copied());
                pending.dir_changed |= dir_changed;
                if outcome.is_ok() {
                    pending.created.retain(|id| !taken.contains(id));
                }
            }
            match outcome {
                Ok(OneFlush::Done) => return self.remove_freed_files(),
                Ok(OneFlush::Fallback(records)) => staged = records,
                Err(e) => return Err(e),
            }
        }
        let deleted = self.imaged(sizes.keys().copied());
        let mut hole_free = BTreeMap::new();
        let synced = (|| -> Result<()> {
            hole_free = self.fill_holes(&attached, &sizes)?;
            for a in attached.iter().filter(|a| a.access == MapAccess::ReadWrite) {
                let region = a.region();
                a.flush()?;
                // msync(MS_SYNC) of a real mapping is an fdatasync of the
                // range it covers (the file's data and length, whoever
                // wrote them): if that covers the size committed below,
                // syncing the file again would only cost a device flush.
                if !region.is_emulated() && sizes.get(&a.id).is_some_and(|&size| region.len() >= size) {
                    to_sync.remove(&a.id);
                }
            }
            for id in sizes.keys().filter(|id| to_sync.contains(id)) {
                self.sync_object_file(*id)?;
            }
            // Every file created since the last sync is in `ids`: synced
            // above (msync or fdatasync) unless freed since, and then its
            // name need not last. Where such a sync makes the file's name
            // durable too, the directory's own sync would only flush again.
            // A renamed (recycled) file's sync need not keep its new name.
            // Images this process does not know may be a whole object's
            // (a dropped handle's sync): its name may not be durable yet,
            // and deleting them leaves only the file.
            let unknown = deleted.iter().filter(|(_, pages)| pages.is_none());
            let sync_dir =
                renamed || ((dir_changed || self.deletes_images(unknown)?) && !self.file_sync_keeps_entry()?);
            if sync_dir {
                self.shared.store.sync_heap_dir()?;
            }
            // Records taken before the flush name only blocks it covered;
            // the others are taken now, after it.
            for &id in sizes.keys() {
                if let std::collections::btree_map::Entry::Vacant(slot) = staged.entry(id) {
                    if let Some((records, _)) = self.take_arena_records_and_fresh(id) {
                        slot.insert(records);
                    }
                }
            }
            let changes = ImageChanges { put: BTreeMap::new(), delete: deleted.clone() };
            self.commit_synced(&sizes, std::mem::take(&mut staged), &changes)
        })();
        self.after_two_flush(synced.is_ok(), &sizes, &deleted, &hole_free);
        if synced.is_ok() {
            // Their files, and the names of those created, are durable now.
            self.shared.pending.lock().created.retain(|id| !ids.contains(id));
        }
        if let Err(e) = synced {
            self.restage_arenas(staged.keys().copied());
            let mut pending = self.shared.pending.lock();
            pending.files.extend(ids.iter().copied());
            pending.dir_changed |= dir_changed;
            pending.renamed |= renamed;
            return Err(e);
        }
        self.remove_freed_files()
    }

    /// Syncs object `id`'s file (fdatasync); one freed meanwhile has
    /// nothing to keep.
    pub(crate) fn sync_object_file(&self, id: u64) -> Result<()> {
        match self.shared.store.open_heap_file(id, true) {
            Ok(file) => Ok(file.sync_data()?),
            Err(larder_object::ObjectError::Io(e)) if e.is_not_found() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether syncing a file created in `heap/` made its name durable
    /// (`Store::heap_file_sync_keeps_entry`, asked once per open heap).
    pub(crate) fn file_sync_keeps_entry(&self) -> Result<bool> {
        if let Some(&kept) = self.shared.file_sync_keeps_entry.get() {
            return Ok(kept);
        }
        let kept = self.shared.store.heap_file_sync_keeps_entry()?;
        Ok(*self.shared.file_sync_keeps_entry.get_or_init(|| kept))
    }

    /// Step 4 of `sync`: durable transactions that record, per object
    /// synced, its durable size, its size if the allocator grew it, its
    /// allocator's changed records (`staged`, taken by the caller) and its
    /// page image changes (skipping objects freed meanwhile). One
    /// object's changes are in one transaction. Transactions are kept to
    /// the log's record budget: every one but the last buffered, the last
    /// durable, so all are durable when it returns (the log is ordered);
    /// one object whose records alone exceed the budget commits as an index
    /// run (atomic and durable too).
    pub(crate) fn commit_synced(
        &self,
        sizes: &BTreeMap<u64, u64>,
        staged: BTreeMap<u64, Staged>,
        images: &ImageChanges,
    ) -> Result<()> {
        if sizes.is_empty() {
            // The log's sync still makes every earlier transaction durable.
            return Ok(self.shared.store.sync()?);
        }
        let budget = larder_namespace::bulk::record_budget(&self.shared.store);
        let mut chunks: Vec<(Vec<u64>, u64)> = vec![(Vec::new(), 0)];
        for &id in sizes.keys() {
            let cost = RECORD_BYTES + staged.get(&id).map_or(0, Staged::bytes) + images.bytes(id);
            match chunks.last_mut() {
                Some((ids, bytes)) if ids.is_empty() || *bytes + cost <= budget => {
                    ids.push(id);
                    *bytes += cost;
                }
                _ => chunks.push((vec![id], cost)),
            }
        }
        let mut done = 0;
        let result = (|| -> Result<()> {
            for (i, (chunk, bytes)) in chunks.iter().enumerate() {
                let locks: Vec<LockRequest> = chunk.iter().map(|&id| LockRequest::Exclusive(id)).collect();
                let commit = |txn: &mut larder_object::Transaction<'_>| -> Result<()> {
                    for id in chunk {
                        // An object freed meanwhile has no record: no images.
                        if self.record_synced(txn, *id, sizes[id], staged.get(id))? {
                            images.write(txn, *id)?;
                        }
                    }
                    Ok(())
                };
                if *bytes > budget {
                    self.shared.store.transact_as_run(&locks, commit)?;
                } else {
                    let last = i + 1 == chunks.len();
                    let durability = if last { Durability::Durable } else { Durability::Buffered };
                    self.shared.store.transact_locked(&locks, durability, commit)?;
                }
                done = i + 1;
            }
            if chunks.last().is_some_and(|(_, bytes)| *bytes > budget) {
                // The last chunk was a run: the earlier buffered ones still
                // need the log's sync.
                self.shared.store.sync()?;
            }
            Ok(())
        })();
        if result.is_err() {
            let lost = chunks[done..].iter().flat_map(|(ids, _)| ids.iter().copied());
            self.restage_arenas(lost.filter(|id| staged.contains_key(id)));
        } else {
            // Every record taken so far is durable: taken here, or by a
            // grow or an allocator's own sync, which commit durably under
            // the allocator's lock.
            for id in staged.keys() {
                if let Some(slot) = self.shared.arenas.read().get(id).cloned() {
                    slot.arena.lock().records_durable();
                }
            }
        }
        result
    }

    /// One object's part of `commit_synced`; whether the object still
    /// exists (one freed meanwhile is skipped).
    pub(crate) fn record_synced(
        &self,
        txn: &mut larder_object::Transaction<'_>,
        id: u64,
        size: u64,
        staged: Option<&Staged>,
    ) -> Result<bool> {
        let Some(mut record) = txn.heap_object(id)? else { return Ok(false) };
        let Some(mut onode) = txn.onode(id)? else { return Ok(false) };
        // The size committed covers every range the records claim, even
        // one claimed after the size was read.
        let committed = size.max(staged.map_or(0, |s| s.claimed_end));
        if onode.size < committed {
            onode.size = committed;
            txn.put_onode(id, &onode)?;
        }
        let before = record;
        record.durable_size = record.durable_size.max(size);
        // Its file was synced: a recycled file's bytes are the object's now.
        record.flags &= !HEAP_OBJECT_RECYCLED;
        if let Some(staged) = staged {
            self.write_staged(txn, id, staged)?;
            if staged.claimed {
                record.flags |= HEAP_OBJECT_ARENA;
            }
        }
        if record != before {
            txn.put_heap_object(id, &record)?;
        }
        Ok(true)
    }

    /// Keeps as spares or removes the files of freed objects whose free is
    /// durable, and makes the removals durable (with those `free` made
    /// since the last sync).
    fn remove_freed_files(&self) -> Result<()> {
        let ready = self.take_durably_freed();
        let removed = std::mem::take(&mut self.shared.pending.lock().removed);
        let mut left = ready.iter().copied().peekable();
        let outcome = (|| -> Result<()> {
            let mut now_removed = false;
            while let Some(&(_, id)) = left.peek() {
                now_removed |= !self.keep_or_remove(id)?;
                left.next();
            }
            if removed || now_removed {
                self.shared.store.sync_heap_dir()?;
            }
            Ok(())
        })();
        if outcome.is_err() {
            // Tried again at the next sync (a removal is idempotent).
            let mut pending = self.shared.pending.lock();
            pending.removals.extend(left);
            pending.removed = true;
        }
        outcome
    }

    /// The file of freed object `id`, whose free is durable: kept among
    /// the spares if there is room and nothing else holds it open or
    /// mapped (a client may still map a freed object: a new object's bytes
    /// must not appear there), else removed. Whether it was kept. A kept
    /// file is emptied unless it is small and the spares' kept bytes
    /// allow (`SPARE_KEPT_FILE_BYTES`, `SPARE_KEPT_BYTES`): then a copy
    /// overwrites it in place.
    /// A kept file is renamed at once to a new object id, the one the
    /// `alloc` that takes it will use, and mapped: that `alloc` then only
    /// sizes it, and this runs in `free` or `sync`, off `alloc`'s path.
    fn keep_or_remove(&self, id: u64) -> Result<bool> {
        let store = &self.shared.store;
        let (room, kept_bytes, mapped) = {
            let pending = self.shared.pending.lock();
            (pending.spares.len() < SPARE_FILES, pending.spare_kept_bytes(), pending.mapped_spares())
        };
        let map = mapped < SPARE_MAPPINGS;
        // Only a mapped spare keeps bytes: a copy overwrites them through it.
        let keep_bytes = match map {
            true => SPARE_KEPT_FILE_BYTES.min(SPARE_KEPT_BYTES.saturating_sub(kept_bytes)),
            false => 0,
        };
        if room {
            if let Some(kept) = store.take_heap_file_if_unshared(id, keep_bytes)? {
                let spare = store.allocate_object_id()?;
                store.rename_heap_file(id, spare)?;
                let mut region = match map {
                    true => store.map_heap_file(spare, MIN_RESERVE_BYTES, MapAccess::ReadWrite).ok(),
                    false => None,
                };
                if let Some(region) = region.as_mut() {
                    // The faults of a copy's stores into the kept pages are
                    // taken here, off the copy's path.
                    region.populate_for_stores();
                    region.expose_none();
                }
                self.shared.pending.lock().spares.push(Spare { id: spare, region, kept });
                return Ok(true);
            }
        }
        store.remove_heap_file(id)?;
        Ok(false)
    }

    /// The freed objects whose free is durable now, taken from the pending
    /// removals.
    fn take_durably_freed(&self) -> Vec<(u64, u64)> {
        let durable = self.shared.store.durable_lsn();
        let mut pending = self.shared.pending.lock();
        let (ready, later) = pending.removals.drain(..).partition(|(lsn, _)| *lsn <= durable);
        pending.removals = later;
        ready
    }

    /// Removes, without syncing the directory, the files of freed objects
    /// whose free the log has made durable since (its background sync, or
    /// any durable commit), so that a program that allocates and frees
    /// between syncs does not pile up files to remove all at once: without
    /// a journal ext4 walks every inode freed in the last minutes at each
    /// create in that block group (docs/heap.md, "Metadata and the log").
    /// The next `sync` makes the removals durable; one lost in a crash
    /// leaves a file without a record, which the next open removes. A
    /// removal that fails is left to that `sync`, which reports it.
    pub(crate) fn remove_files_freed_durably(&self) {
        let ready = self.take_durably_freed();
        if ready.is_empty() {
            return;
        }
        let mut failed = Vec::new();
        let mut removed = false;
        for (lsn, id) in ready {
            match self.keep_or_remove(id) {
                Ok(kept) => removed |= !kept,
                Err(_) => failed.push((lsn, id)),
            }
        }
        let mut pending = self.shared.pending.lock();
        pending.removed |= removed || !failed.is_empty();
        pending.removals.extend(failed);
    }

    /// Removes the spare files (closing: a closed store keeps no file
    /// without a record), durably.
    fn remove_spares(&self) -> Result<()> {
        let spares = std::mem::take(&mut self.shared.pending.lock().spares);
        if spares.is_empty() {
            return Ok(());
        }
        for spare in spares {
            drop(spare.region);
            self.shared.store.remove_heap_file(spare.id)?;
        }
        Ok(self.shared.store.sync_heap_dir()?)
    }

    /// Syncs the heap and, if this is its last handle in the process,
    /// unmaps every object (PSHFS's mfclose). Dropping a heap without
    /// closing it unmaps without syncing: what was not synced may be lost in
    /// a crash.
    pub fn close(self) -> Result<()> {
        self.sync_flushing(true)?;
        // Other handles of this heap in the process keep its mappings.
        if Arc::strong_count(&self.shared) == 1 {
            self.remove_spares()?;
            // The sync wrote back and synced every writable mapping.
            let closed = self.shared.closed.lock().clear();
            self.shared.attached.write().clear();
            self.shared.readers.write().clear();
            drop(closed);
        }
        Ok(())
    }
}
