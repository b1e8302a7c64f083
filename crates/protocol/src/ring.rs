//! One single-producer single-consumer byte ring in shared memory
//! (`docs/format.md`, "Server protocol").
//!
//! A record is `[u32 length][u32 crc32c of the payload]` then the payload,
//! padded with zeros to a multiple of 8. A record that would cross the
//! ring's end is preceded by a padding record (bit 31 of the length set)
//! that runs exactly to the end. Positions are byte counters that wrap at
//! 2^32; a ring's size is a power of two, so `position % size` is the
//! offset. The producer writes records, then publishes its position with a
//! release store; the consumer loads it with an acquire load, copies a
//! record out, and publishes its own position the same way.
//!
//! Each side keeps its own position in private memory and never reads it
//! back from the ring: the peer can overwrite the shared copy. The peer's
//! position is loaded once per operation and checked before use.

use std::sync::atomic::{fence, AtomicU32, Ordering};

use crate::error::{RingKind, SendError, Violation};
use crate::layout::{RingPlacement, CONSUMER_POSITION_OFFSET, FUTEX_OFFSET, PRODUCER_POSITION_OFFSET, SLEEPING_OFFSET};
use crate::mapping::Mapping;

/// Bit 31 of a record's length word: a padding record.
pub const PADDING_FLAG: u32 = 1 << 31;
/// Bytes of a record's header (length, crc32c).
pub const RECORD_HEADER_BYTES: u32 = 8;

/// Bytes a record of `payload` bytes takes in a ring: header, payload,
/// zero padding to 8.
pub fn record_bytes(payload: u32) -> u32 {
    RECORD_HEADER_BYTES + payload.next_multiple_of(8)
}

/// The crc32c of a record's payload (docs/format.md), by `crc-fast`, which
/// folds with carry-less multiplies: 16 KiB 0.30 µs against the `crc32c`
/// crate's 0.72, 40 bytes 15 against 73 ns (best of 3 rounds on this VM,
/// busy). The ring records' crc32c was the transport's largest cost once
/// its copies were cheap
/// (docs/bench-history/2026-11-28-server-16k-append-copies.md). Both
/// crates give crc32c's value, so the wire format is unchanged.
pub(crate) fn record_crc(payload: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(payload)
}

/// The crc32c of the concatenation of `parts`, each read once where it
/// is (one part: [`record_crc`] itself).
fn parts_crc(parts: &[&[u8]]) -> u32 {
    match parts {
        [one] => record_crc(one),
        _ => {
            let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
            for part in parts {
                digest.update(part);
            }
            // A 32-bit CRC's value fits its low 32 bits.
            digest.finalize() as u32
        }
    }
}

/// The largest payload a ring of `ring_bytes` carries: a quarter of it, so
/// a record and the padding before it always fit an empty ring.
pub fn max_record(ring_bytes: u32) -> u32 {
    ring_bytes / 4
}

/// What a split receive ([`crate::region::ClientRings::receive_split`]) took from the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// No record was there.
    Nothing,
    /// A record, its whole payload in the vector.
    Whole,
    /// A record, its first bytes in the vector and this many bytes after
    /// them at the start of the target.
    Split(usize),
}

/// A record found in the ring, checked against it, not yet copied.
struct Located {
    /// Where its payload starts in the mapping.
    payload: usize,
    /// Its header's offset in the ring (for errors).
    offset: u32,
    /// Its payload's length.
    length: u32,
    /// The crc32c its header gives.
    expected_crc: u32,
    /// The consumer's position after it.
    end: u32,
}

impl Located {
    fn checksum_violation(&self, ring: RingKind, actual: u32) -> Violation {
        Violation::Checksum { ring, offset: self.offset, length: self.length, expected: self.expected_crc, actual }
    }
}

/// A ring's place in a mapping.
#[derive(Clone, Copy)]
pub(crate) struct Ring<'a> {
    map: &'a Mapping,
    control: usize,
    slots: usize,
    bytes: u32,
    kind: RingKind,
}

impl<'a> Ring<'a> {
    /// The ring at `placement`, which the layout put inside `map`.
    pub(crate) fn new(map: &'a Mapping, placement: RingPlacement, kind: RingKind) -> Ring<'a> {
        let end = placement.slots + u64::from(placement.bytes);
        assert!(end <= map.len() as u64, "ring ends at {end}, mapping is {} bytes", map.len());
        Ring { map, control: placement.control as usize, slots: placement.slots as usize, bytes: placement.bytes, kind }
    }

    fn word(&self, offset: u32) -> &'a AtomicU32 {
        self.map.word32(self.control + offset as usize)
    }

    fn load(&self, offset: u32, order: Ordering) -> u32 {
        u32::from_le(self.word(offset).load(order))
    }

    fn store(&self, offset: u32, value: u32, order: Ordering) {
        self.word(offset).store(value.to_le(), order);
    }

    pub(crate) fn max_record(&self) -> u32 {
        max_record(self.bytes)
    }

    /// Whether the producer has published bytes past `consumed`.
    pub(crate) fn pending(&self, consumed: &AtomicU32) -> bool {
        self.load(PRODUCER_POSITION_OFFSET, Ordering::Acquire) != consumed.load(Ordering::Relaxed)
    }

    /// Sets or clears the consumer's sleeping flag. Setting is followed by
    /// a full fence, so a check of the ring after it cannot be ordered
    /// before it (the producer fences between publishing and reading the
    /// flag: one of the two sees the other).
    pub(crate) fn set_sleeping(&self, sleeping: bool) {
        self.store(SLEEPING_OFFSET, u32::from(sleeping), Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Whether the consumer says it is asleep. Any nonzero value counts;
    /// garbage only causes a spurious wake-up.
    pub(crate) fn consumer_sleeping(&self) -> bool {
        fence(Ordering::SeqCst);
        self.load(SLEEPING_OFFSET, Ordering::SeqCst) != 0
    }

    /// The ring's futex word.
    pub(crate) fn futex(&self) -> &'a AtomicU32 {
        self.word(FUTEX_OFFSET)
    }

    /// Writes `record` and publishes it; `Ok(false)` if there is no room.
    /// `produced` is this producer's private position.
    pub(crate) fn produce(&self, produced: &AtomicU32, record: &[u8]) -> Result<bool, SendError> {
        self.produce_parts(produced, &[record])
    }

    /// Writes one record whose payload is `parts` one after the other,
    /// and publishes it, as [`Ring::produce`] of their concatenation; the
    /// parts are copied once, each straight into the ring.
    pub(crate) fn produce_parts(&self, produced: &AtomicU32, parts: &[&[u8]]) -> Result<bool, SendError> {
        let max = self.max_record();
        let total = parts.iter().map(|p| p.len()).fold(0usize, usize::saturating_add);
        let length = match u32::try_from(total) {
            Ok(length) if length <= max => length,
            _ => return Err(SendError::TooLarge { length: total, max }),
        };
        let head = produced.load(Ordering::Relaxed);
        let consumer = self.load(CONSUMER_POSITION_OFFSET, Ordering::Acquire);
        let used = head.wrapping_sub(consumer);
        if used > self.bytes || !used.is_multiple_of(8) {
            return Err(Violation::ConsumerPosition {
                ring: self.kind,
                producer: head,
                consumer,
                distance: used,
                ring_bytes: self.bytes,
            }
            .into());
        }
        let free = self.bytes - used;
        let offset = head & (self.bytes - 1);
        let size = record_bytes(length);
        let padding = if offset + size > self.bytes { self.bytes - offset } else { 0 };
        if padding + size > free {
            return Ok(false);
        }
        let mut at = offset;
        if padding > 0 {
            self.write_header(at, PADDING_FLAG | (padding - RECORD_HEADER_BYTES), 0);
            at = 0;
        }
        self.write_header(at, length, parts_crc(parts));
        let payload = at + RECORD_HEADER_BYTES;
        self.check_inside(payload, size - RECORD_HEADER_BYTES);
        let mut to = self.slots + payload as usize;
        for part in parts {
            self.map.write(to, part);
            to += part.len();
        }
        let tail_padding = (size - RECORD_HEADER_BYTES - length) as usize;
        self.map.zero(to, tail_padding);
        let new_head = head.wrapping_add(padding + size);
        produced.store(new_head, Ordering::Relaxed);
        self.store(PRODUCER_POSITION_OFFSET, new_head, Ordering::Release);
        Ok(true)
    }

    /// The last line of defence behind the checks on the peer's values:
    /// no access leaves the ring's slots, whatever the peer wrote (a
    /// panic here is a bug the fuzz target `protocol_ring` looks for).
    fn check_inside(&self, offset: u32, length: u32) {
        assert!(
            u64::from(offset) + u64::from(length) <= u64::from(self.bytes),
            "{length} bytes at ring offset {offset} leave a ring of {}",
            self.bytes
        );
    }

    fn write_header(&self, offset: u32, length: u32, crc: u32) {
        self.check_inside(offset, RECORD_HEADER_BYTES);
        let at = self.slots + offset as usize;
        self.map.word32(at).store(length.to_le(), Ordering::Relaxed);
        self.map.word32(at + 4).store(crc.to_le(), Ordering::Relaxed);
    }

    /// Copies the next record's payload into `out` and checks its crc32c;
    /// `Ok(false)` if the ring is empty. `consumed` is this consumer's
    /// private position.
    pub(crate) fn consume(&self, consumed: &AtomicU32, out: &mut Vec<u8>) -> Result<bool, Violation> {
        out.clear();
        let Some(record) = self.next_record(consumed)? else {
            return Ok(false);
        };
        self.take_whole(consumed, &record, out)?;
        Ok(true)
    }

    /// Appends `record`'s payload past the `out.len()` bytes of it already
    /// copied there, checks the crc32c over the copy and takes the record
    /// off the ring; on a mismatch `out` is cleared and the record stays.
    fn take_whole(&self, consumed: &AtomicU32, record: &Located, out: &mut Vec<u8>) -> Result<(), Violation> {
        let copied = out.len();
        self.map.read_appending(record.payload + copied, record.length as usize - copied, out);
        let actual = record_crc(out);
        if actual != record.expected_crc {
            out.clear();
            return Err(record.checksum_violation(self.kind, actual));
        }
        self.advance(consumed, record.end);
        Ok(())
    }

    /// As [`Ring::consume`], except that a record's payload past its first
    /// `prefix` bytes goes into the start of `target` when `split`, shown
    /// those bytes (copied into `out`) and the payload's length, says so
    /// and the rest fits `target`. The crc32c is checked over the copies,
    /// `out`'s bytes then `target`'s, so the peer cannot change a byte
    /// after it was checked; on a mismatch `target` may hold some of the
    /// record's bytes.
    pub(crate) fn consume_split(
        &self,
        consumed: &AtomicU32,
        out: &mut Vec<u8>,
        prefix: usize,
        target: &mut [u8],
        split: impl FnOnce(&[u8], usize) -> bool,
    ) -> Result<Received, Violation> {
        out.clear();
        let Some(record) = self.next_record(consumed)? else {
            return Ok(Received::Nothing);
        };
        let length = record.length as usize;
        let rest = length.saturating_sub(prefix);
        if length < prefix || rest > target.len() {
            self.take_whole(consumed, &record, out)?;
            return Ok(Received::Whole);
        }
        self.map.read_appending(record.payload, prefix, out);
        if !split(out, length) {
            self.take_whole(consumed, &record, out)?;
            return Ok(Received::Whole);
        }
        let target = &mut target[..rest];
        self.map.read(record.payload + prefix, target);
        let actual = parts_crc(&[out, target]);
        if actual != record.expected_crc {
            out.clear();
            return Err(record.checksum_violation(self.kind, actual));
        }
        self.advance(consumed, record.end);
        Ok(Received::Split(rest))
    }

    /// Finds the next record, past a padding record before it; `None` if
    /// there is none yet (padding alone is taken, so the producer gets its
    /// room back). Everything about the record is checked against the ring
    /// before it is returned; its payload is not copied yet.
    fn next_record(&self, consumed: &AtomicU32) -> Result<Option<Located>, Violation> {
        let mut tail = consumed.load(Ordering::Relaxed);
        let producer = self.load(PRODUCER_POSITION_OFFSET, Ordering::Acquire);
        let mut published = producer.wrapping_sub(tail);
        if published > self.bytes || !published.is_multiple_of(8) {
            return Err(Violation::ProducerPosition {
                ring: self.kind,
                producer,
                consumer: tail,
                distance: published,
                ring_bytes: self.bytes,
            });
        }
        // At most one padding record precedes a record: after it the
        // offset is 0, and a second one would need a whole ring of bytes.
        while published > 0 {
            let offset = tail & (self.bytes - 1);
            self.check_inside(offset, RECORD_HEADER_BYTES);
            let at = self.slots + offset as usize;
            // The tail is 8-aligned and at least 8 bytes precede the end,
            // since the ring's size is a multiple of 8 and published >= 8.
            let word = u32::from_le(self.map.word32(at).load(Ordering::Relaxed));
            let expected_crc = u32::from_le(self.map.word32(at + 4).load(Ordering::Relaxed));
            if word & PADDING_FLAG != 0 {
                let length = word & !PADDING_FLAG;
                let to_end = self.bytes - offset;
                if u64::from(length) + u64::from(RECORD_HEADER_BYTES) != u64::from(to_end) {
                    return Err(Violation::Padding { ring: self.kind, offset, length, ring_bytes: self.bytes });
                }
                if to_end > published {
                    return Err(Violation::RecordBeyondPublished {
                        ring: self.kind,
                        offset,
                        record_bytes: to_end,
                        published,
                    });
                }
                tail = tail.wrapping_add(to_end);
                published -= to_end;
                continue;
            }
            let length = word;
            if length > self.max_record() {
                return Err(Violation::RecordTooLarge { ring: self.kind, offset, length, max: self.max_record() });
            }
            let size = record_bytes(length);
            if offset + size > self.bytes {
                return Err(Violation::RecordCrossesEnd { ring: self.kind, offset, length, ring_bytes: self.bytes });
            }
            if size > published {
                return Err(Violation::RecordBeyondPublished {
                    ring: self.kind,
                    offset,
                    record_bytes: size,
                    published,
                });
            }
            self.check_inside(offset + RECORD_HEADER_BYTES, length);
            return Ok(Some(Located {
                payload: at + RECORD_HEADER_BYTES as usize,
                offset,
                length,
                expected_crc,
                end: tail.wrapping_add(size),
            }));
        }
        self.advance(consumed, tail);
        Ok(None)
    }

    fn advance(&self, consumed: &AtomicU32, tail: u32) {
        if consumed.swap(tail, Ordering::Relaxed) != tail {
            self.store(CONSUMER_POSITION_OFFSET, tail, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_crc_is_the_crc32c_of_its_payload_at_every_length() {
        // Peers of other builds check what this one wrote with the
        // `crc32c` crate, as this build did before: the value must be
        // crc32c's at every length.
        let payload: Vec<u8> = (0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
        let lengths: &[usize] =
            if cfg!(miri) { &[0, 8, 600] } else { &[0, 1, 8, 40, 511, 512, 513, 4096, 16_384, 20_000] };
        for &length in lengths {
            assert_eq!(record_crc(&payload[..length]), crc32c::crc32c(&payload[..length]), "{length} bytes");
        }
        assert_eq!(record_crc(b"123456789"), 0xe306_9283, "CRC-32C's check value");
    }

    #[test]
    fn the_crc_of_parts_is_the_crc_of_their_concatenation() {
        let payload: Vec<u8> = (0..5_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for split in [0, 1, 16, 17, 4096, 5_000] {
            let (a, b) = payload.split_at(split);
            assert_eq!(parts_crc(&[a, b]), record_crc(&payload), "split at {split}");
            assert_eq!(parts_crc(&[a, &[], b]), record_crc(&payload), "split at {split}, an empty part between");
        }
        assert_eq!(parts_crc(&[]), record_crc(&[]));
    }
}
