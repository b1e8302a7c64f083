//! The block cache and the descriptor cache of open runs.
//!
//! Data blocks are cached in one weighted cache (`block_cache_bytes`).
//! Open runs (a descriptor plus filter, block index and tombstones) are
//! bounded by count (`max_open_runs`) and by bytes (`metadata_cache_bytes`);
//! a CLOCK sweep at each open evicts runs, and an evicted run is reopened
//! (and re-verified) on its next use.
//!
//! The count is a hard bound: the sweep clears reference bits on a first
//! turn and evicts on a second. The byte budget yields to the runs reads
//! use: the sweep evicts only a run idle for a window of reads (no use
//! since the sweep last found it used, and at least [`IDLE_WINDOW_PER_RUN`]
//! reads per open run since then). Were it to evict runs in use, point
//! reads whose runs' metadata exceeds the budget would reopen runs on every
//! get (each open's sweep evicting a run the next get needs). So, after
//! each open, the bytes held are at most the budget plus the metadata of
//! runs used within the window (and at most `max_open_runs` runs); runs
//! that go unused are evicted by the sweeps of later opens. Each open that
//! leaves the cache over budget is counted
//! (`IndexStats::metadata_over_budget_opens`) and the first is logged, so
//! a user sees the budget is too small for what reads use.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use larder_io::StorageRef;
use parking_lot::{MappedRwLockReadGuard, Mutex, RwLock, RwLockReadGuard};
use quick_cache::sync::Cache;
use quick_cache::{OptionsBuilder, Weighter};

use super::block::Block;
use super::reader::OpenRun;
use super::RunMeta;
use crate::error::Result;
use crate::merge::Registry;
use crate::stats::Stats;

/// Reads (gets, and run opens, so scans advance it too) per open run a run
/// must go unused, after the sweep last found it used, before the byte
/// budget may evict it. A run of a level of n runs read alike is used once
/// in n gets on average; four times the open runs covers such a level with
/// a margin.
pub(crate) const IDLE_WINDOW_PER_RUN: u64 = 4;

#[derive(Clone)]
struct BlockWeighter;

impl Weighter<(u64, u64), Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), block: &Arc<Block>) -> u64 {
        block.size_bytes() as u64 + 64
    }
}

/// Data blocks keyed by (run id, block offset).
pub(crate) struct BlockCache {
    cache: Cache<(u64, u64), Arc<Block>, BlockWeighter>,
}

/// Blocks below which a cache gets one shard. quick_cache halves the
/// shards it is offered until each holds 32 items, so it would give such
/// a cache one shard anyway (two at 63 items).
const ONE_SHARD_ITEMS: usize = 64;

impl BlockCache {
    pub(crate) fn new(capacity_bytes: usize) -> Self {
        let estimated_items = (capacity_bytes / 4096).max(16);
        let weight = capacity_bytes.max(1) as u64;
        // Said outright for a small cache: unasked, quick_cache starts from
        // the machine's parallelism, which std reads from cgroup files
        // (80 us of a 0.3 ms open of a store by a fresh process here).
        let one_shard = (estimated_items < ONE_SHARD_ITEMS)
            .then(|| {
                OptionsBuilder::new()
                    .estimated_items_capacity(estimated_items)
                    .weight_capacity(weight)
                    .shards(1)
                    .build()
                    .ok()
            })
            .flatten();
        let cache = match one_shard {
            Some(options) => Cache::with_options(options, BlockWeighter, Default::default(), Default::default()),
            None => Cache::with_weighter(estimated_items, weight, BlockWeighter),
        };
        BlockCache { cache }
    }

    pub(crate) fn get_or_load(
        &self,
        run: u64,
        offset: u64,
        stats: &Stats,
        load: impl FnOnce() -> Result<Arc<Block>>,
    ) -> Result<Arc<Block>> {
        if let Some(b) = self.cache.get(&(run, offset)) {
            stats.add(&stats.block_cache_hits, 1);
            return Ok(b);
        }
        stats.add(&stats.block_cache_misses, 1);
        let b = load()?;
        self.cache.insert((run, offset), b.clone());
        Ok(b)
    }

    /// Bytes currently cached.
    pub(crate) fn weight(&self) -> u64 {
        self.cache.weight()
    }
}

/// Removes the files of obsolete runs (and unmaps them), on a merger
/// while the index's workers run, so a reader that lets go of the last
/// version holding a merged-away run does not pay for it: unlinking a
/// 256 MiB run drops its 65,536 cached pages (a few ms of kernel time),
/// and unmapping it its page tables. Without workers (or once they have
/// stopped) the removal happens where the run is let go, as it did
/// before. A run removed late is one no committed manifest names: a crash
/// before its removal leaves a file the next open removes.
pub(crate) struct Reaper {
    queue: Mutex<Vec<(PathBuf, Option<Arc<OpenRun>>)>>,
    /// Whether a worker drains the queue.
    deferred: AtomicBool,
    /// The workers' condition variable: notified when a run is queued
    /// (without their lock, so a merger about to wait may miss it; it
    /// drains the queue before its next merge or wake-up).
    wake: Arc<parking_lot::Condvar>,
    storage: StorageRef,
}

impl Reaper {
    pub(crate) fn new(storage: StorageRef, wake: Arc<parking_lot::Condvar>) -> Reaper {
        Reaper { queue: Mutex::new(Vec::new()), deferred: AtomicBool::new(false), wake, storage }
    }

    /// Queues runs for a worker from now on (until [`Reaper::stop`]).
    pub(crate) fn start(&self) {
        self.deferred.store(true, Ordering::Release);
    }

    /// Removes inline from now on, and whatever is queued now.
    pub(crate) fn stop(&self) {
        self.deferred.store(false, Ordering::Release);
        self.drain();
    }

    fn remove(&self, path: PathBuf, open: Option<Arc<OpenRun>>) {
        if self.deferred.load(Ordering::Acquire) {
            self.queue.lock().push((path, open));
            self.wake.notify_all();
        } else {
            self.remove_now(&path, open);
        }
    }

    fn remove_now(&self, path: &std::path::Path, open: Option<Arc<OpenRun>>) {
        drop(open);
        // A failure leaves an unreferenced file, which the next open removes.
        if let Err(e) = self.storage.remove_file(path) {
            tracing::warn!(path = %path.display(), error = %e, "could not remove obsolete run");
        }
    }

    /// Removes every queued run; says whether there was any.
    pub(crate) fn drain(&self) -> bool {
        let queued = std::mem::take(&mut *self.queue.lock());
        let any = !queued.is_empty();
        for (path, open) in queued {
            self.remove_now(&path, open);
        }
        any
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.drain();
    }
}

/// A run as the version sees it: its manifest record plus, while it is in
/// the descriptor cache, its open state.
pub(crate) struct RunHandle {
    pub(crate) meta: RunMeta,
    pub(crate) path: PathBuf,
    open: RwLock<Option<Arc<OpenRun>>>,
    referenced: AtomicBool,
    /// The read clock ([`RunCache::clock`]) from which the run counts as
    /// idle if unused: set by the sweep (under the clock's lock) when it
    /// finds the run used, and when the run is admitted.
    idle_from: AtomicU64,
    /// Set once a committed manifest no longer lists the run: the file is
    /// removed (by this reaper) when the last reader lets go.
    obsolete: std::sync::OnceLock<Arc<Reaper>>,
}

impl std::fmt::Debug for RunHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunHandle").field("meta", &self.meta).finish()
    }
}

impl RunHandle {
    pub(crate) fn new(meta: RunMeta, path: PathBuf) -> Arc<Self> {
        Arc::new(RunHandle {
            meta,
            path,
            open: RwLock::new(None),
            referenced: AtomicBool::new(false),
            idle_from: AtomicU64::new(0),
            obsolete: std::sync::OnceLock::new(),
        })
    }

    /// No committed manifest lists the run any more: `reaper` removes its
    /// file once the last reader lets go.
    pub(crate) fn mark_obsolete(&self, reaper: &Arc<Reaper>) {
        let _ = self.obsolete.set(reaper.clone());
    }
}

impl Drop for RunHandle {
    fn drop(&mut self) {
        if let Some(reaper) = self.obsolete.get() {
            reaper.remove(std::mem::take(&mut self.path), self.open.get_mut().take());
        }
    }
}

/// Marks `run` used since the last sweep, writing the shared flag only
/// when it changes (a store per get would move its line between readers).
fn mark_referenced(run: &RunHandle) {
    if !run.referenced.load(Ordering::Relaxed) {
        run.referenced.store(true, Ordering::Relaxed);
    }
}

struct ClockState {
    ring: VecDeque<Weak<RunHandle>>,
    open_count: usize,
    bytes: usize,
}

/// Bounds the runs held open.
pub(crate) struct RunCache {
    state: Mutex<ClockState>,
    max_open: usize,
    max_bytes: usize,
    storage: StorageRef,
    registry: Registry,
    /// Map opened runs for point reads (`Options::map_runs`), and check
    /// their length before each mapped read
    /// (`Options::check_mapped_run_length`).
    map_runs: (bool, bool),
    /// Runs whose mappings readers asked to have populated.
    populate_queue: Mutex<Vec<Weak<OpenRun>>>,
    /// The index's counters: the read clock, and opens over budget.
    stats: Arc<Stats>,
    /// Whether an open over the byte budget was logged.
    over_budget_logged: AtomicBool,
}

impl RunCache {
    pub(crate) fn new(
        storage: StorageRef,
        registry: Registry,
        (max_open, max_bytes): (usize, usize),
        map_runs: (bool, bool),
        stats: Arc<Stats>,
    ) -> Self {
        RunCache {
            stats,
            over_budget_logged: AtomicBool::new(false),
            state: Mutex::new(ClockState { ring: VecDeque::new(), open_count: 0, bytes: 0 }),
            max_open,
            max_bytes,
            storage,
            registry,
            map_runs,
            populate_queue: Mutex::new(Vec::new()),
        }
    }

    /// The open state of `run` if it is open now (counted as a use), else
    /// None: for work worth doing only on runs already open.
    pub(crate) fn peek(&self, run: &RunHandle) -> Option<Arc<OpenRun>> {
        let open = run.open.read().clone();
        if open.is_some() {
            mark_referenced(run);
        }
        open
    }

    /// The open state of `run` pinned by its read guard (no reference
    /// count taken), if it is open now and no one holds or waits for its
    /// write lock (counted as a use); else None, and the caller takes it by
    /// [`RunCache::get`] after letting go of its other pins.
    ///
    /// Why pins cannot deadlock: a pin never waits (`try_read`), and a
    /// reader holding pins waits on no lock: before anything that may
    /// block (a run's state by `get`, which may wait on a run's lock, open
    /// the run and take the clock's lock) it lets go of every pin it holds
    /// ([`OpenRef::unpinned`]). The writers of a run's state (an open,
    /// `forget`) so wait only for readers that finish without them, and
    /// the clock's sweep does not wait at all (`try_write`).
    pub(crate) fn pin<'a>(&self, run: &'a RunHandle) -> Option<OpenRef<'a>> {
        let guard = run.open.try_read()?;
        let pinned = RwLockReadGuard::try_map(guard, Option::as_ref).ok()?;
        mark_referenced(run);
        Some(OpenRef::Pinned(pinned))
    }

    /// The open state of `run`, opening (and verifying) it if needed.
    pub(crate) fn get(&self, run: &Arc<RunHandle>, stats: &Stats) -> Result<Arc<OpenRun>> {
        if let Some(o) = self.peek(run) {
            return Ok(o);
        }
        run.referenced.store(true, Ordering::Relaxed);
        let mut slot = run.open.write();
        if let Some(o) = slot.as_ref() {
            return Ok(o.clone());
        }
        let opened = Arc::new(OpenRun::open(&*self.storage, &run.path, &run.meta, &self.registry, self.map_runs)?);
        stats.add(&stats.run_opens, 1);
        *slot = Some(opened.clone());
        drop(slot);
        self.admit(run, opened.metadata_bytes());
        Ok(opened)
    }

    /// Opens (and verifies) a run this index just wrote, before any
    /// version names it; a run of at most `populate_up_to` bytes
    /// (`Options::populate_new_runs_bytes`) has its mapping populated once
    /// a reader uses it ([`RunCache::request_populate`]). Give it to the
    /// run's handle with [`RunCache::adopt`]. None if the open fails: the
    /// first reader's open then reports it, as without this.
    pub(crate) fn open_new(
        &self,
        meta: &RunMeta,
        path: &std::path::Path,
        populate_up_to: usize,
        stats: &Stats,
    ) -> Option<Arc<OpenRun>> {
        let open = match OpenRun::open(&*self.storage, path, meta, &self.registry, self.map_runs) {
            Ok(open) => open,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "could not open a new run ahead of its readers");
                return None;
            }
        };
        stats.add(&stats.run_opens, 1);
        if meta.file_size <= populate_up_to as u64 {
            open.want_populate();
        }
        Some(Arc::new(open))
    }

    /// Queues `open` for [`RunCache::populate_queued`] if the caller, a
    /// reader, is the first to use it and it wants its mapping populated;
    /// says whether it queued it. Only runs readers use are populated, so
    /// an ingest nobody reads keeps its runs' pages out of the process's
    /// resident size.
    pub(crate) fn request_populate(&self, open: &Arc<OpenRun>) -> bool {
        if !open.take_populate_request() {
            return false;
        }
        self.populate_queue.lock().push(Arc::downgrade(open));
        true
    }

    /// Populates the mappings of the runs readers asked for (those still
    /// open); says whether there was any. For an idle worker: a 256 MiB
    /// run takes tens of milliseconds.
    pub(crate) fn populate_queued(&self) -> bool {
        let queued = std::mem::take(&mut *self.populate_queue.lock());
        let any = !queued.is_empty();
        for open in queued.iter().filter_map(std::sync::Weak::upgrade) {
            open.populate();
        }
        any
    }

    /// Whether a reader asked for a run's mapping to be populated.
    pub(crate) fn populate_pending(&self) -> bool {
        !self.populate_queue.lock().is_empty()
    }

    /// Makes `open` ([`RunCache::open_new`]) the open state of `run`, a
    /// run in no installed version yet, so its first readers find it open.
    pub(crate) fn adopt(&self, run: &Arc<RunHandle>, open: Arc<OpenRun>) {
        let bytes = open.metadata_bytes();
        *run.open.write() = Some(open);
        run.referenced.store(true, Ordering::Relaxed);
        self.admit(run, bytes);
    }

    /// The read clock the idle window is measured on: gets plus run
    /// opens (so a workload of scans, which count no gets, advances it).
    fn clock(&self) -> u64 {
        self.stats.gets.load(Ordering::Relaxed) + self.stats.run_opens.load(Ordering::Relaxed)
    }

    /// Takes the runs the open of the index verified as unused, and evicts
    /// down to the bounds: verifying every run is no read that needs it.
    pub(crate) fn settle(&self) {
        let st = self.state.lock();
        for h in st.ring.iter().filter_map(Weak::upgrade) {
            h.referenced.store(false, Ordering::Relaxed);
            h.idle_from.store(0, Ordering::Relaxed);
        }
        drop(st);
        self.sweep(None);
    }

    fn admit(&self, run: &Arc<RunHandle>, bytes: usize) {
        {
            let mut st = self.state.lock();
            st.open_count += 1;
            st.bytes += bytes;
            st.ring.push_back(Arc::downgrade(run));
        }
        self.sweep(Some(run));
    }

    /// Evicts runs while the cache is over a bound (never `keep`, the run
    /// just opened): over the count, the first turn clears reference bits
    /// and the second evicts; over the bytes alone, only runs idle for the
    /// window are evicted, in one turn, and otherwise the budget yields.
    fn sweep(&self, keep: Option<&Arc<RunHandle>>) {
        let now = self.clock();
        let mut st = self.state.lock();
        if st.ring.len() > 2 * self.max_open + 16 {
            // Drop entries of runs that are gone or closed (re-admitted runs
            // leave a stale entry behind).
            st.ring.retain(|w| w.upgrade().is_some_and(|h| h.open.read().is_some()));
        }
        let window = IDLE_WINDOW_PER_RUN * st.open_count.max(16) as u64;
        if let Some(run) = keep {
            run.idle_from.store(now + window, Ordering::Relaxed);
        }
        let over_count = st.open_count > self.max_open;
        let mut budget = st.ring.len() * if over_count { 2 } else { 1 };
        while (st.open_count > self.max_open || st.bytes > self.max_bytes) && budget > 0 && st.ring.len() > 1 {
            budget -= 1;
            let Some(w) = st.ring.pop_front() else { break };
            let Some(h) = w.upgrade() else {
                // The run was dropped; its open state went with it.
                continue;
            };
            if keep.is_some_and(|run| Arc::ptr_eq(&h, run)) {
                st.ring.push_back(w);
                continue;
            }
            if h.referenced.swap(false, Ordering::Relaxed) {
                h.idle_from.store(now + window, Ordering::Relaxed);
                st.ring.push_back(w);
                continue;
            }
            if st.open_count <= self.max_open && now < h.idle_from.load(Ordering::Relaxed) {
                // Over the byte budget only, and used within the window.
                st.ring.push_back(w);
                continue;
            }
            // A run a reader holds (pinned, or being opened) is in use:
            // it stays, and the sweep never waits on a reader.
            let Some(mut slot) = h.open.try_write() else {
                st.ring.push_back(w);
                continue;
            };
            let taken = slot.take();
            drop(slot);
            if let Some(o) = taken {
                st.open_count -= 1;
                st.bytes = st.bytes.saturating_sub(o.metadata_bytes());
            }
        }
        if keep.is_some() && st.bytes > self.max_bytes {
            let (bytes, open) = (st.bytes, st.open_count);
            drop(st);
            self.stats.add(&self.stats.metadata_over_budget_opens, 1);
            if !self.over_budget_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    metadata_bytes = bytes,
                    budget = self.max_bytes,
                    open_runs = open,
                    "the runs reads use hold more metadata than metadata_cache_bytes: kept open over budget"
                );
            }
        }
    }

    /// Forgets a run that left the version, releasing its budget.
    pub(crate) fn forget(&self, run: &RunHandle) {
        let taken = run.open.write().take();
        if let Some(o) = taken {
            let mut st = self.state.lock();
            st.open_count = st.open_count.saturating_sub(1);
            st.bytes = st.bytes.saturating_sub(o.metadata_bytes());
        }
    }

    /// (open runs, metadata bytes) for the counters.
    pub(crate) fn usage(&self) -> (usize, usize) {
        let st = self.state.lock();
        (st.open_count, st.bytes)
    }
}

/// A run's open state as one get holds it: pinned (the run's read guard,
/// held for the get) or owned (a counted reference, for a get that had to
/// wait on a lock or open the run).
pub(crate) enum OpenRef<'a> {
    /// Held by the run's read guard: no reference count taken.
    Pinned(MappedRwLockReadGuard<'a, Arc<OpenRun>>),
    /// Held by a reference of its own.
    Owned(Arc<OpenRun>),
}

impl OpenRef<'_> {
    /// The same open state held by a reference, its guard let go.
    pub(crate) fn unpinned(self) -> OpenRef<'static> {
        match self {
            OpenRef::Pinned(guard) => OpenRef::Owned(Arc::clone(&guard)),
            OpenRef::Owned(open) => OpenRef::Owned(open),
        }
    }
}

impl OpenRef<'_> {
    /// A counted reference to the open state.
    pub(crate) fn shared(&self) -> Arc<OpenRun> {
        match self {
            OpenRef::Pinned(guard) => Arc::clone(guard),
            OpenRef::Owned(open) => open.clone(),
        }
    }
}

impl std::ops::Deref for OpenRef<'_> {
    type Target = OpenRun;

    fn deref(&self) -> &OpenRun {
        match self {
            OpenRef::Pinned(guard) => guard,
            OpenRef::Owned(open) => open,
        }
    }
}
