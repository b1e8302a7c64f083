//! The checkpointer: a thread that keeps the intent log from filling.
//!
//! When the log asks for a checkpoint (or a flush of the index moved its
//! durable sequence number), it flushes the index and tells the log that
//! every record up to the index's durable sequence number is covered, so
//! the segments holding only such records can be reused (DESIGN.md,
//! ordering rule 3). The log's hook cannot call back into the log, so the
//! hook only wakes this thread. The same thread punches freed space,
//! creates spare containers, and checkpoints when much freed space waits
//! for one (frees are reusable only once the index covers them).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use larder_index::Index;
use larder_log::Log;
use larder_space::SpaceManager;
use parking_lot::{Condvar, Mutex};

/// How often the thread looks even without being woken: index flushes
/// triggered by a full memtable also let the log reuse segments.
const POLL: Duration = Duration::from_millis(200);

#[derive(Default)]
struct Flags {
    wanted: bool,
    stop: bool,
}

/// Wakes the checkpointer; shared with the log's hook.
#[derive(Default)]
pub(crate) struct Signal {
    flags: Mutex<Flags>,
    cond: Condvar,
}

impl Signal {
    pub(crate) fn wake(&self) {
        self.flags.lock().wanted = true;
        self.cond.notify_all();
    }

    fn stop(&self) {
        self.flags.lock().stop = true;
        self.cond.notify_all();
    }
}

/// The running checkpointer.
pub(crate) struct Checkpointer {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
    /// Keeps spare containers ready, zero-filling them paced, on a thread
    /// of its own: a gigabyte of zeros takes seconds, which the
    /// checkpoints must not wait for, and at full speed it made durable
    /// commits queue behind it (puts stalled up to 200 ms).
    spares: Option<JoinHandle<()>>,
    /// Stops the spare thread, and a zero-fill it is in.
    stop_spares: Arc<AtomicBool>,
}

/// Share of a container that may wait to be freed before the checkpointer
/// flushes the index for it (see [`frees_wait_for_checkpoint`]).
const PENDING_FREE_SHARE: u64 = 4;
/// Least time between two checkpoints taken for space.
const SPACE_CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Whether enough freed space waits for a checkpoint (frees become
/// reusable only once the index covers the transaction that made them)
/// that one should be taken now: checkpoints otherwise come when the log
/// needs room, and under churn (files written and deleted) allocations
/// would run into the spare container and a new one be zero-filled for
/// space that is already free. Measured: the file-server mix left 567 MB
/// pending through its run.
///
/// Of the container space there is, when containers are still growing: a
/// small store on a small file system frees all it has long before a
/// quarter of a whole container waits.
fn frees_wait_for_checkpoint(stats: &larder_space::SpaceStats, container_bytes: u64) -> bool {
    let space = container_bytes.min(stats.bytes_total);
    stats.bytes_pending_free >= (space / PENDING_FREE_SHARE).max(larder_space::BLOCK_BYTES)
}

/// Flushes the index if the log needs room, then records what the index
/// covers. Returns an error text for the log of the failure.
pub(crate) fn checkpoint_once(index: &Index, log: &Log, space: &SpaceManager, force_flush: bool) -> Result<(), String> {
    if force_flush || log.needs_checkpoint() {
        index.flush().map_err(|e| format!("index flush for a checkpoint: {e}"))?;
    }
    // IMPORTANT: the index's flush hook keeps its durable sequence number
    // at or below the log's durable LSN; the `min` guards that, since the
    // log refuses a checkpoint past its durable LSN.
    let covered = index.durable_seq().min(log.durable_lsn());
    log.checkpoint(covered).map_err(|e| format!("log checkpoint: {e}"))?;
    // Extents freed by transactions the index now covers may be reused.
    space.set_durable_lsn(covered);
    Ok(())
}

impl Checkpointer {
    pub(crate) fn start(
        signal: Arc<Signal>,
        index: Arc<Index>,
        log: Arc<Log>,
        space: Arc<SpaceManager>,
    ) -> std::io::Result<Checkpointer> {
        let s = signal.clone();
        let spare_space = space.clone();
        // When a checkpoint for space was last taken: at most one a second,
        // so frees held back by an old reader (not by the index) cost a
        // small flush a second, not one per poll.
        let mut for_space_at: Option<std::time::Instant> = None;
        let thread = std::thread::Builder::new().name("larder-checkpoint".into()).spawn(move || loop {
            let wanted = {
                let mut f = s.flags.lock();
                if !f.wanted && !f.stop {
                    s.cond.wait_for(&mut f, POLL);
                }
                if f.stop {
                    return;
                }
                std::mem::take(&mut f.wanted)
            };
            let for_space = frees_wait_for_checkpoint(&space.stats(), space.options().container_bytes)
                && for_space_at.is_none_or(|t| t.elapsed() >= SPACE_CHECKPOINT_EVERY);
            if for_space {
                for_space_at = Some(std::time::Instant::now());
            }
            if let Err(e) = checkpoint_once(&index, &log, &space, wanted || for_space) {
                // A failed flush poisons the index and log themselves; the
                // next write reports it. Nothing more to do here.
                tracing::error!(error = %e, "checkpoint failed");
                return;
            }
            // Hole punching rides on the same thread (coalesced and
            // rate-limited by the space manager).
            if let Err(e) = space.punch_some(std::time::Instant::now()) {
                tracing::error!(error = %e, "space upkeep failed");
                return;
            }
        })?;
        let stop_spares = Arc::new(AtomicBool::new(false));
        let stop = stop_spares.clone();
        let spares = std::thread::Builder::new().name("larder-spares".into()).spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match spare_space.ensure_spares_in_background(&stop) {
                    Ok(_) | Err(larder_space::SpaceError::Stopped) => {}
                    // A full disk: the next allocation that needs a
                    // container makes one itself, and reports it.
                    Err(e) => tracing::warn!(error = %e, "could not make a spare container"),
                }
                std::thread::park_timeout(POLL);
            }
        });
        let mut checkpointer = Checkpointer { signal, thread: Some(thread), spares: None, stop_spares };
        match spares {
            Ok(t) => checkpointer.spares = Some(t),
            // Not left running for a store that failed to open.
            Err(e) => {
                checkpointer.stop();
                return Err(e);
            }
        }
        Ok(checkpointer)
    }

    pub(crate) fn stop(&mut self) {
        self.signal.stop();
        self.stop_spares.store(true, Ordering::Relaxed);
        if let Some(t) = self.spares.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarter_container_of_pending_frees_asks_for_a_checkpoint() {
        let mut s = larder_space::SpaceStats::default();
        let gib = 1u64 << 30;
        s.bytes_total = 4 * gib;
        assert!(!frees_wait_for_checkpoint(&s, gib));
        s.bytes_pending_free = gib / 4 - 4096;
        assert!(!frees_wait_for_checkpoint(&s, gib));
        s.bytes_pending_free = gib / 4;
        assert!(frees_wait_for_checkpoint(&s, gib));
        // Tiny containers: at least a block must wait.
        s.bytes_pending_free = 0;
        assert!(!frees_wait_for_checkpoint(&s, 8192));
        s.bytes_pending_free = 4096;
        assert!(frees_wait_for_checkpoint(&s, 8192));
    }

    #[test]
    fn a_quarter_of_growing_containers_asks_for_a_checkpoint() {
        let mut s = larder_space::SpaceStats::default();
        s.bytes_total = 200 << 20;
        s.bytes_pending_free = 50 << 20;
        assert!(frees_wait_for_checkpoint(&s, 1 << 30), "a quarter of a 200 MiB store freed waits");
        s.bytes_pending_free = (50 << 20) - 4096;
        assert!(!frees_wait_for_checkpoint(&s, 1 << 30));
    }
}
