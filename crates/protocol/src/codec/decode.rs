//! Reading fields, each checked before it is used: a length or count
//! against its limit and the bytes left before anything is allocated, a
//! tag against its values. No arithmetic here can overflow and no slice
//! index can panic: every read goes through [`Reader::take`].

use super::error::DecodeError;
use super::{HEADER_BYTES, MAX_DATA_BYTES, MAX_MESSAGE_BYTES};
use crate::message::{Attributes, BufferSlice, Durability, FileKind, Payload, TimeChange, Timestamp};

/// A timestamp's nanoseconds are below this.
pub(super) const NANOSECONDS_PER_SECOND: u32 = 1_000_000_000;

/// The bytes of a message not yet read.
pub(super) struct Reader<'a> {
    left: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Checks the message's length and reads its header: the request id,
    /// the opcode or kind, and the reserved field, which must be 0.
    pub(super) fn message(bytes: &'a [u8]) -> Result<(u64, u16, Reader<'a>), DecodeError> {
        if bytes.len() > MAX_MESSAGE_BYTES {
            return Err(DecodeError::MessageTooLong { length: bytes.len(), limit: MAX_MESSAGE_BYTES });
        }
        let mut reader = Reader { left: bytes };
        if bytes.len() < HEADER_BYTES {
            return Err(DecodeError::Truncated { field: "header", needed: 12, left: bytes.len() });
        }
        let request_id = reader.u64("header.request_id")?;
        let code = reader.u16("header.opcode")?;
        let reserved = reader.u16("header.reserved")?;
        if reserved != 0 {
            return Err(DecodeError::ReservedBits { field: "header.reserved", bits: reserved });
        }
        Ok((request_id, code, reader))
    }

    /// Refuses bytes after the last field.
    pub(super) fn finish(self) -> Result<(), DecodeError> {
        match self.left.len() {
            0 => Ok(()),
            count => Err(DecodeError::TrailingBytes { count }),
        }
    }

    /// The next `count` bytes.
    fn take(&mut self, field: &'static str, count: usize) -> Result<&'a [u8], DecodeError> {
        match self.left.split_at_checked(count) {
            Some((taken, rest)) => {
                self.left = rest;
                Ok(taken)
            }
            None => Err(DecodeError::Truncated { field, needed: to_u64(count), left: self.left.len() }),
        }
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let bytes = self.take(field, N)?;
        let mut array = [0u8; N];
        array.copy_from_slice(bytes);
        Ok(array)
    }

    pub(super) fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(field)?[0])
    }

    pub(super) fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        self.array(field).map(u16::from_le_bytes)
    }

    pub(super) fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        self.array(field).map(u32::from_le_bytes)
    }

    pub(super) fn i32(&mut self, field: &'static str) -> Result<i32, DecodeError> {
        self.array(field).map(i32::from_le_bytes)
    }

    pub(super) fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        self.array(field).map(u64::from_le_bytes)
    }

    pub(super) fn i64(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        self.array(field).map(i64::from_le_bytes)
    }

    /// 0 or 1.
    pub(super) fn bool(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            tag => Err(DecodeError::UnknownTag { field, tag }),
        }
    }

    /// An option's tag: whether a value follows.
    pub(super) fn option(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        self.bool(field)
    }

    /// A `u32` length, checked against `limit` and the bytes left.
    fn length(&mut self, field: &'static str, limit: usize) -> Result<usize, DecodeError> {
        let length = self.u32(field)?;
        match usize::try_from(length) {
            Ok(length) if length <= limit => Ok(length),
            _ => Err(DecodeError::FieldTooLong { field, length: u64::from(length), limit }),
        }
    }

    /// A byte string of at most `limit` bytes.
    pub(super) fn bytes(&mut self, field: &'static str, limit: usize) -> Result<Vec<u8>, DecodeError> {
        let length = self.length(field, limit)?;
        Ok(self.take(field, length)?.to_vec())
    }

    /// UTF-8 text of at most `limit` bytes.
    pub(super) fn text(&mut self, field: &'static str, limit: usize) -> Result<String, DecodeError> {
        let length = self.length(field, limit)?;
        let bytes = self.take(field, length)?;
        match std::str::from_utf8(bytes) {
            Ok(text) => Ok(text.to_owned()),
            Err(source) => Err(DecodeError::NotUtf8 { field, source }),
        }
    }

    /// A list's `u32` count, at most `limit`, and no more elements than
    /// the bytes left could hold at `element_bytes` (each element's
    /// smallest encoding, at least 1) apiece: a count that passes can size
    /// an allocation.
    pub(super) fn count(
        &mut self,
        field: &'static str,
        limit: usize,
        element_bytes: usize,
    ) -> Result<usize, DecodeError> {
        let count = self.u32(field)?;
        let count_usize = match usize::try_from(count) {
            Ok(count) if count <= limit => count,
            _ => return Err(DecodeError::TooManyElements { field, count: u64::from(count), limit }),
        };
        let fits = self.left.len() / element_bytes.max(1);
        if count_usize > fits {
            return Err(DecodeError::Truncated {
                field,
                needed: u64::from(count).saturating_mul(to_u64(element_bytes)),
                left: self.left.len(),
            });
        }
        Ok(count_usize)
    }

    pub(super) fn timestamp(&mut self, field: &'static str) -> Result<Timestamp, DecodeError> {
        let seconds = self.i64(field)?;
        let nanoseconds = self.u32(field)?;
        if nanoseconds >= NANOSECONDS_PER_SECOND {
            return Err(DecodeError::OutOfRange { field, reason: "nanoseconds of a second or more" });
        }
        Ok(Timestamp { seconds, nanoseconds })
    }

    pub(super) fn time_change(&mut self, field: &'static str) -> Result<TimeChange, DecodeError> {
        match self.u8(field)? {
            1 => Ok(TimeChange::Now),
            2 => Ok(TimeChange::At(self.timestamp(field)?)),
            tag => Err(DecodeError::UnknownTag { field, tag }),
        }
    }

    pub(super) fn file_kind(&mut self, field: &'static str) -> Result<FileKind, DecodeError> {
        match self.u8(field)? {
            1 => Ok(FileKind::File),
            2 => Ok(FileKind::Directory),
            3 => Ok(FileKind::Symlink),
            4 => Ok(FileKind::Fifo),
            5 => Ok(FileKind::Socket),
            6 => Ok(FileKind::CharDevice),
            7 => Ok(FileKind::BlockDevice),
            tag => Err(DecodeError::UnknownTag { field, tag }),
        }
    }

    pub(super) fn durability(&mut self, field: &'static str) -> Result<Durability, DecodeError> {
        match self.u8(field)? {
            1 => Ok(Durability::Durable),
            2 => Ok(Durability::Buffered),
            tag => Err(DecodeError::UnknownTag { field, tag }),
        }
    }

    pub(super) fn buffer_slice(&mut self, field: &'static str) -> Result<BufferSlice, DecodeError> {
        Ok(BufferSlice { offset: self.u64(field)?, length: self.u32(field)? })
    }

    pub(super) fn payload(&mut self, field: &'static str) -> Result<Payload, DecodeError> {
        match self.u8(field)? {
            1 => Ok(Payload::Inline(self.bytes(field, MAX_DATA_BYTES)?)),
            2 => Ok(Payload::Buffer(self.buffer_slice(field)?)),
            tag => Err(DecodeError::UnknownTag { field, tag }),
        }
    }

    pub(super) fn attributes(&mut self) -> Result<Attributes, DecodeError> {
        Ok(Attributes {
            ino: self.u64("Attributes.ino")?,
            kind: self.file_kind("Attributes.kind")?,
            mode: self.u32("Attributes.mode")?,
            nlink: self.u32("Attributes.nlink")?,
            uid: self.u32("Attributes.uid")?,
            gid: self.u32("Attributes.gid")?,
            rdev: self.u64("Attributes.rdev")?,
            size: self.u64("Attributes.size")?,
            blocks: self.u64("Attributes.blocks")?,
            atime: self.timestamp("Attributes.atime")?,
            mtime: self.timestamp("Attributes.mtime")?,
            ctime: self.timestamp("Attributes.ctime")?,
            btime: self.timestamp("Attributes.btime")?,
            generation: self.u64("Attributes.generation")?,
        })
    }
}

/// A length as a `u64` for an error.
fn to_u64(length: usize) -> u64 {
    u64::try_from(length).unwrap_or(u64::MAX)
}
