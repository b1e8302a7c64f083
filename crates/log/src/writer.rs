//! Group commit, with up to [`Options::max_groups_in_flight`] groups being
//! written and synced at once.
//!
//! Appenders take the next LSN and queue their record under the state
//! lock. A thread that needs durability, whose record is still queued,
//! becomes a leader if fewer than the limit of groups are in flight: under
//! the lock it takes every queued record that fits the active segment,
//! encodes them as one group at the next block-aligned offset (so the crc
//! chain and the offsets follow LSN order whatever the threads do next),
//! then writes the group and syncs the segment without the lock, while the
//! dependency files of those records are synced on other threads at the
//! same time. Several groups of one segment may be syncing at once: the
//! device serves concurrent flushes far better than a queue of them (on
//! the 2-core test machine, 8 threads each overwriting and syncing one
//! file reached 3.3 times the rate of one), and a group no longer waits
//! for the previous group's sync to finish before its own starts.
//!
//! Groups are acknowledged strictly in order: a finished group is
//! published (the `on_durable` hook run for its records, the durable LSN
//! advanced, waiters woken) only once every group before it finished. One
//! thread at a time publishes, taking every finished group at the front.
//! A crash may leave a later group on disk and an earlier one not; recovery
//! stops at the first gap, and the later group's header claims nothing
//! acknowledged beyond what was published when it was formed, so the
//! records it holds were never acknowledged (docs/format.md, section 11).
//!
//! A segment is rotated only once every group formed is published, so
//! every group in flight belongs to the active segment and the new
//! segment's header can name the durable LSN as its start.
//!
//! Any failure poisons the log: a failed sync may have dropped the pages
//! while a later sync reports success (DESIGN.md, ordering rule 6), so
//! nothing more is written and only reopening clears it.

use std::time::Instant;

use std::sync::Arc;

use larder_io::{write_all_at, FileRef, DIRECT_ALIGN};
use parking_lot::{Condvar, MutexGuard};

use crate::dep_sync::sync_all;
use crate::dependency::Dependency;
use crate::error::{LogError, Result};
use crate::format::{align_up, encode_record, GroupHeader, GROUP_HEADER_BYTES, RECORD_OVERHEAD};
use crate::log::{Flight, Inner, Pending, State, Syncer};
use crate::segment::SegmentFile;
use crate::Lsn;

thread_local! {
    /// The log (its `Inner`'s address) whose hook this thread is running,
    /// or 0. Per log, so a hook may append to another log.
    static IN_HOOK_OF: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// At most this many threads sync one group's dependency files.
pub(crate) const MAX_DEP_SYNC_THREADS: usize = 8;

/// Group buffers kept for reuse; more are allocated while more groups are
/// in flight and dropped when they come back.
const KEPT_BUFFERS: usize = 4;

/// One formed group, written and synced without the lock.
struct Formed {
    seg: SegmentFile,
    offset: u64,
    /// The group is `buf[start..]`: `start` zero bytes put it at a
    /// [`DIRECT_ALIGN`] boundary of the buffer's memory, so a direct write
    /// takes it as it is instead of copying it to an aligned buffer first.
    buf: Vec<u8>,
    start: usize,
    deps: Vec<Dependency>,
}

impl Formed {
    /// The group's bytes.
    fn bytes(&self) -> &[u8] {
        self.buf.get(self.start..).unwrap_or_default()
    }
}

/// Most bytes one group takes from the queue (a larger record still goes
/// alone): the group is encoded under the state lock, so this bounds how
/// long appenders wait for it, and a long backlog becomes several groups
/// that sync concurrently.
const MAX_GROUP_BYTES: usize = 8 << 20;

impl Inner {
    /// Assigns the next LSN to a record and queues it, waiting (or leading
    /// a group) while the queue is over `max_pending_bytes`.
    pub(crate) fn enqueue(&self, payload: Vec<u8>, deps: Vec<Dependency>) -> Result<Lsn> {
        let limit = self.options.max_payload_bytes();
        if payload.len() as u64 > limit {
            return Err(LogError::TooLarge { len: payload.len() as u64, limit });
        }
        self.check_not_in_hook()?;
        let size = payload.len() + RECORD_OVERHEAD;
        let mut st = self.state.lock();
        loop {
            check_usable(&st)?;
            if st.queued_bytes == 0 || st.queued_bytes + size <= self.options.max_pending_bytes {
                break;
            }
            if self.can_lead(&st) {
                self.lead(&mut st)?;
            } else {
                self.cond.wait(&mut st);
            }
        }
        let lsn = st.next_lsn;
        st.next_lsn += 1;
        st.queued_bytes += size;
        st.queue.push_back(Pending { lsn, payload, deps });
        self.last.store(lsn, std::sync::atomic::Ordering::Release);
        Ok(lsn)
    }

    /// Returns when every record up to `lsn` (capped at the last assigned)
    /// is durable.
    pub(crate) fn sync_to(&self, lsn: Lsn) -> Result<()> {
        let mut st = self.state.lock();
        if st.durable < lsn.min(st.next_lsn - 1) {
            self.check_not_in_hook()?;
        }
        let target = lsn.min(st.next_lsn - 1);
        loop {
            // Durability first: a follower whose group succeeded may wake
            // only after a later leader failed, and its record is durable
            // (and applied) all the same.
            if st.durable >= target {
                return Ok(());
            }
            if let Some(cause) = &st.poisoned {
                return Err(LogError::Poisoned(cause.clone()));
            }
            // Lead only for records still queued: one already in a group
            // in flight needs no second group, just that one's end.
            let queued = st.queue.front().is_some_and(|r| r.lsn <= target);
            if queued && self.can_lead(&st) {
                self.lead(&mut st)?;
            } else {
                wait_as_syncer(&mut st, target);
            }
        }
    }

    /// Wakes the syncers whose target is durable, and, if a group could be
    /// formed now, one syncer whose record is queued to lead it: waking
    /// every waiter after every group cost a quarter of the CPU of 8
    /// durable writers (futex wakes, and most woke only to sleep again).
    fn wake_syncers(&self, st: &mut State) {
        let durable = st.durable;
        st.syncers.retain(|w| {
            let done = w.target <= durable;
            if done {
                w.cond.notify_one();
            }
            !done
        });
        if self.can_lead(st) {
            let front = st.queue.front().map_or(Lsn::MAX, |r| r.lsn);
            if let Some(at) = st.syncers.iter().position(|w| w.target >= front) {
                st.syncers.swap_remove(at).cond.notify_one();
            }
        }
    }

    /// Whether a thread may form the next group now: something is queued,
    /// no rotation is under way, fewer groups than the limit are in flight,
    /// and, if the next group needs a new segment, none at all: every
    /// group formed is published, so the durable LSN and the crc chain
    /// that the new segment's header names are the last ones formed.
    fn can_lead(&self, st: &State) -> bool {
        let Some(front) = st.queue.front() else { return false };
        if st.rotating || st.poisoned.is_some() || st.writing >= self.max_in_flight() {
            return false;
        }
        if st.writing > 0 && st.queue.len() < st.in_flight.back().map_or(0, |f| f.count) {
            return false;
        }
        !needs_rotation(st, front) || st.in_flight.is_empty()
    }

    /// Sets the number of groups being written and synced, adding the
    /// time since the last change to the busy and at-limit counters.
    fn set_writing(&self, st: &mut State, writing: usize) {
        let now = Instant::now();
        let nanos = u64::try_from(now.saturating_duration_since(st.writing_since).as_nanos()).unwrap_or(u64::MAX);
        if st.writing > 0 {
            self.stats.add(&self.stats.busy_nanos, nanos);
        }
        if st.writing >= self.max_in_flight() {
            self.stats.add(&self.stats.at_limit_nanos, nanos);
        }
        st.writing = writing;
        st.writing_since = now;
    }

    /// Groups that may be written and synced at once (hooks run at
    /// publication, in order, so they need no lower limit).
    fn max_in_flight(&self) -> usize {
        self.options.max_groups_in_flight.max(1)
    }

    /// Forms, writes and syncs one group as its leader, then publishes
    /// whatever finished groups are at the front. Any failure poisons.
    fn lead(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        let result = self.lead_one(st);
        if let Err(e) = &result {
            self.poison(st, e.to_string());
        }
        result
    }

    fn lead_one(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        let Some(front) = st.queue.front() else { return Ok(()) };
        if needs_rotation(st, front) {
            st.rotating = true;
            let rotated = MutexGuard::unlocked(st, || self.rotate());
            st.rotating = false;
            self.cond.notify_all();
            rotated?;
            self.wake_syncers(st);
        }
        let (id, formed, batch) = self.form(st)?;
        if st.writing > 0 {
            self.stats.add(&self.stats.overlapped_groups, 1);
        }
        let writing = st.writing + 1;
        self.set_writing(st, writing);
        let hook = self.options.on_durable.is_some();
        let (written, batch) = MutexGuard::unlocked(st, || {
            let written = self.write_group(&formed);
            // Payloads are needed after the write only by the hook.
            (written, if hook { batch } else { Vec::new() })
        });
        let writing = st.writing - 1;
        self.set_writing(st, writing);
        // A slot is free: a queued syncer may lead the next group.
        self.wake_syncers(st);
        if st.w.bufs.len() < KEPT_BUFFERS {
            st.w.bufs.push(formed.buf);
        }
        written?;
        let base = st.flight_base;
        let Some(flight) = st.in_flight.get_mut((id - base) as usize) else {
            return Err(LogError::Poisoned("a finished group is not in flight".into()));
        };
        flight.finished = true;
        flight.records = batch;
        self.publish(st)
    }

    /// Takes the queue's head (what fits the active segment, up to
    /// [`MAX_GROUP_BYTES`]) and encodes it as the next group at the next
    /// offset, chained to the group formed before it. Returns the group's
    /// flight id, the group and its records.
    fn form(&self, st: &mut MutexGuard<'_, State>) -> Result<(u64, Formed, Vec<Pending>)> {
        let Some(seg) = st.w.seg.clone() else { return Err(LogError::Poisoned("no active segment".into())) };
        let room = ((st.w.capacity - st.w.offset) as usize - GROUP_HEADER_BYTES).min(MAX_GROUP_BYTES);
        let (mut batch, mut body) = (Vec::new(), 0usize);
        while let Some(r) = st.queue.front() {
            let n = RECORD_OVERHEAD + r.payload.len();
            // The first record always goes: it fits the segment (checked
            // before rotating) though perhaps not MAX_GROUP_BYTES.
            if !batch.is_empty() && body + n > room {
                break;
            }
            body += n;
            batch.extend(st.queue.pop_front());
        }
        let (Some(first), Some(last)) = (batch.first(), batch.last()) else {
            return Err(LogError::Poisoned("empty group".into()));
        };
        let (first_lsn, last_lsn) = (first.lsn, last.lsn);
        let was_over_half = st.queued_bytes * 2 > self.options.max_pending_bytes;
        st.queued_bytes -= body;
        if was_over_half {
            // Appenders waiting for queue space may go on.
            self.cond.notify_all();
        }
        let mut buf = st.w.bufs.pop().unwrap_or_default();
        let start = start_aligned(&mut buf, align_up((GROUP_HEADER_BYTES + body) as u64) as usize);
        GroupHeader {
            segment_id: seg.id,
            epoch: st.w.epoch,
            first_lsn,
            count: batch.len() as u32,
            body_len: body as u32,
            acked_lsn: st.durable,
            nonce: st.w.nonce,
        }
        .encode_into(&mut buf);
        let mut chain = st.w.last_crc;
        for r in &batch {
            chain = encode_record(&mut buf, r.lsn, chain, &r.payload);
        }
        buf.resize(start + align_up((buf.len() - start) as u64) as usize, 0);
        let offset = st.w.offset;
        st.w.offset += (buf.len() - start) as u64;
        st.w.last_crc = chain;
        let mut deps: Vec<Dependency> = Vec::new();
        for d in batch.iter().flat_map(|r| r.deps.iter()) {
            Dependency::merge_into(&mut deps, d);
        }
        self.stats.add(&self.stats.records, batch.len() as u64);
        self.stats.add(&self.stats.payload_bytes, batch.iter().map(|r| r.payload.len() as u64).sum());
        let id = st.flight_base + st.in_flight.len() as u64;
        st.in_flight.push_back(Flight { last_lsn, count: batch.len(), finished: false, records: Vec::new() });
        Ok((id, Formed { seg, offset, buf, start, deps }, batch))
    }

    /// Writes and syncs one formed group and makes its dependencies
    /// durable: write-back ranges are started before the group's write and
    /// waited for before its sync, whose device flush covers them (one
    /// flush for data and record); whole files are synced on other threads
    /// at the same time.
    fn write_group(&self, g: &Formed) -> Result<()> {
        let (mut backs, mut syncs): (Vec<(&FileRef, u64, u64)>, Vec<FileRef>) = (Vec::new(), Vec::new());
        for d in &g.deps {
            match d {
                Dependency::WriteBack { file, offset, len } => backs.push((file, *offset, *len)),
                Dependency::Sync(f) => syncs.push(f.clone()),
            }
        }
        let write_and_sync = || -> Result<()> {
            for (file, offset, len) in &backs {
                file.start_write_back(*offset, *len)?;
            }
            write_all_at(&*g.seg.file, g.bytes(), g.offset)?;
            if !backs.is_empty() {
                // The group's own write goes to the device alongside the
                // data instead of after it (the sync then only waits).
                g.seg.file.start_write_back(g.offset, g.bytes().len() as u64)?;
            }
            for (file, offset, len) in &backs {
                file.write_back(*offset, *len)?;
            }
            let start = Instant::now();
            g.seg.file.sync_data()?;
            self.stats.add(&self.stats.sync_micros, start.elapsed().as_micros() as u64);
            Ok(())
        };
        if syncs.is_empty() {
            write_and_sync()?;
        } else {
            // The log's sync and the data files' syncs run concurrently,
            // these on the log's kept threads; files no thread can take
            // are synced here after the log's. The group is acknowledged
            // only when all of them succeeded.
            let per_thread = syncs.len().div_ceil(MAX_DEP_SYNC_THREADS);
            let mut tickets = Vec::new();
            let mut here = Vec::new();
            for chunk in syncs.chunks(per_thread) {
                match self.dep_syncers.submit(chunk.to_vec()) {
                    Ok(ticket) => tickets.push(ticket),
                    Err(back) => here.extend(back),
                }
            }
            let log_result = write_and_sync();
            let mut dep_result = match log_result {
                Ok(()) => sync_all(&here),
                Err(_) => Ok(()),
            };
            // Every ticket is waited for, so no sync of this group is still
            // running when it is acknowledged or the log poisoned.
            for ticket in tickets {
                let r = ticket.wait();
                dep_result = dep_result.and(r);
            }
            log_result?;
            dep_result?;
            self.stats.add(&self.stats.dependency_syncs, syncs.len() as u64);
        }
        self.stats.add(&self.stats.dependency_write_backs, backs.len() as u64);
        self.stats.add(&self.stats.syncs, 1);
        self.stats.add(&self.stats.groups, 1);
        self.stats.add(&self.stats.bytes_written, g.bytes().len() as u64);
        Ok(())
    }

    /// Publishes the finished groups at the front of the flight queue, in
    /// order, unless another thread is already doing so (it will take ours
    /// too: it looks again after each group). For each: the `on_durable`
    /// hook for its records, then the durable LSN, then the waiters.
    fn publish(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        if st.publishing {
            return Ok(());
        }
        st.publishing = true;
        let result = self.publish_ready(st);
        st.publishing = false;
        result
    }

    fn publish_ready(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        while st.poisoned.is_none() && st.in_flight.front().is_some_and(|f| f.finished) {
            let Some(flight) = st.in_flight.pop_front() else { break };
            st.flight_base += 1;
            if let Some(apply) = &self.options.on_durable {
                MutexGuard::unlocked(st, || {
                    self.in_hook(|| -> Result<()> {
                        for r in &flight.records {
                            apply(r.lsn, &r.payload).map_err(|reason| LogError::Apply { lsn: r.lsn, reason })?;
                        }
                        Ok(())
                    })
                })?;
            }
            st.durable = flight.last_lsn;
            if let Some(active) = st.live.back_mut() {
                active.last_lsn = flight.last_lsn;
            }
            self.durable.store(flight.last_lsn, std::sync::atomic::Ordering::Release);
            self.wake_syncers(st);
            self.cond.notify_all();
            self.after_group(st);
        }
        Ok(())
    }

    /// Runs a caller's hook on the leader's thread, marked so that an
    /// append or sync of this log from inside it fails with `Reentrant`
    /// instead of waiting for the very group the hook is part of.
    pub(crate) fn in_hook<T>(&self, f: impl FnOnce() -> T) -> T {
        struct Restore(usize);
        impl Drop for Restore {
            fn drop(&mut self) {
                IN_HOOK_OF.with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(IN_HOOK_OF.with(|c| c.replace(self as *const Inner as usize)));
        f()
    }

    fn check_not_in_hook(&self) -> Result<()> {
        if IN_HOOK_OF.with(|c| c.get()) == self as *const Inner as usize {
            return Err(LogError::Reentrant);
        }
        Ok(())
    }

    /// Latches the first failure; every later call reports it.
    pub(crate) fn poison(&self, st: &mut State, cause: String) {
        if st.poisoned.is_none() {
            tracing::error!(dir = %self.dir.display(), %cause, "log poisoned; refusing further appends");
            if let Some(hook) = &self.options.on_poison {
                hook(&cause);
            }
            st.poisoned = Some(cause);
        }
        for w in st.syncers.drain(..) {
            w.cond.notify_one();
        }
        self.cond.notify_all();
    }
}

thread_local! {
    /// What this thread waits on in `sync_to` (one wait at a time per
    /// thread, so one condition variable serves every log).
    static SYNC_WAKER: Arc<Condvar> = Arc::new(Condvar::new());
}

/// Waits, registered as a syncer for `target`, until some thread wakes
/// this one (see `wake_syncers`; the caller looks again either way).
fn wait_as_syncer(st: &mut MutexGuard<'_, State>, target: Lsn) {
    let cond = SYNC_WAKER.with(Arc::clone);
    st.syncers.push(Syncer { target, cond: cond.clone() });
    cond.wait(st);
    // Woken for leadership or spuriously: still registered, perhaps.
    if let Some(at) = st.syncers.iter().position(|w| Arc::ptr_eq(&w.cond, &cond)) {
        st.syncers.swap_remove(at);
    }
}

/// Empties `buf` and pads it with zeros up to a [`DIRECT_ALIGN`] boundary
/// of its memory, with room for `len` more bytes reserved first, so that
/// the buffer does not move (and lose its alignment) while they are
/// appended; returns where they start.
fn start_aligned(buf: &mut Vec<u8>, len: usize) -> usize {
    buf.clear();
    buf.reserve(len + DIRECT_ALIGN);
    let start = buf.as_ptr().align_offset(DIRECT_ALIGN).min(DIRECT_ALIGN);
    buf.resize(start, 0);
    start
}

/// Whether the record `front` needs a new segment for its group.
fn needs_rotation(st: &State, front: &Pending) -> bool {
    let need = (GROUP_HEADER_BYTES + RECORD_OVERHEAD + front.payload.len()) as u64;
    st.w.seg.is_none() || st.w.offset + need > st.w.capacity
}

fn check_usable(st: &State) -> Result<()> {
    if let Some(cause) = &st.poisoned {
        return Err(LogError::Poisoned(cause.clone()));
    }
    if st.closed {
        return Err(LogError::Closed);
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_group_buffer_starts_aligned_and_stays_put_while_filled() {
        for (kept, len) in [(Vec::new(), 8192), (vec![7u8; 100], 4096), (Vec::with_capacity(3), 1 << 20)] {
            let mut buf = kept;
            let start = start_aligned(&mut buf, len);
            assert!(start < DIRECT_ALIGN);
            assert_eq!(buf.len(), start);
            assert!(buf.iter().all(|&b| b == 0), "the padding is zeros");
            let at = buf.as_ptr() as usize + start;
            assert_eq!(at % DIRECT_ALIGN, 0, "the group's first byte is aligned");
            buf.extend(std::iter::repeat_n(1u8, len));
            assert_eq!(buf.as_ptr() as usize + start, at, "the buffer moved while filled");
        }
    }
}
