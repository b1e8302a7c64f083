//! Writing fields. One encoder serves two sinks: a `Vec<u8>` that takes
//! the bytes, and a [`Measure`] that only counts them and keeps the first
//! rule a decoder would refuse, so `check_request` and `check_response`
//! follow the very code that encodes.

use super::error::DecodeError;
use super::{HEADER_BYTES, MAX_MESSAGE_BYTES};
use crate::message::{Attributes, BufferSlice, Durability, FileKind, Payload, TimeChange, Timestamp};

/// Where encoded bytes go.
pub(super) trait Sink {
    /// Takes the next bytes.
    fn put(&mut self, bytes: &[u8]);
    /// Learns that the message breaks a rule of the decoder.
    fn refuse(&mut self, error: DecodeError);
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    /// Encoding never fails: the bytes go out and the peer refuses them.
    #[inline]
    fn refuse(&mut self, _error: DecodeError) {}
}

/// Counts the bytes of a message and keeps the first refusal.
#[derive(Default)]
pub(super) struct Measure {
    length: usize,
    first_refusal: Option<DecodeError>,
}

impl Measure {
    /// What the decoder would say: the message's length is checked first,
    /// as the decoder does, then the first field that breaks a rule. The
    /// length when none does.
    pub(super) fn result(self) -> Result<usize, DecodeError> {
        if self.length > MAX_MESSAGE_BYTES {
            return Err(DecodeError::MessageTooLong { length: self.length, limit: MAX_MESSAGE_BYTES });
        }
        match self.first_refusal {
            Some(error) => Err(error),
            None => Ok(self.length),
        }
    }
}

impl Sink for Measure {
    fn put(&mut self, bytes: &[u8]) {
        self.length = self.length.saturating_add(bytes.len());
    }

    fn refuse(&mut self, error: DecodeError) {
        self.first_refusal.get_or_insert(error);
    }
}

/// Writes fields to a sink.
pub(super) struct Encoder<'a, S: Sink> {
    sink: &'a mut S,
}

impl<'a, S: Sink> Encoder<'a, S> {
    pub(super) fn new(sink: &'a mut S) -> Self {
        Encoder { sink }
    }

    /// The message header: request id, opcode or kind, reserved 0.
    pub(super) fn header(&mut self, request_id: u64, code: u16) {
        let mut header = [0u8; HEADER_BYTES];
        header[..8].copy_from_slice(&request_id.to_le_bytes());
        header[8..10].copy_from_slice(&code.to_le_bytes());
        self.sink.put(&header);
    }

    pub(super) fn u8(&mut self, value: u8) {
        self.sink.put(&[value]);
    }

    pub(super) fn u16(&mut self, value: u16) {
        self.sink.put(&value.to_le_bytes());
    }

    pub(super) fn u32(&mut self, value: u32) {
        self.sink.put(&value.to_le_bytes());
    }

    /// Records that the message breaks a rule the decoder enforces.
    pub(super) fn refuse(&mut self, error: DecodeError) {
        self.sink.refuse(error);
    }

    pub(super) fn i32(&mut self, value: i32) {
        self.sink.put(&value.to_le_bytes());
    }

    pub(super) fn u64(&mut self, value: u64) {
        self.sink.put(&value.to_le_bytes());
    }

    pub(super) fn i64(&mut self, value: i64) {
        self.sink.put(&value.to_le_bytes());
    }

    /// 1 for true, 0 for false.
    pub(super) fn bool(&mut self, value: bool) {
        self.u8(u8::from(value));
    }

    /// An option's tag: 1 if a value follows, 0 if not.
    pub(super) fn option<T>(&mut self, value: &Option<T>) {
        self.bool(value.is_some());
    }

    /// A length or count as a `u32`; one that does not fit is written as
    /// `u32::MAX`, which is over every limit.
    pub(super) fn length(&mut self, length: usize) {
        self.u32(u32::try_from(length).unwrap_or(u32::MAX));
    }

    /// A byte string: its `u32` length, then the bytes.
    pub(super) fn bytes(&mut self, field: &'static str, limit: usize, bytes: &[u8]) {
        if bytes.len() > limit {
            self.sink.refuse(DecodeError::FieldTooLong { field, length: to_u64(bytes.len()), limit });
        }
        self.length(bytes.len());
        self.sink.put(bytes);
    }

    /// Text: as a byte string of its UTF-8.
    pub(super) fn text(&mut self, field: &'static str, limit: usize, text: &str) {
        self.bytes(field, limit, text.as_bytes());
    }

    /// A list's `u32` count; its elements follow.
    pub(super) fn count(&mut self, field: &'static str, limit: usize, count: usize) {
        if count > limit {
            self.sink.refuse(DecodeError::TooManyElements { field, count: to_u64(count), limit });
        }
        self.length(count);
    }

    /// Seconds `i64`, nanoseconds `u32`.
    pub(super) fn timestamp(&mut self, field: &'static str, time: Timestamp) {
        if time.nanoseconds >= super::decode::NANOSECONDS_PER_SECOND {
            self.sink.refuse(DecodeError::OutOfRange { field, reason: "nanoseconds of a second or more" });
        }
        self.i64(time.seconds);
        self.u32(time.nanoseconds);
    }

    /// Tag 1 `Now`, or tag 2 and the time.
    pub(super) fn time_change(&mut self, field: &'static str, change: TimeChange) {
        match change {
            TimeChange::Now => self.u8(1),
            TimeChange::At(time) => {
                self.u8(2);
                self.timestamp(field, time);
            }
        }
    }

    pub(super) fn file_kind(&mut self, kind: FileKind) {
        self.u8(match kind {
            FileKind::File => 1,
            FileKind::Directory => 2,
            FileKind::Symlink => 3,
            FileKind::Fifo => 4,
            FileKind::Socket => 5,
            FileKind::CharDevice => 6,
            FileKind::BlockDevice => 7,
        });
    }

    pub(super) fn durability(&mut self, durability: Durability) {
        self.u8(match durability {
            Durability::Durable => 1,
            Durability::Buffered => 2,
        });
    }

    /// Offset `u64`, length `u32`.
    pub(super) fn buffer_slice(&mut self, slice: BufferSlice) {
        self.u64(slice.offset);
        self.u32(slice.length);
    }

    /// Tag 1 and the bytes inline, or tag 2 and a slice of the data area.
    pub(super) fn payload(&mut self, field: &'static str, payload: &Payload) {
        match payload {
            Payload::Inline(bytes) => {
                self.u8(1);
                self.bytes(field, super::MAX_DATA_BYTES, bytes);
            }
            Payload::Buffer(slice) => {
                self.u8(2);
                self.buffer_slice(*slice);
            }
        }
    }

    pub(super) fn attributes(&mut self, attributes: &Attributes) {
        self.u64(attributes.ino);
        self.file_kind(attributes.kind);
        self.u32(attributes.mode);
        self.u32(attributes.nlink);
        self.u32(attributes.uid);
        self.u32(attributes.gid);
        self.u64(attributes.rdev);
        self.u64(attributes.size);
        self.u64(attributes.blocks);
        self.timestamp("Attributes.atime", attributes.atime);
        self.timestamp("Attributes.mtime", attributes.mtime);
        self.timestamp("Attributes.ctime", attributes.ctime);
        self.timestamp("Attributes.btime", attributes.btime);
        self.u64(attributes.generation);
    }
}

/// A length as a `u64` for an error (saturating: no `usize` is wider on
/// the targets this builds for).
fn to_u64(length: usize) -> u64 {
    u64::try_from(length).unwrap_or(u64::MAX)
}
