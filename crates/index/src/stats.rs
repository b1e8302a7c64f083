//! Counters every index keeps, printed by the CLI and the benchmarks.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters (relaxed atomics).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub block_cache_hits: AtomicU64,
    pub block_cache_misses: AtomicU64,
    /// Blocks read by `pread` (through the cache or around it); reads in
    /// a mapping count in `mapped_block_reads` only.
    pub block_reads: AtomicU64,
    pub mapped_block_reads: AtomicU64,
    pub bloom_negatives: AtomicU64,
    pub bloom_true_positives: AtomicU64,
    pub bloom_false_positives: AtomicU64,
    pub gets: AtomicU64,
    pub get_misses: AtomicU64,
    pub missed_gets_reading_data_block: AtomicU64,
    pub user_bytes_written: AtomicU64,
    pub bytes_flushed: AtomicU64,
    pub bytes_compacted: AtomicU64,
    pub flushes: AtomicU64,
    pub bytes_ingested: AtomicU64,
    pub ingests: AtomicU64,
    pub compactions: AtomicU64,
    pub stall_micros: AtomicU64,
    pub slowdowns: AtomicU64,
    pub stops: AtomicU64,
    pub run_opens: AtomicU64,
    pub metadata_over_budget_opens: AtomicU64,
    pub manifest_writes: AtomicU64,
}

impl Stats {
    pub(crate) fn add(&self, counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// A copy of the counters at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct IndexStats {
    /// Data blocks found in the block cache.
    pub block_cache_hits: u64,
    /// Data blocks not in the cache.
    pub block_cache_misses: u64,
    /// Data blocks read from run files (cache misses, uncached reads and
    /// reads in a mapped run).
    pub block_reads: u64,
    /// Of those, blocks a point get read in a run's mapping
    /// ([`crate::Options::map_runs`]), bypassing the block cache.
    pub mapped_block_reads: u64,
    /// Lookups a bloom filter answered "absent" (no data block read).
    pub bloom_negatives: u64,
    /// Lookups a filter passed where the run held the key.
    pub bloom_true_positives: u64,
    /// Lookups a filter passed where the run did not hold the key.
    pub bloom_false_positives: u64,
    /// Point gets.
    pub gets: u64,
    /// Point gets that found nothing.
    pub get_misses: u64,
    /// Missed gets that consulted at least one data block.
    pub missed_gets_reading_data_block: u64,
    /// Bytes of keys and values written by callers.
    pub user_bytes_written: u64,
    /// Bytes written by memtable flushes.
    pub bytes_flushed: u64,
    /// Bytes written by merges (compactions).
    pub bytes_compacted: u64,
    /// Flushes done.
    pub flushes: u64,
    /// Bytes of runs written straight from ingested batches.
    pub bytes_ingested: u64,
    /// Batches ingested as runs.
    pub ingests: u64,
    /// Merges done.
    pub compactions: u64,
    /// Time writers spent delayed or stopped, in microseconds.
    pub stall_micros: u64,
    /// Writes delayed because level 0 was filling.
    pub slowdowns: u64,
    /// Writes stopped until flushing or merging caught up.
    pub stops: u64,
    /// Run files opened (including reopens after eviction).
    pub run_opens: u64,
    /// Run opens that left the open runs' metadata over
    /// `metadata_cache_bytes`, every other open run having been used
    /// recently: the budget is smaller than what reads use.
    pub metadata_over_budget_opens: u64,
    /// Manifests written.
    pub manifest_writes: u64,
    /// Runs in the current version.
    pub runs: u64,
    /// Runs per level, level 0 first.
    pub runs_per_level: Vec<u64>,
    /// Bytes of run files in the current version.
    pub run_bytes: u64,
    /// Runs held open in the descriptor cache.
    pub open_runs: u64,
    /// Filter, index and tombstone bytes of open runs.
    pub metadata_bytes: u64,
    /// Bytes in the block cache.
    pub block_cache_bytes: u64,
    /// Bytes in memtables (active and frozen).
    pub memtable_bytes: u64,
    /// Bytes of the entries in the memtables, without their filters:
    /// about what flushing them all would write.
    pub memtable_data_bytes: u64,
    /// Highest sequence number whose batches are all in durable runs.
    pub durable_seq: u64,
    /// Highest sequence number written.
    pub last_seq: u64,
}

impl IndexStats {
    /// Bytes written to runs per byte written by callers.
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes_written == 0 {
            return 0.0;
        }
        (self.bytes_flushed + self.bytes_ingested + self.bytes_compacted) as f64 / self.user_bytes_written as f64
    }

    /// Share of missed gets that read a data block.
    pub fn missed_get_block_read_ratio(&self) -> f64 {
        if self.get_misses == 0 {
            return 0.0;
        }
        self.missed_gets_reading_data_block as f64 / self.get_misses as f64
    }

    /// Share of block lookups served from the cache.
    pub fn block_cache_hit_ratio(&self) -> f64 {
        let total = self.block_cache_hits + self.block_cache_misses;
        if total == 0 {
            return 0.0;
        }
        self.block_cache_hits as f64 / total as f64
    }
}

impl std::fmt::Display for IndexStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "runs:             {} ({} bytes), per level {:?}", self.runs, self.run_bytes, self.runs_per_level)?;
        writeln!(f, "sequence:         last {} durable {}", self.last_seq, self.durable_seq)?;
        writeln!(
            f,
            "memory:           memtables {} B, block cache {} B, metadata {} B in {} open runs ({} opens over budget)",
            self.memtable_bytes,
            self.block_cache_bytes,
            self.metadata_bytes,
            self.open_runs,
            self.metadata_over_budget_opens
        )?;
        writeln!(
            f,
            "writes:           {} user bytes, {} flushed ({} flushes), {} ingested ({} batches), {} compacted ({} merges), write amp {:.2}",
            self.user_bytes_written,
            self.bytes_flushed,
            self.flushes,
            self.bytes_ingested,
            self.ingests,
            self.bytes_compacted,
            self.compactions,
            self.write_amplification()
        )?;
        writeln!(
            f,
            "stalls:           {} slowdowns, {} stops, {:.3} s stalled",
            self.slowdowns,
            self.stops,
            self.stall_micros as f64 / 1e6
        )?;
        writeln!(
            f,
            "block cache:      {} hits, {} misses ({:.1}% hit), {} block reads ({} in mapped runs)",
            self.block_cache_hits,
            self.block_cache_misses,
            100.0 * self.block_cache_hit_ratio(),
            self.block_reads,
            self.mapped_block_reads
        )?;
        writeln!(
            f,
            "bloom filters:    {} negatives, {} true positives, {} false positives",
            self.bloom_negatives, self.bloom_true_positives, self.bloom_false_positives
        )?;
        write!(
            f,
            "gets:             {} ({} missed, {:.2}% of misses read a data block)",
            self.gets,
            self.get_misses,
            100.0 * self.missed_get_block_read_ratio()
        )
    }
}
