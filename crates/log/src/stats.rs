//! Counters every log keeps.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters (relaxed atomics).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub records: AtomicU64,
    pub payload_bytes: AtomicU64,
    pub groups: AtomicU64,
    pub bytes_written: AtomicU64,
    pub zero_fill_bytes: AtomicU64,
    pub syncs: AtomicU64,
    pub sync_micros: AtomicU64,
    pub dependency_syncs: AtomicU64,
    pub dependency_write_backs: AtomicU64,
    pub checkpoints: AtomicU64,
    pub segments_created: AtomicU64,
    pub segments_reused: AtomicU64,
    pub segments_freed: AtomicU64,
    pub full_waits: AtomicU64,
    pub reserve_segments: AtomicU64,
    pub overlapped_groups: AtomicU64,
    /// Kept in nanoseconds: a group on fast storage takes less than a
    /// microsecond, which whole microseconds per change would drop.
    pub busy_nanos: AtomicU64,
    pub at_limit_nanos: AtomicU64,
}

impl Stats {
    pub(crate) fn add(&self, counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> LogStats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LogStats {
            records: g(&self.records),
            payload_bytes: g(&self.payload_bytes),
            groups: g(&self.groups),
            bytes_written: g(&self.bytes_written),
            zero_fill_bytes: g(&self.zero_fill_bytes),
            syncs: g(&self.syncs),
            sync_micros: g(&self.sync_micros),
            dependency_syncs: g(&self.dependency_syncs),
            dependency_write_backs: g(&self.dependency_write_backs),
            checkpoints: g(&self.checkpoints),
            segments_created: g(&self.segments_created),
            segments_reused: g(&self.segments_reused),
            segments_freed: g(&self.segments_freed),
            full_waits: g(&self.full_waits),
            reserve_segments: g(&self.reserve_segments),
            overlapped_groups: g(&self.overlapped_groups),
            busy_micros: g(&self.busy_nanos) / 1000,
            at_limit_micros: g(&self.at_limit_nanos) / 1000,
        }
    }
}

/// A copy of the counters at one moment (since open).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogStats {
    /// Records written (durable).
    pub records: u64,
    /// Payload bytes of those records.
    pub payload_bytes: u64,
    /// Groups written: one write and one sync each.
    pub groups: u64,
    /// Bytes of groups written, headers and padding included.
    pub bytes_written: u64,
    /// Zeros written to create or extend segments.
    pub zero_fill_bytes: u64,
    /// `fdatasync` calls on segments (groups, segment headers and
    /// [`crate::Log::flush`]).
    pub syncs: u64,
    /// Microseconds spent in those syncs.
    pub sync_micros: u64,
    /// Dependency files synced on behalf of `append_with`.
    pub dependency_syncs: u64,
    /// Dependency ranges written back before a group's sync (one per file
    /// per group), made durable by its flush.
    pub dependency_write_backs: u64,
    /// Calls to `checkpoint`.
    pub checkpoints: u64,
    /// Segment files created.
    pub segments_created: u64,
    /// Segments restarted after a checkpoint freed them.
    pub segments_reused: u64,
    /// Segments checkpoints freed.
    pub segments_freed: u64,
    /// Times the writer found every segment in use and waited for a checkpoint.
    pub full_waits: u64,
    /// Segments created beyond `max_segments`, from the reserve.
    pub reserve_segments: u64,
    /// Groups whose write started while an earlier group was still being
    /// written or synced (see [`crate::Options::max_groups_in_flight`]).
    pub overlapped_groups: u64,
    /// Microseconds during which at least one group was being written or
    /// synced: over a timed window, the rest is time in which the log had
    /// no write or sync at the device (its records, if any, were waiting
    /// for a leader to be scheduled or were not yet appended).
    pub busy_micros: u64,
    /// Microseconds during which [`crate::Options::max_groups_in_flight`]
    /// groups were being written or synced, so a record appended then
    /// waited for one of them to finish before its group could start.
    pub at_limit_micros: u64,
}

impl LogStats {
    /// Average records per group (0 before the first group).
    pub fn average_group_records(&self) -> f64 {
        if self.groups == 0 {
            0.0
        } else {
            self.records as f64 / self.groups as f64
        }
    }
}
