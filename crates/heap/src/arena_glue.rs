//! Where the heap meets the object allocator (`arena`): `alloc_in` and
//! `free_in` for small blocks inside an object, the generation check of
//! `deref`, and the allocator records `sync` writes.
//!
//! Each object's allocator is loaded from its records on first use and kept
//! for the heap's life (not only while attached: its changes wait for the
//! next `sync`). Growth for the allocator extends the object's file at once
//! but commits the object's size only at `sync`, with the spans: a crash
//! before cuts the file back (recovery) and the allocator state with it.

use std::sync::Arc;

use larder_io::MapAccess;
use larder_object::meta::{heap_span_key, heap_span_prefix, prefix_end, HeapObject, MetaKey};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use larder_object::Transaction;

use crate::arena::{Arena, ArenaError, HEADER_KEY};
use crate::error::{invalid, HeapError, Result};
use crate::limits::{MAX_ALIGN, MAX_OBJECT_BYTES};
use crate::{Heap, ObjectId, PPtr};

/// Bytes of a page: spans are whole pages.
const PAGE: u64 = 4096;

/// An object's allocator, with what `sync` must write of it.
pub(crate) struct ArenaSlot {
    pub(crate) arena: Mutex<Arena>,
    /// Changed since its records were last taken (set under the lock).
    pub(crate) dirty: AtomicBool,
    /// A transaction that took its records failed: write them all.
    pub(crate) rewrite: AtomicBool,
    /// Blocks handed out since the last sync took them (pushed under the
    /// allocator's lock): a one-flush sync images their pages.
    pub(crate) fresh: Mutex<FreshBlocks>,
}

/// Blocks an allocator handed out since a sync last took them
/// (`images::FRESH_BLOCKS` at most, then only that there were more).
#[derive(Default)]
pub(crate) struct FreshBlocks {
    /// (offset, length) of each block.
    pub(crate) blocks: Vec<(u64, u64)>,
    /// More blocks than the list holds were handed out.
    pub(crate) overflow: bool,
}

/// Hashes object ids by one multiplication: ids are distinct integers, and
/// SipHash on every `alloc_in` cost more than the allocator itself.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A map keyed by object id.
pub(crate) type IdMap<V> = std::collections::HashMap<u64, V, std::hash::BuildHasherDefault<IdHasher>>;

/// Allocator records taken for a transaction.
pub(crate) struct Staged {
    /// (span key, value or `None` for a delete).
    pub(crate) records: Vec<(u64, Option<Vec<u8>>)>,
    /// The records are the whole state: the committed ones go first.
    pub(crate) rewrite: bool,
    /// The allocator has claimed space (the object record's arena flag).
    pub(crate) claimed: bool,
    /// Where the last range the allocator claimed ends: the object's size
    /// committed with the records must reach it.
    pub(crate) claimed_end: u64,
}

impl Staged {
    /// Bytes the records add to a log record, about.
    pub(crate) fn bytes(&self) -> u64 {
        self.records.iter().map(|(_, v)| 32 + v.as_ref().map_or(0, |v| v.len() as u64)).sum()
    }
}

/// What the allocator says of a pointer.
pub(crate) enum Check {
    /// It names user bytes or a live block.
    Live,
    /// It names a block that was freed (or never handed out).
    Stale,
}

/// Generation checks a heap answers from the index before it loads the
/// allocator of the object asked about (see [`Heap::arena_check`]).
pub(crate) const LAZY_CHECKS: u64 = 256;

/// What `arena` says of `len` bytes at `offset` with `generation`.
fn verdict(arena: &Arena, offset: u64, len: u64, generation: u64) -> Check {
    match generation {
        0 if arena.is_claimed(offset, len) => Check::Stale,
        0 => Check::Live,
        _ => match arena.check(offset, len, generation) {
            Ok(_) => Check::Live,
            Err(_) => Check::Stale,
        },
    }
}

fn arena_error(object: u64, e: ArenaError) -> HeapError {
    HeapError::Arena { object, source: Box::new(e) }
}

impl Heap {
    /// The allocator of object `id`, loaded from its records if this heap
    /// has not used it yet.
    pub(crate) fn arena(&self, id: u64) -> Result<Arc<ArenaSlot>> {
        if let Some(a) = self.shared.arenas.read().get(&id) {
            return Ok(a.clone());
        }
        let records = self.span_records_in_index(id)?;
        let arena = Arena::load(records.iter().map(|(k, v)| (*k, v.as_slice()))).map_err(|e| arena_error(id, e))?;
        let slot = ArenaSlot {
            arena: Mutex::new(arena),
            dirty: AtomicBool::new(false),
            rewrite: AtomicBool::new(false),
            fresh: Mutex::new(FreshBlocks::default()),
        };
        Ok(self.shared.arenas.write().entry(id).or_insert_with(|| Arc::new(slot)).clone())
    }

    /// The allocator records of `id` as committed: (span key, value).
    pub(crate) fn span_records_in_index(&self, id: u64) -> Result<Vec<(u64, Vec<u8>)>> {
        let prefix = heap_span_prefix(id);
        let end = prefix_end(&prefix).unwrap_or_default();
        let mut out = Vec::new();
        let range = self.shared.store.index().range(
            std::ops::Bound::Included(&prefix[..]),
            std::ops::Bound::Excluded(&end[..]),
            true,
        )?;
        for kv in range {
            let (k, v) = kv?;
            if let MetaKey::HeapSpan { span, .. } = MetaKey::decode(&k)? {
                out.push((span, v));
            }
        }
        Ok(out)
    }

    /// The allocator records of `id` (whose object record is `record`) as
    /// they are now: in memory if loaded, else the index's if the record
    /// says it has an allocator (an object never allocated in has none to
    /// scan for).
    pub(crate) fn span_records_now(&self, id: u64, record: &HeapObject) -> Result<Vec<(u64, Vec<u8>)>> {
        let loaded = self.shared.arenas.read().get(&id).cloned();
        match loaded {
            Some(slot) => Ok(slot.arena.lock().all_records()),
            None if record.has_arena() => self.span_records_in_index(id),
            None => Ok(Vec::new()),
        }
    }

    /// Allocates `size` bytes aligned to `align` (a power of two up to
    /// 4096) inside `object`, growing it by whole pages when the allocator
    /// needs room. The block's pointer carries its generation, so after
    /// [`Heap::free_in`] the pointer dereferences as `Stale`. Durable at the
    /// next [`Heap::sync`].
    pub fn alloc_in(&self, object: ObjectId, size: u64, align: u64) -> Result<PPtr<u8>> {
        let id = object.0;
        if size == 0 || size > MAX_OBJECT_BYTES {
            return Err(invalid(format!("block size {size}")));
        }
        if !align.is_power_of_two() || align > MAX_ALIGN {
            return Err(invalid(format!("alignment {align}: a power of two up to {MAX_ALIGN}")));
        }
        let attached = self.attach(id)?;
        if attached.access != MapAccess::ReadWrite {
            return Err(HeapError::PermissionDenied { what: format!("allocate in object {id}") });
        }
        let slot = self.arena(id)?;
        let mut arena = slot.arena.lock();
        let mut grow = |needed: u64| -> std::result::Result<u64, Box<dyn std::error::Error + Send + Sync>> {
            let current = attached.size();
            let offset = current.div_ceil(PAGE) * PAGE;
            let added = needed.div_ceil(PAGE).checked_mul(PAGE).ok_or("growth overflows")?;
            let new_size = offset.checked_add(added).filter(|s| *s <= MAX_OBJECT_BYTES).ok_or("object too large")?;
            self.shared.store.extend_heap_file(id, new_size).map_err(Box::new)?;
            self.shared.pending.lock().files.insert(id);
            attached.grown(self, new_size).map_err(Box::new)?;
            Ok(offset)
        };
        let block = match arena.alloc(size, align, &mut grow) {
            Ok(block) => block,
            // The allocator's generations must be reserved durably first
            // (after a load, and once per 2^36 blocks): commit its records
            // now and retry once.
            Err(ArenaError::NeedsSync) => {
                // `sync_lock` first, as `sync` takes them (see `grow`).
                drop(arena);
                let _one = self.shared.sync_lock.lock();
                arena = slot.arena.lock();
                self.flush_before_records(&attached)?;
                self.persist_arena(id, &slot, &mut arena)?;
                arena.alloc(size, align, &mut grow).map_err(|e| arena_error(id, e))?
            }
            Err(e) => return Err(arena_error(id, e)),
        };
        slot.dirty.store(true, Ordering::Release);
        {
            let mut fresh = slot.fresh.lock();
            if fresh.blocks.len() < crate::images::FRESH_BLOCKS {
                fresh.blocks.push((block.offset, block.len));
            } else {
                fresh.overflow = true;
            }
        }
        Ok(PPtr::new(id, block.offset, block.generation))
    }

    /// Frees a block [`Heap::alloc_in`] handed out. A pointer that names no
    /// live block (freed already, or never handed out) is `Stale`.
    pub fn free_in<T>(&self, pointer: PPtr<T>) -> Result<()> {
        let id = pointer.object;
        let attached = self.attach(id)?;
        if attached.access != MapAccess::ReadWrite {
            return Err(HeapError::PermissionDenied { what: format!("free in object {id}") });
        }
        let slot = self.arena(id)?;
        let stale = HeapError::Stale { object: id, offset: pointer.offset, generation: pointer.generation };
        let mut arena = slot.arena.lock();
        arena.free(pointer.offset, pointer.generation).map_err(|_| stale)?;
        slot.dirty.store(true, Ordering::Release);
        Ok(())
    }

    /// The allocator's verdict on `len` bytes at `offset` of `object` with
    /// `generation`: generation 0 is user bytes, which must lie outside
    /// every span the allocator claimed.
    ///
    /// An allocator this heap has not loaded is not loaded for the first
    /// [`LAZY_CHECKS`] checks of the heap: each reads only the records it
    /// needs from the index (the header, and the span or large block at or
    /// below `offset`), which hold the whole state since this process has
    /// changed nothing of it. So a process that attaches an object to read
    /// a few pointers does not rebuild an allocator of a million blocks.
    pub(crate) fn arena_check(&self, object: u64, offset: u64, len: u64, generation: u64) -> Result<Check> {
        let loaded = self.shared.arenas.read().get(&object).cloned();
        let slot = match loaded {
            Some(slot) => slot,
            None if self.shared.lazy_checks.fetch_add(1, Ordering::Relaxed) < LAZY_CHECKS => {
                let verdict = self.check_in_index(object, offset, len, generation)?;
                // Loaded meanwhile, it may hold changes not yet committed:
                // then it decides.
                match self.shared.arenas.read().get(&object).cloned() {
                    None => return Ok(verdict),
                    Some(slot) => slot,
                }
            }
            None => self.arena(object)?,
        };
        let arena = slot.arena.lock();
        Ok(verdict(&arena, offset, len, generation))
    }

    /// [`Heap::arena_check`] from the committed records alone: an arena
    /// built of the header and the one record that can hold `offset`.
    fn check_in_index(&self, id: u64, offset: u64, len: u64, generation: u64) -> Result<Check> {
        let index = self.shared.store.index();
        let Some(header) = index.get(&heap_span_key(id, HEADER_KEY))? else {
            // No allocator records: nothing claimed, no block handed out.
            return Ok(if generation == 0 { Check::Live } else { Check::Stale });
        };
        let mut records = vec![(HEADER_KEY, header)];
        if generation != 0 && offset != HEADER_KEY {
            // Blocks do not overlap, so the last record at or below
            // `offset` is the only one that can hold it.
            let prefix = heap_span_prefix(id);
            let upto = heap_span_key(id, offset);
            let below =
                index.range(std::ops::Bound::Included(&prefix[..]), std::ops::Bound::Included(&upto[..]), false)?;
            if let Some(kv) = below.into_iter().next() {
                let (k, v) = kv?;
                if let MetaKey::HeapSpan { span, .. } = MetaKey::decode(&k)? {
                    records.push((span, v));
                }
            }
        }
        let arena = Arena::load(records.iter().map(|(k, v)| (*k, v.as_slice()))).map_err(|e| arena_error(id, e))?;
        Ok(verdict(&arena, offset, len, generation))
    }

    /// Takes the allocator records of `id` that changed (all of them, if
    /// an earlier transaction that took them failed), to be written by
    /// [`Heap::write_staged`]; `None` if this heap never loaded the
    /// allocator. If that transaction fails, the caller calls
    /// [`Heap::restage_arenas`]. With them, the blocks handed out since
    /// the last call, taken under the same lock: every block the records
    /// name as handed out since is among them.
    pub(crate) fn take_arena_records_and_fresh(&self, id: u64) -> Option<(Staged, FreshBlocks)> {
        let slot = self.shared.arenas.read().get(&id).cloned()?;
        let mut arena = slot.arena.lock();
        let staged = Heap::stage_locked(&slot, &mut arena);
        let fresh = std::mem::take(&mut *slot.fresh.lock());
        Some((staged, fresh))
    }

    /// [`Heap::take_arena_records_and_fresh`] of an allocator the caller has locked.
    pub(crate) fn stage_locked(slot: &ArenaSlot, arena: &mut Arena) -> Staged {
        slot.dirty.store(false, Ordering::Release);
        let rewrite = slot.rewrite.swap(false, Ordering::AcqRel);
        let dirty = arena.take_dirty_records();
        let records =
            if rewrite { arena.all_records().into_iter().map(|(k, v)| (k, Some(v))).collect() } else { dirty };
        let claimed_end = arena.claimed_ranges().iter().map(|&(start, len)| start + len).max().unwrap_or(0);
        Staged { records, rewrite, claimed: arena.claimed_bytes() > 0, claimed_end }
    }

    /// Makes `attached`'s mapped bytes durable before allocator records
    /// are committed outside [`Heap::sync`] (a grow, a reservation of
    /// generations): those records name the blocks handed out since the
    /// last sync, and the log may make them durable at any later sync,
    /// whoever asks for it. A block whose allocation survives a crash then
    /// holds what it held when the records were taken, never an earlier
    /// occupant's bytes (docs/heap.md). The caller holds the object's
    /// allocator lock, so no block is handed out between the two.
    pub(crate) fn flush_before_records(&self, attached: &crate::attach::Attached) -> Result<()> {
        attached.flush()?;
        // An emulated region's flush only writes its bytes.
        if attached.region().is_emulated() {
            self.sync_object_file(attached.id)?;
        }
        Ok(())
    }

    /// Commits the records of the allocator of `id` (locked by the caller)
    /// durably, with the object's size covering what it claimed, and tells
    /// it they are durable.
    pub(crate) fn persist_arena(&self, id: u64, slot: &ArenaSlot, arena: &mut Arena) -> Result<()> {
        let stale_images = self.images_made_stale(id)?;
        let staged = Heap::stage_locked(slot, arena);
        let committed = self.shared.store.transact_locked(
            &[larder_object::LockRequest::Exclusive(id)],
            larder_object::Durability::Durable,
            |txn| {
                if self.record_synced(txn, id, 0, Some(&staged))? {
                    stale_images.write(txn, id)?;
                }
                Ok(())
            },
        );
        self.after_images_deleted(id, committed.is_ok());
        if let Err(e) = committed {
            slot.rewrite.store(true, Ordering::Release);
            slot.dirty.store(true, Ordering::Release);
            return Err(e);
        }
        arena.records_durable();
        Ok(())
    }

    /// Writes records taken by [`Heap::take_arena_records_and_fresh`] for `id` (held
    /// by `txn`).
    pub(crate) fn write_staged(&self, txn: &mut Transaction<'_>, id: u64, staged: &Staged) -> Result<()> {
        if staged.rewrite {
            txn.delete_prefix(&heap_span_prefix(id))?;
        }
        for (key, value) in &staged.records {
            match value {
                Some(value) => txn.put(&heap_span_key(id, *key), value),
                None => txn.delete(&heap_span_key(id, *key)),
            }
        }
        Ok(())
    }

    /// Marks `ids`' allocators to be written whole by the next transaction
    /// that stages them (the one that took their dirty records failed).
    pub(crate) fn restage_arenas(&self, ids: impl IntoIterator<Item = u64>) {
        let arenas = self.shared.arenas.read();
        for id in ids {
            if let Some(slot) = arenas.get(&id) {
                slot.rewrite.store(true, Ordering::Release);
                slot.dirty.store(true, Ordering::Release);
            }
        }
    }

    /// Where the last range this heap's allocator of `id` claimed ends (0
    /// if it has none loaded): the object's file is at least that long.
    pub(crate) fn arena_claimed_end(&self, id: u64) -> u64 {
        let Some(slot) = self.shared.arenas.read().get(&id).cloned() else { return 0 };
        let arena = slot.arena.lock();
        arena.claimed_ranges().last().map_or(0, |&(start, len)| start + len)
    }

    /// Forgets the allocator of a freed object.
    pub(crate) fn drop_arena(&self, id: u64) {
        self.shared.arenas.write().remove(&id);
    }

    /// Whether this heap holds the allocator of `id` (so its in-memory size
    /// may be ahead of the committed one).
    pub(crate) fn has_arena(&self, id: u64) -> bool {
        self.shared.arenas.read().contains_key(&id)
    }

    /// Objects whose allocator changed since its records were last taken.
    pub(crate) fn dirty_arenas(&self) -> Vec<u64> {
        self.shared.arenas.read().iter().filter(|(_, s)| s.dirty.load(Ordering::Acquire)).map(|(id, _)| *id).collect()
    }
}
