//! The transport's typed errors.
//!
//! A [`Violation`] is something the peer wrote into shared memory that
//! breaks the protocol; the server ends that client's session on any of
//! them. A [`TransportError`] is a failure to set up or reach the shared
//! memory itself. A [`SendError`] is a record the caller should not have
//! sent, or a violation found while sending.

use std::io;

use thiserror::Error;

/// Which ring of a worker's pair a violation was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingKind {
    /// Client produces, worker consumes.
    Request,
    /// Worker produces, client consumes.
    Completion,
}

impl std::fmt::Display for RingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RingKind::Request => "request ring",
            RingKind::Completion => "completion ring",
        })
    }
}

/// A peer broke the protocol in shared memory. Every field is what this
/// side saw after copying it out, so the message names what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Violation {
    /// The producer's published position is more than a ring ahead of what
    /// this consumer has taken, or not a multiple of 8 from it.
    #[error("{ring}: producer position {producer} is {distance} bytes past consumer position {consumer} (ring of {ring_bytes} bytes, records 8-byte aligned)")]
    ProducerPosition { ring: RingKind, producer: u32, consumer: u32, distance: u32, ring_bytes: u32 },
    /// The consumer's published position is ahead of what this producer has
    /// written, more than a ring behind it, or not a multiple of 8 from it.
    #[error("{ring}: consumer position {consumer} is {distance} bytes behind producer position {producer} (ring of {ring_bytes} bytes, records 8-byte aligned)")]
    ConsumerPosition { ring: RingKind, producer: u32, consumer: u32, distance: u32, ring_bytes: u32 },
    /// A padding record that does not end exactly at the ring's end.
    #[error("{ring}: padding record of {length} bytes at ring offset {offset} does not end at the ring's end ({ring_bytes})")]
    Padding { ring: RingKind, offset: u32, length: u32, ring_bytes: u32 },
    /// A record longer than the largest the ring allows.
    #[error("{ring}: record of {length} bytes at ring offset {offset} is longer than the largest allowed ({max})")]
    RecordTooLarge { ring: RingKind, offset: u32, length: u32, max: u32 },
    /// A record (or padding record) that would run past the ring's end.
    #[error("{ring}: record of {length} bytes at ring offset {offset} crosses the ring's end ({ring_bytes})")]
    RecordCrossesEnd { ring: RingKind, offset: u32, length: u32, ring_bytes: u32 },
    /// A record longer than the bytes the producer published.
    #[error("{ring}: record of {record_bytes} bytes (with header and padding) at ring offset {offset} exceeds the {published} bytes published")]
    RecordBeyondPublished { ring: RingKind, offset: u32, record_bytes: u32, published: u32 },
    /// The record's crc32c does not match the bytes copied out.
    #[error(
        "{ring}: record of {length} bytes at ring offset {offset}: crc32c {actual:#010x}, header says {expected:#010x}"
    )]
    Checksum { ring: RingKind, offset: u32, length: u32, expected: u32, actual: u32 },
    /// A slice of the data area that does not lie inside it.
    #[error("data area slice at offset {offset}, {length} bytes, is outside the data area of {data_bytes} bytes")]
    DataSlice { offset: u64, length: u64, data_bytes: u64 },
    /// Bytes named by offset outside the whole region (raw access).
    #[error("{length} bytes at offset {offset} are outside the region of {region_bytes} bytes")]
    OutsideRegion { offset: u64, length: u64, region_bytes: u64 },
    /// A word access (raw) at an offset that is not a multiple of its size.
    #[error("a {bytes}-byte word at offset {offset} is not {bytes}-byte aligned")]
    UnalignedWord { offset: u64, bytes: u64 },
}

/// Why a record was not sent.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SendError {
    /// The record is longer than the ring's largest record (a quarter of
    /// the ring): the caller must split it or use the data area.
    #[error("record of {length} bytes is longer than the ring's largest record ({max} bytes)")]
    TooLarge { length: usize, max: u32 },
    /// The peer's consumer position is impossible.
    #[error(transparent)]
    Violation(#[from] Violation),
}

/// What is wrong with a [`crate::layout::Layout`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LayoutError {
    #[error("{workers} workers: a region holds 1 to {max} workers' rings")]
    Workers { workers: u32, max: u32 },
    #[error("{which} ring of {bytes} bytes: a ring is a power of two from {min} to {max} bytes")]
    RingBytes { which: RingKind, bytes: u32, min: u32, max: u32 },
    #[error("data area of {bytes} bytes: it is a multiple of {page} bytes and at most {max}")]
    DataBytes { bytes: u64, page: u64, max: u64 },
}

/// Setting up, attaching or using a region or doorbell failed.
#[derive(Debug, Error)]
pub enum TransportError {
    #[error("invalid layout: {0}")]
    Layout(#[from] LayoutError),
    /// A system call failed; `what` names it and its object.
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    /// A memfd received from the peer is not the size the layout implies.
    #[error("{what} is {actual} bytes, the layout implies {expected}")]
    Size { what: &'static str, expected: u64, actual: u64 },
    /// A memfd received from the peer lacks seals the protocol requires,
    /// so the peer could shrink it under this side's mapping.
    #[error("{what} is missing seals {missing:#x} (has {present:#x})")]
    NotSealed { what: &'static str, missing: u32, present: u32 },
    /// A worker index beyond the layout's workers.
    #[error("worker {worker} does not exist (the layout has {workers})")]
    NoSuchWorker { worker: u32, workers: u32 },
}

impl TransportError {
    pub(crate) fn io(what: &'static str, source: impl Into<io::Error>) -> Self {
        TransportError::Io { what, source: source.into() }
    }
}
