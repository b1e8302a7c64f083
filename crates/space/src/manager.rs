//! The space manager: containers, allocation, deferred frees, punching,
//! rebuild and verification, behind one lock.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use larder_io::{FileRef, OpenOptions, StorageRef};
use parking_lot::{Condvar, Mutex};

use crate::buddy::Buddy;
use crate::container;
use crate::deferred::{release_bound, Deferred, Readers};
use crate::error::{Result, SpaceError};
use crate::extent::Extent;
use crate::options::Options;
use crate::punch::{self, TokenBucket};
use crate::rebuild::{self, VerifyReport};
use crate::state::{Container, State};
use crate::stats::{Counters, SpaceStats};
use crate::BLOCK_BYTES;
use larder_io::RangeSet;

use crate::room::still_trusted;
pub use crate::room::{ROOM_CHECK_EVERY, ROOM_CHECK_LONGEST, ROOM_CHECK_NEAR};

#[derive(Debug)]
struct Inner {
    storage: StorageRef,
    dir: PathBuf,
    options: Options,
    /// Bytes of the file system creating or growing a container leaves
    /// free (`Options::reserve_bytes`, changed by `set_reserve_bytes`).
    reserve_bytes: AtomicU64,
    /// When [`SpaceManager::check_room`] or an allocation last asked the
    /// file system, and the room beyond the reserve it found.
    room_seen: Mutex<Option<(Instant, u64)>>,
    /// Lock order: `state`, then `readers`.
    state: Mutex<State>,
    /// Signalled when a container creation or growth finishes.
    created: Condvar,
    readers: Mutex<Readers>,
}

/// Owns the container files of one directory and hands out extents.
///
/// All methods take `&self` and are safe to call from many threads; one
/// lock guards the allocator, and it is never held across a zero-fill or a
/// punch. The caller (the store) holds the directory's lock.
#[derive(Debug)]
pub struct SpaceManager {
    inner: Arc<Inner>,
}

/// A registered reader; dropping it unregisters the reader and releases
/// the frees it was holding back.
#[derive(Debug)]
#[must_use = "dropping the guard unregisters the reader at once"]
pub struct ReaderGuard {
    inner: Arc<Inner>,
    lsn: u64,
}

impl ReaderGuard {
    /// The snapshot LSN the reader registered at.
    pub fn lsn(&self) -> u64 {
        self.lsn
    }
}

impl Drop for ReaderGuard {
    fn drop(&mut self) {
        self.inner.readers.lock().remove(self.lsn);
        let mut st = self.inner.state.lock();
        self.inner.release_ready(&mut st);
    }
}

impl SpaceManager {
    /// Opens (creating if needed) the containers in `dir` and rebuilds free
    /// space as container space minus `used`, the extents the object
    /// layer's extent map references.
    ///
    /// Refuses, changing nothing: an extent that is misaligned, empty,
    /// past its container's end or in a container that does not exist; two
    /// extents sharing a block (both named); an extent past the end of its
    /// container's file (corruption); a container file longer than
    /// `container_bytes` (the directory was made with another size). A
    /// container file is as long as it was filled and synced (see
    /// [`Options::initial_container_bytes`]); with whole containers
    /// (`initial_container_bytes == container_bytes`), a short one no
    /// extent uses is an interrupted creation: it is removed and created
    /// again. Then spares are created up to `spare_containers`.
    pub fn open(
        storage: StorageRef,
        dir: &Path,
        options: Options,
        used: impl IntoIterator<Item = Extent>,
    ) -> Result<SpaceManager> {
        options.validate()?;
        if !storage.exists(dir)? {
            storage.create_dir_all(dir)?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                // Make the new directory itself durable.
                storage.sync_dir(parent)?;
            }
        }
        let bytes = options.container_bytes;
        let mut files = BTreeMap::new();
        for name in storage.list_dir(dir)? {
            let Some(id) = container::parse_file_name(&name) else { continue };
            let path = dir.join(&name);
            let file = storage.open(&path, OpenOptions::WRITE)?;
            let len = file.len()?;
            if len > bytes {
                return Err(SpaceError::corrupt(
                    path,
                    bytes,
                    format!(
                        "container is {len} bytes, longer than container_bytes ({bytes}); \
                         open with the container_bytes the directory was created with"
                    ),
                ));
            }
            files.insert(id, (file, len));
        }
        let used = rebuild::index_used(used, bytes, |id| files.contains_key(&id))?;
        let growing = options.initial_container_bytes < bytes;
        let mut interrupted = Vec::new();
        for (&id, (file, len)) in &files {
            if *len == bytes {
                continue;
            }
            let filled_end = len / BLOCK_BYTES * BLOCK_BYTES;
            if let Some(past) = used.get(&id).and_then(|v| v.iter().find(|e| !growing || e.end() > filled_end)) {
                return Err(SpaceError::corrupt(
                    file.path(),
                    *len,
                    format!("container is {len} bytes, shorter than container_bytes ({bytes}), while extent {past} is in use in it and ends at {}", past.end()),
                ));
            }
            if growing {
                // A growth that failed or was stopped may have left zeros
                // past the last synced length; the file is used as long as
                // it is, so make that length durable before any extent
                // points into it.
                file.sync_data()?;
            } else {
                interrupted.push(id);
            }
        }
        for &id in &interrupted {
            tracing::info!(container = id, "removing a container whose creation was interrupted");
            files.remove(&id);
            storage.remove_file(&container::path(dir, id))?;
        }
        if !interrupted.is_empty() {
            storage.sync_dir(dir)?;
        }
        for &id in &interrupted {
            let file = container::create(&*storage, dir, id, bytes, options.direct_fill, container::Pace::Full)?;
            files.insert(id, (file, bytes));
        }
        let blocks = options.container_blocks();

        let mut containers = BTreeMap::new();
        for (id, (file, len)) in files {
            let filled = len / BLOCK_BYTES;
            let extents = used.get(&id).map(Vec::as_slice).unwrap_or_default();
            let in_use = rebuild::used_blocks(extents);
            let mut buddy = Buddy::all_allocated(blocks);
            for (s, e) in in_use.gaps(filled) {
                buddy.free_range(s, e);
            }
            let holes = container::holes(&*file, filled)?;
            containers.insert(id, Container::new(file, buddy, in_use.total(), holes, filled));
        }
        let next_id = containers.keys().next_back().map_or(0, |&id| id + 1);
        let capacity = options.punch_bytes_per_sec.max(options.punch_min_bytes);
        let state = State {
            containers,
            blocks,
            next_id,
            creating: 0,
            filling: 0,
            deferred: Deferred::default(),
            durable_lsn: 0,
            bucket: TokenBucket::new(options.punch_bytes_per_sec, capacity),
            counters: Counters { containers_created: interrupted.len() as u64, ..Counters::default() },
        };
        let inner = Inner {
            storage,
            dir: dir.to_path_buf(),
            reserve_bytes: AtomicU64::new(options.reserve_bytes),
            room_seen: Mutex::new(None),
            options,
            state: Mutex::new(state),
            created: Condvar::new(),
            readers: Mutex::new(Readers::default()),
        };
        let manager = SpaceManager { inner: Arc::new(inner) };
        manager.inner.debug_check(&manager.inner.state.lock());
        manager.ensure_spares()?;
        Ok(manager)
    }

    /// The options the manager was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// Fails with [`SpaceError::FileSystemFull`] if the file system has
    /// no room left beyond the reserve, which it first sets to
    /// `reserve_now()` (if more than [`Options::reserve_bytes`]) whenever
    /// it asks the file system: for writes that grow the store
    /// without allocating (small objects live in the log and the index),
    /// which must stop at the reserve as allocations do, so deletes still
    /// find room for their log records and index flushes. Cheap: the
    /// file system is asked again once the room it last had is older
    /// than [`ROOM_CHECK_EVERY`] per [`ROOM_CHECK_NEAR`] of it (at most
    /// [`ROOM_CHECK_LONGEST`]), on every call once it is within
    /// `ROOM_CHECK_NEAR` of the reserve.
    ///
    /// `may_use` bytes of the reserve count as room for this call (a
    /// caller whose writes are known to be tiny may dip into the part of
    /// the reserve kept for metadata); the reserve stored for containers
    /// stays whole.
    pub fn check_room(&self, reserve_now: impl FnOnce() -> u64, may_use: u64) -> Result<()> {
        let inner = &*self.inner;
        let mut seen = inner.room_seen.lock();
        let fresh = seen.is_some_and(|(at, room)| still_trusted(at, room, 0));
        if fresh {
            return Ok(());
        }
        inner.reserve_bytes.store(reserve_now().max(inner.options.reserve_bytes), Ordering::Relaxed);
        let room = inner.room_blocks(1);
        *seen = room.as_ref().ok().map(|&blocks| (Instant::now(), blocks.saturating_mul(BLOCK_BYTES)));
        match room {
            Ok(_) => Ok(()),
            Err(SpaceError::FileSystemFull { available, reserve, .. })
                if available.saturating_sub(reserve.saturating_sub(may_use)) >= BLOCK_BYTES =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// The bytes of the file system creating or growing a container
    /// leaves free now (for `statfs`: the store can use what the file
    /// system has less this).
    pub fn reserve_bytes(&self) -> u64 {
        self.inner.reserve_bytes.load(Ordering::Relaxed)
    }

    /// Changes the bytes of the file system that creating or growing a
    /// container leaves free ([`Options::reserve_bytes`]).
    pub fn set_reserve_bytes(&self, bytes: u64) {
        self.inner.reserve_bytes.store(bytes, Ordering::Relaxed);
        *self.inner.room_seen.lock() = None;
    }

    /// The directory holding the containers.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Allocates `len` bytes rounded up to whole 4 KiB blocks, exactly that
    /// many blocks (no power-of-two rounding).
    ///
    /// Returns one extent when some container has a free aligned chunk big
    /// enough, preferring, in order: space never punched, then the smallest
    /// such chunk (best fit), then the lowest container and address. When
    /// none has (fragmented free space, or `len` above `container_bytes`),
    /// returns several extents, largest free chunks first, adjacent ones
    /// merged; the caller writes its data across them in order. Punched
    /// space, which the file system allocates again when it is written,
    /// is taken for at most the room the file system has beyond the
    /// reserve: with less room than `len`, unpunched space comes first,
    /// in as many pieces as it takes, and punched space only up to that
    /// room, so writes never spend the reserve while unpunched space is
    /// free. When free
    /// space is short, grows a container whose file is not whole yet, or
    /// else creates one (waiting for the zero-fill), never leaving the
    /// file system less than the reserve ([`Options::reserve_bytes`]):
    /// fails with [`SpaceError::FileSystemFull`] when it would, and with
    /// [`SpaceError::NoSpace`] when `max_containers` would be exceeded
    /// (space grown before the failure stays, free). The contents of the
    /// returned space are unspecified (zeros only in fresh or punched space).
    ///
    /// A request of at least [`Options::unwritten_min_bytes`] first takes
    /// one extent past the filled part of a growing container, set aside
    /// with `fallocate` and never zero-filled (see
    /// [`SpaceManager::allocate_unfilled`]): it is not written space
    /// ([`SpaceManager::is_written`] says no) until the write that fills
    /// it is synced with its container.
    pub fn allocate(&self, len: u64) -> Result<Vec<Extent>> {
        if len == 0 {
            return Err(SpaceError::InvalidAllocation { len, what: "zero bytes" });
        }
        let n = len.div_ceil(BLOCK_BYTES);
        let large = self.inner.options.unwritten_min_bytes;
        if large > 0 && len >= large {
            if let Some(extent) = self.allocate_unfilled(n)? {
                return Ok(vec![extent]);
            }
        }
        let inner = &*self.inner;
        let mut st = inner.state.lock();
        loop {
            inner.release_ready(&mut st);
            // Punched space takes the file system's blocks again when
            // written: taken freely only while the file system has room
            // for all of it beyond the reserve.
            let room = if st.punched_blocks() == 0 { None } else { inner.room_short_of(n, st.filling)? };
            let allocated = match room {
                None => st.try_allocate(n)?,
                Some(room) => st.try_allocate_within(n, room)?,
            };
            if let Some(extents) = allocated {
                st.counters.allocations += 1;
                st.counters.extents_allocated += extents.len() as u64;
                inner.debug_check(&st);
                return Ok(extents);
            }
            let short = n.saturating_sub(room.map_or_else(|| st.free_blocks(), |room| st.usable_blocks(room)));
            let blocks = st.blocks;
            if let Some((&id, _)) = st.containers.iter().find(|(_, c)| !c.growing && c.filled < blocks) {
                let room = inner.room_blocks(1 + st.filling)? - st.filling;
                st.counters.container_growths_inline += 1;
                st = inner.grow(st, id, short, room, container::Pace::Full)?;
                continue;
            }
            if st.creating > 0 || st.containers.values().any(|c| c.growing) {
                // Another thread's creation or growth may bring enough space.
                inner.created.wait(&mut st);
                continue;
            }
            let need = if inner.options.initial_container_bytes < inner.options.container_bytes {
                1
            } else {
                short.div_ceil(st.blocks)
            };
            let have = st.containers.len() as u64;
            if have.saturating_add(need) > inner.options.max_containers {
                return Err(SpaceError::NoSpace {
                    requested: n * BLOCK_BYTES,
                    free: st.free_blocks() * BLOCK_BYTES,
                    containers: st.containers.len() as u64,
                    max_containers: inner.options.max_containers,
                });
            }
            let initial = inner.initial_blocks();
            // Whole containers need room for all of them; growing ones
            // start smaller when the file system is nearly full.
            let each = if need > 1 || initial == st.blocks {
                inner.room_blocks(initial * need)?;
                initial
            } else {
                initial.min(inner.room_blocks(1)?)
            };
            let ids = st.reserve(need, each);
            st.counters.containers_created_inline += need;
            drop(st);
            inner.create_containers(&ids, each, container::Pace::Full)?;
            st = inner.state.lock();
        }
    }

    /// Takes `n` blocks past the filled part of the first growing
    /// container that has them (none growing now), if the file system has
    /// room for them beyond the reserve: the blocks become filled and
    /// allocated, and the file is extended over them with `fallocate`
    /// (with the lock dropped), so the host holds them as unwritten
    /// extents, read as zeros, without a byte of zeros written. They are
    /// holes to [`SpaceManager::is_written`]: the caller's write there
    /// changes the container's metadata (the extents' conversion), which
    /// only a sync of the container makes durable, and that sync must
    /// come before anything durable refers to the data (DESIGN.md,
    /// ordering rule 4; a record whose data did not reach the disk fails
    /// its check at replay and ends the log).
    ///
    /// Returns `None`, changing nothing, when no container has the room
    /// (all whole, or none yet), or when free space is more than the
    /// container's next growth step (deletes freed it: reusing it keeps
    /// the store from growing while it has room), or when the file system
    /// lacks room beyond the reserve for the blocks and for every free
    /// block that is a punched hole (a later write into one takes a
    /// block from the file system without asking, so the room for them
    /// must stay): the caller allocates as usual. A failed `fallocate`
    /// gives the blocks back (past the filled part again, for a
    /// zero-filled growth, if nothing was taken after them; else free as
    /// punched space and holes) and returns `None`, leaving the usual
    /// path to find space or report why there is none.
    pub fn allocate_unfilled(&self, n: u64) -> Result<Option<Extent>> {
        let inner = &*self.inner;
        let mut st = inner.state.lock();
        let blocks = st.blocks;
        let free = st.free_blocks();
        let growth = |c: &Container| inner.options.growth_blocks(c.filled);
        let fits = |c: &Container| !c.growing && blocks - c.filled >= n && free <= growth(c);
        let Some((&id, _)) = st.containers.iter().find(|(_, c)| fits(c)) else {
            return Ok(None);
        };
        let punched: u64 = st.containers.values().map(|c| c.punched.total() + c.punching.total()).sum();
        if inner.room_blocks(n + punched).is_err() {
            return Ok(None);
        }
        let c = st.containers.get_mut(&id).ok_or_else(|| SpaceError::invariant(id, "taking space in no container"))?;
        let s = c.filled;
        c.filled += n;
        c.allocated += n;
        c.holes.insert(s, s + n);
        let file = Arc::clone(&c.file);
        inner.debug_check(&st);
        drop(st);
        let extent = Extent::from_blocks(id, s, s + n);
        match file.allocate(extent.offset, extent.len) {
            Ok(()) => {
                let mut st = inner.state.lock();
                st.counters.allocations += 1;
                st.counters.extents_allocated += 1;
                st.counters.unfilled_allocations += 1;
                Ok(Some(extent))
            }
            Err(e) => {
                tracing::debug!(%extent, error = %e, "fallocate for a large allocation failed; allocating as usual");
                let mut st = inner.state.lock();
                if let Some(c) = st.containers.get_mut(&id) {
                    c.allocated -= n;
                    if c.filled == s + n && !c.growing {
                        // The growth that takes them next zero-fills them.
                        c.filled = s;
                        c.holes.remove(s, s + n);
                    } else {
                        // Others took space past it meanwhile: the blocks
                        // stay in the filled part, free, as punched space
                        // (the file system may hold no block for them).
                        c.buddy.free_range(s, s + n);
                        c.punched.insert(s, s + n);
                    }
                }
                inner.debug_check(&st);
                Ok(None)
            }
        }
    }

    /// Records that the transaction with LSN `lsn` freed `extent` (any run
    /// of allocated blocks: a whole extent from [`SpaceManager::allocate`]
    /// or part of one). The space becomes reusable, and punchable, once
    /// [`SpaceManager::set_durable_lsn`] reached `lsn` and no reader
    /// registered below `lsn` remains. Call it once the transaction is
    /// visible to new readers.
    ///
    /// Refuses, changing nothing, an extent that is malformed, in no
    /// container, or not wholly allocated (a double free, a free of free
    /// space, or of space whose free is pending).
    pub fn free(&self, extent: Extent, lsn: u64) -> Result<()> {
        extent.check(self.inner.options.container_bytes)?;
        let inner = &*self.inner;
        let mut st = inner.state.lock();
        let Some(c) = st.containers.get_mut(&extent.container) else {
            return Err(SpaceError::InvalidExtent { extent, what: "its container does not exist" });
        };
        let (s, n) = extent.blocks();
        let e = s + n;
        if c.buddy.any_free(s, e) || c.punching.intersects(s, e) {
            return Err(SpaceError::InvalidFree {
                extent,
                what: "space in it is free (never allocated, or freed and released)",
            });
        }
        if c.pending.intersects(s, e) {
            return Err(SpaceError::InvalidFree { extent, what: "space in it was already freed (release pending)" });
        }
        c.allocated = c
            .allocated
            .checked_sub(n)
            .ok_or_else(|| SpaceError::invariant(extent.container, "allocated count below a free"))?;
        c.pending.insert(s, e);
        st.deferred.push(lsn, extent);
        st.counters.frees += 1;
        inner.release_ready(&mut st);
        inner.debug_check(&st);
        Ok(())
    }

    /// Says that every transaction up to `lsn` is durable (the index's
    /// durable sequence number), releasing the frees this allows. The
    /// durable LSN never moves back; a lower value is ignored.
    pub fn set_durable_lsn(&self, lsn: u64) {
        let mut st = self.inner.state.lock();
        st.durable_lsn = st.durable_lsn.max(lsn);
        self.inner.release_ready(&mut st);
        self.inner.debug_check(&st);
    }

    /// The durable LSN last set.
    pub fn durable_lsn(&self) -> u64 {
        self.inner.state.lock().durable_lsn
    }

    /// Registers a reader whose snapshot sees the transactions up to `lsn`:
    /// until the guard drops, no space freed by a transaction above `lsn`
    /// is reused or punched. Register before reading the snapshot's extent
    /// map. Fails with [`SpaceError::ReaderTooOld`] if frees above `lsn`
    /// were already released.
    pub fn register_reader(&self, lsn: u64) -> Result<ReaderGuard> {
        self.inner.readers.lock().add(lsn)?;
        Ok(ReaderGuard { inner: Arc::clone(&self.inner), lsn })
    }

    /// Releases the frees whose transaction is durable and which no reader
    /// holds back; returns how many. Every other call does this first, so
    /// an owner needs it only to make [`SpaceManager::stats`] current.
    pub fn release_ready(&self) -> usize {
        let mut st = self.inner.state.lock();
        let n = self.inner.release_ready(&mut st);
        self.inner.debug_check(&st);
        n
    }

    /// Creates containers until at least `min_containers` exist and
    /// `spare_containers` have nothing allocated (bounded by
    /// `max_containers` and by the file system's room beyond the
    /// reserve); returns how many it created or grew. With growing
    /// containers ([`Options::initial_container_bytes`]), while one is not
    /// whole the spare is its next growth instead: made once free space is
    /// below half of it (so small stores keep small files). Call it
    /// from a background thread after allocations, so that allocations find
    /// a zero-filled container ready instead of waiting for one.
    ///
    /// With `spares_after_first_use`, a store with no container yet gets
    /// only its `min_containers`: the first allocation creates the first
    /// container.
    pub fn ensure_spares(&self) -> Result<u64> {
        self.make_spares(container::Pace::Full)
    }

    /// [`SpaceManager::ensure_spares`] for a background thread: each spare
    /// is zero-filled at most half the time (see `container::Pace`), and
    /// the creation stops with [`SpaceError::Stopped`] once `stop` is set
    /// (the store is closing), its partial file removed.
    pub fn ensure_spares_in_background(&self, stop: &std::sync::atomic::AtomicBool) -> Result<u64> {
        self.make_spares(container::Pace::Background { stop })
    }

    fn make_spares(&self, pace: container::Pace<'_>) -> Result<u64> {
        let inner = &*self.inner;
        let mut st = inner.state.lock();
        let existing = st.containers.len() as u64 + st.creating;
        let below_min = inner.options.min_containers.saturating_sub(existing);
        let want = if inner.options.spares_after_first_use && existing == 0 {
            below_min
        } else {
            let spares = st.containers.values().filter(|c| c.is_spare()).count() as u64;
            below_min.max(inner.options.spare_containers.saturating_sub(spares + st.creating))
        };
        let blocks = st.blocks;
        if below_min == 0 && inner.initial_blocks() < blocks {
            // Growing containers: the spare is the next growth of one not
            // whole yet, made when free space falls below it; a new
            // container only once every one is whole.
            if st.containers.values().any(|c| c.growing) {
                return Ok(0);
            }
            if let Some((&id, c)) = st.containers.iter().find(|(_, c)| c.filled < blocks) {
                let step = inner.options.growth_blocks(c.filled);
                if inner.options.spare_containers == 0 || st.free_blocks() >= step / 2 {
                    return Ok(0);
                }
                // Writing punched space takes the file system's blocks
                // again: a spare growth takes only the room beyond that
                // (and beyond zeros being written).
                let room = inner.room_blocks(1).unwrap_or(0).saturating_sub(st.punched_blocks() + st.filling);
                if room == 0 {
                    return Ok(0);
                }
                drop(inner.grow(st, id, 0, room, pace)?);
                return Ok(1);
            }
        }
        let room = inner.options.max_containers.saturating_sub(st.containers.len() as u64 + st.creating);
        let mut count = want.min(room);
        // Containers up to `min_containers` size the store ahead of its
        // data: they are made whole. Spares start small.
        let each = if below_min > 0 { blocks } else { inner.initial_blocks() };
        if count > 0 {
            // A spare is made only with room to spare: one the file system
            // cannot hold would only turn a later write's ENOSPC into
            // this thread's error.
            let fits = inner.room_blocks(1).unwrap_or(0) / each;
            count = count.min(fits);
        }
        if count == 0 {
            return Ok(0);
        }
        let ids = st.reserve(count, each);
        drop(st);
        inner.create_containers(&ids, each, pace)?;
        Ok(count)
    }

    /// Punches holes in released free space, if free space exceeds
    /// `punch_free_threshold` of all container space or the file system
    /// has less room beyond the reserve than `initial_container_bytes`
    /// (then ranges of any size), within the rate
    /// limit as of `now` (the caller's clock: a background thread passes
    /// `Instant::now()`, tests a fake one). Punches adjacent freed ranges as
    /// one call, largest first, none below `punch_min_bytes`. Returns the
    /// bytes punched.
    pub fn punch_some(&self, now: Instant) -> Result<u64> {
        let inner = &*self.inner;
        let options = &inner.options;
        if options.punch_bytes_per_sec == 0 {
            return Ok(0);
        }
        let mut st = inner.state.lock();
        inner.release_ready(&mut st);
        let total: u64 = st.containers.values().map(|c| c.filled).sum();
        let share = if total == 0 { 0.0 } else { st.free_blocks() as f64 / total as f64 };
        // On a file system with no room left beyond the reserve, freed
        // space goes back to it whatever the share: other files (the log,
        // the index) may need it, and the reserve must be whole again.
        let pressed = inner.room_blocks(inner.initial_blocks()).is_err();
        if share <= options.punch_free_threshold && !pressed {
            return Ok(0);
        }
        // Under pressure every freed block counts, not only large ranges.
        let min_blocks = if pressed { 1 } else { options.punch_min_bytes / BLOCK_BYTES };
        let budget = st.bucket.refill(now) / BLOCK_BYTES;
        let plan = punch::plan(st.containers.iter().map(|(&id, c)| (id, &c.dirty)), min_blocks, budget);
        let mut work = Vec::with_capacity(plan.len());
        for &(id, s, e) in &plan {
            let c =
                st.containers.get_mut(&id).ok_or_else(|| SpaceError::invariant(id, "planned punch in no container"))?;
            if !c.buddy.take_range(s, e) {
                return Err(SpaceError::invariant(id, format!("dirty blocks [{s}, {e}) are not free")));
            }
            c.dirty.remove(s, e);
            c.punching.insert(s, e);
            work.push((id, s, e, Arc::clone(&c.file)));
            st.bucket.spend((e - s) * BLOCK_BYTES);
        }
        drop(st);
        // Punch without the lock: the ranges are off the free lists, so no
        // allocation can hand them out (and get its data zeroed) meanwhile.
        let results: Vec<_> =
            work.iter().map(|(_, s, e, f)| f.punch_hole(s * BLOCK_BYTES, (e - s) * BLOCK_BYTES)).collect();
        let mut st = inner.state.lock();
        let mut punched = 0;
        let mut first_error = None;
        for ((id, s, e, _), result) in work.into_iter().zip(results) {
            let Some(c) = st.containers.get_mut(&id) else { continue };
            c.punching.remove(s, e);
            c.buddy.free_range(s, e);
            match result {
                Ok(()) => {
                    c.punched.insert(s, e);
                    c.holes.insert(s, e);
                    punched += (e - s) * BLOCK_BYTES;
                    st.counters.punches += 1;
                }
                Err(err) => {
                    // A failed punch may have freed some of its blocks
                    // before it failed: a later write there changes file
                    // metadata, so it must take the path that syncs the
                    // container. The range stays a candidate for the next
                    // punch.
                    c.dirty.insert(s, e);
                    c.holes.insert(s, e);
                    first_error.get_or_insert(err);
                }
            }
        }
        st.counters.bytes_punched += punched;
        inner.debug_check(&st);
        match first_error {
            Some(err) => Err(err.into()),
            None => Ok(punched),
        }
    }

    /// Whether `extent` lies on blocks known to be allocated and written in
    /// its container file (never punched this session, no hole at open):
    /// overwriting it changes no file metadata, so its data may be made
    /// durable by a write-back and another file's sync.
    pub fn is_written(&self, extent: Extent) -> bool {
        let st = self.inner.state.lock();
        let (start, end) = (extent.offset / BLOCK_BYTES, (extent.offset + extent.len).div_ceil(BLOCK_BYTES));
        st.containers.get(&extent.container).is_some_and(|c| !c.holes.intersects(start, end))
    }

    /// Compares the live allocator with the free space derived from `used`
    /// (the extent map, as [`SpaceManager::open`] would rebuild it), for
    /// fsck. Malformed or overlapping extents are refused as at open.
    pub fn verify(&self, used: impl IntoIterator<Item = Extent>) -> Result<VerifyReport> {
        let st = self.inner.state.lock();
        let used = rebuild::index_used(used, self.inner.options.container_bytes, |id| st.containers.contains_key(&id))?;
        let mut report = VerifyReport { containers: st.containers.len() as u64, ..VerifyReport::default() };
        for (&id, c) in &st.containers {
            let in_use = rebuild::used_blocks(used.get(&id).map(Vec::as_slice).unwrap_or_default());
            let mut free = c.punching.clone();
            for (s, e) in c.buddy.free_ranges() {
                free.insert(s, e);
            }
            let mut accounted = free.clone();
            accounted.insert(c.filled, st.blocks);
            for (s, e) in in_use.iter().chain(c.pending.iter()) {
                accounted.insert(s, e);
            }
            let to_extent = |(s, e): (u64, u64)| Extent::from_blocks(id, s, e);
            report.free_but_used.extend(in_use.intersection(&free).into_iter().map(to_extent));
            report.leaked.extend(accounted.gaps(st.blocks).into_iter().map(to_extent));
            report.used_bytes += in_use.total() * BLOCK_BYTES;
            report.free_bytes += free.total() * BLOCK_BYTES;
            report.pending_bytes += c.pending.total() * BLOCK_BYTES;
        }
        Ok(report)
    }

    /// The free, reusable space as maximal extents, by container and offset.
    pub fn free_extents(&self) -> Vec<Extent> {
        let st = self.inner.state.lock();
        let mut out = Vec::new();
        for (&id, c) in &st.containers {
            let mut free = c.punching.clone();
            for (s, e) in c.buddy.free_ranges() {
                free.insert(s, e);
            }
            out.extend(free.iter().map(|(s, e)| Extent::from_blocks(id, s, e)));
        }
        out
    }

    /// The ids of the containers, ascending.
    pub fn container_ids(&self) -> Vec<u64> {
        self.inner.state.lock().containers.keys().copied().collect()
    }

    /// Allocates the host file system's blocks under `extent` (fallocate
    /// mode 0), so that writing them later cannot fail for want of space.
    /// The host keeps such blocks as unwritten extents: the first write
    /// there changes the container's metadata, which only a sync of the
    /// container makes durable, so the range counts as not written
    /// ([`SpaceManager::is_written`] says no) and a write there takes the
    /// path that syncs the container rather than a write-back.
    pub fn allocate_on_host(&self, extent: Extent) -> Result<()> {
        let file = self
            .container_file(extent.container)
            .ok_or(SpaceError::InvalidExtent { extent, what: "no such container" })?;
        file.allocate(extent.offset, extent.len)?;
        let mut st = self.inner.state.lock();
        if let Some(c) = st.containers.get_mut(&extent.container) {
            c.holes.insert(extent.offset / BLOCK_BYTES, (extent.offset + extent.len).div_ceil(BLOCK_BYTES));
        }
        Ok(())
    }

    /// The open file of container `id`, for reading and writing extents.
    pub fn container_file(&self, id: u64) -> Option<FileRef> {
        self.inner.state.lock().containers.get(&id).map(|c| Arc::clone(&c.file))
    }

    /// The counters now.
    pub fn stats(&self) -> SpaceStats {
        let st = self.inner.state.lock();
        let sum = |f: &dyn Fn(&Container) -> u64| st.containers.values().map(f).sum::<u64>() * BLOCK_BYTES;
        let k = &st.counters;
        SpaceStats {
            containers: st.containers.len() as u64,
            spare_containers: st.containers.values().filter(|c| c.is_spare()).count() as u64,
            bytes_total: sum(&|c| c.filled),
            bytes_free: sum(&|c| c.buddy.free_blocks() + c.punching.total()),
            bytes_allocated: sum(&|c| c.allocated),
            bytes_pending_free: sum(&|c| c.pending.total()),
            bytes_punched_now: sum(&|c| c.punched.total() + c.punching.total()),
            deferred_frees_pending: st.deferred.len() as u64,
            readers: self.inner.readers.lock().count() as u64,
            allocations: k.allocations,
            extents_allocated: k.extents_allocated,
            frees: k.frees,
            frees_released: k.frees_released,
            punches: k.punches,
            bytes_punched: k.bytes_punched,
            containers_created: k.containers_created,
            containers_created_inline: k.containers_created_inline,
            container_growths: k.container_growths,
            container_growths_inline: k.container_growths_inline,
            unfilled_allocations: k.unfilled_allocations,
        }
    }

    /// Checks every invariant of the allocator (the buddy allocator's, stated on
    /// its type, and the container states'): buddy lists well formed; free + allocated +
    /// pending + being punched = the whole container, with no block in two
    /// states; punched and dirty space free; the deferred queue matching
    /// the pending space. Debug and test builds run it after every change.
    pub fn check_invariants(&self) -> Result<()> {
        self.inner.state.lock().check()
    }
}

impl Inner {
    /// Releases what [`release_bound`] allows; returns how many frees.
    fn release_ready(&self, st: &mut State) -> usize {
        // Held across the releases, so no reader can register below a
        // release in between (see `Readers::add`).
        let mut readers = self.readers.lock();
        let ready = st.deferred.pop_through(release_bound(st.durable_lsn, readers.oldest()));
        let n = ready.len();
        for (lsn, extent) in ready {
            let Some(c) = st.containers.get_mut(&extent.container) else { continue };
            let (s, count) = extent.blocks();
            c.pending.remove(s, s + count);
            c.buddy.free_range(s, s + count);
            c.dirty.insert(s, s + count);
            readers.note_released(lsn);
        }
        st.counters.frees_released += n as u64;
        n
    }

    /// Creates the containers `ids` (reserved by [`State::reserve`]) with
    /// the lock dropped, then adds them. Always ends their reservation.
    fn create_containers(&self, ids: &[u64], blocks_each: u64, pace: container::Pace<'_>) -> Result<()> {
        let mut result = Ok(());
        let mut made = Vec::new();
        let bytes = blocks_each * BLOCK_BYTES;
        for &id in ids {
            match container::create(&*self.storage, &self.dir, id, bytes, self.options.direct_fill, pace) {
                Ok(file) => made.push((id, file)),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        let mut st = self.state.lock();
        st.creating -= ids.len() as u64;
        st.filling -= ids.len() as u64 * blocks_each;
        for (id, file) in made {
            let mut buddy = Buddy::all_allocated(st.blocks);
            buddy.free_range(0, bytes / BLOCK_BYTES);
            // Zero-filled by writes and synced: no holes.
            st.containers.insert(id, Container::new(file, buddy, 0, RangeSet::default(), bytes / BLOCK_BYTES));
            st.counters.containers_created += 1;
        }
        self.debug_check(&st);
        drop(st);
        self.created.notify_all();
        result
    }

    /// Blocks a new container file starts with.
    fn initial_blocks(&self) -> u64 {
        self.options.initial_container_bytes / BLOCK_BYTES
    }

    /// The blocks the file system can take beyond the reserve, less the
    /// `filling` blocks of creations and growths under way, if fewer
    /// than `n`, else `None`. Trusts the room last seen (by this or
    /// [`SpaceManager::check_room`]) for [`ROOM_CHECK_EVERY`] per
    /// [`ROOM_CHECK_NEAR`] of it beyond the `n + filling` blocks, at most
    /// [`ROOM_CHECK_LONGEST`].
    fn room_short_of(&self, n: u64, filling: u64) -> Result<Option<u64>> {
        let mut seen = self.room_seen.lock();
        let need = (n + filling).saturating_mul(BLOCK_BYTES);
        if seen.is_some_and(|(at, room)| still_trusted(at, room, need)) {
            return Ok(None);
        }
        let available = self.storage.available_bytes(&self.dir)?;
        let room = available.saturating_sub(self.reserve_bytes.load(Ordering::Relaxed)) / BLOCK_BYTES;
        *seen = Some((Instant::now(), room.saturating_mul(BLOCK_BYTES)));
        // Zeros being written with the lock dropped take their room soon.
        let room = room.saturating_sub(filling);
        Ok((room < n).then_some(room))
    }

    /// Blocks the file system can take beyond the reserve; fails with
    /// [`SpaceError::FileSystemFull`] if fewer than `need` (at least one).
    fn room_blocks(&self, need: u64) -> Result<u64> {
        let available = self.storage.available_bytes(&self.dir)?;
        let reserve = self.reserve_bytes.load(Ordering::Relaxed);
        let room = available.saturating_sub(reserve) / BLOCK_BYTES;
        if room < need.max(1) {
            return Err(SpaceError::FileSystemFull {
                path: self.dir.clone(),
                requested: need * BLOCK_BYTES,
                available,
                reserve,
            });
        }
        Ok(room)
    }

    /// Grows container `id` (not whole, not growing) by its growth step,
    /// at least `short` blocks if it can, at most `room` blocks: zero-fills
    /// and syncs the new part with the lock dropped, then frees it.
    fn grow<'a>(
        &'a self,
        mut st: parking_lot::MutexGuard<'a, State>,
        id: u64,
        short: u64,
        room: u64,
        pace: container::Pace<'_>,
    ) -> Result<parking_lot::MutexGuard<'a, State>> {
        let blocks = st.blocks;
        let c = st.containers.get_mut(&id).ok_or_else(|| SpaceError::invariant(id, "growing no container"))?;
        let from = c.filled;
        let step = self.options.growth_blocks(from).max(short).min(blocks - from).min(room);
        c.growing = true;
        let file = Arc::clone(&c.file);
        st.filling += step;
        drop(st);
        let range = (from * BLOCK_BYTES, (from + step) * BLOCK_BYTES);
        let direct = self.options.direct_fill;
        let result = container::grow(&*self.storage, &self.dir, id, &*file, range, direct, pace);
        let mut st = self.state.lock();
        st.filling -= step;
        if let Some(c) = st.containers.get_mut(&id) {
            c.growing = false;
            if result.is_ok() {
                c.buddy.free_range(from, from + step);
                c.filled = from + step;
            }
        }
        if result.is_ok() {
            st.counters.container_growths += 1;
        }
        self.debug_check(&st);
        self.created.notify_all();
        result.map(|()| st)
    }

    /// Runs [`State::check`] in debug and test builds.
    fn debug_check(&self, st: &State) {
        if cfg!(debug_assertions) {
            if let Err(e) = st.check() {
                panic!("{e}");
            }
        }
    }
}
