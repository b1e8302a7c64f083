//! Run-time options of a log, with documented defaults.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{LogError, Result};
use crate::format::{BLOCK, GROUP_HEADER_BYTES, RECORD_OVERHEAD};
use crate::Lsn;

/// Called by the thread publishing a group for each record of it once the
/// group (and its dependency files) are durable, in LSN order, before any
/// appender of the group is acknowledged. An error poisons the log. It runs
/// on the thread publishing the group, so it must not append to or sync this
/// log (that would wait for itself; the call fails with
/// [`LogError::Reentrant`] instead).
pub type OnDurable = Arc<dyn Fn(Lsn, &[u8]) -> std::result::Result<(), String> + Send + Sync>;

/// Called (from the writing thread, with no lock held) when the live
/// segments pass the checkpoint high-water mark, and again when the log is
/// full. It should make the owner flush its index and call
/// [`crate::Log::checkpoint`]; it must not wait for an append to finish,
/// and it must not append to or sync this log itself (that would wait for
/// the group its own thread is writing; the call fails with
/// [`LogError::Reentrant`] instead).
pub type OnCheckpointNeeded = Arc<dyn Fn() + Send + Sync>;

/// Called once, with the cause, when the log is poisoned (a failed write
/// or sync, a panic of its flusher, or [`crate::Log::poison`]), so an
/// engine above it can stop as a whole on its first failure. It runs with
/// the log's state locked: it must not call into the log.
pub type OnPoison = Arc<dyn Fn(&str) + Send + Sync>;

/// How a log runs. Disk use is bounded by `segment_bytes * (max_segments +
/// reserve)`, where the reserve holds `max_pending_bytes` (see
/// [`Options::reserve_segments`]); memory by `max_pending_bytes` of queued
/// records plus one group buffer.
#[derive(Clone)]
pub struct Options {
    /// Size of every segment file: a multiple of 4 KiB, at least 16 KiB,
    /// at most 1 GiB. Default 64 MiB.
    pub segment_bytes: u64,
    /// Segment files the log may hold (at least 2) before it waits for a
    /// checkpoint, beyond its reserve. Segments are reused, deleted only at a clean close,
    /// so this bounds the log's disk use. Default 16.
    pub max_segments: usize,
    /// Percentage of `segment_bytes * max_segments` that the live segments
    /// may fill before [`crate::Log::needs_checkpoint`] turns true and
    /// `on_checkpoint_needed` fires. Default 50.
    pub checkpoint_percent: u32,
    /// Bytes of payload queued (assigned an LSN, not yet written) at which
    /// appenders wait. This is also the bound on what `append_buffered`
    /// can lose in a crash, with the one group being written. Default 64 MiB.
    pub max_pending_bytes: usize,
    /// How often a background thread writes records queued by
    /// `append_buffered` that nobody is waiting for; `None` runs no thread
    /// (they are then written by the next `append`, `sync_to` or `close`).
    /// Default 10 ms.
    pub buffered_sync_interval: Option<Duration>,
    /// How long the writer waits for a checkpoint when every segment is in
    /// use before it fails the group with [`LogError::Full`] (which poisons
    /// the log). Default 60 s.
    pub full_wait: Duration,
    /// Groups that may be written and synced at the same time (at least
    /// 1). While one group's sync runs, the next can already be written
    /// and its sync started once at least as many records wait as the
    /// group in flight holds (so overlapping never shrinks groups); they
    /// are acknowledged in order all the same. Default 2: on the 2-core
    /// test machine 8 durable writers gained about 7% over 1, and 4 lost
    /// (more, smaller groups: each sync costs CPU in the kernel).
    pub max_groups_in_flight: usize,
    /// Segment files the log holds, zero-filled, once open: those missing
    /// are created at open (before any record is replayed), unless the
    /// log was closed cleanly (such an open writes nothing). A log sized
    /// ahead of its records, as a careful user sizes a database file: the
    /// first `min_segments * segment_bytes` of records are written while
    /// no segment is being zero-filled beside them (a zero-fill doubles
    /// the bytes the device takes and slows the groups' syncs meanwhile).
    /// Best effort, like the spare made at open: a segment that cannot be
    /// created (a full disk) is created when a rotation needs it. At most
    /// `max_segments`. Default 0: only the one spare.
    pub min_segments: usize,
    /// See [`OnDurable`]. Default none: the caller applies records itself
    /// and must do so in LSN order.
    pub on_durable: Option<OnDurable>,
    /// See [`OnCheckpointNeeded`]. Default none.
    pub on_checkpoint_needed: Option<OnCheckpointNeeded>,
    /// See [`OnPoison`]. Default none.
    pub on_poison: Option<OnPoison>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            segment_bytes: 64 << 20,
            max_segments: 16,
            checkpoint_percent: 50,
            max_pending_bytes: 64 << 20,
            buffered_sync_interval: Some(Duration::from_millis(10)),
            full_wait: Duration::from_secs(60),
            max_groups_in_flight: 2,
            min_segments: 0,
            on_durable: None,
            on_checkpoint_needed: None,
            on_poison: None,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("segment_bytes", &self.segment_bytes)
            .field("max_segments", &self.max_segments)
            .field("checkpoint_percent", &self.checkpoint_percent)
            .field("max_pending_bytes", &self.max_pending_bytes)
            .field("buffered_sync_interval", &self.buffered_sync_interval)
            .field("full_wait", &self.full_wait)
            .field("max_groups_in_flight", &self.max_groups_in_flight)
            .field("min_segments", &self.min_segments)
            .field("on_durable", &self.on_durable.is_some())
            .field("on_checkpoint_needed", &self.on_checkpoint_needed.is_some())
            .field("on_poison", &self.on_poison.is_some())
            .finish()
    }
}

impl Options {
    /// Segments the log may add beyond `max_segments` rather than wait for
    /// a checkpoint: enough for `max_pending_bytes` of queued records and
    /// one more. A caller may apply records before they are durable (the
    /// object store does) and then needs them written for its checkpoint to
    /// finish; a writer waiting for that checkpoint would never write them.
    pub fn reserve_segments(&self) -> usize {
        let usable = self.segment_bytes.saturating_sub(2 * BLOCK).max(BLOCK);
        (self.max_pending_bytes as u64).div_ceil(usable) as usize + 1
    }

    /// Refuses inconsistent values.
    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |name, reason: &str| Err(LogError::InvalidOption { name, reason: reason.into() });
        if !self.segment_bytes.is_multiple_of(BLOCK) || self.segment_bytes < 4 * BLOCK || self.segment_bytes > 1 << 30 {
            return bad("segment_bytes", "must be a multiple of 4096 between 16 KiB and 1 GiB");
        }
        if self.max_segments < 2 {
            return bad("max_segments", "must be at least 2 (one being written, one to move to)");
        }
        if self.checkpoint_percent == 0 || self.checkpoint_percent > 100 {
            return bad("checkpoint_percent", "must be between 1 and 100");
        }
        if self.max_pending_bytes == 0 {
            return bad("max_pending_bytes", "must be positive");
        }
        if self.max_groups_in_flight == 0 {
            return bad("max_groups_in_flight", "must be at least 1");
        }
        if self.min_segments > self.max_segments {
            return bad("min_segments", "must not exceed max_segments");
        }
        Ok(())
    }

    /// The largest payload one segment can hold.
    pub fn max_payload_bytes(&self) -> u64 {
        self.segment_bytes.saturating_sub(BLOCK + (GROUP_HEADER_BYTES + RECORD_OVERHEAD) as u64)
    }
}
