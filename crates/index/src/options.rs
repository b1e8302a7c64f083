//! Run-time options of an index, with documented defaults.

use std::sync::Arc;

use crate::error::{IndexError, Result};
use crate::merge::MergeOperator;

/// How an index runs. Memory use is bounded by the sum of the named budgets:
/// `memtable_size_bytes * (1 + max_immutable_memtables)` for memtables (each
/// also holds a bloom filter of about 1.3% of its size),
/// `block_cache_bytes` for cached data blocks and `metadata_cache_bytes` for
/// the bloom filters, block indexes and range tombstones of open runs.
#[derive(Clone)]
pub struct Options {
    /// Size at which the active memtable is frozen and queued for flushing.
    /// Default 64 MiB.
    pub memtable_size_bytes: usize,
    /// Frozen memtables that may wait for their flush before writers stop.
    /// Default 2.
    pub max_immutable_memtables: usize,
    /// Target size of a data block in a run (a block ends at a key boundary,
    /// so it can be larger when one key's versions are larger). Default 4 KiB.
    pub block_size_bytes: usize,
    /// Budget of the shared data-block cache. Default 64 MiB.
    pub block_cache_bytes: usize,
    /// Map run files read-only (where the storage backend maps files) and
    /// have point gets read data blocks in the mapping: no system call,
    /// copy or block-cache entry per read, and each block's checksum is
    /// checked once per open. The pages are the OS page cache's (shared,
    /// and reclaimed under memory pressure like any file's), but they count
    /// in the process's resident size. User scans view mapped blocks the
    /// same way, and so do merges where the fault guard covers the
    /// mapping (checking every entry of every block they read; without
    /// the guard they read with `read_at`). Default true.
    ///
    /// A run cut short under the open index is reported as `Corrupt` (with
    /// [`Options::check_mapped_run_length`]); with `false`, gets read with
    /// `read_at` and a cut or an I/O error is an error there too.
    pub map_runs: bool,
    /// With `map_runs`, guard reads of a run's mapping against the file
    /// being cut short under the open index (by another program: the index
    /// never changes a run it wrote), so such a read is a `Corrupt` error
    /// naming the file instead of a SIGBUS that kills the process. The
    /// guard is a SIGBUS handler (installed once per process, handing
    /// faults outside the index's mappings to the handler it replaced) that
    /// reads a faulting page of a registered mapping as zeros and counts
    /// the fault; each read checks the count after it (one atomic load),
    /// and a block's entry count catches the zeros of a cut page's tail.
    /// A mapping the guard cannot register (more than 4,096 at once) checks
    /// the file's length before each read instead (one fstat, about 0.4 us
    /// a get). With `false` neither is done: a cut run kills the process
    /// when a read touches its missing pages. Default true.
    pub check_mapped_run_length: bool,
    /// A run this index writes (a flush, a merge, an ingest) is opened by
    /// the thread that wrote it before readers can see it. With `map_runs`
    /// and background threads, once a reader first uses such a run of at
    /// most this many bytes, the idle flusher populates its mapping
    /// (`MADV_POPULATE_READ`): its pages are likely still in the page cache
    /// (written by this index), so this maps them without reading the
    /// disk, and the readers stop paying a page fault per 64 KiB they
    /// touch. The mapped pages count in the process's resident size, as a
    /// mapped run's pages do once read; runs no reader uses (an ingest) are
    /// not populated, and larger runs' pages are mapped as reads touch
    /// them; a merge's output is populated whatever its size when each of
    /// its inputs was within this bound (its pages stand in for theirs).
    /// 0 disables it. Default 256 MiB.
    pub populate_new_runs_bytes: usize,
    /// Bloom filter bits per key. 0 disables filters. Default 14 (about
    /// 0.12% false positives per run, so a missed get reads a data block
    /// less than 2% of the time even when it consults a dozen runs; 10
    /// bits give about 0.8% per run).
    pub bloom_bits_per_key: u32,
    /// Budget for the filters, block indexes and range tombstones of open
    /// runs; a run whose metadata is evicted is reopened on next use.
    /// Default 64 MiB.
    pub metadata_cache_bytes: usize,
    /// Bound on run files held open at once (the descriptor cache). Default 512.
    pub max_open_runs: usize,
    /// Runs of one level merged into one run of the next level. Default 4.
    pub merge_fanout: usize,
    /// Level-0 runs at which each write is delayed by a millisecond so
    /// merging can catch up. Default 8.
    pub l0_slowdown_runs: usize,
    /// Level-0 runs at which writes stop until merging catches up. Default 12.
    pub l0_stop_runs: usize,
    /// Threads that merge runs. Default 2.
    pub compaction_threads: usize,
    /// With background threads, merge each level's runs into one run of
    /// that level once writes have stopped: the active memtable empty
    /// and unsealed for 10 ms (a writer that stopped and flushed) or
    /// unsealed for a second. A store at rest then reads one run per
    /// level: a get probes fewer filters and a scan positions fewer
    /// cursors. One such merge at a time, at the lowest CPU priority
    /// (nice 19), smallest level first; together they rewrite at most
    /// twice the bytes flushed or ingested since the index opened, and a
    /// flush (writes resumed) ends a round. Default true.
    pub merge_at_rest: bool,
    /// Run flushes and merges on background threads (default). When false,
    /// they run inline in the writing thread: deterministic, for tests.
    pub background_threads: bool,
    /// Merge operators available to batches, by name.
    pub merge_operators: Vec<Arc<dyn MergeOperator>>,
    /// Called with S before a flush declares every batch up to S durable;
    /// returns only once those batches are durable elsewhere (a caller's
    /// log), or fails, and then the flush fails and declares nothing. Lets
    /// a caller apply batches before they are durable in its log while the
    /// index's durable sequence number never runs ahead of the log
    /// (DESIGN.md, ordering rule 2). Default none.
    pub before_durable: Option<BeforeDurable>,
    /// Called once, with the cause, when the index is poisoned (a flush,
    /// merge or write failed, or a worker panicked), so an engine above it
    /// can stop as a whole on its first failure. Default none.
    pub on_poison: Option<OnPoison>,
}

/// See [`Options::on_poison`].
pub type OnPoison = Arc<dyn Fn(&str) + Send + Sync>;

/// See [`Options::before_durable`].
pub type BeforeDurable = Arc<dyn Fn(u64) -> std::result::Result<(), String> + Send + Sync>;

impl Default for Options {
    fn default() -> Self {
        Options {
            memtable_size_bytes: 64 << 20,
            max_immutable_memtables: 2,
            block_size_bytes: 4096,
            block_cache_bytes: 64 << 20,
            map_runs: true,
            check_mapped_run_length: true,
            populate_new_runs_bytes: 256 << 20,
            bloom_bits_per_key: 14,
            metadata_cache_bytes: 64 << 20,
            max_open_runs: 512,
            merge_fanout: 4,
            l0_slowdown_runs: 8,
            l0_stop_runs: 12,
            compaction_threads: 2,
            merge_at_rest: true,
            background_threads: true,
            merge_operators: Vec::new(),
            before_durable: None,
            on_poison: None,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("memtable_size_bytes", &self.memtable_size_bytes)
            .field("max_immutable_memtables", &self.max_immutable_memtables)
            .field("block_size_bytes", &self.block_size_bytes)
            .field("block_cache_bytes", &self.block_cache_bytes)
            .field("map_runs", &self.map_runs)
            .field("check_mapped_run_length", &self.check_mapped_run_length)
            .field("populate_new_runs_bytes", &self.populate_new_runs_bytes)
            .field("bloom_bits_per_key", &self.bloom_bits_per_key)
            .field("metadata_cache_bytes", &self.metadata_cache_bytes)
            .field("max_open_runs", &self.max_open_runs)
            .field("merge_fanout", &self.merge_fanout)
            .field("l0_slowdown_runs", &self.l0_slowdown_runs)
            .field("l0_stop_runs", &self.l0_stop_runs)
            .field("compaction_threads", &self.compaction_threads)
            .field("merge_at_rest", &self.merge_at_rest)
            .field("background_threads", &self.background_threads)
            .field("merge_operators", &self.merge_operators.iter().map(|o| o.name().to_string()).collect::<Vec<_>>())
            .field("before_durable", &self.before_durable.is_some())
            .field("on_poison", &self.on_poison.is_some())
            .finish()
    }
}

impl Options {
    /// Refuses inconsistent settings with the option's name and why.
    pub fn validate(&self) -> Result<()> {
        let bad = |name, reason: &str| Err(IndexError::InvalidOption { name, reason: reason.to_string() });
        if self.memtable_size_bytes < 4096 {
            return bad("memtable_size_bytes", "must be at least 4096");
        }
        if self.max_immutable_memtables == 0 {
            return bad("max_immutable_memtables", "must be at least 1");
        }
        if !(256..=(16 << 20)).contains(&self.block_size_bytes) {
            return bad("block_size_bytes", "must be between 256 bytes and 16 MiB");
        }
        if self.bloom_bits_per_key > 64 {
            return bad("bloom_bits_per_key", "must be at most 64");
        }
        if self.max_open_runs < 2 {
            return bad("max_open_runs", "must be at least 2");
        }
        if self.merge_fanout < 2 {
            return bad("merge_fanout", "must be at least 2");
        }
        if self.l0_slowdown_runs < self.merge_fanout || self.l0_stop_runs <= self.l0_slowdown_runs {
            return bad("l0_stop_runs", "need merge_fanout <= l0_slowdown_runs < l0_stop_runs");
        }
        if self.compaction_threads == 0 {
            return bad("compaction_threads", "must be at least 1");
        }
        Ok(())
    }
}
