//! Larder's index: a write-optimized, persistent, ordered key-value index
//! with arbitrary byte keys, usable on its own.
//!
//! It is a log-structured merge tree in the manner of the COLA the papers
//! build on: writes go to a memtable; full memtables are flushed on a
//! background thread into immutable sorted runs (block index, bloom filter,
//! a crc32c per block); other threads merge runs level by level (tiered, so
//! a byte is rewritten about once per level); a manifest, rewritten
//! atomically, says which runs make up the index and up to which sequence
//! number they are durable.
//!
//! What it is not: it keeps no write-ahead log of its own. Every batch
//! carries a caller-supplied sequence number; [`Index::durable_seq`] says
//! which batches are in durable runs, and the caller's log replays the rest
//! after a crash. Used alone, call [`Index::flush`] to make writes durable.
//!
//! Limits: keys up to [`MAX_KEY_BYTES`], values and merge operands up to
//! [`MAX_VALUE_BYTES`], batches up to 2^32 - 1 operations; larger ones are
//! refused with [`IndexError::TooLarge`].
#![deny(missing_docs)]

mod batch;
mod codec;
mod compaction;
mod db;
mod entry;
mod error;
mod flush;
mod head_tree;
mod huge;
mod ingest;
mod iter;
mod manifest;
mod memtable;
mod merge;
mod merge_order;
mod options;
mod prefetch;
mod read;
mod read_many;
mod resolve;
mod run;
mod stats;
mod version;
mod workers;
mod write;

pub mod fuzzing;

pub use batch::{BatchOp, WriteBatch};
pub use db::{Index, Snapshot};
pub use error::{IndexError, Result};
pub use ingest::PreparedRun;
pub use iter::Iter;
pub use merge::{CounterOperator, MergeOperator};
pub use options::{BeforeDurable, OnPoison, Options};
pub use stats::IndexStats;

/// Largest key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 64 << 10;
/// Largest value or merge operand accepted, in bytes.
pub const MAX_VALUE_BYTES: usize = 256 << 20;
