//! The log layer's error type.

use std::path::PathBuf;

use larder_io::IoError;

use crate::Lsn;

/// Result of a log call.
pub type Result<T, E = LogError> = std::result::Result<T, E>;

/// What went wrong in the intent log, and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The io layer failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A segment header fails a check that a torn write cannot explain
    /// (it names another segment, or its size is impossible).
    #[error("{path}: corrupt at offset {offset}: {what}")]
    Corrupt {
        /// The segment file.
        path: PathBuf,
        /// Where the bad structure starts.
        offset: u64,
        /// What check failed.
        what: String,
    },
    /// A record the log had acknowledged is damaged or missing: a valid
    /// group header written later says records up to `acked` were durable.
    #[error(
        "{path}: record {lsn} at offset {offset} is damaged or missing ({what}), but the log had acknowledged \
         records up to {acked}; the log is corrupt"
    )]
    CorruptRecord {
        /// The segment file where the valid records end.
        path: PathBuf,
        /// Where the first bad or missing record (or its group) starts.
        offset: u64,
        /// The LSN of the first record that could not be read.
        lsn: Lsn,
        /// The highest acknowledged LSN found in a valid header.
        acked: Lsn,
        /// What check failed.
        what: String,
    },
    /// A segment was written by a newer format version than this build reads.
    #[error(
        "{path}: log format version {found} is newer than the newest this build reads ({supported}); upgrade larder"
    )]
    NewerVersion {
        /// The segment file.
        path: PathBuf,
        /// The version found.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// A segment uses an incompatible feature this build does not know.
    #[error("{path}: unknown incompatible feature flags {flags:#x}; upgrade larder")]
    UnknownFeature {
        /// The segment file.
        path: PathBuf,
        /// The unknown flag bits.
        flags: u64,
    },
    /// The log holds no record at or below `covered + 1`: records between
    /// what the caller's index covers and what the log holds are missing.
    #[error(
        "{dir}: the log starts at LSN {log_start}, but the caller covers only up to {covered}; records are missing"
    )]
    MissingRecords {
        /// The log directory.
        dir: PathBuf,
        /// The LSN the caller's index covers.
        covered: Lsn,
        /// The lowest LSN the log could start from.
        log_start: Lsn,
    },
    /// The caller's index covers LSNs beyond the end of the durable log: it
    /// was flushed with records the log had not made durable.
    #[error("{dir}: the caller covers up to LSN {covered}, but the durable log ends at {log_end}; the index was flushed ahead of the log")]
    IndexAhead {
        /// The log directory.
        dir: PathBuf,
        /// The LSN the caller's index covers.
        covered: Lsn,
        /// The last valid LSN in the log.
        log_end: Lsn,
    },
    /// The replay callback refused a record during open.
    #[error("replaying record {lsn} failed: {source}")]
    Replay {
        /// The record.
        lsn: Lsn,
        /// The callback's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The `on_durable` hook refused a durable record; the log is poisoned.
    #[error("applying durable record {lsn} failed: {reason}")]
    Apply {
        /// The record.
        lsn: Lsn,
        /// The hook's explanation.
        reason: String,
    },
    /// A payload is larger than a segment can hold.
    #[error("record payload is {len} bytes; the limit for this segment size is {limit}")]
    TooLarge {
        /// The payload size.
        len: u64,
        /// The largest payload accepted.
        limit: u64,
    },
    /// Every segment is in use and no checkpoint freed one in time.
    #[error("{dir}: log is full ({segments} segments in use) and no checkpoint freed a segment within {waited_ms} ms")]
    Full {
        /// The log directory.
        dir: PathBuf,
        /// Segments in use.
        segments: usize,
        /// How long the writer waited.
        waited_ms: u64,
    },
    /// `checkpoint` was given an LSN beyond what is durable.
    #[error("checkpoint at LSN {covered} is beyond the durable LSN {durable}")]
    CheckpointAhead {
        /// The LSN given.
        covered: Lsn,
        /// The durable LSN.
        durable: Lsn,
    },
    /// The options are inconsistent.
    #[error("invalid option {name}: {reason}")]
    InvalidOption {
        /// The option.
        name: &'static str,
        /// Why it is refused.
        reason: String,
    },
    /// An earlier failed write, sync or hook stopped the log; reopen it to
    /// recover from what is on disk.
    #[error("log is poisoned: {0}; reopen it to recover from what is on disk")]
    Poisoned(String),
    /// `append`, `append_buffered`, `sync` or `sync_to` was called from the
    /// log's own `on_durable` hook or `on_checkpoint_needed` callback, which
    /// run on the thread writing a group: waiting there would deadlock.
    #[error(
        "append or sync called from the log's own on_durable or on_checkpoint_needed callback (it would deadlock)"
    )]
    Reentrant,
    /// The log was closed.
    #[error("log is closed")]
    Closed,
}

impl LogError {
    /// Builds a [`LogError::Corrupt`].
    pub(crate) fn corrupt(path: impl Into<PathBuf>, offset: u64, what: impl Into<String>) -> Self {
        LogError::Corrupt { path: path.into(), offset, what: what.into() }
    }
}
