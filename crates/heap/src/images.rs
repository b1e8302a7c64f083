//! One flush per sync (docs/heap.md, "One flush per sync"): a `sync` whose
//! objects are all attached writable, hole-free and unchanged in length
//! commits an image of every page whose stores may not be on the file's
//! blocks, with its records, in its one durable transaction, instead of
//! writing those pages back and flushing the device before it. The log's
//! own flush then makes durable the records, the images and every page the
//! kernel wrote back before the sync; recovery writes the images into the
//! files (`Store::replay_heap_images`). A sync that cannot (growth, a
//! created or closed object, more pages than [`MAX_IMAGES`], a storage
//! whose log sync does not flush the files' device) flushes twice as
//! before, and deletes the object's images in its transaction, ordered
//! after its msync.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use larder_io::{page_size, MapAccess, SharedRegion};
use larder_object::meta::{heap_image_key, heap_image_prefix, HeapPageImage};

use crate::arena_glue::{IdMap, Staged};
use crate::attach::Attached;
use crate::error::Result;
use crate::Heap;

/// Blocks an allocator remembers as handed out since the last sync; past
/// that the next sync flushes twice (it could not name their pages).
pub(crate) const FRESH_BLOCKS: usize = 64;

/// Most page images one object holds (those carried from earlier syncs and
/// this sync's): past it the sync flushes twice, which deletes them. It
/// bounds what one sync writes to the log (64 KiB an object with 4 KiB
/// pages) and what each later sync compares.
pub(crate) const MAX_IMAGES: usize = 16;

/// Pages imaged and not on their way to the file that make a one-flush
/// sync start their write-back (docs/heap.md, "Retiring images"): with
/// the pages started and written meanwhile, an object holds about three
/// times this many images at most, under [`MAX_IMAGES`].
pub(crate) const START_BATCH: usize = 5;

/// Largest object created since its last sync that a one-flush sync images
/// whole (every page): past it the sync flushes twice. Its images cost a
/// log write of the object's size, which below this costs less than the
/// device flush they save.
pub(crate) const WHOLE_IMAGE_BYTES: u64 = 256 << 10;

/// Most bytes of whole objects one sync images, all objects together:
/// past it the sync flushes twice (the log write would cost more than the
/// flush it saves).
pub(crate) const WHOLE_SYNC_BYTES: u64 = 1 << 20;

/// Most bytes of holes a sync that flushes twice fills in one object to
/// make its file hole-free (a larger sparse object keeps its holes and
/// every sync of it flushes twice).
pub(crate) const HOLE_FILL_BYTES: u64 = 16 << 20;

/// How far a page imaged by one-flush syncs is on its way to its file
/// (docs/heap.md, "Retiring images"). Each committed one-flush sync in
/// which the page is not fresh moves it one step; a fresh block's page
/// starts again at [`PageStage::Imaged`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PageStage {
    /// Imaged; its write-back not started.
    Imaged,
    /// Imaged again by a sync that started its write-back (not waited
    /// for).
    Started,
    /// Imaged again by a sync that waited for its write-back before its
    /// log write, and whose flush made those bytes durable in the file:
    /// the next sync deletes the image.
    Written,
}

/// One page image the index holds.
#[derive(Debug)]
pub(crate) struct PageImage {
    /// The page's bytes at the last sync.
    pub(crate) bytes: Vec<u8>,
    /// How far the page is on its way to its file.
    pub(crate) stage: PageStage,
}

/// What one one-flush sync does with an object's pages.
#[derive(Debug, Default)]
struct PagePlan {
    /// The pages imaged (their image put where its bytes changed).
    imaged: BTreeSet<u64>,
    /// Of those, the pages whose write-back this sync starts.
    start: BTreeSet<u64>,
    /// Of those, the pages whose write-back this sync waits for.
    wait: BTreeSet<u64>,
    /// The pages whose images this sync deletes (their bytes are durable
    /// in the file since an earlier sync's flush).
    retire: BTreeSet<u64>,
}

impl PagePlan {
    /// The next step of each page `known` holds an image of (the pages
    /// still [`PageStage::Imaged`] wait for [`PagePlan::start_batch`]).
    fn of(known: &ObjectImages) -> PagePlan {
        let mut plan = PagePlan::default();
        for (&at, image) in &known.pages {
            match image.stage {
                PageStage::Imaged => {
                    plan.imaged.insert(at);
                }
                PageStage::Started => {
                    plan.imaged.insert(at);
                    plan.wait.insert(at);
                }
                PageStage::Written => {
                    plan.retire.insert(at);
                }
            }
        }
        plan
    }

    /// Page `at` holds a block handed out since the last sync: imaged, and
    /// on its way to the file from the start.
    fn fresh(&mut self, at: u64) {
        self.imaged.insert(at);
        self.wait.remove(&at);
        self.retire.remove(&at);
    }

    /// Starts the write-back of the pages imaged and not started (fresh
    /// ones included) once there are [`START_BATCH`] of them: one
    /// sync_file_range for them all, where one per sync cost as much
    /// again as the log's write (the submission, a virtio notification, is
    /// CPU in a VM).
    fn start_batch(&mut self) {
        let waiting: BTreeSet<u64> = self.imaged.difference(&self.wait).copied().collect();
        if waiting.len() >= START_BATCH {
            self.start = waiting;
        }
    }

    /// The stage of imaged page `at` once this sync committed.
    fn stage_after(&self, at: u64) -> PageStage {
        if self.wait.contains(&at) {
            PageStage::Written
        } else if self.start.contains(&at) {
            PageStage::Started
        } else {
            PageStage::Imaged
        }
    }
}

/// What a heap knows of one object for one-flush syncs.
#[derive(Debug, Default)]
pub(crate) struct ObjectImages {
    /// The page images the index holds, by page offset: each page's bytes
    /// at the last sync and how far it is on its way to the file.
    pub(crate) pages: BTreeMap<u64, PageImage>,
    /// The file's bytes `[0, hole_free)` are on written blocks whose
    /// metadata is durable (a two-flush sync filled the holes and synced
    /// the file): writing a page back there changes no file metadata.
    pub(crate) hole_free: u64,
    /// A transaction that put or deleted images failed: the index may hold
    /// images `pages` does not know. The next sync flushes twice and
    /// deletes them all.
    pub(crate) unknown: bool,
}

/// Image changes a sync's transactions make, per object.
#[derive(Default)]
pub(crate) struct ImageChanges {
    /// Images to put: (page offset, bytes).
    pub(crate) put: BTreeMap<u64, Vec<(u64, Vec<u8>)>>,
    /// Images to delete, per object: the page offsets named (a two-flush
    /// sync's: all the heap put; a one-flush sync's: those it retires), or
    /// `None` for all of them if the index may hold others (a transaction
    /// that put or deleted images failed), which are then found by a scan.
    /// Naming them spares the scan's walk over every image and deletion
    /// the index's memtable holds under the object's prefix (4 KiB
    /// values copied; 23% of a durable alloc's time, 2026-11-27).
    pub(crate) delete: BTreeMap<u64, Option<Vec<u64>>>,
}

impl ImageChanges {
    /// Bytes object `id`'s changes add to a log record, about.
    pub(crate) fn bytes(&self, id: u64) -> u64 {
        self.put.get(&id).map_or(0, |pages| pages.iter().map(|(_, b)| 32 + b.len() as u64).sum())
    }

    /// Writes object `id`'s changes into `txn`.
    pub(crate) fn write(&self, txn: &mut larder_object::Transaction<'_>, id: u64) -> Result<()> {
        match self.delete.get(&id) {
            Some(Some(pages)) => pages.iter().for_each(|&offset| txn.delete(&heap_image_key(id, offset))),
            Some(None) => txn.delete_prefix(&heap_image_prefix(id))?,
            None => {}
        }
        for (offset, bytes) in self.put.get(&id).into_iter().flatten() {
            let value = HeapPageImage { bytes: bytes.clone() }.encode()?;
            txn.put(&heap_image_key(id, *offset), &value);
        }
        Ok(())
    }
}

/// How a sync goes after [`Heap::try_one_flush`].
pub(crate) enum OneFlush {
    /// Committed with one flush.
    Done,
    /// It must flush twice; the allocator records it took (if any) go with
    /// that sync's transaction.
    Fallback(BTreeMap<u64, Staged>),
}

impl Heap {
    /// Whether the log's sync flushes the device of the heap's files
    /// (asked once per open heap).
    fn log_flush_covers_files(&self) -> Result<bool> {
        if let Some(&covers) = self.shared.log_flush_covers_files.get() {
            return Ok(covers);
        }
        let covers = self.shared.store.heap_files_share_log_flush()?;
        Ok(*self.shared.log_flush_covers_files.get_or_init(|| covers))
    }

    /// Commits the sync of the objects in `sizes` (id -> size to commit)
    /// with one flush if it can (see the module doc); the caller has
    /// checked that no file was created, grown, written or closed since the
    /// last sync. On an error the sync failed (the caller restores what
    /// it took).
    ///
    /// The objects in `whole` were created since their files were last
    /// synced (nothing of their files need be durable): every page of each
    /// up to its size is imaged, if that is at most [`WHOLE_IMAGE_BYTES`],
    /// and recovery makes the file again from its images.
    pub(crate) fn try_one_flush(
        &self,
        attached: &[Arc<Attached>],
        sizes: &BTreeMap<u64, u64>,
        whole: &BTreeSet<u64>,
    ) -> Result<OneFlush> {
        let fallback = || Ok(OneFlush::Fallback(BTreeMap::new()));
        if !self.log_flush_covers_files()? {
            return fallback();
        }
        let writable: IdMap<&Arc<Attached>> =
            attached.iter().filter(|a| a.access == MapAccess::ReadWrite).map(|a| (a.id, a)).collect();
        let page = page_size();
        // Which pages: those imaged before, by how far each is on its way
        // to the file (an image is kept current until its page is, so
        // replay never writes an old image over later bytes), and those of
        // fresh blocks (below).
        let mut whole_bytes = 0u64;
        let mut plans: BTreeMap<u64, PagePlan> = BTreeMap::new();
        {
            let images = self.shared.images.lock();
            for (&id, &size) in sizes {
                let Some(a) = writable.get(&id) else { return fallback() };
                if a.region().len() < size {
                    return fallback();
                }
                let known = images.get(&id);
                if known.is_some_and(|k| k.unknown) {
                    return fallback();
                }
                if whole.contains(&id) {
                    whole_bytes += size;
                    if size > WHOLE_IMAGE_BYTES || whole_bytes > WHOLE_SYNC_BYTES {
                        return fallback();
                    }
                    let imaged = (0..size.div_ceil(page)).map(|i| i * page).collect();
                    plans.insert(id, PagePlan { imaged, ..PagePlan::default() });
                    continue;
                }
                match known {
                    Some(known) if known.hole_free >= size => {
                        plans.insert(id, PagePlan::of(known));
                    }
                    _ => return fallback(),
                }
            }
        }
        // The records, and the blocks handed out since the last sync under
        // the same lock: a block the records name is among them, and its
        // pages are imaged whether or not the kernel wrote them back (a
        // write-back not yet flushed must not be outlived by its record).
        let mut staged = BTreeMap::new();
        let mut fits = true;
        for (&id, plan) in plans.iter_mut() {
            let Some((records, fresh)) = self.take_arena_records_and_fresh(id) else { continue };
            staged.insert(id, records);
            // A whole object's pages are all imaged, however many blocks.
            fits &= !fresh.overflow || whole.contains(&id);
            for (offset, len) in fresh.blocks {
                let mut at = offset / page * page;
                while at < offset.saturating_add(len) {
                    plan.fresh(at);
                    at += page;
                }
            }
            let most = if whole.contains(&id) { WHOLE_IMAGE_BYTES.div_ceil(page) as usize } else { MAX_IMAGES };
            fits &= plan.imaged.len() <= most;
        }
        for (id, plan) in plans.iter_mut() {
            if !whole.contains(id) {
                plan.start_batch();
            }
        }
        if !fits {
            return Ok(OneFlush::Fallback(staged));
        }
        // Then every other page's stores are written to the device, to be
        // made durable by the log's flush, and so are the pages whose
        // write-back an earlier sync started: done after the records were
        // taken, so a store the sync must keep came before. The other
        // imaged pages are left to their images: waiting for a fresh
        // block's page here would wait for the device on every sync (it
        // stays dirty until the kernel writes it back); their write-back
        // is only started, for the next sync to wait for.
        for (&id, &size) in sizes {
            let region = writable[&id].region();
            self.keep_descriptor(&region);
            let plan = &plans[&id];
            let skip: BTreeSet<u64> = plan.imaged.difference(&plan.wait).copied().collect();
            let written = region
                .write_back_except(size, &skip)
                .and_then(|all| Ok(all && region.start_write_back(size, &plan.start)?));
            match written {
                Ok(true) => {}
                Ok(false) => fits = false,
                Err(e) => {
                    self.restage_arenas(staged.keys().copied());
                    return Err(e.into());
                }
            }
        }
        if !fits {
            return Ok(OneFlush::Fallback(staged));
        }
        let mut changes = ImageChanges::default();
        let read = (|| -> Result<()> {
            let images = self.shared.images.lock();
            for (&id, plan) in &plans {
                let region = writable[&id].region();
                let len = region.len();
                let known = images.get(&id);
                for &at in plan.imaged.iter().filter(|&&at| at < len) {
                    let mut bytes = vec![0u8; (len - at).min(page) as usize];
                    region.read_into(at, &mut bytes)?;
                    if known.and_then(|k| k.pages.get(&at)).map(|image| &image.bytes) != Some(&bytes) {
                        changes.put.entry(id).or_default().push((at, bytes));
                    }
                }
                if !plan.retire.is_empty() {
                    changes.delete.insert(id, Some(plan.retire.iter().copied().collect()));
                }
            }
            Ok(())
        })();
        // An emulated region is a copy, not the file's page cache: the
        // bytes of a whole object reach its file as a kernel's write-back
        // at will would take them (no flush), so that its other readers see
        // them as they would a real mapping's.
        let read = read.and_then(|()| {
            for id in whole.iter().filter(|id| plans.contains_key(id)) {
                let region = writable[id].region();
                if region.is_emulated() {
                    region.write_back_at_will(0, region.len())?;
                }
            }
            Ok(())
        });
        if let Err(e) = read {
            self.restage_arenas(staged.keys().copied());
            return Err(e);
        }
        let committed = self.commit_synced(sizes, staged, &changes);
        let mut images = self.shared.images.lock();
        for (id, plan) in plans {
            let mut put: BTreeMap<u64, Vec<u8>> = changes.put.remove(&id).into_iter().flatten().collect();
            if committed.is_err() {
                if !put.is_empty() || changes.delete.contains_key(&id) {
                    images.entry(id).or_default().unknown = true;
                }
                continue;
            }
            let known = images.entry(id).or_default();
            for at in &plan.retire {
                known.pages.remove(at);
            }
            for &at in &plan.imaged {
                let stage = plan.stage_after(at);
                match put.remove(&at) {
                    Some(bytes) => {
                        known.pages.insert(at, PageImage { bytes, stage });
                    }
                    None => {
                        if let Some(image) = known.pages.get_mut(&at) {
                            image.stage = stage;
                        }
                    }
                }
            }
        }
        committed.map(|()| OneFlush::Done)
    }

    /// For a commit of object `id`'s allocator records outside `sync`
    /// (`grow`, the reservation of generations), made after
    /// `flush_before_records` wrote and synced all of its mapped bytes: the
    /// images that commit deletes. Its pages are on disk now; an image
    /// left behind would be written over newer bytes at recovery (a block
    /// freed and handed out again since its page was imaged would come back
    /// with the freed block's bytes). A file made durable only by its
    /// images (a whole object's) needs its name durable too first. The
    /// caller holds `sync_lock`, so no sync puts images meanwhile, and
    /// calls [`Heap::after_images_deleted`] after the commit.
    pub(crate) fn images_made_stale(&self, id: u64) -> Result<ImageChanges> {
        let delete = self.imaged([id]);
        if self.deletes_images(&delete)? && !self.file_sync_keeps_entry()? {
            self.shared.store.sync_heap_dir()?;
        }
        Ok(ImageChanges { put: BTreeMap::new(), delete })
    }

    /// Whether deleting `delete` (as [`Heap::imaged`] returns it) deletes
    /// any image: the pages this heap put, or, where it does not know, the
    /// ones the index holds.
    pub(crate) fn deletes_images<'a>(
        &self,
        delete: impl IntoIterator<Item = (&'a u64, &'a Option<Vec<u64>>)>,
    ) -> Result<bool> {
        for (&id, pages) in delete {
            let any = match pages {
                Some(pages) => !pages.is_empty(),
                None => self.shared.store.has_heap_images(id)?,
            };
            if any {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// After the commit that carried [`Heap::images_made_stale`]'s changes:
    /// the object has no image if it succeeded, unknown ones if not.
    pub(crate) fn after_images_deleted(&self, id: u64, committed: bool) {
        let mut images = self.shared.images.lock();
        if let Some(known) = images.get_mut(&id) {
            known.pages.clear();
            known.unknown = !committed;
        } else if !committed {
            images.entry(id).or_default().unknown = true;
        }
    }

    /// Before a two-flush sync writes the mappings back: dirties, without
    /// changing a byte, every page in a hole of each writable attached
    /// object's file (below [`HOLE_FILL_BYTES`] of holes an object), so
    /// that the msync writes them to blocks and syncs those blocks'
    /// metadata. Returns, per object, how far the file will be hole-free
    /// once the sync's flush succeeded.
    pub(crate) fn fill_holes(
        &self,
        attached: &[Arc<Attached>],
        sizes: &BTreeMap<u64, u64>,
    ) -> Result<BTreeMap<u64, u64>> {
        let mut hole_free = BTreeMap::new();
        for a in attached.iter().filter(|a| a.access == MapAccess::ReadWrite) {
            let Some(&size) = sizes.get(&a.id) else { continue };
            let region = a.region();
            let known = self.shared.images.lock().get(&a.id).map_or(0, |k| k.hole_free);
            let end = size.min(region.len());
            if known >= end {
                continue;
            }
            if region.is_emulated() {
                // Its flush writes the whole region to the file.
                hole_free.insert(a.id, end);
                continue;
            }
            let file = match self.shared.store.open_heap_file(a.id, false) {
                Ok(file) => file,
                Err(larder_object::ObjectError::Io(e)) if e.is_not_found() => continue,
                Err(e) => return Err(e.into()),
            };
            let Some(holes) = file.holes()? else { continue };
            let holes: Vec<(u64, u64)> =
                holes.into_iter().map(|(s, e)| (s, e.min(end))).filter(|(s, e)| s < e).collect();
            if holes.iter().map(|(s, e)| e - s).sum::<u64>() > HOLE_FILL_BYTES {
                continue;
            }
            for (start, stop) in holes {
                region.dirty_range(start, stop - start)?;
            }
            hole_free.insert(a.id, end);
        }
        Ok(hole_free)
    }

    /// The objects of `ids` whose images a two-flush sync deletes, with
    /// the pages imaged (`None`: unknown, see [`ImageChanges::delete`]).
    pub(crate) fn imaged(&self, ids: impl IntoIterator<Item = u64>) -> BTreeMap<u64, Option<Vec<u64>>> {
        let images = self.shared.images.lock();
        let imaged = |id: &u64| {
            // An object this heap has not synced since it was opened in
            // the process may have images a dropped handle of it put.
            let Some(known) = images.get(id) else { return Some(None) };
            match known.unknown {
                true => Some(None),
                false if known.pages.is_empty() => None,
                false => Some(Some(known.pages.keys().copied().collect())),
            }
        };
        ids.into_iter().filter_map(|id| Some((id, imaged(&id)?))).collect()
    }

    /// After a two-flush sync of `sizes`: its images deleted and its holes
    /// filled (`hole_free`) if it succeeded; the images unknown if not.
    /// Keeps only the objects still attached writable, or still imaged.
    pub(crate) fn after_two_flush(
        &self,
        succeeded: bool,
        sizes: &BTreeMap<u64, u64>,
        deleted: &BTreeMap<u64, Option<Vec<u64>>>,
        hole_free: &BTreeMap<u64, u64>,
    ) {
        let mut images = self.shared.images.lock();
        if !succeeded {
            for id in deleted.keys() {
                images.entry(*id).or_default().unknown = true;
            }
            return;
        }
        for id in sizes.keys() {
            if let Some(known) = images.get_mut(id) {
                known.pages.clear();
                known.unknown = false;
            }
        }
        for (&id, &end) in hole_free {
            let known = images.entry(id).or_default();
            known.hole_free = known.hole_free.max(end);
        }
        let attached = self.shared.attached.read();
        images.retain(|id, known| attached.contains_key(id) || known.unknown || !known.pages.is_empty());
    }
}

impl Heap {
    /// Notes that `region` keeps its file's descriptor for the syncs that
    /// write it back, as the most recent of at most
    /// [`crate::limits::SYNC_DESCRIPTORS`] regions: the oldest past that
    /// closes its own. A region dropped (its object freed or closed, its
    /// mapping replaced by growth) closed its descriptor with it.
    fn keep_descriptor(&self, region: &Arc<SharedRegion>) {
        let mut kept = self.shared.descriptors.lock();
        kept.retain(|r| r.strong_count() > 0 && !std::ptr::eq(r.as_ptr(), Arc::as_ptr(region)));
        kept.push_back(Arc::downgrade(region));
        while kept.len() > crate::limits::SYNC_DESCRIPTORS {
            if let Some(oldest) = kept.pop_front().and_then(|r| r.upgrade()) {
                oldest.release_descriptor();
            }
        }
    }

    /// How many mappings keep their file's descriptor for syncs now.
    #[doc(hidden)]
    pub fn kept_descriptors(&self) -> usize {
        let attached = self.shared.attached.read();
        attached.values().filter(|a| a.region().holds_descriptor()).count()
    }
}

impl Heap {
    /// For crash tests on the simulated storage: writes `object`'s mapped
    /// bytes to its file as the kernel writes a mapping's dirty pages back
    /// at will, without a flush (durable at any later sync, on written
    /// blocks only: [`larder_io::SharedRegion::write_back_at_will`]). Does
    /// nothing to a real mapping, whose kernel does it on its own, or to
    /// an object not attached writable.
    #[doc(hidden)]
    pub fn write_back_at_will(&self, object: crate::ObjectId) -> Result<()> {
        let Some(attached) = self.shared.attached.read().get(&object.0).cloned() else { return Ok(()) };
        let region = attached.region();
        Ok(region.write_back_at_will(0, region.len())?)
    }
}
