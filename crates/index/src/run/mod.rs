//! Sorted runs: immutable files of entries in internal order, with a block
//! index, a bloom filter, range tombstones and a checksum on every block.
//! The byte layout is in docs/format.md ("Run file").

pub(crate) mod block;
pub(crate) mod block_index;
pub(crate) mod bloom;
pub(crate) mod cache;
pub(crate) mod fault_guard;
pub(crate) mod iter;
pub(crate) mod lookup_many;
pub(crate) mod radix_table;
pub(crate) mod reader;
pub(crate) mod writer;

/// The last 8 bytes of every run file.
pub(crate) const RUN_MAGIC: [u8; 8] = *b"LRDRRUN\0";
/// The run format version this build writes and the newest it reads.
pub(crate) const RUN_FORMAT_VERSION: u32 = 1;
/// Incompatible feature bit 0: the bloom filter uses the cache-local
/// layout (see `bloom`). Set by every run this build writes with a filter.
pub(crate) const RUN_FEATURE_LOCAL_FILTER: u64 = 1;
/// Incompatible feature bits this build understands.
pub(crate) const RUN_KNOWN_INCOMPAT: u64 = RUN_FEATURE_LOCAL_FILTER;
/// Size of the fixed footer.
pub(crate) const FOOTER_BYTES: usize = 44;

/// Where a block lives in a run file (its length includes the checksum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockHandle {
    pub offset: u64,
    pub len: u32,
}

/// The deepest level a run may have. Merges take at least two runs of a
/// level (`merge_fanout >= 2`) into one of the next, so a run at this level
/// stands for at least 2^63 flushes: only a corrupt manifest names a
/// deeper one, and refusing it keeps per-level tables small.
pub(crate) const MAX_LEVEL: u32 = 63;

/// What the manifest records about a run, so lookups can skip it without
/// opening it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunMeta {
    pub id: u64,
    pub level: u32,
    /// The batches the run holds: exactly those with sequence numbers in
    /// `[seq_min, seq_max]` (runs never overlap in sequence numbers).
    pub seq_min: u64,
    pub seq_max: u64,
    pub entry_count: u64,
    pub tombstone_count: u32,
    pub file_size: u64,
    /// Smallest and largest key the run's entries and tombstones touch.
    pub min_key: Vec<u8>,
    pub max_key: Vec<u8>,
}

/// File name of run `id`.
pub(crate) fn run_file_name(id: u64) -> String {
    format!("{id:016x}.run")
}

/// Parses a run file name back to its id.
pub(crate) fn parse_run_file_name(name: &str) -> Option<u64> {
    parse_lower_hex16(name.strip_suffix(".run")?)
}

/// Exactly 16 lower-case hex digits, as the writer names files; anything
/// else is not ours (and is never removed as if it were).
pub(crate) fn parse_lower_hex16(hex: &str) -> Option<u64> {
    let ok = hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ok.then(|| u64::from_str_radix(hex, 16).ok()).flatten()
}
