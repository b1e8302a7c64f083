//! Space: starting segments (new or reused), checkpoints that free them,
//! the high-water mark that asks the owner for a checkpoint, and waiting
//! when every segment is in use.
//!
//! The log never deletes, truncates or punches a segment while it runs. A
//! checkpoint writes nothing: it moves segments whose records are all
//! covered to the free pool, where they keep their old bytes until the
//! writer restarts one by rewriting its header with a new epoch. Recovery
//! never reads a freed segment as live, because it starts from the newest
//! segment whose first LSN is at or below the caller's covered LSN.

use std::time::Instant;

use parking_lot::MutexGuard;

use crate::clean::SegmentUse;
use crate::error::{LogError, Result};
use crate::format::{SegmentHeader, BLOCK};
use crate::log::{Inner, State};
use crate::recover::LiveSegment;
use crate::segment::{new_nonce, segment_file_name, SegmentFile};
use crate::Lsn;

impl Inner {
    /// Frees the live segments (oldest first, never the one being written)
    /// whose records are all at or below `covered`.
    pub(crate) fn checkpoint(&self, covered: Lsn) -> Result<()> {
        let mut st = self.state.lock();
        if covered > st.durable {
            return Err(LogError::CheckpointAhead { covered, durable: st.durable });
        }
        let keep = usize::from(st.w.seg.is_some());
        let mut freed = 0;
        while st.live.len() > keep && st.live.front().is_some_and(|s| s.last_lsn <= covered) {
            if let Some(s) = st.live.pop_front() {
                st.free.push_back(s.seg);
                freed += 1;
            }
        }
        st.checkpoint_armed = true;
        self.stats.add(&self.stats.checkpoints, 1);
        self.stats.add(&self.stats.segments_freed, freed);
        if freed > 0 {
            self.cond.notify_all();
        }
        Ok(())
    }

    /// Whether the live segments fill `checkpoint_percent` of the bound and
    /// a checkpoint could free one (a segment other than the active one).
    pub(crate) fn over_mark(&self, st: &State) -> bool {
        let active = usize::from(st.w.seg.is_some());
        let closed = st.live.len().saturating_sub(active) as u64;
        if closed == 0 {
            return false;
        }
        let used = closed * self.options.segment_bytes + if active == 1 { st.w.offset } else { 0 };
        let bound = self.options.segment_bytes * self.options.max_segments as u64;
        used * 100 >= bound * self.options.checkpoint_percent as u64
    }

    /// After each group, as its publisher: ask for a checkpoint past the
    /// mark, and have the next segment created ahead of need once the
    /// active one is half full (so a rotation rarely waits for
    /// zero-filling): by the flusher thread if there is one. Nothing here may
    /// fail the group: it is already durable and applied.
    pub(crate) fn after_group(&self, st: &mut MutexGuard<'_, State>) {
        if st.checkpoint_armed && self.over_mark(st) {
            st.checkpoint_armed = false;
            if let Some(cb) = self.options.on_checkpoint_needed.clone() {
                MutexGuard::unlocked(st, || self.in_hook(|| cb()));
            }
        }
        if st.w.offset * 2 >= st.w.capacity && st.free.is_empty() {
            if self.options.buffered_sync_interval.is_some() {
                // The flusher thread makes it: zero-filling a segment on a
                // committer's thread held that commit (and its group's
                // other appenders) for the whole fill.
                st.spare_wanted = true;
                self.stop_cond.notify_all();
            } else {
                MutexGuard::unlocked(st, || self.create_spare());
            }
        }
    }

    /// Counts a new segment and hands out its id if the log is open and
    /// `wanted` holds. A closed log writes nothing more (its clean-close
    /// marker counts the files).
    fn reserve_segment_id(&self, wanted: impl FnOnce(&crate::log::State) -> bool) -> Option<u64> {
        let mut st = self.state.lock();
        if st.closed || !wanted(&st) {
            return None;
        }
        st.total_segments += 1;
        st.next_id += 1;
        Some(st.next_id - 1)
    }

    /// Creates a segment for the free pool if it is empty and the bound
    /// allows. Best effort: the spare is only an optimisation, so a failure
    /// (a full disk) is logged, the partial file removed, and the next
    /// rotation tries again when a segment is really needed.
    pub(crate) fn create_spare(&self) {
        let Some(id) =
            self.reserve_segment_id(|st| st.free.is_empty() && st.total_segments < self.options.max_segments)
        else {
            return;
        };
        match self.create_segment(id) {
            Ok(seg) => self.state.lock().free.push_back(seg),
            Err(e) => tracing::warn!(dir = %self.dir.display(), error = %e, "could not create a spare log segment"),
        }
    }

    /// Creates free segments until the log holds
    /// [`crate::Options::min_segments`] files. Best effort, as
    /// [`Inner::create_spare`]: it stops at the first failure (logged),
    /// and rotations create what is missing when they need it.
    pub(crate) fn create_ready_segments(&self) {
        let wanted = self.options.min_segments.min(self.options.max_segments);
        loop {
            let Some(id) = self.reserve_segment_id(|st| st.total_segments < wanted) else {
                return;
            };
            match self.create_segment(id) {
                Ok(seg) => self.state.lock().free.push_back(seg),
                Err(e) => {
                    tracing::warn!(dir = %self.dir.display(), error = %e, "could not create a log segment ahead of need");
                    return;
                }
            }
        }
    }

    /// Creates segment `id` (already counted in `total_segments`). On
    /// failure the partial file is removed and uncounted, so a retry can
    /// create another; if even the removal fails the file stays counted
    /// (it still takes disk space) and recovery later finds it free.
    fn create_segment(&self, id: u64) -> Result<SegmentFile> {
        if let Err(e) = self.invalidate_clean() {
            self.state.lock().total_segments -= 1;
            return Err(e);
        }
        match SegmentFile::new_zeroed(&*self.storage, &self.dir, id, self.options.segment_bytes) {
            Ok(seg) => {
                self.stats.add(&self.stats.segments_created, 1);
                self.stats.add(&self.stats.zero_fill_bytes, self.options.segment_bytes);
                Ok(seg)
            }
            Err(e) => {
                let path = self.dir.join(segment_file_name(id));
                let removed = match self.storage.exists(&path) {
                    Ok(false) => true,
                    Ok(true) => self.storage.remove_file(&path).is_ok(),
                    Err(_) => false,
                };
                if removed {
                    self.state.lock().total_segments -= 1;
                }
                Err(e)
            }
        }
    }

    /// Takes a free segment, creates one within the bound, asks for a
    /// checkpoint and creates one from the reserve
    /// ([`crate::Options::reserve_segments`]), or waits for a checkpoint up
    /// to `full_wait`.
    fn acquire_segment(&self) -> Result<(SegmentFile, bool)> {
        let deadline = Instant::now() + self.options.full_wait;
        let (mut asked, mut waited) = (false, false);
        let mut st = self.state.lock();
        loop {
            if let Some(seg) = st.free.pop_front() {
                return Ok((seg, true));
            }
            if st.total_segments < self.options.max_segments {
                st.total_segments += 1;
                st.next_id += 1;
                let id = st.next_id - 1;
                drop(st);
                return Ok((self.create_segment(id)?, false));
            }
            if !asked {
                asked = true;
                if let Some(cb) = self.options.on_checkpoint_needed.clone() {
                    MutexGuard::unlocked(&mut st, || self.in_hook(|| cb()));
                }
                continue;
            }
            if st.free.is_empty() && st.total_segments < self.options.max_segments + self.options.reserve_segments() {
                st.total_segments += 1;
                st.next_id += 1;
                let id = st.next_id - 1;
                drop(st);
                self.stats.add(&self.stats.reserve_segments, 1);
                return Ok((self.create_segment(id)?, false));
            }
            if !waited {
                waited = true;
                self.stats.add(&self.stats.full_waits, 1);
                tracing::warn!(dir = %self.dir.display(), "log full, reserve included; waiting for a checkpoint");
            }
            if self.cond.wait_until(&mut st, deadline).timed_out() && st.free.is_empty() {
                return Err(LogError::Full {
                    dir: self.dir.clone(),
                    segments: st.total_segments,
                    waited_ms: self.options.full_wait.as_millis() as u64,
                });
            }
        }
    }

    /// Starts the next segment, as leader: its header (new epoch, first LSN
    /// = durable + 1, the chain's crc) is durable before any group in it.
    pub(crate) fn rotate(&self) -> Result<()> {
        // The first write after an open from a clean-close marker.
        self.invalidate_clean()?;
        let (seg, reused) = self.acquire_segment()?;
        let header = {
            let mut st = self.state.lock();
            let epoch = st.w.next_epoch;
            st.w.next_epoch += 1;
            SegmentHeader {
                segment_id: seg.id,
                epoch,
                first_lsn: st.durable + 1,
                acked_lsn: st.durable,
                prev_crc: st.w.last_crc,
                segment_bytes: self.options.segment_bytes,
                nonce: new_nonce(),
            }
        };
        let start = Instant::now();
        seg.start(&header)?;
        self.stats.add(&self.stats.sync_micros, start.elapsed().as_micros() as u64);
        self.stats.add(&self.stats.syncs, 1);
        if reused {
            self.stats.add(&self.stats.segments_reused, 1);
        }
        let mut st = self.state.lock();
        st.tail = Some(SegmentUse::of(&header));
        st.live.push_back(LiveSegment { seg: seg.clone(), last_lsn: header.first_lsn - 1 });
        st.w.seg = Some(seg);
        st.w.epoch = header.epoch;
        st.w.nonce = header.nonce;
        st.w.offset = BLOCK;
        st.w.capacity = header.segment_bytes;
        Ok(())
    }
}
