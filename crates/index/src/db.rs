//! The index: open, the shared state, and the public API.

use std::collections::HashSet;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use larder_io::{Lock, StorageRef};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::batch::WriteBatch;
use crate::error::{IndexError, Result};
use crate::iter::Iter;
use crate::manifest::{self, commit_manifest, load_manifest, parse_manifest_file_name, ManifestState};
use crate::memtable::Memtable;
use crate::merge::Registry;
use crate::options::Options;
use crate::run::cache::{BlockCache, RunCache, RunHandle};
use crate::run::{parse_run_file_name, run_file_name};
use crate::stats::{IndexStats, Stats};
use crate::version::{SuperVersion, Version};

/// The writer's state, under the write lock.
pub(crate) struct WriterState {
    pub last_seq: u64,
    /// The sequence number of a prepared, not yet installed ingest: writes
    /// wait for it (see `ingest`).
    pub ingesting: Option<u64>,
}

/// The committed manifest and the version it describes, under the commit lock.
pub(crate) struct Committed {
    pub state: ManifestState,
    pub path: PathBuf,
    pub version: Arc<Version>,
}

/// Coordination between writers and background workers.
#[derive(Default)]
pub(crate) struct BgState {
    pub shutdown: bool,
    pub busy_runs: HashSet<u64>,
    pub flushing: bool,
    pub compactions_running: usize,
    /// Bumped (under the lock) whenever there may be new work, so a worker
    /// that found none can tell whether it missed a wake-up.
    pub work_epoch: u64,
    /// The file a flush last could not write for want of space, until
    /// one succeeds: the flusher retries after a pause, and waiters (a
    /// flush, a stalled write) get ENOSPC naming it.
    pub flush_no_space: Option<PathBuf>,
    /// Flushes the flusher has tried, for a waiter to tell whether a try
    /// since it began failed.
    pub flush_tries: u64,
    /// The same for merges (a write stalled on merges gets ENOSPC).
    pub merge_no_space: Option<PathBuf>,
    /// The idle flusher found writes stopped: mergers with nothing else
    /// to do merge each level into one run (`compaction::choose_at_rest`)
    /// until every level is one run or a flush ends it.
    pub rest_merge_wanted: bool,
    /// Bytes of the runs merges at rest took as inputs since the index
    /// opened (their budget: `compaction::REST_MERGE_BYTES_PER_WRITTEN`).
    pub rest_merged_bytes: u64,
    /// A merge at rest is running (one at a time).
    pub rest_merge_running: bool,
}

pub(crate) struct Inner {
    pub storage: StorageRef,
    pub dir: PathBuf,
    pub options: Options,
    pub registry: Registry,
    pub sv: RwLock<Arc<SuperVersion>>,
    pub writer: Mutex<WriterState>,
    pub visible_seq: AtomicU64,
    pub durable_seq: AtomicU64,
    pub committed: Mutex<Committed>,
    pub block_cache: Arc<BlockCache>,
    pub run_cache: RunCache,
    pub stats: Arc<Stats>,
    pub poison: Mutex<Option<String>>,
    /// The thread that latched the poison, if it had a name.
    pub poisoned_by: Mutex<Option<String>>,
    /// Set when the index is closing, read by long merges without a lock.
    pub shutting_down: std::sync::atomic::AtomicBool,
    pub bg: Mutex<BgState>,
    /// Wakes workers: a memtable was frozen, runs were added, an obsolete
    /// run was queued for removal, or shutdown.
    pub work_cv: Arc<Condvar>,
    /// Removes obsolete runs' files (on a merger while the workers run).
    pub reaper: Arc<crate::run::cache::Reaper>,
    /// Wakes waiters: a flush or merge finished, or the index was poisoned.
    pub done_cv: Condvar,
    /// The sort buffer of the last ingest, kept for the next (see
    /// [`crate::ingest::SpareSlots`]).
    pub spare_slots: Mutex<crate::ingest::SpareSlots>,
    _lock: Box<dyn Lock>,
}

/// A write-optimized, persistent, ordered key-value index.
///
/// Writes go to a memtable and become durable when a flush writes them into
/// a sorted run and commits a manifest; [`Index::durable_seq`] says how far
/// that has got, so an intent log above the index replays exactly the rest.
/// Every batch carries a caller-supplied sequence number greater than any
/// before it. Reads see a consistent state: all of a batch or none of it.
pub struct Index {
    pub(crate) inner: Arc<Inner>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("dir", &self.inner.dir).finish()
    }
}

impl Index {
    /// Opens the index in `dir` (creating it if empty), taking its lock.
    ///
    /// Refuses, naming the file: a manifest or run from a newer format
    /// version or with an unknown incompatible feature; runs holding
    /// operands of a merge operator not in `options.merge_operators`; a
    /// `CURRENT`, manifest or run whose footer, meta block, filter, block
    /// index or tombstones fail their checks (data blocks are checked when
    /// read). Files no committed manifest refers to (left by a crash) are
    /// removed once everything else has been verified. Another process
    /// holding the lock is [`IndexError::Io`] (`Locked`); invalid options
    /// are [`IndexError::InvalidOption`].
    ///
    /// What a crash keeps: the batches up to [`Index::durable_seq`] (made
    /// durable by [`Index::flush`], [`Index::close`] or a background
    /// flush), none after it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use larder_index::{Index, Options, WriteBatch};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let storage = Arc::new(larder_io::RealStorage::new());
    /// let index = Index::open(storage.clone(), tmp.path(), Options::default())?;
    /// let mut batch = WriteBatch::new();
    /// batch.put(b"k1", b"v1").put(b"k2", b"v2");
    /// index.write(1, &batch)?;
    /// index.close()?; // flushes: batch 1 is durable
    ///
    /// let index = Index::open(storage, tmp.path(), Options::default())?;
    /// assert_eq!(index.durable_seq(), 1);
    /// assert_eq!(index.get(b"k2")?, Some(b"v2".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn open(storage: StorageRef, dir: &Path, options: Options) -> Result<Index> {
        options.validate()?;
        let registry = Registry::new(options.merge_operators.clone())?;
        storage.create_dir_all(dir)?;
        let lock = storage.lock(&dir.join("LOCK"))?;
        let names = storage.list_dir(dir)?;
        let (state, path, stale) = match load_manifest(&*storage, dir, &names)? {
            Some(l) => (l.state, l.path, l.stale),
            None => {
                if let Some(run) = names.iter().find(|n| parse_run_file_name(n).is_some()) {
                    // Runs exist, so a commit happened: CURRENT was lost.
                    return Err(IndexError::corrupt(
                        dir.join(manifest::CURRENT_FILE),
                        0,
                        format!("missing while run {run} exists; restore the index directory from a backup"),
                    ));
                }
                // A new index, or one whose first commit never finished:
                // clear what that attempt left, then commit generation 1.
                for n in
                    names.iter().filter(|n| parse_manifest_file_name(n).is_some() || *n == manifest::CURRENT_TMP_FILE)
                {
                    storage.remove_file(&dir.join(n))?;
                }
                let state = ManifestState { generation: 1, ..Default::default() };
                let path = commit_manifest(&*storage, dir, &state)?;
                if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                    // Make the new directory itself durable.
                    storage.sync_dir(parent)?;
                }
                (state, path, Vec::new())
            }
        };
        for name in &state.operator_names {
            if registry.id_of(name).is_none() {
                return Err(IndexError::UnknownMergeOperator { path: path.clone(), name: name.clone() });
            }
        }
        let referenced: HashSet<u64> = state.runs.iter().map(|r| r.id).collect();
        let present: HashSet<u64> = names.iter().filter_map(|n| parse_run_file_name(n)).collect();
        for r in &state.runs {
            if !present.contains(&r.id) {
                return Err(IndexError::corrupt(
                    dir.join(run_file_name(r.id)),
                    0,
                    format!("run named by {} is missing", path.display()),
                ));
            }
        }
        let stats = Arc::new(Stats::default());
        let run_cache = RunCache::new(
            storage.clone(),
            registry.clone(),
            (options.max_open_runs, options.metadata_cache_bytes),
            (options.map_runs, options.check_mapped_run_length),
            stats.clone(),
        );
        let runs: Vec<Arc<RunHandle>> =
            state.runs.iter().map(|m| RunHandle::new(m.clone(), dir.join(run_file_name(m.id)))).collect();
        // Verify every run's footer, meta block, filter, block index and
        // tombstones now, so corruption there is reported at open (data
        // blocks are verified when read). Nothing is removed before this.
        for r in &runs {
            run_cache.get(r, &stats)?;
        }
        run_cache.settle();
        // Remove what a crash left behind: stale manifests, unreferenced runs.
        let mut removed = false;
        for p in stale {
            storage.remove_file(&p)?;
            removed = true;
        }
        for n in &names {
            if parse_run_file_name(n).is_some_and(|id| !referenced.contains(&id)) {
                storage.remove_file(&dir.join(n))?;
                removed = true;
            }
        }
        if removed {
            storage.sync_dir(dir)?;
        }
        let version = Arc::new(Version { runs });
        let durable = state.durable_seq;
        let sv = SuperVersion {
            active: Arc::new(Memtable::with_deferred_seals(
                durable + 1,
                options.memtable_size_bytes,
                options.background_threads,
            )),
            frozen: Vec::new(),
            version: version.clone(),
        };
        let work_cv = Arc::new(Condvar::new());
        let reaper = Arc::new(crate::run::cache::Reaper::new(storage.clone(), work_cv.clone()));
        let inner = Arc::new(Inner {
            block_cache: Arc::new(BlockCache::new(options.block_cache_bytes)),
            run_cache,
            storage,
            dir: dir.to_path_buf(),
            registry,
            sv: RwLock::new(Arc::new(sv)),
            writer: Mutex::new(WriterState { last_seq: durable, ingesting: None }),
            visible_seq: AtomicU64::new(durable),
            durable_seq: AtomicU64::new(durable),
            committed: Mutex::new(Committed { state, path, version }),
            stats,
            poison: Mutex::new(None),
            poisoned_by: Mutex::new(None),
            shutting_down: std::sync::atomic::AtomicBool::new(false),
            bg: Mutex::new(BgState::default()),
            work_cv,
            reaper,
            done_cv: Condvar::new(),
            spare_slots: Mutex::new(crate::ingest::SpareSlots::default()),
            _lock: lock,
            options,
        });
        let workers = if inner.options.background_threads { crate::workers::spawn(&inner) } else { Vec::new() };
        if !workers.is_empty() {
            inner.reaper.start();
        }
        Ok(Index { inner, workers: Mutex::new(workers) })
    }

    /// Applies `batch` atomically as sequence number `seq`, which must be
    /// greater than every sequence number written before
    /// ([`IndexError::SequenceNotIncreasing`] if not). A refused batch
    /// changes nothing. Readers see the whole batch as soon as this
    /// returns. The batch is durable once [`Index::durable_seq`] reaches
    /// `seq` (after a flush); until then a crash loses it. Keys, values and
    /// batches over the limits are [`IndexError::TooLarge`]; a poisoned
    /// index refuses every write with [`IndexError::Poisoned`].
    pub fn write(&self, seq: u64, batch: &WriteBatch) -> Result<()> {
        self.inner.write(seq, batch)
    }

    /// The value of `key`, or None. A block that fails its checksum is
    /// [`IndexError::Corrupt`], naming the file, never wrong bytes.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get_latest(key, <[u8]>::to_vec, |v| v)
    }

    /// The value of `key` copied into `out` (true), or false and `out`
    /// left as it was: [`Index::get`] without allocating a value for a key
    /// whose newest version is a put (in a memtable or a run), when `out`
    /// has the room. After an error `out` may hold anything.
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let value = self.inner.get_latest(key, copy_into(out), Some)?;
        Ok(settle_into(value, out))
    }

    /// The values of `keys`, in their order, seeing the index as of this
    /// call (one view for all of them): what [`Index::get`] returns for
    /// each, found in one pass (each memtable's view taken once, each run
    /// consulted once for the keys still unsettled that it may hold, a
    /// data block found and loaded once for the neighbouring keys it
    /// holds, and every filter line and block the keys need loading
    /// before any is searched). Keys may come in any order and repeat;
    /// strictly ascending ones skip a sort.
    ///
    /// ```
    /// use larder_index::{Index, Options, WriteBatch};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let index = Index::open(std::sync::Arc::new(larder_io::RealStorage::new()), tmp.path(), Options::default())?;
    /// let mut batch = WriteBatch::new();
    /// batch.put(b"a", b"1");
    /// batch.put(b"c", b"3");
    /// index.write(1, &batch)?;
    /// let values = index.get_many(&[&b"c"[..], b"b", b"a"])?;
    /// assert_eq!(values, [Some(b"3".to_vec()), None, Some(b"1".to_vec())]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let (sv, seq) = self.inner.read_view();
        self.inner.get_many_any_order(&sv, seq, keys)
    }

    /// Live keys between `start` and `end`, forward or backward, as
    /// `(key, value)` pairs, seeing the index as of this call. A seek is a
    /// range with an unbounded end. An I/O or corruption error is yielded
    /// as an `Err` item and ends the iteration.
    ///
    /// ```
    /// use std::ops::Bound;
    /// use std::sync::Arc;
    /// use larder_index::{Index, Options, WriteBatch};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let index = Index::open(Arc::new(larder_io::RealStorage::new()), tmp.path(), Options::default())?;
    /// let mut batch = WriteBatch::new();
    /// for key in ["a", "b", "c", "d"] {
    ///     batch.put(key, key.to_uppercase());
    /// }
    /// index.write(1, &batch)?;
    /// let keys = |from: Bound<&[u8]>, to: Bound<&[u8]>, forward| -> larder_index::Result<Vec<Vec<u8>>> {
    ///     index.range(from, to, forward)?.map(|kv| kv.map(|(k, _)| k)).collect()
    /// };
    /// assert_eq!(keys(Bound::Included(b"b"), Bound::Excluded(b"d"), true)?, [b"b".to_vec(), b"c".to_vec()]);
    /// assert_eq!(keys(Bound::Unbounded, Bound::Included(b"b"), false)?, [b"b".to_vec(), b"a".to_vec()]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn range(&self, start: Bound<&[u8]>, end: Bound<&[u8]>, forward: bool) -> Result<Iter> {
        let (sv, seq) = self.inner.read_view();
        self.inner.iter_at(sv, seq, owned(start), owned(end), forward)
    }

    /// Every live key, forward or backward.
    pub fn iter(&self, forward: bool) -> Result<Iter> {
        self.range(Bound::Unbounded, Bound::Unbounded, forward)
    }

    /// Live keys starting with `prefix`, forward or backward.
    pub fn prefix(&self, prefix: &[u8], forward: bool) -> Result<Iter> {
        let (sv, seq) = self.inner.read_view();
        let (start, end) = prefix_bounds(prefix);
        self.inner.iter_at(sv, seq, start, end, forward)
    }

    /// A consistent view of the index as of now; later writes stay
    /// invisible to it. It keeps the memtables and run files it reads alive
    /// (and merges keep the versions it sees), so drop it when done.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use larder_index::{Index, Options, WriteBatch};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let index = Index::open(Arc::new(larder_io::RealStorage::new()), tmp.path(), Options::default())?;
    /// index.write(1, WriteBatch::new().put(b"count", b"1"))?;
    /// let before = index.snapshot();
    /// index.write(2, WriteBatch::new().put(b"count", b"2").put(b"new", b"!"))?;
    /// assert_eq!(before.get(b"count")?, Some(b"1".to_vec()));
    /// assert_eq!(before.get(b"new")?, None);
    /// assert_eq!(before.iter(true)?.count(), 1);
    /// assert_eq!(index.get(b"count")?, Some(b"2".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn snapshot(&self) -> Snapshot {
        let (sv, seq) = self.inner.read_view();
        Snapshot { inner: self.inner.clone(), sv, seq }
    }

    /// Freezes the memtable and waits until every batch written so far is
    /// in durable runs: they are durable when it returns.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush_all()
    }

    /// Merges each level's runs into one run of that level, as the
    /// background mergers do once writes stop ([`Options::merge_at_rest`]),
    /// after running merges finish; the memtable is not flushed.
    pub fn merge_levels(&self) -> Result<()> {
        self.inner.merge_levels()
    }

    /// Merges every run into one (and flushes first).
    pub fn compact_all(&self) -> Result<()> {
        self.inner.flush_all()?;
        self.inner.compact_all()
    }

    /// Why the index refuses writes (a flush, merge or write failed), or
    /// `None` while it takes them.
    pub fn poisoned(&self) -> Option<String> {
        self.inner.poison.lock().clone()
    }

    /// The name of the thread whose failure poisoned the index (a worker's,
    /// `larder-flush` or `larder-merge-N`, or a caller's), if it had one.
    pub fn poisoned_by(&self) -> Option<String> {
        self.inner.poisoned_by.lock().clone()
    }

    /// The names of the background workers this index runs (none without
    /// [`Options::background_threads`]).
    pub fn worker_names(&self) -> Vec<String> {
        crate::workers::names(&self.inner.options)
    }

    /// Highest sequence number whose batches, and all below it, are in
    /// durable runs; a log above the index replays what follows it.
    pub fn durable_seq(&self) -> u64 {
        self.inner.durable_seq.load(Ordering::Acquire)
    }

    /// Highest sequence number written.
    pub fn last_seq(&self) -> u64 {
        self.inner.visible_seq.load(Ordering::Acquire)
    }

    /// A copy of the counters.
    pub fn stats(&self) -> IndexStats {
        self.inner.stats_snapshot()
    }

    /// Flushes, stops the background workers and releases the lock.
    pub fn close(self) -> Result<()> {
        let r = self.inner.flush_all();
        self.stop_workers();
        r
    }

    fn stop_workers(&self) {
        self.inner.bg.lock().shutdown = true;
        self.inner.shutting_down.store(true, Ordering::Relaxed);
        self.inner.wake_all();
        for w in self.workers.lock().drain(..) {
            // A worker that panicked has already poisoned the index.
            let _ = w.join();
        }
        self.inner.reaper.stop();
    }
}

impl Drop for Index {
    /// Stops the workers without flushing: unflushed writes are lost, as in
    /// a crash (the log above the index replays them).
    fn drop(&mut self) {
        self.stop_workers();
    }
}

/// What a get into `out` does with a value found in a memtable: copies
/// it into `out`'s allocation.
fn copy_into(out: &mut Vec<u8>) -> impl FnOnce(&[u8]) -> Option<Vec<u8>> + '_ {
    move |v| {
        out.clear();
        out.extend_from_slice(v);
        None
    }
}

/// Whether a get into `out` found a value, moving into `out` one the read
/// built (a get's two closures cannot both hold `out`).
fn settle_into(value: Option<Option<Vec<u8>>>, out: &mut Vec<u8>) -> bool {
    match value {
        Some(Some(built)) => {
            *out = built;
            true
        }
        Some(None) => true,
        None => false,
    }
}

/// A fixed view of the index at one sequence number.
pub struct Snapshot {
    inner: Arc<Inner>,
    sv: Arc<SuperVersion>,
    seq: u64,
}

impl Snapshot {
    /// The sequence number the snapshot sees up to.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The value of `key` as of the snapshot.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get_at(&self.sv, self.seq, key)
    }

    /// The value of `key` as of the snapshot copied into `out` (true), or
    /// false and `out` left as it was (see [`Index::get_into`]). After an
    /// error `out` may hold anything.
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let value = self.inner.get_with(&self.sv, self.seq, key, copy_into(out), Some)?;
        Ok(settle_into(value, out))
    }

    /// The values of `keys` as of the snapshot, in their order (see
    /// [`Index::get_many`]).
    pub fn get_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner.get_many_any_order(&self.sv, self.seq, keys)
    }

    /// Live keys between `start` and `end` as of the snapshot.
    pub fn range(&self, start: Bound<&[u8]>, end: Bound<&[u8]>, forward: bool) -> Result<Iter> {
        self.inner.iter_at(self.sv.clone(), self.seq, owned(start), owned(end), forward)
    }

    /// Every live key as of the snapshot.
    pub fn iter(&self, forward: bool) -> Result<Iter> {
        self.range(Bound::Unbounded, Bound::Unbounded, forward)
    }

    /// Live keys starting with `prefix` as of the snapshot.
    pub fn prefix(&self, prefix: &[u8], forward: bool) -> Result<Iter> {
        let (start, end) = prefix_bounds(prefix);
        self.inner.iter_at(self.sv.clone(), self.seq, start, end, forward)
    }
}

fn owned(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    b.map(<[u8]>::to_vec)
}

/// `[prefix, successor(prefix))`, unbounded above when the prefix is all 0xff.
pub(crate) fn prefix_bounds(prefix: &[u8]) -> (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>) {
    use std::ops::Bound;
    let mut end = prefix.to_vec();
    while let Some(last) = end.last_mut() {
        if *last == 0xff {
            end.pop();
        } else {
            *last += 1;
            return (Bound::Included(prefix.to_vec()), Bound::Excluded(end));
        }
    }
    (Bound::Included(prefix.to_vec()), Bound::Unbounded)
}

impl Inner {
    pub(crate) fn check_poison(&self) -> Result<()> {
        match self.poison.lock().as_ref() {
            Some(cause) => Err(IndexError::Poisoned(cause.clone())),
            None => Ok(()),
        }
    }

    /// Latches the first failure; every later write and flush is refused.
    pub(crate) fn set_poison(&self, cause: String) {
        let first = {
            let mut p = self.poison.lock();
            let first = p.is_none();
            if first {
                tracing::error!(%cause, "index poisoned");
                *self.poisoned_by.lock() = std::thread::current().name().map(str::to_string);
                *p = Some(cause.clone());
            }
            first
        };
        if let Some(hook) = self.options.on_poison.as_ref().filter(|_| first) {
            hook(&cause);
        }
        self.wake_all();
    }

    /// Wakes workers and waiters. Bumping the epoch under the lock means no
    /// waiter misses the wake-up between its check and its wait.
    pub(crate) fn wake_all(&self) {
        self.bg.lock().work_epoch += 1;
        self.work_cv.notify_all();
        self.done_cv.notify_all();
    }

    /// The value of `key` as of now (see [`Inner::get_with`]). The memtable
    /// step reads under the super version's lock (held for a search of
    /// memory, which a swap of super versions waits on), so the get takes no
    /// reference count on the super version unless it reads runs.
    pub(crate) fn get_latest<T>(
        &self,
        key: &[u8],
        found: impl FnOnce(&[u8]) -> T,
        owned: impl FnOnce(Vec<u8>) -> T,
    ) -> Result<Option<T>> {
        let hash = crate::run::bloom::key_hash(key);
        let g = self.sv.read();
        let seq = self.visible_seq.load(Ordering::Acquire);
        let step = self.get_from_memtables(&g, seq, key, hash, found);
        // Runs may be read from disk: not under the lock.
        let unlocked = || {
            let sv = g.clone();
            drop(g);
            sv
        };
        self.get_after_memtables(step, unlocked, seq, key, hash, owned)
    }

    /// The current super version and the sequence number to read at, taken
    /// together so every batch up to that number is in the view.
    pub(crate) fn read_view(&self) -> (Arc<SuperVersion>, u64) {
        let g = self.sv.read();
        let seq = self.visible_seq.load(Ordering::Acquire);
        (g.clone(), seq)
    }

    fn stats_snapshot(&self) -> IndexStats {
        let s = &self.stats;
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let (sv, _) = self.read_view();
        let runs = &sv.version.runs;
        // Levels are at most MAX_LEVEL (checked when the manifest is read
        // and before each commit), so this table stays small.
        let max_level = runs.iter().map(|r| r.meta.level).max().map_or(0, |m| m as usize + 1);
        let mut per_level = vec![0u64; max_level];
        for r in runs {
            per_level[r.meta.level as usize] += 1;
        }
        let (open_runs, metadata_bytes) = self.run_cache.usage();
        IndexStats {
            block_cache_hits: l(&s.block_cache_hits),
            block_cache_misses: l(&s.block_cache_misses),
            // A read in a mapped run is counted once, as a mapped one.
            block_reads: l(&s.block_reads) + l(&s.mapped_block_reads),
            mapped_block_reads: l(&s.mapped_block_reads),
            bloom_negatives: l(&s.bloom_negatives),
            bloom_true_positives: l(&s.bloom_true_positives),
            bloom_false_positives: l(&s.bloom_false_positives),
            gets: l(&s.gets),
            get_misses: l(&s.get_misses),
            missed_gets_reading_data_block: l(&s.missed_gets_reading_data_block),
            user_bytes_written: l(&s.user_bytes_written),
            bytes_flushed: l(&s.bytes_flushed),
            bytes_compacted: l(&s.bytes_compacted),
            flushes: l(&s.flushes),
            bytes_ingested: l(&s.bytes_ingested),
            ingests: l(&s.ingests),
            compactions: l(&s.compactions),
            stall_micros: l(&s.stall_micros),
            slowdowns: l(&s.slowdowns),
            stops: l(&s.stops),
            run_opens: l(&s.run_opens),
            metadata_over_budget_opens: l(&s.metadata_over_budget_opens),
            manifest_writes: l(&s.manifest_writes),
            runs: runs.len() as u64,
            runs_per_level: per_level,
            run_bytes: runs.iter().map(|r| r.meta.file_size).sum(),
            open_runs: open_runs as u64,
            metadata_bytes: metadata_bytes as u64,
            block_cache_bytes: self.block_cache.weight(),
            memtable_bytes: sv.memtables().map(|m| m.memory_bytes() as u64).sum(),
            memtable_data_bytes: sv.memtables().map(|m| m.size_bytes() as u64).sum(),
            durable_seq: self.durable_seq.load(Ordering::Acquire),
            last_seq: self.visible_seq.load(Ordering::Acquire),
        }
    }
}
