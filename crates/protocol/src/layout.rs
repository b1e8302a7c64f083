//! Where everything lies in a client's region (`docs/format.md`, "Server
//! protocol"): a header page, then each worker's request and completion
//! rings, then the data area, page-aligned, then the lease area (a futex
//! word and one slot per lease, through which the server revokes leases).
//!
//! Every ring has a control block of four cache lines (producer position,
//! consumer position, the consumer's sleeping flag, the futex word), so
//! the two sides never write the same cache line, followed by its bytes.

use crate::error::{LayoutError, RingKind};

/// The alignment of the header, the data area and the region's size:
/// 4 KiB, Linux's smallest page (a kernel with larger pages maps the
/// region all the same; the data area is then only 4 KiB aligned).
pub const PAGE_BYTES: u64 = 4096;
/// Bytes of the header page at offset 0.
pub const HEADER_BYTES: u64 = PAGE_BYTES;
/// One cache line: each control word has its own.
pub const CACHE_LINE_BYTES: u32 = 64;
/// A ring's control block: producer position, consumer position, sleeping
/// flag and futex word, one cache line each.
pub const RING_CONTROL_BYTES: u32 = 4 * CACHE_LINE_BYTES;
/// Offsets of the control words inside a ring's control block.
pub const PRODUCER_POSITION_OFFSET: u32 = 0;
pub const CONSUMER_POSITION_OFFSET: u32 = CACHE_LINE_BYTES;
pub const SLEEPING_OFFSET: u32 = 2 * CACHE_LINE_BYTES;
pub const FUTEX_OFFSET: u32 = 3 * CACHE_LINE_BYTES;
/// Smallest and largest ring (bytes of records, without the control block).
pub const MIN_RING_BYTES: u32 = 4096;
pub const MAX_RING_BYTES: u32 = 16 << 20;
/// Most workers a region has rings for.
pub const MAX_WORKERS: u32 = 64;
/// Largest data area: 64 GiB (the memfd is sparse; pages exist once used).
pub const MAX_DATA_BYTES: u64 = 64 << 30;
/// Magic at the start of the header page: "LARDRGN1".
pub const REGION_MAGIC: [u8; 8] = *b"LARDRGN1";
/// Bytes of an encoded layout (in the header page and the welcome).
pub const ENCODED_LAYOUT_BYTES: usize = 24;
/// Lease slots in every region's lease area: a client holds at most this
/// many leases (the server's `max_leases` may not exceed it). 16,384
/// slots (128 KiB of the memfd, whose pages exist once written) let a
/// client cache a working set of that many files and directories.
pub const MAX_LEASE_SLOTS: u32 = 16_384;
/// Bytes of one lease slot: the server's revocation notice (`u32`, the
/// revoked lease's sequence) and the client's acknowledgement (`u32`).
pub const LEASE_SLOT_BYTES: u32 = 8;
/// Offset, in the lease area, of the notice futex word (its own cache
/// line); the slots follow on the next line.
pub const LEASE_FUTEX_OFFSET: u32 = 0;
/// Offset of the first lease slot in the lease area.
pub const LEASE_SLOTS_OFFSET: u32 = CACHE_LINE_BYTES;
/// Bytes of the lease area at the end of the region, page-aligned.
pub const LEASE_AREA_BYTES: u64 =
    (LEASE_SLOTS_OFFSET as u64 + MAX_LEASE_SLOTS as u64 * LEASE_SLOT_BYTES as u64).next_multiple_of(PAGE_BYTES);

/// The shape of a client's region: how many workers' ring pairs, how big
/// the rings are, and how big the data area is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Ring pairs, one per possible worker (the server's maximum).
    pub workers: u32,
    /// Bytes of each request ring (client to worker).
    pub request_ring_bytes: u32,
    /// Bytes of each completion ring (worker to client).
    pub completion_ring_bytes: u32,
    /// Bytes of the data area (zero-copy buffers).
    pub data_bytes: u64,
}

/// Where one ring lies in the region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingPlacement {
    /// Offset of the control block (64-byte aligned).
    pub control: u64,
    /// Offset of the ring's bytes (64-byte aligned), right after the
    /// control block.
    pub slots: u64,
    /// Bytes of the ring (a power of two).
    pub bytes: u32,
}

impl Layout {
    /// Checks every bound; a layout that passes has a region size that fits
    /// a `usize` on 64-bit Linux.
    pub fn validate(&self) -> Result<(), LayoutError> {
        if self.workers == 0 || self.workers > MAX_WORKERS {
            return Err(LayoutError::Workers { workers: self.workers, max: MAX_WORKERS });
        }
        for (which, bytes) in
            [(RingKind::Request, self.request_ring_bytes), (RingKind::Completion, self.completion_ring_bytes)]
        {
            if !bytes.is_power_of_two() || !(MIN_RING_BYTES..=MAX_RING_BYTES).contains(&bytes) {
                return Err(LayoutError::RingBytes { which, bytes, min: MIN_RING_BYTES, max: MAX_RING_BYTES });
            }
        }
        if !self.data_bytes.is_multiple_of(PAGE_BYTES) || self.data_bytes > MAX_DATA_BYTES {
            return Err(LayoutError::DataBytes { bytes: self.data_bytes, page: PAGE_BYTES, max: MAX_DATA_BYTES });
        }
        Ok(())
    }

    /// Bytes of one worker's ring pair with their control blocks.
    fn worker_stride(&self) -> u64 {
        2 * u64::from(RING_CONTROL_BYTES) + u64::from(self.request_ring_bytes) + u64::from(self.completion_ring_bytes)
    }

    /// The request ring of `worker` (which must be below `workers`).
    pub fn request_ring(&self, worker: u32) -> RingPlacement {
        let control = HEADER_BYTES + u64::from(worker) * self.worker_stride();
        RingPlacement { control, slots: control + u64::from(RING_CONTROL_BYTES), bytes: self.request_ring_bytes }
    }

    /// The completion ring of `worker` (which must be below `workers`).
    pub fn completion_ring(&self, worker: u32) -> RingPlacement {
        let request = self.request_ring(worker);
        let control = request.slots + u64::from(request.bytes);
        RingPlacement { control, slots: control + u64::from(RING_CONTROL_BYTES), bytes: self.completion_ring_bytes }
    }

    /// Offset of the data area: the first page after the last ring.
    pub fn data_offset(&self) -> u64 {
        (HEADER_BYTES + u64::from(self.workers) * self.worker_stride()).next_multiple_of(PAGE_BYTES)
    }

    /// Offset of the lease area (revocation notices): right after the
    /// data area.
    pub fn lease_offset(&self) -> u64 {
        self.data_offset() + self.data_bytes
    }

    /// Bytes of the whole region (the memfd's size).
    pub fn region_bytes(&self) -> u64 {
        self.lease_offset() + LEASE_AREA_BYTES
    }

    /// The layout's 24 bytes, little-endian: workers, request ring bytes,
    /// completion ring bytes, 4 reserved zero bytes, data bytes.
    pub fn encode(&self) -> [u8; ENCODED_LAYOUT_BYTES] {
        let mut out = [0u8; ENCODED_LAYOUT_BYTES];
        out[0..4].copy_from_slice(&self.workers.to_le_bytes());
        out[4..8].copy_from_slice(&self.request_ring_bytes.to_le_bytes());
        out[8..12].copy_from_slice(&self.completion_ring_bytes.to_le_bytes());
        out[16..24].copy_from_slice(&self.data_bytes.to_le_bytes());
        out
    }

    /// Reads an encoded layout; `None` if the reserved bytes are not zero.
    /// The result is not validated: call [`Layout::validate`].
    pub fn decode(bytes: &[u8; ENCODED_LAYOUT_BYTES]) -> Option<Layout> {
        let word = |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        if word(12) != 0 {
            return None;
        }
        let mut data = [0u8; 8];
        data.copy_from_slice(&bytes[16..24]);
        Some(Layout {
            workers: word(0),
            request_ring_bytes: word(4),
            completion_ring_bytes: word(8),
            data_bytes: u64::from_le_bytes(data),
        })
    }

    /// The header page's first bytes: magic, protocol version, the encoded
    /// layout, the data area's offset, and a crc32c of what precedes it.
    pub fn header(&self) -> [u8; HEADER_RECORD_BYTES] {
        let mut out = [0u8; HEADER_RECORD_BYTES];
        out[0..8].copy_from_slice(&REGION_MAGIC);
        out[8..12].copy_from_slice(&crate::PROTOCOL_VERSION.to_le_bytes());
        out[16..40].copy_from_slice(&self.encode());
        out[40..48].copy_from_slice(&self.data_offset().to_le_bytes());
        let crc = crc32c::crc32c(&out[..48]);
        out[48..52].copy_from_slice(&crc.to_le_bytes());
        out
    }
}

/// Bytes of the record at the start of the header page.
pub const HEADER_RECORD_BYTES: usize = 56;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn layout() -> Layout {
        Layout { workers: 3, request_ring_bytes: 8192, completion_ring_bytes: 4096, data_bytes: 3 * PAGE_BYTES }
    }

    #[test]
    fn offsets_do_not_overlap_and_control_words_have_own_lines() {
        let l = layout();
        l.validate().unwrap();
        let mut end = HEADER_BYTES;
        for w in 0..l.workers {
            for ring in [l.request_ring(w), l.completion_ring(w)] {
                assert_eq!(ring.control, end);
                assert_eq!(ring.control % u64::from(CACHE_LINE_BYTES), 0);
                assert_eq!(ring.slots, ring.control + u64::from(RING_CONTROL_BYTES));
                end = ring.slots + u64::from(ring.bytes);
            }
        }
        assert!(l.data_offset() >= end);
        assert_eq!(l.data_offset() % PAGE_BYTES, 0);
        assert_eq!(l.lease_offset(), l.data_offset() + 3 * PAGE_BYTES);
        assert_eq!(l.region_bytes(), l.lease_offset() + LEASE_AREA_BYTES);
        assert_eq!(LEASE_AREA_BYTES % PAGE_BYTES, 0);
        assert!(
            u64::from(LEASE_SLOTS_OFFSET) + u64::from(MAX_LEASE_SLOTS) * u64::from(LEASE_SLOT_BYTES)
                <= LEASE_AREA_BYTES
        );
        let offsets = [PRODUCER_POSITION_OFFSET, CONSUMER_POSITION_OFFSET, SLEEPING_OFFSET, FUTEX_OFFSET];
        for pair in offsets.windows(2) {
            assert_eq!(pair[1] - pair[0], CACHE_LINE_BYTES);
        }
    }

    #[test]
    fn validate_refuses_each_bound() {
        let bad = [
            Layout { workers: 0, ..layout() },
            Layout { workers: MAX_WORKERS + 1, ..layout() },
            Layout { request_ring_bytes: 6000, ..layout() },
            Layout { request_ring_bytes: 2048, ..layout() },
            Layout { completion_ring_bytes: MAX_RING_BYTES * 2, ..layout() },
            Layout { data_bytes: 100, ..layout() },
            Layout { data_bytes: MAX_DATA_BYTES + PAGE_BYTES, ..layout() },
        ];
        for l in bad {
            assert!(l.validate().is_err(), "{l:?} passed");
        }
        let largest = Layout {
            workers: MAX_WORKERS,
            request_ring_bytes: MAX_RING_BYTES,
            completion_ring_bytes: MAX_RING_BYTES,
            data_bytes: MAX_DATA_BYTES,
        };
        largest.validate().unwrap();
        assert!(largest.region_bytes() < 1 << 40);
    }

    #[test]
    fn encoding_round_trips_and_refuses_reserved_bits() {
        let l = layout();
        let bytes = l.encode();
        assert_eq!(Layout::decode(&bytes), Some(l));
        let mut bad = bytes;
        bad[13] = 1;
        assert_eq!(Layout::decode(&bad), None);
        let header = l.header();
        assert_eq!(&header[..8], b"LARDRGN1");
        assert_eq!(u32::from_le_bytes(header[48..52].try_into().unwrap()), crc32c::crc32c(&header[..48]));
    }
}
