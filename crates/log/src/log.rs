//! The [`Log`] handle: open (with recovery), the public calls, the
//! background flusher of buffered records, and close.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use larder_io::{Lock, StorageRef};
use parking_lot::{Condvar, Mutex};

use crate::clean::{self, CleanMarker, CleanOpen, SegmentUse};
use crate::dep_sync::DepSyncers;
use crate::dependency::Dependency;
use crate::error::{LogError, Result};
use crate::options::Options;
use crate::recover::{verify, LiveSegment, RecoveryReport, Replay, Verified};
use crate::segment::SegmentFile;
use crate::stats::{LogStats, Stats};
use crate::writer::MAX_DEP_SYNC_THREADS;
use crate::Lsn;

/// A record handed to the [`Log::open_with`] replay callback.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ReplayRecord<'a> {
    /// The record's LSN.
    pub lsn: Lsn,
    /// Its payload.
    pub payload: &'a [u8],
    /// The highest LSN some header proves was acknowledged (the same for
    /// every record of one open). A record at or below it was acknowledged:
    /// the callback must not stop before it.
    pub acked_lsn: Lsn,
}

/// Creates `dir` if needed and makes its name durable: every directory
/// created here, up to the first ancestor that existed, is durable only once
/// its parent is synced; and the parent of `dir` is synced even if `dir`
/// existed, since an earlier open may have created it and died before its
/// sync.
fn create_dir_durably(storage: &dyn larder_io::Storage, dir: &Path) -> Result<()> {
    let mut missing: Vec<&Path> = Vec::new();
    for a in dir.ancestors() {
        if a.as_os_str().is_empty() || storage.exists(a)? {
            break;
        }
        missing.push(a);
    }
    if !missing.is_empty() {
        storage.create_dir_all(dir)?;
    }
    // Parents to sync, from the top down: the entry of each created
    // directory lives in its parent.
    let mut parents: Vec<&Path> = Vec::new();
    for d in missing.iter().rev().copied().chain(std::iter::once(dir)) {
        if let Some(p) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
            if !parents.contains(&p) {
                parents.push(p);
            }
        }
    }
    for p in parents {
        storage.sync_dir(p)?;
    }
    Ok(())
}

/// The name of the lock file in the log directory.
const LOCK_FILE: &str = "LOCK";

/// A record assigned an LSN and not yet written.
pub(crate) struct Pending {
    pub lsn: Lsn,
    pub payload: Vec<u8>,
    pub deps: Vec<Dependency>,
}

/// A thread waiting in `sync_to` until `target` is durable (or until it
/// may lead a group), woken through its own condition variable.
pub(crate) struct Syncer {
    pub target: Lsn,
    pub cond: Arc<Condvar>,
}

/// A group formed and not yet published, oldest first in
/// [`State::in_flight`].
pub(crate) struct Flight {
    /// Its last record's LSN: the durable LSN once it is published.
    pub last_lsn: Lsn,
    /// How many records it holds.
    pub count: usize,
    /// Written and synced (with its dependency files).
    pub finished: bool,
    /// Its records, kept from the write to publication only for the
    /// `on_durable` hook.
    pub records: Vec<Pending>,
}

/// Where the next group goes; changed only under the state lock, by the
/// thread forming a group or rotating.
pub(crate) struct WriterPos {
    /// The segment being written, once one is started after open.
    pub seg: Option<SegmentFile>,
    pub epoch: u64,
    /// The active segment's nonce, repeated in every group header.
    pub nonce: u64,
    /// Offset of the next group (block-aligned).
    pub offset: u64,
    pub capacity: u64,
    /// crc of the last record written (the next record's `prev_crc`).
    pub last_crc: u32,
    /// The epoch the next segment start uses.
    pub next_epoch: u64,
    /// Group buffers, reused between groups.
    pub bufs: Vec<Vec<u8>>,
}

/// Everything behind the state lock.
pub(crate) struct State {
    pub next_lsn: Lsn,
    pub durable: Lsn,
    pub queue: VecDeque<Pending>,
    /// Payload plus record overhead of the queue.
    pub queued_bytes: usize,
    /// Groups being written and synced (changed only through
    /// `Inner::set_writing`, which times it).
    pub writing: usize,
    /// When `writing` last changed.
    pub writing_since: std::time::Instant,
    /// A thread is starting the next segment: no group is formed meanwhile.
    pub rotating: bool,
    /// A thread is publishing finished groups (see `writer`).
    pub publishing: bool,
    /// Formed groups not yet published, in LSN order.
    pub in_flight: VecDeque<Flight>,
    /// The id of `in_flight`'s front (ids count formed groups since open).
    pub flight_base: u64,
    /// Threads waiting in `sync_to`.
    pub syncers: Vec<Syncer>,
    /// The flusher should create a spare segment.
    pub spare_wanted: bool,
    pub poisoned: Option<String>,
    pub closed: bool,
    /// Oldest first; when `w.seg` is set the last one is being written.
    pub live: VecDeque<LiveSegment>,
    pub free: VecDeque<SegmentFile>,
    pub total_segments: usize,
    pub next_id: u64,
    /// The checkpoint callback may fire (re-armed by every checkpoint).
    pub checkpoint_armed: bool,
    /// The use of the segment the log ends in: the one recovery walked
    /// last, then each segment started (what a clean-close marker names).
    pub tail: Option<SegmentUse>,
    pub w: WriterPos,
}

/// Shared between the handle, appending threads and the flusher.
pub(crate) struct Inner {
    pub storage: StorageRef,
    pub dir: PathBuf,
    pub options: Options,
    pub state: Mutex<State>,
    /// Signalled when a group completes, the queue shrinks, a segment is
    /// freed, or the log is poisoned (threads in `sync_to` wait on their
    /// own, see `Syncer`).
    pub cond: Condvar,
    /// Mirrors of `State::durable` and `next_lsn - 1` for lock-free reads.
    pub durable: AtomicU64,
    pub last: AtomicU64,
    pub stats: Stats,
    /// The threads that sync groups' dependency files.
    pub dep_syncers: DepSyncers,
    stop: Mutex<bool>,
    /// Wakes the flusher: to stop, to create a spare segment, or to sync
    /// now ([`Log::sync_soon`]).
    pub stop_cond: Condvar,
    /// A caller asked the flusher to sync without waiting out its interval.
    sync_soon: AtomicBool,
    /// A clean-close marker describing the segments is on disk; it is
    /// removed (see `invalidate_clean`) before anything is written to the
    /// log. Held across the removal and across a close's marker write.
    pub clean: Mutex<bool>,
    _lock: Box<dyn Lock>,
}

/// How open found the log.
enum Opening {
    /// As a clean close left it (its marker held).
    Clean(CleanOpen),
    /// Verified by a full recovery, not yet replayed.
    Full(Verified),
}

impl Inner {
    /// Removes the clean-close marker, durably, if one is on disk: called
    /// before every write to the log directory after open (a segment
    /// start, creation or removal), so a marker never describes segments
    /// that changed. A failure fails that write.
    pub(crate) fn invalidate_clean(&self) -> Result<()> {
        let mut clean = self.clean.lock();
        if *clean {
            clean::remove(&*self.storage, &self.dir)?;
            *clean = false;
        }
        Ok(())
    }
}

/// The intent log: one ordered stream of checksummed records with LSNs,
/// written in groups (one write and one sync each) to reused segment files.
///
/// # Applying records in LSN order
///
/// Appends from many threads get consecutive LSNs, and each returns only
/// when its record and every earlier one are durable, but threads wake in
/// any order. A caller that applies records to an index after `append`
/// returns must serialise that itself. The simpler way is
/// [`Options::on_durable`]: the thread publishing a group calls it for
/// every record of the group, in LSN order, after the group is durable and before
/// any appender of the group returns, so an index fed from it sees batches
/// in LSN order and a reader that saw `append` return sees the write.
pub struct Log {
    inner: Arc<Inner>,
    /// Taken (and joined) when the log closes.
    flusher: Mutex<Option<JoinHandle<()>>>,
    report: RecoveryReport,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.inner.dir)
            .field("durable_lsn", &self.durable_lsn())
            .field("last_lsn", &self.last_lsn())
            .finish_non_exhaustive()
    }
}

impl Log {
    /// Opens (or creates) the log in `dir` and recovers it.
    ///
    /// `covered_lsn` is the caller's durable sequence number: every record
    /// at or below it is already in the caller's durable index (for a new
    /// log, the base: the first record gets `covered_lsn + 1`). Every valid
    /// record above it is passed to `replay`, in LSN order, after the whole
    /// log has been verified and every byte of it made durable (so an open
    /// that fails before `replay` is called has replayed nothing, and what
    /// was replayed survives a crash). After open, new records continue at
    /// `last_lsn() + 1`; the caller should flush its index and call
    /// [`Log::checkpoint`], since replayed records live in segments that
    /// only a checkpoint frees. [`Log::open_with`] lets the callback end
    /// the log early.
    ///
    /// Fails with `NewerVersion` / `UnknownFeature` naming a segment a newer
    /// build wrote; `CorruptRecord` (file, offset, LSN) if a record the log
    /// had acknowledged is damaged or missing; `Corrupt` naming a segment
    /// whose header rotted although groups in it prove it had been durable;
    /// `MissingRecords` if the log starts above `covered_lsn + 1`;
    /// `IndexAhead` if the log ends below `covered_lsn`; `Replay` if
    /// `replay` fails (after the records before it were replayed).
    pub fn open<E>(
        storage: StorageRef,
        dir: &Path,
        options: Options,
        covered_lsn: Lsn,
        mut replay: impl FnMut(Lsn, &[u8]) -> std::result::Result<(), E>,
    ) -> Result<Log>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        Self::open_with(storage, dir, options, covered_lsn, |r: ReplayRecord<'_>| {
            replay(r.lsn, r.payload).map(|()| Replay::Continue)
        })
    }

    /// Like [`Log::open`], but the callback also learns the acknowledged
    /// LSN ([`ReplayRecord::acked_lsn`], also in
    /// [`RecoveryReport::acked_lsn`]) and may end the log before a record
    /// with [`Replay::StopBefore`]: the architecture's rule for a record
    /// whose data fails its checksum. Above the acknowledged LSN the log is
    /// cut durably before that record before `open_with` goes on: it and
    /// every later record are discarded and never replayed again, and new
    /// records continue at its LSN. At or below the acknowledged LSN the
    /// record was acknowledged, so open fails with `CorruptRecord` naming
    /// it. Either way the records before it were already replayed.
    pub fn open_with<E>(
        storage: StorageRef,
        dir: &Path,
        options: Options,
        covered_lsn: Lsn,
        mut replay: impl FnMut(ReplayRecord<'_>) -> std::result::Result<Replay, E>,
    ) -> Result<Log>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        options.validate()?;
        let existed = storage.exists(dir)?;
        if !existed {
            create_dir_durably(&*storage, dir)?;
        }
        let lock = storage.lock(&dir.join(LOCK_FILE))?;
        // Read under the lock. A clean-close marker means an earlier open
        // completed, so the directory's name is durable already: no parent
        // sync then.
        let marker = clean::read(&*storage, dir)?;
        if existed && marker.is_none() {
            create_dir_durably(&*storage, dir)?;
        }
        let from_marker = match &marker {
            Some(m) => clean::open_from(&*storage, dir, covered_lsn, m)?,
            None => None,
        };
        let opening = match from_marker {
            Some(c) => Opening::Clean(c),
            None => {
                // A marker that does not hold is removed before anything
                // is written, so it cannot outlive the state it described.
                if marker.is_some() || clean::present(&*storage, dir)? {
                    clean::remove(&*storage, dir)?;
                }
                let mut verified = verify(&*storage, dir, covered_lsn)?;
                // Before anything is replayed or written after it (DESIGN.md:
                // a record is acknowledged only once durable; new headers and
                // groups claim everything up to the end was).
                verified.make_durable()?;
                Opening::Full(verified)
            }
        };
        let (end, acked, has_free, segments, next_id, next_epoch) = match &opening {
            Opening::Clean(c) => {
                let r = &c.recovered;
                (r.report.end_lsn, r.report.acked_lsn, !r.free.is_empty(), r.report.segments, c.next_id, c.next_epoch)
            }
            Opening::Full(v) => {
                (v.end_lsn(), v.acked_lsn(), v.free_count() > 0, v.segment_count(), v.next_id(), v.next_epoch())
            }
        };
        let clean_on_disk = matches!(opening, Opening::Clean(_));
        let state = State {
            next_lsn: end + 1,
            durable: end,
            queue: VecDeque::new(),
            queued_bytes: 0,
            writing: 0,
            writing_since: std::time::Instant::now(),
            rotating: false,
            publishing: false,
            in_flight: VecDeque::new(),
            flight_base: 0,
            syncers: Vec::new(),
            spare_wanted: false,
            poisoned: None,
            closed: false,
            // Filled in after the replay, which may still cut the log.
            live: VecDeque::new(),
            free: VecDeque::new(),
            total_segments: segments,
            next_id,
            checkpoint_armed: true,
            tail: None,
            w: WriterPos {
                seg: None,
                epoch: 0,
                nonce: 0,
                offset: 0,
                capacity: 0,
                last_crc: 0,
                next_epoch,
                bufs: Vec::new(),
            },
        };
        let dep_syncers = DepSyncers::new(options.max_groups_in_flight.max(1) * MAX_DEP_SYNC_THREADS);
        let inner = Arc::new(Inner {
            storage,
            dir: dir.to_path_buf(),
            options,
            state: Mutex::new(state),
            cond: Condvar::new(),
            durable: AtomicU64::new(end),
            last: AtomicU64::new(end),
            stats: Stats::default(),
            dep_syncers,
            stop: Mutex::new(false),
            stop_cond: Condvar::new(),
            sync_soon: AtomicBool::new(false),
            clean: Mutex::new(clean_on_disk),
            _lock: lock,
        });
        // Everything that can fail for reasons other than the replay itself
        // happens before the first record is replayed.
        if !has_free && !clean_on_disk {
            // Have a segment ready so the first group does not wait for
            // one; best effort, the first rotation creates one if needed.
            // Not after a clean close: creating it is a write, which would
            // cost the marker (and an open that only reads would pay for a
            // zero-filled segment it never uses).
            inner.create_spare();
        }
        if !clean_on_disk {
            inner.create_ready_segments();
        }
        let flusher = match inner.options.buffered_sync_interval {
            Some(interval) => {
                let inner = inner.clone();
                Some(
                    std::thread::Builder::new()
                        .name(FLUSHER_THREAD.into())
                        .spawn(move || flusher(&inner, interval))
                        .map_err(|e| larder_io::IoError::os("spawn", dir, e))?,
                )
            }
            None => None,
        };
        // From here a failure drops `log`, which stops the flusher.
        let mut log = Log { inner, flusher: Mutex::new(flusher), report: RecoveryReport::default() };
        let rec = match opening {
            Opening::Clean(c) => c.recovered,
            Opening::Full(verified) => {
                let mut sink = |lsn: Lsn, payload: &[u8], acked_lsn: Lsn| -> Result<Replay> {
                    replay(ReplayRecord { lsn, payload, acked_lsn })
                        .map_err(|e| LogError::Replay { lsn, source: e.into() })
                };
                verified.replay(&mut sink)?
            }
        };
        let end = rec.report.end_lsn;
        {
            let mut st = log.inner.state.lock();
            st.next_lsn = end + 1;
            st.durable = end;
            st.live = rec.live.into();
            let spare = std::mem::take(&mut st.free);
            st.free = rec.free.into();
            st.free.extend(spare);
            st.w.last_crc = rec.last_crc;
            st.tail = rec.tail;
            log.inner.durable.store(end, Ordering::Release);
            log.inner.last.store(end, Ordering::Release);
        }
        tracing::info!(dir = %dir.display(), end, acked, replayed = rec.report.replayed, clean = rec.report.clean, "log opened");
        log.report = rec.report;
        Ok(log)
    }

    /// Appends a record and returns its LSN once it and every earlier record
    /// are durable. Fails with `Poisoned` after any earlier failure, and
    /// with `TooLarge` for a payload above [`Options::max_payload_bytes`].
    pub fn append(&self, payload: Vec<u8>) -> Result<Lsn> {
        self.append_with(payload, Vec::new())
    }

    /// Like [`Log::append`], and the record is acknowledged only when every
    /// dependency in `deps` is durable too: the leader syncs whole files
    /// concurrently with the group's own write and sync, and writes back
    /// [`Dependency::WriteBack`] ranges before its sync (whose flush makes
    /// them durable). Files are deduplicated by path: of several handles
    /// with the same path in one group only one is used, so every handle
    /// must refer to the file currently at its path (not one since
    /// replaced by a rename).
    ///
    /// If a dependency sync fails the log is poisoned, but the record may
    /// already be durable in the log and be replayed after reopening; the
    /// replayer must check the data it refers to (the extent descriptors
    /// carry checksums for this).
    pub fn append_with(&self, payload: Vec<u8>, deps: Vec<Dependency>) -> Result<Lsn> {
        let lsn = self.inner.enqueue(payload, deps)?;
        self.inner.sync_to(lsn)?;
        Ok(lsn)
    }

    /// Queues a record and returns its LSN without waiting for durability.
    /// It becomes durable with the next group: the next `append`, `sync_to`
    /// or `close` from any thread, or the background flusher within
    /// [`Options::buffered_sync_interval`]. A crash loses at most the
    /// records queued since the last group (bounded by
    /// [`Options::max_pending_bytes`]) plus the group being written, and
    /// always a suffix: never a record before one that survived.
    pub fn append_buffered(&self, payload: Vec<u8>) -> Result<Lsn> {
        self.append_buffered_with(payload, Vec::new())
    }

    /// Like [`Log::append_buffered`], and the record's group is
    /// acknowledged only when every dependency in `deps` is durable too
    /// (made so by the group's leader, as for [`Log::append_with`]).
    /// Nothing is synced now: a large write made with buffered durability
    /// costs no sync of its own, and the next durable append pays one
    /// round for both.
    pub fn append_buffered_with(&self, payload: Vec<u8>, deps: Vec<Dependency>) -> Result<Lsn> {
        self.inner.enqueue(payload, deps)
    }

    /// Returns when every record up to `lsn` (capped at the last assigned
    /// LSN) is durable, writing a group if needed.
    pub fn sync_to(&self, lsn: Lsn) -> Result<()> {
        // Already durable (a combined commit's thread, say, whose
        // combiner synced it): no lock.
        if self.durable_lsn() >= lsn {
            return Ok(());
        }
        self.inner.sync_to(lsn)
    }

    /// Makes every record appended so far durable.
    pub fn sync(&self) -> Result<()> {
        self.inner.sync_to(Lsn::MAX)
    }

    /// Makes every record appended so far durable, then flushes the
    /// device's cache with an fdatasync of the segment the log writes, even
    /// when no record waited: writes that other files' write-backs
    /// completed before this call are durable when it returns, as they
    /// would be at a group's sync (the same device, `Storage::shares_flush`).
    /// For a commit with nothing to record whose caller wrote data back
    /// and needs it durable: no record is written. False, having flushed
    /// nothing, when the log has no segment open to sync (none written or
    /// recovered since open): the caller then syncs a record. A failed
    /// flush poisons the log, as a failed group sync does.
    pub fn flush(&self) -> Result<bool> {
        self.inner.sync_to(Lsn::MAX)?;
        let segment = {
            let st = self.inner.state.lock();
            if let Some(cause) = &st.poisoned {
                return Err(LogError::Poisoned(cause.clone()));
            }
            st.w.seg.clone().or_else(|| st.live.back().map(|live| live.seg.clone()))
        };
        let Some(segment) = segment else { return Ok(false) };
        let start = std::time::Instant::now();
        if let Err(e) = segment.file.sync_data() {
            let mut st = self.inner.state.lock();
            self.inner.poison(&mut st, format!("flushing {}: {e}", segment.path.display()));
            return Err(e.into());
        }
        self.inner.stats.add(&self.inner.stats.sync_micros, start.elapsed().as_micros() as u64);
        self.inner.stats.add(&self.inner.stats.syncs, 1);
        Ok(true)
    }

    /// Stops the log as a failed sync would: every later append, sync and
    /// checkpoint fails with `cause`, and no group is written. For a caller
    /// whose own state no longer matches the log (a record it could not
    /// apply). Only reopening clears it.
    pub fn poison(&self, cause: String) {
        let mut st = self.inner.state.lock();
        self.inner.poison(&mut st, cause);
    }

    /// The name of the thread that writes buffered records in the
    /// background, if the log runs one ([`Options::buffered_sync_interval`]).
    pub fn flusher_name(&self) -> Option<&'static str> {
        self.flusher.lock().as_ref().map(|_| FLUSHER_THREAD)
    }

    /// Asks the background flusher to make the buffered records durable
    /// now rather than at the end of its interval, without waiting for it
    /// (a caller that needs them durable calls [`Log::sync_to`]). Nothing
    /// happens without a flusher ([`Options::buffered_sync_interval`]
    /// `None`: buffered records wait for a sync).
    pub fn sync_soon(&self) {
        if self.flusher.lock().is_none() {
            return;
        }
        self.inner.sync_soon.store(true, Ordering::Release);
        // Taken so the notification cannot fall between the flusher's
        // check of the flag and its wait.
        let _stop = self.inner.stop.lock();
        self.inner.stop_cond.notify_all();
    }

    /// The highest LSN such that it and every record before it are durable.
    pub fn durable_lsn(&self) -> Lsn {
        self.inner.durable.load(Ordering::Acquire)
    }

    /// The highest LSN assigned (durable or not).
    pub fn last_lsn(&self) -> Lsn {
        self.inner.last.load(Ordering::Acquire)
    }

    /// Tells the log that every record up to `covered_lsn` is in the
    /// caller's durable index, so segments holding only such records are
    /// freed for reuse (nothing is written: a freed segment keeps its bytes
    /// until it is restarted with a new epoch). `covered_lsn` must not
    /// exceed [`Log::durable_lsn`], and the caller must pass at least this
    /// value as `covered_lsn` to every later open.
    pub fn checkpoint(&self, covered_lsn: Lsn) -> Result<()> {
        self.inner.checkpoint(covered_lsn)
    }

    /// Whether the live segments passed [`Options::checkpoint_percent`] of
    /// the log's bound and a checkpoint would free some.
    pub fn needs_checkpoint(&self) -> bool {
        self.inner.over_mark(&self.inner.state.lock())
    }

    /// Counters since open.
    pub fn stats(&self) -> LogStats {
        self.inner.stats.snapshot()
    }

    /// What recovery found at open.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Removes the segment files no live record is in (those a checkpoint
    /// freed, and spares) but the one with the highest id, returning how
    /// many: at a clean close, after the last checkpoint, so a closed store
    /// keeps only the segment being written (and perhaps that one). Does
    /// nothing while no segment is live (nothing written since the open):
    /// the segment written last, which recovery needs to find the log's
    /// end, is then among the free ones. The log still works after it; it creates segments again as
    /// it needs them (zero-filled, as always). A failed removal leaves the
    /// segment in the free pool and is reported.
    pub fn release_free_segments(&self) -> Result<usize> {
        let free: Vec<SegmentFile> = {
            let mut st = self.inner.state.lock();
            if st.live.is_empty() {
                // Nothing written since the open: the newest segment, the
                // one that says where the log ends, may be among the free.
                return Ok(0);
            }
            // The file with the highest id stays, so that ids handed out
            // after a reopen (one above the highest file) stay unused.
            let live_max = st.live.iter().map(|l| l.seg.id).max().unwrap_or(0);
            let free_max = st.free.iter().map(|s| s.id).max().unwrap_or(0);
            let keep = (free_max > live_max).then_some(free_max);
            if st.free.iter().all(|s| Some(s.id) == keep) {
                return Ok(0);
            }
            let (kept, gone): (Vec<SegmentFile>, Vec<SegmentFile>) =
                st.free.drain(..).partition(|s| Some(s.id) == keep);
            st.free = kept.into();
            gone
        };
        if let Err(e) = self.inner.invalidate_clean() {
            self.inner.state.lock().free.extend(free);
            return Err(e);
        }
        let mut removed = 0;
        let mut result = Ok(());
        for seg in free {
            match self.inner.storage.remove_file(&seg.path) {
                Ok(()) => removed += 1,
                Err(e) => {
                    // Still there, still free: kept.
                    self.inner.state.lock().free.push_back(seg);
                    result = Err(e.into());
                }
            }
        }
        self.inner.state.lock().total_segments -= removed;
        if removed > 0 {
            self.inner.storage.sync_dir(&self.inner.dir)?;
        }
        result.map(|()| removed)
    }

    /// Makes every appended record durable, stops the flusher and closes
    /// the log, leaving a clean-close marker (see [`Log::close_clean`]);
    /// later calls through other references fail with `Closed`.
    pub fn close(self) -> Result<()> {
        self.close_clean()
    }

    /// Closes the log cleanly through a shared reference: makes every
    /// appended record durable, refuses later appends (`Closed`), stops the
    /// flusher, then records a clean-close marker (docs/format.md, section
    /// 11) so that the next open, if the caller's covered LSN is then the
    /// log's end, reads no segment past its header. A log with nothing
    /// written since an open that found a marker keeps that marker (nothing
    /// is written). A poisoned log, or one whose records are not all
    /// durable, gets no marker and reports why.
    pub fn close_clean(&self) -> Result<()> {
        // Closed first, so that no record can be appended after the sync.
        self.inner.state.lock().closed = true;
        let synced = self.inner.sync_to(Lsn::MAX);
        // No spare is created from here on (the flusher's), so the marker
        // counts the files as they stay.
        self.stop_flusher();
        synced?;
        let mut clean = self.inner.clean.lock();
        let marker = {
            let st = self.inner.state.lock();
            if let Some(cause) = &st.poisoned {
                return Err(LogError::Poisoned(cause.clone()));
            }
            CleanMarker {
                end_lsn: st.durable,
                last_crc: st.w.last_crc,
                tail: st.tail,
                next_epoch: st.w.next_epoch,
                highest_id: st.next_id.saturating_sub(1),
                segment_files: st.total_segments as u64,
            }
        };
        if !*clean {
            clean::write(&*self.inner.storage, &self.inner.dir, &marker)?;
            *clean = true;
        }
        Ok(())
    }

    fn stop_flusher(&self) {
        *self.inner.stop.lock() = true;
        self.inner.stop_cond.notify_all();
        let handle = self.flusher.lock().take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        self.stop_flusher();
        let closed = self.inner.state.lock().closed;
        if !closed {
            // Best effort, as after append_buffered; close() reports errors.
            let _ = self.inner.sync_to(Lsn::MAX);
        }
    }
}

/// Writes buffered records nobody waits for, every `interval`, and
/// creates the spare segment a publisher asked for.
/// The background flusher's thread name.
const FLUSHER_THREAD: &str = "larder-log-flush";

/// Poisons the log if the flusher unwinds: appenders then fail with the
/// cause instead of waiting for a flush that never comes.
struct PoisonOnPanic<'a>(&'a Inner);

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut st = self.0.state.lock();
            self.0.poison(&mut st, format!("{FLUSHER_THREAD} panicked"));
        }
    }
}

fn flusher(inner: &Inner, interval: Duration) {
    let _guard = PoisonOnPanic(inner);
    loop {
        {
            let mut stop = inner.stop.lock();
            if !*stop && !inner.sync_soon.swap(false, Ordering::AcqRel) {
                inner.stop_cond.wait_for(&mut stop, interval);
                inner.sync_soon.store(false, Ordering::Release);
            }
            if *stop {
                return;
            }
        }
        let (target, spare) = {
            let mut st = inner.state.lock();
            // A poisoned log writes nothing more, spares included.
            if st.poisoned.is_some() {
                return;
            }
            let last = st.next_lsn - 1;
            let spare = std::mem::take(&mut st.spare_wanted);
            ((last > st.durable && st.writing == 0 && st.poisoned.is_none()).then_some(last), spare)
        };
        if spare {
            inner.create_spare();
        }
        if let Some(target) = target {
            // An error poisons the log; appenders report it.
            let _ = inner.sync_to(target);
        }
    }
}
