//! Larder's intent log: one ordered stream of checksummed records in
//! segment files that are zero-filled when created and reused, never
//! truncated or punched (DESIGN.md).
//!
//! Every record has an LSN (consecutive from a base the caller gives), the
//! crc32c of the record before it (a chain), an opaque payload (for the
//! object layer: an encoded index `WriteBatch` plus extent descriptors) and
//! its own crc32c. Records are written in *groups*: one write of whole
//! 4 KiB blocks at a block-aligned offset, then one `fdatasync`. Appends
//! from many threads are gathered by a leader into one group, a few groups
//! may be syncing at once, and they are acknowledged in LSN order ([`Log`]
//! explains how callers apply records in LSN order); a record can name
//! data files to be made durable in the same round ([`Log::append_with`]).
//!
//! Segments (`<dir>/<id:016x>.seg`, [`Options::segment_bytes`] each, at
//! most [`Options::max_segments`]) are freed by [`Log::checkpoint`] once
//! the caller's index covers their records, and restarted later under a new
//! epoch; recovery tells their stale bytes from live ones by the epoch and
//! the LSN/crc chain. [`Log::open`] verifies the whole log and replays what
//! the caller's index lacks; a damaged record that a later durable group
//! proves was acknowledged fails open, naming file, offset and LSN.
//!
//! After any failed write or sync the log is poisoned: every later call
//! fails with [`LogError::Poisoned`] until it is reopened.
//!
//! The byte layouts, recovery rules and crash cases are in docs/format.md,
//! section 11.
#![deny(missing_docs)]

mod checkpoint;
mod clean;
mod dep_sync;
mod dependency;
mod error;
mod format;
mod log;
mod options;
mod recover;
mod segment;
mod stats;
mod writer;

pub mod fuzzing;

pub use dependency::Dependency;
pub use error::{LogError, Result};
pub use log::{Log, ReplayRecord};
pub use options::{OnCheckpointNeeded, OnDurable, OnPoison, Options};
pub use recover::{RecoveryReport, Replay};
pub use stats::LogStats;

/// A log sequence number: records get consecutive LSNs.
pub type Lsn = u64;

/// The format version this build writes and the newest it reads.
pub const LOG_FORMAT_VERSION: u32 = format::LOG_FORMAT_VERSION;
