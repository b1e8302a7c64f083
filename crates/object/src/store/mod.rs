//! The store: one directory holding the superblock, the index, the intent
//! log and (later) the containers, opened and recovered as one.
//!
//! Every change is a transaction whose index batch travels in an intent-log
//! record. The log assigns the LSN; the record's batch enters the index
//! with that LSN as its sequence number, in LSN order, as soon as it is
//! appended (see `apply`), and an index flush first makes the log durable
//! through what it flushes (DESIGN.md, ordering rules 1 and 2). So the
//! index's durable sequence number says exactly which records a recovery
//! must replay.
//!
//! Open: take the store lock, read the superblock, open the index (its
//! durable sequence number S), open the log replaying every record above S
//! into the index, flush the index and checkpoint the log ("recovery ends
//! with an index flush"), then start the checkpointer.

mod allocate;
mod apply;
mod cache;
pub use cache::{DerivedPath, MetaValue};
mod checkpoint;
mod combine;
#[cfg(test)]
mod committed_tests;
mod health;
mod index_view;
mod ingest;
mod observe;
pub(crate) mod payload;
mod redundancy;
pub mod reserve;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use larder_index::{Index, WriteBatch};
use larder_io::{CheckedStorage, Lock, Storage, StorageRef};
use larder_log::{Dependency, Log, Replay, ReplayRecord};
use larder_space::{Extent, SpaceManager};

use crate::error::{ObjectError, Result};
use crate::meta::{
    decode_counter, encode_counter, map_prefix, prefix_end, store_key, DirEntriesOperator, ExtentMapEntry, Kind, Map,
    MetaLimits, Onode, StoreName, NEXT_OBJECT_ID,
};
use crate::objects::{DataDamage, ReplayVerifier};
use crate::superblock::{self, CreationOptions, Loaded, Superblock};
use crate::txn::ids::IdAllocator;
use crate::txn::locks::{Held, LockTable};
use crate::txn::{LockRequest, Transaction};
use apply::ApplyOrder;
use cache::MetaCache;
use checkpoint::{checkpoint_once, Checkpointer, Parts, Signal};
pub use health::{StoreHealth, ThreadHealth, ThreadState};
pub use index_view::IndexView;
pub use observe::{unobserved_thread, ChangeObserver, MetaChange};
use payload::Payload;

/// The index's directory inside the store.
pub const INDEX_DIR: &str = "index";
/// The intent log's directory inside the store.
pub const LOG_DIR: &str = "log";
/// The container directory inside the store.
pub const DATA_DIR: &str = "data";
/// The store's lock file: held by the one process that owns the store.
pub const LOCK_FILE: &str = "LOCK";
/// Entry-count operands a directory's onode may gather before it is
/// rewritten whole (see `Store::fold_entry_counts`).
pub const FOLD_OPERANDS: u32 = 32;
/// Entry-count operands after which the rewrite waits for the directory's
/// lock instead of trying it (see `Store::fold_entry_counts`).
pub const FOLD_OPERANDS_FORCE: u32 = 1024;
/// The root directory's object id: created with the store, never named
/// by a dentry, its own parent.
pub const ROOT_ID: u64 = 1;

/// Run-time options of a store. The log's segment size comes from the
/// superblock (fixed at creation) and its hooks are the store's own.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Options of the index.
    pub index: larder_index::Options,
    /// Options of the intent log.
    pub log: larder_log::Options,
    /// Options of space management (the container size comes from the
    /// superblock).
    pub space: larder_space::Options,
    /// Bytes of the metadata caches: recently read onodes (with inline
    /// objects' bytes) and dentries, paths (an eighth of what they get)
    /// and, with an eighth of the whole, decoded extent maps of small
    /// objects (default 64 MiB; 0 turns them off).
    pub meta_cache_bytes: usize,
    /// Checkpoint on a background thread (default). When false, a commit
    /// that finds the log needing room checkpoints in its own thread:
    /// deterministic, for tests.
    pub background_checkpoints: bool,
    /// Make a large write's data durable by writing it back
    /// (sync_file_range) before the log's sync, whose device flush then
    /// covers it, instead of a sync of its container of its own: one flush
    /// per commit instead of two. Used only for data overwriting written
    /// blocks (containers are zero-filled; a punched range needs its
    /// sync) and only where the storage says a sync of the log flushes the
    /// containers' device (the real backend: the same ext4 or XFS file
    /// system). Default true.
    pub write_back_data: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            index: larder_index::Options::default(),
            log: larder_log::Options::default(),
            space: larder_space::Options::default(),
            meta_cache_bytes: 64 << 20,
            background_checkpoints: true,
            write_back_data: true,
        }
    }
}

/// How long a commit waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Returns once the transaction is durable (its log group synced).
    Durable,
    /// Returns once the transaction has its LSN and is visible to every
    /// reader and later transaction. It becomes durable when its group is
    /// written: within the log's `buffered_sync_interval` (10 ms by
    /// default; 1 s for a store opened as a file system,
    /// `larder_fs::FS_BUFFERED_SYNC_INTERVAL`) or at the next durable
    /// commit or sync. A crash loses at most the buffered transactions not
    /// yet written (bounded by the log's `max_pending_bytes`), always a
    /// suffix: never one without those before it.
    Buffered,
}

/// How a transaction's batch is committed.
#[derive(Clone, Copy, Debug)]
enum CommitAs {
    /// As an intent-log record.
    Record(Durability),
    /// As an index run of its own (see `ingest`).
    Run,
}

/// An open store.
pub struct Store {
    dir: PathBuf,
    /// Every handle the store opens goes through this one latch (`latch`'s
    /// storage).
    storage: StorageRef,
    /// The store's poison latch: the first failure anywhere stops every
    /// later write (see `health`).
    latch: CheckedStorage,
    superblock: Loaded,
    index: Arc<Index>,
    log: Arc<Log>,
    space: Arc<SpaceManager>,
    checkpointer: Option<Checkpointer>,
    ids: IdAllocator,
    locks: LockTable,
    /// Recently read onodes and dentries.
    meta_cache: Arc<MetaCache>,
    /// Decoded extent maps of recently read objects (`objects::extent_cache`).
    extent_cache: crate::objects::ExtentCache,
    /// Entry-count operands written per directory since its onode was last
    /// written whole.
    pending_operands: parking_lot::Mutex<std::collections::HashMap<u64, u32>>,
    /// The emptied batch of the last transaction committed as a run, for
    /// the next one: a bulk create commits chunk after chunk of about 130
    /// MiB, each in fresh pages otherwise (perf, 4M creates: 6.5% of the
    /// creating thread faulting them in). Dropped by the next transaction
    /// committed as a record, when bulk commits are over.
    spare_run_batch: parking_lot::Mutex<Option<WriteBatch>>,
    /// Whether `spare_run_batch` holds one (read without its lock by
    /// every record commit).
    spare_kept: std::sync::atomic::AtomicBool,
    /// Turns to apply committed batches to the index in LSN order.
    apply_order: Arc<ApplyOrder>,
    /// Durable commits waiting for a thread to append, apply and sync them
    /// together (see `combine`).
    combiner: combine::Combiner,
    /// Held shared from a record's append until its batch is in the index,
    /// and exclusively by an ingest (see `ingest`), which must know the next
    /// LSN and have the index to itself.
    append_gate: parking_lot::RwLock<()>,
    /// Told what each commit changed (see [`Store::set_change_observer`]).
    observer: parking_lot::RwLock<Option<ChangeObserver>>,
    /// Large writes' data may be written back instead of synced
    /// ([`StoreOptions::write_back_data`], where the storage allows it).
    write_back_data: bool,
    /// The `heap/` directory held open for lookups of heap files by name
    /// (`Store::heap_file_status`), opened at the first; `None` inside
    /// where the storage has no directory handles.
    pub(crate) heap_dir_handle: std::sync::OnceLock<Option<larder_io::DirectoryRef>>,
    /// Whether `heap/` is known to exist (`Store::ensure_heap_dir`), so
    /// that a heap file's create does not look for it first.
    pub(crate) heap_dir_made: std::sync::atomic::AtomicBool,
    _lock: Box<dyn Lock>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.dir).finish()
    }
}

/// Whether `index` (recovered) holds any key of the xattr map: one seek.
fn holds_xattrs(index: &Index) -> Result<bool> {
    let start = crate::meta::map_prefix(crate::meta::Map::Xattr);
    let end = crate::meta::prefix_end(&start).unwrap_or_default();
    match index.range(std::ops::Bound::Included(&start[..]), std::ops::Bound::Excluded(&end[..]), true)?.next() {
        Some(entry) => entry.map(|_| true).map_err(ObjectError::from),
        None => Ok(false),
    }
}

/// Creates every missing level of `dir` and syncs each new level's parent.
fn create_dir_durably(storage: &StorageRef, dir: &Path) -> Result<()> {
    let mut missing = Vec::new();
    let mut cur = Some(dir);
    while let Some(d) = cur.filter(|d| !d.as_os_str().is_empty()) {
        if storage.exists(d)? {
            break;
        }
        missing.push(d);
        cur = d.parent();
    }
    storage.create_dir_all(dir)?;
    for d in missing.iter().rev() {
        if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
            storage.sync_dir(parent)?;
        }
    }
    Ok(())
}

impl Store {
    /// Creates a new store in `dir` (which may exist but must hold no store).
    /// Every file the store opens goes through one poison latch around
    /// `storage` (its own, if `storage` already is a [`CheckedStorage`]).
    pub fn create(storage: StorageRef, dir: &Path, creation: CreationOptions, options: StoreOptions) -> Result<Store> {
        creation.validate()?;
        let latch = CheckedStorage::wrap(storage);
        let storage = latch.storage_ref();
        create_dir_durably(&storage, dir)?;
        let lock = storage.lock(&dir.join(LOCK_FILE))?;
        superblock::create(&*storage, dir, &Superblock::new(creation))?;
        // open_locked creates the root directory of a store that has none.
        Self::open_locked(latch, dir, options, lock)
    }

    /// Opens the store in `dir`, recovering from any crash: every
    /// transaction acknowledged durable before it is there afterwards.
    /// Every file the store opens goes through one poison latch around
    /// `storage` (its own, if `storage` already is a [`CheckedStorage`]).
    pub fn open(storage: StorageRef, dir: &Path, options: StoreOptions) -> Result<Store> {
        let latch = CheckedStorage::wrap(storage);
        if !latch.exists(&dir.join(superblock::SUPERBLOCK_FILE))? {
            return Err(ObjectError::NotAStore { path: dir.to_path_buf() });
        }
        let lock = latch.lock(&dir.join(LOCK_FILE))?;
        Self::open_locked(latch, dir, options, lock)
    }

    fn open_locked(latch: CheckedStorage, dir: &Path, options: StoreOptions, lock: Box<dyn Lock>) -> Result<Store> {
        let storage = latch.storage_ref();
        let loaded = superblock::load(&*storage, dir)?;
        let limits = MetaLimits::from_superblock(&loaded.superblock);
        let options_write_back = options.write_back_data;
        let mut index_options = options.index;
        index_options.merge_operators.push(Arc::new(DirEntriesOperator::new(limits)));
        index_options.on_poison = Some(poison_hook(&latch, "index", index_options.on_poison.take()));
        // Batches enter the index before the log makes them durable; a
        // flush first makes the log durable through what it flushes. Set
        // once the log is open: replay's own flushes need nothing (what it
        // replays is on disk already).
        let log_slot: Arc<std::sync::OnceLock<(Arc<Log>, Arc<ApplyOrder>)>> = Arc::default();
        let hook_slot = log_slot.clone();
        index_options.before_durable = Some(Arc::new(move |seq| match hook_slot.get() {
            Some((log, order)) => {
                order.check()?;
                log.sync_to(seq).map_err(|e| e.to_string())
            }
            None => Ok(()),
        }));
        let index = Arc::new(Index::open(storage.clone(), &dir.join(INDEX_DIR), index_options)?);
        let covered = index.durable_seq();
        let signal = Arc::new(Signal::default());
        let mut log_options = options.log;
        log_options.segment_bytes = loaded.superblock.options.log_segment_bytes;
        // An eighth of the metadata budget holds decoded extent maps.
        let extent_bytes = options.meta_cache_bytes / 8;
        let meta_cache =
            Arc::new(MetaCache::new(options.meta_cache_bytes - extent_bytes, Some(DirEntriesOperator::new(limits))));
        let extent_cache = crate::objects::ExtentCache::new(extent_bytes);
        let wake = signal.clone();
        log_options.on_checkpoint_needed = Some(Arc::new(move || wake.wake()));
        log_options.on_poison = Some(poison_hook(&latch, "log", log_options.on_poison.take()));
        let replay_index = index.clone();
        // The space manager needs the replayed extent map, so replay reads
        // the containers itself to check a large write's data.
        let mut verifier = ReplayVerifier::new(storage.clone(), dir.join(DATA_DIR), limits);
        let log = Log::open_with(storage.clone(), &dir.join(LOG_DIR), log_options, covered, |r: ReplayRecord<'_>| {
            match payload::decode(r.payload) {
                Ok(Payload::Batch(batch)) => match verifier.check(&batch) {
                    Ok(()) => replay_index.write(r.lsn, &batch).map(|()| Replay::Continue),
                    // An acknowledged record's data was durable before it
                    // was acknowledged: a block failing its crc32c now was
                    // damaged on the medium since, as a checkpointed block
                    // can be. Replayed, the damage stays in those blocks
                    // (reads of them report corruption naming the
                    // container, fsck lists them) instead of refusing the
                    // whole store.
                    Err(DataDamage::Checksum(what)) if r.lsn <= r.acked_lsn => {
                        tracing::error!(lsn = r.lsn, %what, "acknowledged log record's data is damaged; replayed, reads of the damaged blocks fail");
                        replay_index.write(r.lsn, &batch).map(|()| Replay::Continue)
                    }
                    // DESIGN.md: above the acknowledged LSN replay ends at
                    // the first record whose data fails its checksum; at or
                    // below it, data that cannot be read is corruption the
                    // log reports naming the record.
                    Err(damage) => {
                        let what = damage.to_string();
                        tracing::warn!(lsn = r.lsn, %what, "log record's data is not intact");
                        Ok(Replay::Damaged(what))
                    }
                },
                // The index holds an ingested batch only once its manifest
                // names the run, and then replay starts above the marker:
                // a marker replayed is a batch that never committed, and
                // the log's last record (see `ingest`).
                Ok(Payload::Ingested { run }) => {
                    tracing::warn!(lsn = r.lsn, ?run, "an ingested batch did not commit before the crash");
                    Ok(Replay::StopBefore)
                }
                // Above the acknowledged LSN this ends the log; at or
                // below it the log reports corruption naming the record.
                Err(what) => {
                    tracing::warn!(lsn = r.lsn, %what, "log record payload does not decode");
                    Ok(Replay::StopBefore)
                }
            }
        })?;
        let log = Arc::new(log);
        let apply_order = Arc::new(ApplyOrder::new(holds_xattrs(&index)?));
        // Nothing else has set it: this open made the slot.
        let _ = log_slot.set((log.clone(), apply_order.clone()));
        let background = options.background_checkpoints;
        // IMPORTANT: recovery ends with an index flush, then a checkpoint,
        // so the replayed records are durable in the index before any
        // segment holding them can be reused.
        // Free space is derived, not stored: rebuilt from the extent map
        // as recovery left it, so no crash can leak space.
        let used = used_extents(&index, &limits)?;
        let container_bytes = loaded.superblock.options.container_bytes;
        // A store made before containers could grow keeps whole ones, so
        // the builds it was made with can still open it.
        let initial_container_bytes = if loaded.superblock.incompat & superblock::INCOMPAT_GROWING_CONTAINERS != 0 {
            options.space.initial_container_bytes.min(container_bytes)
        } else {
            container_bytes
        };
        let reserve_bytes = options.space.reserve_bytes.max(reserve::reserve_bytes(
            &*storage,
            &dir.join(INDEX_DIR),
            loaded.superblock.options.log_segment_bytes,
        )?);
        let space_options =
            larder_space::Options { container_bytes, initial_container_bytes, reserve_bytes, ..options.space };
        let space = Arc::new(SpaceManager::open(storage.clone(), &dir.join(DATA_DIR), space_options, used)?);
        checkpoint_once(&index, &log, &space, true)
            .map_err(|source| ObjectError::Checkpoint { during: "recovery", source })?;
        let checkpointer = if background {
            let poisoner = health::Poisoner { latch: latch.clone(), log: log.clone() };
            let parts = Parts { index: index.clone(), space: space.clone(), poisoner };
            let c =
                Checkpointer::start(signal, parts).map_err(|e| larder_io::IoError::os("spawn checkpointer", dir, e))?;
            Some(c)
        } else {
            None
        };
        let high_water = match index.get(&next_object_id_key()?)? {
            Some(v) => Some(decode_counter(&v)?),
            None => None,
        };
        let write_back_data = options_write_back && storage.shares_flush(&dir.join(LOG_DIR), &dir.join(DATA_DIR))?;
        let store = Store {
            write_back_data,
            dir: dir.to_path_buf(),
            storage: storage.clone(),
            latch,
            superblock: loaded,
            index,
            log,
            space,
            checkpointer,
            ids: IdAllocator::new(high_water.unwrap_or(0)),
            locks: LockTable::new(),
            apply_order,
            combiner: combine::Combiner::default(),
            append_gate: parking_lot::RwLock::new(()),
            observer: parking_lot::RwLock::new(None),
            pending_operands: parking_lot::Mutex::new(std::collections::HashMap::new()),
            spare_run_batch: parking_lot::Mutex::new(None),
            spare_kept: std::sync::atomic::AtomicBool::new(false),
            meta_cache,
            extent_cache,
            heap_dir_handle: std::sync::OnceLock::new(),
            heap_dir_made: std::sync::atomic::AtomicBool::new(false),
            _lock: lock,
        };
        if high_water.is_none() && store.stat(ROOT_ID)?.is_none() {
            // A new store (or one whose creation a crash interrupted before
            // anything else was committed): it starts with its root.
            store.create_root()?;
        }
        // No handle survives a close or crash: objects left without a name
        // (unlinked while open, or half freed) are freed now.
        let reclaimed = store.reclaim_orphans()?;
        if reclaimed > 0 {
            tracing::info!(reclaimed, "freed orphan objects left by the last run");
        }
        // After the orphans: a heap object freed there leaves a file
        // without a record, which this removes.
        let heap = store.recover_heap_files()?;
        if heap != crate::objects::HeapRecovery::default() {
            tracing::info!(?heap, "brought heap files in step with their records");
        }
        Ok(store)
    }

    /// Creates the root directory: id [`ROOT_ID`], its own parent, mode
    /// 0755, owned by root, named by no dentry.
    fn create_root(&self) -> Result<()> {
        let onode = Onode::new(Kind::Directory, 0o755, 0, 0, ROOT_ID);
        self.transact(&[ROOT_ID], Durability::Durable, |txn| txn.put_onode(ROOT_ID, &onode))?;
        Ok(())
    }

    /// Commits `batch` atomically. Returns its LSN (which is also its
    /// sequence number in the index).
    pub fn commit(&self, batch: &WriteBatch, durability: Durability) -> Result<u64> {
        self.commit_with_deps(batch, Vec::new(), durability)
    }

    /// Commits `batch` atomically, its record depending on the data in
    /// `deps` (container files a large write wrote): the record is durable
    /// only with them. Durable: the data is made durable in the log's own
    /// round (written back before its sync, or synced concurrently with
    /// it). Buffered: the dependencies travel with the record and are made
    /// durable with the group that writes it, likewise in one round;
    /// a record whose data did not reach the disk fails recovery's data
    /// check and ends replay, and no later record was acknowledged.
    pub fn commit_with_deps(&self, batch: &WriteBatch, deps: Vec<Dependency>, durability: Durability) -> Result<u64> {
        self.check_writable()?;
        match durability {
            Durability::Durable => self.commit_durable(batch.clone(), deps),
            Durability::Buffered => self.commit_buffered(batch, deps),
        }
    }

    /// [`Store::commit_with_deps`] of a batch the caller gives up.
    fn commit_owned(&self, batch: WriteBatch, deps: Vec<Dependency>, durability: Durability) -> Result<u64> {
        self.check_writable()?;
        match durability {
            Durability::Durable => self.commit_durable(batch, deps),
            Durability::Buffered => self.commit_buffered(&batch, deps),
        }
    }

    /// Appends and applies `batch` on this thread, durable later.
    fn commit_buffered(&self, batch: &WriteBatch, deps: Vec<Dependency>) -> Result<u64> {
        let record = payload::encode_batch(batch);
        let gate = self.append_gate.read();
        let lsn = self.apply_order.append_and_apply(&self.log, &self.index, &self.meta_cache, (record, deps), batch)?;
        drop(gate);
        self.after_commit(batch, lsn);
        Ok(lsn)
    }

    /// What every commit does on its own thread once its batch is
    /// applied: tells the change observer, checkpoints if due. Nothing
    /// here can fail the commit, which has happened.
    fn after_commit(&self, batch: &WriteBatch, lsn: u64) {
        if let Some(observer) = self.observer.read().clone().filter(|_| observe::observed_thread()) {
            let changes = observe::changes(batch);
            if !changes.is_empty() {
                observer(&changes);
            }
        }
        self.checkpoint_if_needed(lsn);
    }

    /// Without a checkpointer thread, a commit that finds the log needing
    /// room checkpoints itself, after its own commit (`lsn`): a failure
    /// worth a retry is left for the next commit to retry, any other
    /// poisons the store, and neither turns the commit into an error.
    fn checkpoint_if_needed(&self, lsn: u64) {
        if self.checkpointer.is_some() || !self.log.needs_checkpoint() {
            return;
        }
        if let Err(e) = checkpoint_once(&self.index, &self.log, &self.space, true) {
            self.checkpoint_failed(&e, &format!("the checkpoint after commit {lsn}"), "the next commit retries it");
        }
    }

    /// Reacts to a checkpoint that a caller (not the checkpointer thread)
    /// took and that failed (`during` names it): a failure not worth a
    /// retry poisons the store, any other is logged, saying what happens
    /// `instead`.
    fn checkpoint_failed(&self, e: &crate::error::CheckpointError, during: &str, instead: &str) {
        match health::checkpoint_reaction(e) {
            health::Reaction::Poison => self.poison(format!("{during} failed: {e}")),
            health::Reaction::RetryBriefly | health::Reaction::RetryWhileItLasts => {
                tracing::warn!(error = %e, "{during} failed; {instead}");
            }
        }
    }

    /// Poisons the store: every later write fails with the first cause
    /// (the log too, so appenders waiting for its room wake).
    pub(crate) fn poison(&self, cause: String) {
        health::poison(&self.latch, &self.log, cause);
    }

    /// Fails with [`ObjectError::Poisoned`], naming the first failure, once
    /// the store is poisoned.
    pub(crate) fn check_writable(&self) -> Result<()> {
        match self.latch.poison_cause() {
            Some(cause) => Err(ObjectError::Poisoned { cause }),
            None => Ok(()),
        }
    }

    /// Whether the store refuses writes, why, and what each background
    /// thread (the store's, the index's and the log's) is doing.
    pub fn health(&self) -> StoreHealth {
        let poisoned = self.latch.poison_cause();
        let by = self.latch.poisoned_by();
        let mut threads = match &self.checkpointer {
            Some(c) => c.health(),
            None => Vec::new(),
        };
        // The index's and the log's threads stop at their own layer's
        // poison; which one failed first the latch knows.
        let others = self.index.worker_names().into_iter().chain(self.log.flusher_name().map(str::to_string));
        for name in others {
            let failed = poisoned.is_some() && by.as_deref() == Some(name.as_str());
            let (state, last_error) = if failed {
                (ThreadState::Failed, poisoned.clone())
            } else if poisoned.is_some() {
                (ThreadState::Stopped, None)
            } else {
                (ThreadState::Running, None)
            };
            threads.push(ThreadHealth { name, state, last_error, retries: 0 });
        }
        StoreHealth { poisoned, threads }
    }

    /// A new object id, never handed out before, even across crashes.
    pub fn allocate_object_id(&self) -> Result<u64> {
        Ok(self.allocate_object_ids(1)?.start)
    }

    /// Makes the next `count` object ids allocatable without a durable
    /// high-water commit each (one commit now, if the reserved ids do not
    /// already cover them). A bulk create of N files calls it once for N:
    /// each of its chunks would otherwise commit its own high-water mark,
    /// a log record the next chunk's ingest flushed as a run of its own
    /// between the ingested ones. Ids reserved and never used are skipped,
    /// as a crash skips the rest of a reserved chunk.
    pub fn reserve_object_ids(&self, count: u64) -> Result<()> {
        self.ids.reserve_ahead(count, |high| self.commit_id_high_water(high))
    }

    /// `count` new object ids, consecutive, never handed out before, even
    /// across crashes.
    pub fn allocate_object_ids(&self, count: u64) -> Result<std::ops::Range<u64>> {
        self.ids.allocate_range(count, |high| self.commit_id_high_water(high))
    }

    /// Durably records `high` as the object ids' high-water mark.
    fn commit_id_high_water(&self, high: u64) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(next_object_id_key()?, encode_counter(high));
        // IMPORTANT: committed before any id of the new chunk is handed
        // out, so its LSN precedes every transaction using one, and
        // durability is prefix-closed. Durable keeps that argument
        // local; it costs one sync per chunk.
        self.commit(&b, Durability::Durable).map(|_| ())
    }

    /// Runs `f` as a transaction on `objects`, which it may change (see
    /// [`Transaction`]): their locks are taken in a fixed order and held
    /// until the transaction's record is committed with `durability`. If
    /// `f` fails nothing is written. Returns `f`'s result and the LSN.
    pub fn transact<R>(
        &self,
        objects: &[u64],
        durability: Durability,
        f: impl FnOnce(&mut Transaction<'_>) -> Result<R>,
    ) -> Result<(R, u64)> {
        let requests: Vec<LockRequest> = objects.iter().map(|&id| LockRequest::Exclusive(id)).collect();
        self.transact_locked(&requests, durability, f)
    }

    /// Like [`Store::transact`], with any mix of exclusive and shared
    /// object locks and name locks (see [`LockRequest`]).
    /// `f` may fail with any error a store error converts into (a caller's
    /// own "retry" signal, say); it is returned as is.
    pub fn transact_locked<R, E: From<ObjectError>>(
        &self,
        requests: &[LockRequest],
        durability: Durability,
        f: impl FnOnce(&mut Transaction<'_>) -> std::result::Result<R, E>,
    ) -> std::result::Result<(R, u64), E> {
        let held = self.locks.lock(requests);
        self.run_locked(held, requests, CommitAs::Record(durability), f)
    }

    /// Like [`Store::transact_locked`], committing the transaction's batch
    /// as an index run of its own instead of a log record: for very large
    /// transactions (a bulk create of many thousands of names), whose
    /// bytes are then written once instead of to the log, a memtable and a
    /// flush. Durable when it returns. Other commits wait while the run is
    /// written (and any unflushed memtable is flushed first), so small
    /// transactions should not use it.
    pub fn transact_as_run<R, E: From<ObjectError>>(
        &self,
        requests: &[LockRequest],
        f: impl FnOnce(&mut Transaction<'_>) -> std::result::Result<R, E>,
    ) -> std::result::Result<(R, u64), E> {
        let held = self.locks.lock(requests);
        self.run_locked(held, requests, CommitAs::Run, f)
    }

    /// Gives a transaction committed as a run the spare batch, if one is
    /// kept; a transaction committed as a record drops it.
    fn take_spare_batch(&self, how: CommitAs, txn: &mut Transaction<'_>) {
        use std::sync::atomic::Ordering;
        if !self.spare_kept.load(Ordering::Acquire) {
            return;
        }
        // The flag changes under the lock, so it never says none is kept
        // while one is.
        let mut kept = self.spare_run_batch.lock();
        let spare = kept.take();
        self.spare_kept.store(false, Ordering::Release);
        drop(kept);
        if let (CommitAs::Run, Some(batch)) = (how, spare) {
            txn.use_batch(batch);
        }
    }

    /// Runs a transaction on locks already taken (see `transact_locked`).
    fn run_locked<R, E: From<ObjectError>>(
        &self,
        held: Held<'_>,
        requests: &[LockRequest],
        how: CommitAs,
        f: impl FnOnce(&mut Transaction<'_>) -> std::result::Result<R, E>,
    ) -> std::result::Result<(R, u64), E> {
        self.check_writable()?;
        let mut txn = Transaction::new(self, requests, matches!(how, CommitAs::Record(Durability::Durable)));
        self.take_spare_batch(how, &mut txn);
        let out = match f(&mut txn) {
            Ok(out) => out,
            Err(e) => {
                // Nothing refers to the space it allocated: return it now.
                for extent in txn.finish().allocated {
                    if let Err(free_err) = self.space.free(extent, 0) {
                        tracing::warn!(%extent, error = %free_err, "could not return space of a failed transaction");
                    }
                }
                return Err(e);
            }
        };
        let maps = crate::objects::maps_after(&txn);
        let done = txn.finish();
        // On a failed commit the record may still be durable (a failed
        // data sync poisons the log after the record was written), so the
        // space it allocated stays allocated; the log is poisoned and
        // reopening rebuilds free space from the extent map.
        let lsn = match how {
            CommitAs::Record(durability) => self.commit_owned(done.batch, done.deps, durability)?,
            CommitAs::Run => {
                let committed = self.commit_ingest(&done.batch, &done.deps);
                let mut spare = done.batch;
                spare.clear();
                let mut kept = self.spare_run_batch.lock();
                *kept = Some(spare);
                self.spare_kept.store(true, std::sync::atomic::Ordering::Release);
                drop(kept);
                committed?
            }
        };
        self.extent_cache.settle(maps);
        drop(held);
        // IMPORTANT: the transaction has committed: nothing below may turn
        // it into an error, or a caller would retry what is done (an
        // append, say). Shadowing: what the record stopped referencing is
        // reused only once the record is durable and no older reader
        // remains.
        for extent in done.frees {
            if let Err(e) = self.space.free(extent, lsn) {
                // The space map no longer matches the extent map: stop
                // writing; reopening rebuilds free space from the map.
                self.poison(format!("freeing {extent} after commit {lsn} failed: {e}"));
            }
        }
        if let Err(e) = self.fold_entry_counts(&done.merged_dirs) {
            // Only the form of the onodes was to change; their operand
            // counts stay pending, so a later commit folds them.
            tracing::warn!(lsn, error = %e, "folding directory entry counts after a commit failed");
        }
        Ok((out, lsn))
    }

    /// A stamp of the committed metadata now: `None` while a batch goes in
    /// or without a metadata cache. Metadata read after it (onodes,
    /// dentries) is still the committed value while
    /// [`Store::meta_unchanged_since`] of it holds, so a caller may act on
    /// what it read then instead of reading it again.
    pub fn meta_stamp(&self) -> Option<u64> {
        self.meta_cache.stamp()
    }

    /// Whether no batch went into the store, nor is going in, since
    /// [`Store::meta_stamp`] gave `stamp`.
    pub fn meta_unchanged_since(&self, stamp: u64) -> bool {
        self.meta_cache.unchanged_since(stamp)
    }

    /// The committed value of an onode or dentry key, through the metadata
    /// cache (other keys are read from the index). Sees every commit that
    /// returned, buffered or durable.
    pub fn get_meta(&self, key: &[u8]) -> Result<Option<Arc<MetaValue>>> {
        self.meta_cache.get_or_load(key, || self.index.get(key).map_err(ObjectError::from))
    }

    /// The committed values of `keys` (onode or dentry keys, in any
    /// order), in their order: from the metadata cache where it holds
    /// them, the rest from one sorted multi-get of the index
    /// ([`larder_index::Index::get_many`], which shares its searches
    /// between neighbouring keys), which are not kept in the cache (a
    /// scan's values, each read once: keeping them evicted what gets
    /// reuse).
    pub fn get_meta_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Arc<MetaValue>>>> {
        self.meta_cache.get_many_unkept(keys, |missed| self.index.get_many(missed).map_err(ObjectError::from))
    }

    /// A value derived from dentry reads only (the dentry a path leads
    /// to), kept in a path entry of the metadata cache while none of the
    /// dentries it was derived from changes, else computed by `derive`;
    /// `key` names it (the caller's encoding of the path). `derive` pushes
    /// the key ([`crate::meta::dentry_key`]) of every dentry it reads,
    /// present or absent, onto the vector it is given: a batch writing
    /// one of those retires the entry, and only those do, so a dentry
    /// read but not named would leave a stale entry answering.
    pub fn derived_from_names<E>(
        &self,
        key: &[u8],
        derive: impl FnOnce(&mut Vec<Vec<u8>>) -> std::result::Result<Option<Vec<u8>>, E>,
    ) -> std::result::Result<DerivedPath, E> {
        self.meta_cache.get_or_derive(key, false, derive)
    }

    /// As [`Store::derived_from_names`], for a caller that reads the
    /// object the path leads to next, through [`Store::read_to_end_via`]:
    /// a path derived anew and leading somewhere enters the cache only
    /// then, together with the object's onode, as one entry inserted once
    /// (a path leading nowhere enters at once).
    pub fn derived_for_read<E>(
        &self,
        key: &[u8],
        derive: impl FnOnce(&mut Vec<Vec<u8>>) -> std::result::Result<Option<Vec<u8>>, E>,
    ) -> std::result::Result<DerivedPath, E> {
        self.meta_cache.get_or_derive(key, true, derive)
    }

    /// The path entry's value for `key`, as [`Store::derived_from_names`]
    /// would return it, if it is cached and current; `None` otherwise
    /// (nothing is derived).
    pub fn derived_cached(&self, key: &[u8]) -> Option<DerivedPath> {
        self.meta_cache.derived_cached(key)
    }

    /// What `path` leads to (the value of `key`, and for an inline object
    /// the length of its bytes at the value's end), if the path's entry
    /// holds it current; `None` otherwise (nothing is loaded).
    pub(crate) fn reached_cached(&self, path: &DerivedPath, key: &[u8]) -> Option<cache::Reached> {
        self.meta_cache.reached_cached(path, key)
    }

    /// What `path` leads to: from the path's entry while no batch wrote
    /// `key` since it was read, else from the metadata cache or the index,
    /// then held by the path's entry alone (not kept under `key`).
    pub(crate) fn reach(&self, path: &DerivedPath, key: &[u8]) -> Result<cache::Reached> {
        let limits = self.limits();
        self.meta_cache.reach(path, key, || self.index.get(key).map_err(ObjectError::from), |v| v.inline_len(&limits))
    }

    /// The committed value of `key`: the metadata cache's if it holds one,
    /// else the index's, which is then not kept in the cache; for a caller
    /// that keeps what it derives itself (a path entry of the cache).
    pub fn get_meta_unkept(&self, key: &[u8]) -> Result<Option<Arc<MetaValue>>> {
        self.meta_cache.get_unkept(key, || self.index.get(key).map_err(ObjectError::from))
    }

    /// `f` of the attributes of the onode key `key` holds (`None` if it
    /// is absent), as [`Store::with_attributes`] gives them, for a key
    /// read through the value `from` (a dentry's value, for its child's
    /// onode): while nothing was committed since `from` last led to
    /// `key`, no lookup at all.
    pub fn attributes_linked<T>(&self, from: &MetaValue, key: &[u8], f: impl FnOnce(&Onode) -> T) -> Result<Option<T>> {
        let limits = self.limits();
        self.meta_cache.attributes_linked(from, key, &limits, || self.index.get(key).map_err(ObjectError::from), f)
    }

    /// Whether any object may have an extended attribute (see
    /// `ApplyOrder::xattrs_may_exist`).
    pub(crate) fn xattrs_may_exist(&self) -> bool {
        self.apply_order.xattrs_may_exist()
    }

    /// The cache of decoded extent maps.
    pub(crate) fn extent_cache(&self) -> &crate::objects::ExtentCache {
        &self.extent_cache
    }

    /// Bytes the metadata cache may hold, by its weighing: what
    /// `meta_cache_bytes` leaves once the extent-map cache's share and the
    /// room the cache keeps for keys recently evicted are set aside.
    pub fn meta_cache_capacity(&self) -> u64 {
        self.meta_cache.capacity()
    }

    /// Metadata cache counters: (hits, misses, bytes cached).
    pub fn meta_cache_stats(&self) -> (u64, u64, u64) {
        self.meta_cache.stats()
    }

    /// Rewrites a directory's onode whole once [`FOLD_OPERANDS`] entry-count
    /// operands have been written to it since the last rewrite, so a read
    /// of the onode (every create in the directory reads it) never folds a
    /// long chain of operands: a directory of a million creates would
    /// otherwise make each read fold up to a memtable's worth of them.
    fn fold_entry_counts(&self, dirs: &[u64]) -> Result<()> {
        let due: Vec<(u64, u32)> = {
            let mut pending = self.pending_operands.lock();
            if pending.len() > 65_536 {
                // Only a heuristic: forgetting counts of directories seldom
                // written lets their chains grow a little longer, no more.
                pending.clear();
            }
            dirs.iter()
                .copied()
                .filter_map(|d| {
                    let n = pending.entry(d).or_insert(0);
                    *n += 1;
                    if *n >= FOLD_OPERANDS {
                        pending.remove(&d).map(|n| (d, n))
                    } else {
                        None
                    }
                })
                .collect()
        };
        for (dir, count) in due {
            let requests = [LockRequest::Exclusive(dir)];
            // Creates hold the directory shared: waiting for it would
            // drain them all, so a busy directory is folded only when its
            // chain has grown long, and otherwise at the next chance.
            let held = if count >= FOLD_OPERANDS_FORCE {
                self.locks.lock(&requests)
            } else {
                match self.locks.try_lock(&requests) {
                    Some(h) => h,
                    None => {
                        *self.pending_operands.lock().entry(dir).or_insert(0) += count;
                        continue;
                    }
                }
            };
            // Buffered: the value is the same, only its form changes.
            let folded = self.run_locked(held, &requests, CommitAs::Record(Durability::Buffered), |txn| {
                match txn.onode(dir)? {
                    Some(onode) => txn.put_onode(dir, &onode),
                    None => Ok(()),
                }
            });
            if let Err(e) = folded {
                *self.pending_operands.lock().entry(dir).or_insert(0) += count;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Makes every transaction committed so far durable (and visible).
    pub fn sync(&self) -> Result<()> {
        self.check_writable()?;
        Ok(self.log.sync()?)
    }

    /// Returns once the transaction committed as `lsn` (and so every one
    /// before it) is durable, sharing the log's group commit with every
    /// other caller. With [`Store::commit`] as [`Durability::Buffered`] it
    /// lets a caller release its own locks once the commit is visible and
    /// ordered, then wait for durability without holding them, so
    /// concurrent committers' records reach the disk in one group.
    pub fn sync_to(&self, lsn: u64) -> Result<()> {
        self.check_writable()?;
        Ok(self.log.sync_to(lsn)?)
    }

    /// The index holding the store's maps, for reads only: writes, flushes
    /// and ingests go through the store's transactions and checkpoints.
    pub fn index(&self) -> IndexView<'_> {
        IndexView::new(&self.index)
    }

    /// Sets (or, with `None`, removes) the observer told, after each
    /// commit, which objects and entries it changed: a FUSE mount drops
    /// the kernel's cached copies when another interface in the process
    /// changes them. Commits on threads marked by
    /// [`unobserved_thread`] are not told.
    pub fn set_change_observer(&self, observer: Option<ChangeObserver>) {
        *self.observer.write() = observer;
    }

    /// Bytes the file system holding the store still has for it (for
    /// `statfs`: containers not yet created can use them).
    pub fn host_available_bytes(&self) -> Result<u64> {
        Ok(self.storage.available_bytes(&self.dir)?)
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The storage every file of the store goes through (behind the
    /// store's poison latch): for the store's own files only.
    pub(crate) fn storage(&self) -> &StorageRef {
        &self.storage
    }

    /// The superblock's current copy.
    pub fn superblock(&self) -> &Superblock {
        &self.superblock.superblock
    }

    /// The intent log's counters since this open (groups, records, syncs).
    pub fn log_stats(&self) -> larder_log::LogStats {
        self.log.stats()
    }

    /// What the intent log's recovery found when this store opened (whether
    /// it opened from a clean close, records replayed, the log's end).
    pub fn log_recovery(&self) -> &larder_log::RecoveryReport {
        self.log.recovery_report()
    }

    /// Asks the log's background flusher to make the buffered
    /// transactions durable now, without waiting for it (see
    /// `larder_log::Log::sync_soon`): for a caller that waits on
    /// [`Store::durable_lsn`] to reuse what a buffered transaction freed.
    pub fn sync_soon(&self) {
        self.log.sync_soon();
    }

    /// Highest LSN whose transaction, and every earlier one, is durable.
    pub fn durable_lsn(&self) -> u64 {
        self.log.durable_lsn()
    }

    /// Flushes the index now and frees the log segments and the space of
    /// deleted data it then covers (the background checkpointer does this
    /// as the log fills).
    pub fn checkpoint(&self) -> Result<()> {
        self.check_writable()?;
        checkpoint_once(&self.index, &self.log, &self.space, true)
            .map_err(|source| ObjectError::Checkpoint { during: "a checkpoint", source })
    }

    /// Makes everything durable, flushes the index so the next open replays
    /// nothing, removes the log segments it no longer needs, stops the
    /// background threads and closes the log with its clean-close marker,
    /// so the next open reads no log segment past its header.
    pub fn close(mut self) -> Result<()> {
        if let Some(c) = self.checkpointer.as_mut() {
            c.stop();
        }
        self.log.sync()?;
        self.checkpoint()?;
        // The index now holds everything: the log needs only the segment
        // it writes next, and a closed store should not keep the rest's
        // disk space (the next open makes segments again as it fills).
        if let Err(e) = self.log.release_free_segments() {
            tracing::warn!(dir = %self.dir.display(), error = %e, "could not remove free log segments at close");
        }
        // Last, once the index covers every record: the log's clean-close
        // marker lets the next open skip reading its segments.
        self.log.close_clean()?;
        Ok(())
    }

    /// The store's container space.
    pub fn space(&self) -> &SpaceManager {
        &self.space
    }

    /// Whether large writes' data over written blocks is written back
    /// rather than synced ([`StoreOptions::write_back_data`]).
    pub(crate) fn writes_back_data(&self) -> bool {
        self.write_back_data
    }

    /// The limits the store's records are checked against.
    pub(crate) fn limits(&self) -> MetaLimits {
        MetaLimits::from_superblock(&self.superblock.superblock)
    }

    /// Every extent the extent map references, for a check against the
    /// space manager (fsck).
    pub fn used_extents(&self) -> Result<Vec<Extent>> {
        used_extents(&self.index, &self.limits())
    }
}

/// Applies one durable record to the index (the log calls this in LSN order).
fn next_object_id_key() -> Result<Vec<u8>> {
    Ok(store_key(&StoreName::new(NEXT_OBJECT_ID)?))
}

/// The extents every fmap entry references.
fn used_extents(index: &Index, limits: &MetaLimits) -> Result<Vec<Extent>> {
    let start = map_prefix(Map::Fmap);
    let end = prefix_end(&start).unwrap_or_default();
    let mut used = Vec::new();
    for kv in index.range(std::ops::Bound::Included(&start[..]), std::ops::Bound::Excluded(&end[..]), true)? {
        let (_, value) = kv?;
        used.push(ExtentMapEntry::decode(&value, limits)?.extent);
    }
    Ok(used)
}

/// A hook a lower layer (`layer`: "index" or "log") calls once when it is
/// poisoned: it poisons the store too, so the first failure of any layer
/// stops every write, then calls the hook the caller's options had.
fn poison_hook(
    latch: &CheckedStorage,
    layer: &'static str,
    theirs: Option<larder_index::OnPoison>,
) -> larder_index::OnPoison {
    let latch = latch.clone();
    Arc::new(move |cause: &str| {
        latch.poison(format!("{layer}: {cause}"));
        if let Some(hook) = &theirs {
            hook(cause);
        }
    })
}
