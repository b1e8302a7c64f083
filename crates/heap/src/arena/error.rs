//! The arena's error type.

use super::{MAX_ALIGN, MAX_BLOCK_BYTES, RECORD_VERSION};

/// What the owner's grow callback returns on failure.
pub type GrowError = Box<dyn std::error::Error + Send + Sync>;

/// Why an arena call failed. A failed call changes nothing, except that a
/// range the owner did add to the object (a grow callback that succeeded)
/// stays claimed by the arena.
#[derive(Debug, thiserror::Error)]
pub enum ArenaError {
    /// No live block holds `[offset, offset + len)` with this generation:
    /// the block was freed (perhaps reused since), or never existed.
    #[error("stale pointer: no live arena block holds {len} bytes at offset {offset} with generation {generation}")]
    Stale {
        /// The offset asked about.
        offset: u64,
        /// The length asked about (0 for `free`).
        len: u64,
        /// The generation the caller holds.
        generation: u64,
    },
    /// The alignment is not a power of two between 1 and [`MAX_ALIGN`].
    #[error("alignment {align} is not a power of two between 1 and {MAX_ALIGN}")]
    BadAlignment {
        /// The alignment asked for.
        align: u64,
    },
    /// A block of zero bytes was asked for.
    #[error("an arena block must have at least one byte")]
    ZeroSize,
    /// The block is larger than [`MAX_BLOCK_BYTES`].
    #[error("an arena block of {size} bytes is larger than the limit of {MAX_BLOCK_BYTES} bytes")]
    TooLarge {
        /// The size asked for.
        size: u64,
    },
    /// The owner could not grow the object.
    #[error("growing the object for its arena failed")]
    Grow(#[source] GrowError),
    /// The owner's grow callback returned a range that is not page-aligned,
    /// wraps around, or overlaps bytes the arena already claimed.
    #[error("the object grew at offset {offset} for {len} bytes, which is not page-aligned or overlaps the arena")]
    BadGrow {
        /// Where the callback said the new range starts.
        offset: u64,
        /// The bytes asked for.
        len: u64,
    },
    /// The arena has used every generation its durable reservation covers
    /// (always so right after `Arena::new` or `Arena::load`): persist
    /// `Arena::take_dirty_records` durably, call `Arena::records_durable`,
    /// and retry. Nothing changed.
    #[error("the arena needs a sync: its durable generation reservation is used up")]
    NeedsSync,
    /// The arena has issued every generation a 64-bit counter holds.
    #[error("the arena has run out of generations")]
    GenerationsExhausted,
    /// A record, or a set of records, is damaged or inconsistent.
    #[error("corrupt arena record (key {key:#x}): {what}")]
    Corrupt {
        /// The record's key ([`super::HEADER_KEY`] for the header).
        key: u64,
        /// What is wrong with it.
        what: &'static str,
    },
    /// A record written by a newer build.
    #[error(
        "arena record (key {key:#x}) has version {version}; this build reads up to {RECORD_VERSION}: upgrade larder"
    )]
    NewerRecord {
        /// The record's key.
        key: u64,
        /// The version it carries.
        version: u8,
    },
}

impl ArenaError {
    pub(crate) fn corrupt(key: u64, what: &'static str) -> ArenaError {
        ArenaError::Corrupt { key, what }
    }
}
