//! Group commit.
//!
//! Appenders take the next LSN and queue their record under the state
//! lock. A thread that needs durability and finds no leader becomes the
//! leader: it takes every queued record that fits the active segment,
//! writes them as one group (one write of whole 4 KiB blocks at a
//! block-aligned offset) and syncs once, while the dependency files of
//! those records are synced on other threads at the same time. Then it
//! calls the `on_durable` hook per record, publishes the new durable LSN
//! and wakes everyone. Only one leader exists at a time and it always takes
//! the queue's head, so groups are written, and acknowledged, in LSN order.
//!
//! Any failure poisons the log: a failed sync may have dropped the pages
//! while a later sync reports success (DESIGN.md, ordering rule 6), so
//! nothing more is written and only reopening clears it.

use std::time::Instant;

use larder_io::{write_all_at, FileRef};
use parking_lot::MutexGuard;

use crate::error::{LogError, Result};
use crate::format::{align_up, encode_record, GroupHeader, GROUP_HEADER_BYTES, RECORD_OVERHEAD};
use crate::log::{Inner, Pending, State};
use crate::segment::SegmentFile;
use crate::Lsn;

thread_local! {
    /// The log (its `Inner`'s address) whose hook this thread is running,
    /// or 0. Per log, so a hook may append to another log.
    static IN_HOOK_OF: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// At most this many threads sync one group's dependency files.
const MAX_DEP_SYNC_THREADS: usize = 8;

/// What the leader needs to write one group without the lock.
struct GroupTarget {
    seg: SegmentFile,
    epoch: u64,
    nonce: u64,
    offset: u64,
    prev_crc: u32,
    acked: Lsn,
}

impl Inner {
    /// Assigns the next LSN to a record and queues it, waiting (or leading
    /// a group) while the queue is over `max_pending_bytes`.
    pub(crate) fn enqueue(&self, payload: Vec<u8>, deps: Vec<FileRef>) -> Result<Lsn> {
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
            self.lead_or_wait(&mut st)?;
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
            self.lead_or_wait(&mut st)?;
        }
    }

    /// Writes one group if no other thread is, else waits for a change.
    fn lead_or_wait(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        if st.leader {
            self.cond.wait(st);
            return Ok(());
        }
        st.leader = true;
        let result = self.lead(st);
        if let Err(e) = &result {
            self.poison(st, e.to_string());
        }
        st.leader = false;
        self.cond.notify_all();
        result
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
            st.poisoned = Some(cause);
        }
        self.cond.notify_all();
    }

    /// One group, as leader.
    fn lead(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        let Some(front) = st.queue.front() else { return Ok(()) };
        let need = (GROUP_HEADER_BYTES + RECORD_OVERHEAD + front.payload.len()) as u64;
        if st.w.seg.is_none() || st.w.offset + need > st.w.capacity {
            MutexGuard::unlocked(st, || self.rotate())?;
        }
        let Some(seg) = st.w.seg.clone() else { return Err(LogError::Poisoned("no active segment".into())) };
        let room = (st.w.capacity - st.w.offset) as usize - GROUP_HEADER_BYTES;
        let (mut batch, mut body, mut queued) = (Vec::new(), 0usize, 0usize);
        while let Some(r) = st.queue.front() {
            let n = RECORD_OVERHEAD + r.payload.len();
            if body + n > room {
                break;
            }
            body += n;
            queued += n;
            batch.extend(st.queue.pop_front());
        }
        st.queued_bytes -= queued;
        // Appenders waiting for queue space may go on.
        self.cond.notify_all();
        let target = GroupTarget {
            seg,
            epoch: st.w.epoch,
            nonce: st.w.nonce,
            offset: st.w.offset,
            prev_crc: st.w.last_crc,
            acked: st.durable,
        };
        let mut buf = std::mem::take(&mut st.w.buf);
        let result = MutexGuard::unlocked(st, || self.write_group(&target, &batch, body, &mut buf));
        let padded = buf.len() as u64;
        st.w.buf = buf;
        let (last_lsn, last_crc) = result?;
        st.w.offset += padded;
        st.w.last_crc = last_crc;
        st.durable = last_lsn;
        if let Some(active) = st.live.back_mut() {
            active.last_lsn = last_lsn;
        }
        self.durable.store(last_lsn, std::sync::atomic::Ordering::Release);
        self.cond.notify_all();
        self.after_group(st);
        Ok(())
    }

    /// Encodes, writes and syncs one group (and its dependency files), then
    /// applies it through the hook. Returns the last LSN and its crc.
    fn write_group(&self, t: &GroupTarget, batch: &[Pending], body: usize, buf: &mut Vec<u8>) -> Result<(Lsn, u32)> {
        let (Some(first), Some(last)) = (batch.first(), batch.last()) else {
            return Err(LogError::Poisoned("empty group".into()));
        };
        buf.clear();
        GroupHeader {
            segment_id: t.seg.id,
            epoch: t.epoch,
            first_lsn: first.lsn,
            count: batch.len() as u32,
            body_len: body as u32,
            acked_lsn: t.acked,
            nonce: t.nonce,
        }
        .encode_into(buf);
        let mut chain = t.prev_crc;
        for r in batch {
            chain = encode_record(buf, r.lsn, chain, &r.payload);
        }
        buf.resize(align_up(buf.len() as u64) as usize, 0);

        let mut deps: Vec<&FileRef> = Vec::new();
        for d in batch.iter().flat_map(|r| r.deps.iter()) {
            if !deps.iter().any(|e| e.path() == d.path()) {
                deps.push(d);
            }
        }
        let write_and_sync = || -> Result<()> {
            write_all_at(&*t.seg.file, buf, t.offset)?;
            let start = Instant::now();
            t.seg.file.sync_data()?;
            self.stats.add(&self.stats.sync_micros, start.elapsed().as_micros() as u64);
            Ok(())
        };
        if deps.is_empty() {
            write_and_sync()?;
        } else {
            // The log's sync and the data files' syncs run concurrently; the
            // group is acknowledged only when all of them succeeded.
            let per_thread = deps.len().div_ceil(MAX_DEP_SYNC_THREADS);
            let (log_result, dep_result) = std::thread::scope(|s| {
                let handles: Vec<_> = deps.chunks(per_thread).map(|chunk| s.spawn(move || sync_all(chunk))).collect();
                let log_result = write_and_sync();
                let dep_result = handles.into_iter().try_for_each(|h| {
                    h.join().unwrap_or_else(|_| Err(LogError::Poisoned("a dependency sync thread panicked".into())))
                });
                (log_result, dep_result)
            });
            log_result?;
            dep_result?;
            self.stats.add(&self.stats.dependency_syncs, deps.len() as u64);
        }
        self.stats.add(&self.stats.syncs, 1);
        self.stats.add(&self.stats.groups, 1);
        self.stats.add(&self.stats.records, batch.len() as u64);
        self.stats.add(&self.stats.payload_bytes, batch.iter().map(|r| r.payload.len() as u64).sum());
        self.stats.add(&self.stats.bytes_written, buf.len() as u64);
        if let Some(apply) = &self.options.on_durable {
            self.in_hook(|| -> Result<()> {
                for r in batch {
                    apply(r.lsn, &r.payload).map_err(|reason| LogError::Apply { lsn: r.lsn, reason })?;
                }
                Ok(())
            })?;
        }
        Ok((last.lsn, chain))
    }
}

fn sync_all(files: &[&FileRef]) -> Result<()> {
    for f in files {
        f.sync_data()?;
    }
    Ok(())
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
