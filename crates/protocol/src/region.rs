//! A client's region: one memfd holding a header page, each worker's
//! request and completion rings, and the data area (`crate::layout`).
//!
//! The server creates and seals it ([`Region::create`]) and passes the fd
//! at the handshake; the client checks and maps it ([`Region::attach`]).
//! The server sees the client's side through [`ServerRings`] and
//! [`DataArea`], and trusts nothing in it; the client sees the server's
//! through [`ClientRings`].
//!
//! Each side keeps its own ring positions here, in private memory, per
//! worker: the copies in the region are for the peer, never read back.
//! One thread at a time uses a given worker's rings on each side (the
//! rings are single-producer single-consumer).

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::backoff::Spinner;
use crate::error::{RingKind, SendError, TransportError, Violation};
use crate::futex::{self, Wake};
use crate::layout::{Layout, HEADER_RECORD_BYTES, REGION_MAGIC};
use crate::mapping::{self, Mapping};
use crate::ring::{Received, Ring};

/// One side's private positions in one worker's ring pair.
#[derive(Debug, Default)]
struct Positions {
    request: AtomicU32,
    completion: AtomicU32,
}

/// A mapped region. Unmapped on drop (the peer's mapping is its own).
#[derive(Debug)]
pub struct Region {
    map: Mapping,
    layout: Layout,
    server: Box<[Positions]>,
    client: Box<[Positions]>,
}

impl Region {
    /// Server: creates a sealed memfd for `layout`, maps it and writes the
    /// header page. The fd is for the client (the mapping does not need it).
    pub fn create(layout: Layout) -> Result<(Region, OwnedFd), TransportError> {
        layout.validate()?;
        let fd = mapping::sealed_memfd("larder-region", layout.region_bytes(), "create region memfd")?;
        let map = Mapping::shared(&fd, map_len(&layout)?, "map region")?;
        let region = Region::new(map, layout);
        region.map.write(0, &layout.header());
        Ok((region, fd))
    }

    /// Client: checks that `fd` is sealed and is the size `layout` implies,
    /// then maps it. The fd is closed once mapped.
    pub fn attach(fd: OwnedFd, layout: Layout) -> Result<Region, TransportError> {
        layout.validate()?;
        mapping::check_sealed_memfd(&fd, layout.region_bytes(), "region memfd")?;
        let map = Mapping::shared(&fd, map_len(&layout)?, "map region")?;
        Ok(Region::new(map, layout))
    }

    /// Both sides in one process, over private anonymous memory: for tests
    /// and fuzzing. Otherwise as [`Region::create`].
    pub fn anonymous(layout: Layout) -> Result<Region, TransportError> {
        layout.validate()?;
        let map = Mapping::anonymous(map_len(&layout)?, "map anonymous region")?;
        let region = Region::new(map, layout);
        region.map.write(0, &layout.header());
        Ok(region)
    }

    fn new(map: Mapping, layout: Layout) -> Region {
        let positions = || (0..layout.workers).map(|_| Positions::default()).collect();
        Region { map, layout, server: positions(), client: positions() }
    }

    /// The layout this side mapped (its own copy, not the header page's).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The layout in the header page, if its magic, version and crc32c
    /// hold (for tools; neither side relies on it).
    pub fn header_layout(&self) -> Option<Layout> {
        let mut header = [0u8; HEADER_RECORD_BYTES];
        self.map.read(0, &mut header);
        let word = |at: usize| u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
        if header[..8] != REGION_MAGIC
            || word(8) != crate::PROTOCOL_VERSION
            || word(48) != crc32c::crc32c(&header[..48])
        {
            return None;
        }
        let mut encoded = [0u8; crate::layout::ENCODED_LAYOUT_BYTES];
        encoded.copy_from_slice(&header[16..40]);
        Layout::decode(&encoded)
    }

    fn check_worker(&self, worker: u32) -> Result<usize, TransportError> {
        if worker < self.layout.workers {
            Ok(worker as usize)
        } else {
            Err(TransportError::NoSuchWorker { worker, workers: self.layout.workers })
        }
    }

    fn rings(&self, worker: u32) -> (Ring<'_>, Ring<'_>) {
        (
            Ring::new(&self.map, self.layout.request_ring(worker), RingKind::Request),
            Ring::new(&self.map, self.layout.completion_ring(worker), RingKind::Completion),
        )
    }

    /// The server's view of `worker`'s ring pair.
    pub fn server_rings(&self, worker: u32) -> Result<ServerRings<'_>, TransportError> {
        let index = self.check_worker(worker)?;
        let (request, completion) = self.rings(worker);
        Ok(ServerRings { request, completion, positions: &self.server[index] })
    }

    /// The client's view of `worker`'s ring pair.
    pub fn client_rings(&self, worker: u32) -> Result<ClientRings<'_>, TransportError> {
        let index = self.check_worker(worker)?;
        let (request, completion) = self.rings(worker);
        Ok(ClientRings { request, completion, positions: &self.client[index] })
    }

    /// The data area (zero-copy buffers).
    pub fn data(&self) -> DataArea<'_> {
        DataArea { map: &self.map, offset: self.layout.data_offset() as usize, bytes: self.layout.data_bytes }
    }

    /// The lease area: revocation notices and their acknowledgements.
    pub fn leases(&self) -> crate::lease::LeaseArea<'_> {
        crate::lease::LeaseArea::new(&self.map, self.layout.lease_offset())
    }

    /// Bytes of the whole mapping.
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// Never: a valid layout has a header page.
    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    fn check_raw(&self, offset: u64, length: u64) -> Result<usize, Violation> {
        check_slice(offset, length, self.len()).map_err(|_| Violation::OutsideRegion {
            offset,
            length,
            region_bytes: self.len(),
        })
    }

    /// Writes any bytes anywhere in the region, as the peer can: for tests
    /// and fuzzing of a hostile peer, and for tools.
    pub fn write_bytes(&self, offset: u64, bytes: &[u8]) -> Result<(), Violation> {
        let at = self.check_raw(offset, bytes.len() as u64)?;
        self.map.write(at, bytes);
        Ok(())
    }

    /// Stores `value` little-endian as the 32-bit word at `offset` (4-byte
    /// aligned) anywhere in the region, as a peer stores a header or
    /// position word: a test racing a hostile writer against the server in
    /// one process stores words the size the server loads them (the
    /// `mapping` module's comment says why).
    pub fn write_word32(&self, offset: u64, value: u32) -> Result<(), Violation> {
        let at = self.check_raw(offset, 4)?;
        if !at.is_multiple_of(4) {
            return Err(Violation::UnalignedWord { offset, bytes: 4 });
        }
        self.map.word32(at).store(value.to_le(), std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Copies any bytes of the region out (tests, tools).
    pub fn read_bytes(&self, offset: u64, out: &mut [u8]) -> Result<(), Violation> {
        let at = self.check_raw(offset, out.len() as u64)?;
        self.map.read(at, out);
        Ok(())
    }
}

fn map_len(layout: &Layout) -> Result<usize, TransportError> {
    usize::try_from(layout.region_bytes()).map_err(|_| TransportError::Size {
        what: "region (larger than the address space)",
        expected: layout.region_bytes(),
        actual: usize::MAX as u64,
    })
}

/// `offset..offset + length` inside `0..limit`, without overflow.
fn check_slice(offset: u64, length: u64, limit: u64) -> Result<usize, Violation> {
    match offset.checked_add(length) {
        Some(end) if end <= limit => Ok(offset as usize),
        _ => Err(Violation::DataSlice { offset, length, data_bytes: limit }),
    }
}

/// The server's side of one worker's ring pair in one client's region:
/// consumes requests, produces completions. Everything read from the
/// region is checked; a [`Violation`] means the client broke the protocol.
#[derive(Clone, Copy)]
pub struct ServerRings<'a> {
    request: Ring<'a>,
    completion: Ring<'a>,
    positions: &'a Positions,
}

impl ServerRings<'_> {
    /// Copies the next request's payload into `out` (its crc32c checked
    /// on the copy); `Ok(false)` if there is none.
    pub fn receive(&self, out: &mut Vec<u8>) -> Result<bool, Violation> {
        self.request.consume(&self.positions.request, out)
    }

    /// Whether the client has published bytes not yet received (a hint:
    /// `receive` checks them).
    pub fn has_request(&self) -> bool {
        self.request.pending(&self.positions.request)
    }

    /// Writes a completion; `Ok(false)` if the completion ring has no room
    /// (the client has not taken its completions: keep a backlog, never
    /// wait for it).
    pub fn send(&self, record: &[u8]) -> Result<bool, SendError> {
        self.completion.produce(&self.positions.completion, record)
    }

    /// As [`ServerRings::send`] of the concatenation of `parts`, each
    /// copied once, straight into the record: a read's answer goes from
    /// the buffer the read filled into the ring with its encoded prefix
    /// before it ([`crate::codec::encode_response_split`]).
    pub fn send_parts(&self, parts: &[&[u8]]) -> Result<bool, SendError> {
        self.completion.produce_parts(&self.positions.completion, parts)
    }

    /// The largest record `send` takes.
    pub fn max_record(&self) -> u32 {
        self.completion.max_record()
    }

    /// Sets or clears this worker's sleeping flag in the request ring; set
    /// before a worker checks its rings one last time and sleeps on the
    /// doorbell (`crate::doorbell`).
    pub fn set_sleeping(&self, sleeping: bool) {
        self.request.set_sleeping(sleeping);
    }

    /// After sending completions: if the client says it sleeps, bumps the
    /// completion ring's futex word and wakes it. Returns whether it woke.
    /// The flag is the client's to write; a false one costs a system call.
    pub fn wake_client(&self) -> io::Result<bool> {
        if !self.completion.consumer_sleeping() {
            return Ok(false);
        }
        self.completion.futex().fetch_add(1, Ordering::SeqCst);
        futex::wake(self.completion.futex())?;
        Ok(true)
    }
}

/// The client's side of one worker's ring pair: produces requests,
/// consumes completions.
#[derive(Clone, Copy)]
pub struct ClientRings<'a> {
    request: Ring<'a>,
    completion: Ring<'a>,
    positions: &'a Positions,
}

impl ClientRings<'_> {
    /// Writes a request; `Ok(false)` if the request ring is full. After a
    /// send, check [`ClientRings::server_sleeping`] and ring the doorbell.
    pub fn send(&self, record: &[u8]) -> Result<bool, SendError> {
        self.request.produce(&self.positions.request, record)
    }

    /// The largest record `send` takes.
    pub fn max_record(&self) -> u32 {
        self.request.max_record()
    }

    /// Copies the next completion into `out`; `Ok(false)` if there is none.
    pub fn receive(&self, out: &mut Vec<u8>) -> Result<bool, Violation> {
        self.completion.consume(&self.positions.completion, out)
    }

    /// As [`ClientRings::receive`], with the completion's bytes past its
    /// first `prefix` put at the start of `target` instead when `split`,
    /// shown the first bytes and the completion's length, says so and
    /// they fit (`Received::Split`: their count). The crc32c is checked
    /// over the copies; after a checksum violation `target` may hold some
    /// of the completion's bytes.
    pub fn receive_split(
        &self,
        out: &mut Vec<u8>,
        prefix: usize,
        target: &mut [u8],
        split: impl FnOnce(&[u8], usize) -> bool,
    ) -> Result<Received, Violation> {
        self.completion.consume_split(&self.positions.completion, out, prefix, target, split)
    }

    /// Whether the server has published a completion not yet received.
    pub fn has_completion(&self) -> bool {
        self.completion.pending(&self.positions.completion)
    }

    /// Whether the worker says it sleeps (then ring its doorbell). Fenced
    /// after the send, so a worker that set the flag after our publish
    /// sees the request in its last check.
    pub fn server_sleeping(&self) -> bool {
        self.request.consumer_sleeping()
    }

    /// Waits until a completion is published: spins as `spinner` allows
    /// first (`crate::backoff`, which learns from this wait), then sleeps on the completion ring's
    /// futex word (sleeping flag set, ring checked once more) until woken
    /// or `timeout` passes. Call it in bounded waits, checking between
    /// them that the server's socket is still open. Timeouts beyond a day
    /// count as a day.
    pub fn wait_for_completion(&self, spinner: &mut Spinner, timeout: Duration) -> io::Result<Wake> {
        if spinner.spin(|| self.has_completion()) {
            return Ok(Wake::Ready);
        }
        let deadline = futex::Deadline::after(timeout);
        let mut slept = false;
        let outcome = loop {
            let seen = self.completion.futex().load(Ordering::SeqCst);
            self.completion.set_sleeping(true);
            if self.has_completion() {
                break if slept { Wake::Woken } else { Wake::Ready };
            }
            let Some(left) = deadline.remaining() else {
                break Wake::TimedOut;
            };
            if let Err(e) = futex::wait(self.completion.futex(), seen, left) {
                self.completion.set_sleeping(false);
                return Err(e);
            }
            slept = true;
        };
        self.completion.set_sleeping(false);
        Ok(outcome)
    }
}

/// The data area: the client's zero-copy buffers. The server copies a
/// slice out before it checks or checksums it, and copies results in;
/// every offset and length is checked against the area, without overflow.
#[derive(Clone, Copy)]
pub struct DataArea<'a> {
    map: &'a Mapping,
    offset: usize,
    bytes: u64,
}

impl DataArea<'_> {
    /// Bytes of the area.
    pub fn len(&self) -> u64 {
        self.bytes
    }

    /// Whether the layout has no data area.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    fn at(&self, offset: u64, length: u64) -> Result<usize, Violation> {
        check_slice(offset, length, self.bytes).map(|at| self.offset + at)
    }

    /// Copies `length` bytes at `offset` into a new buffer.
    pub fn copy_out(&self, offset: u64, length: u32) -> Result<Vec<u8>, Violation> {
        let at = self.at(offset, u64::from(length))?;
        // Copied into fresh capacity, not over zeros first: a zero-copy
        // write's bytes were otherwise written twice on the server.
        let mut out = Vec::with_capacity(length as usize);
        self.map.read_appending(at, length as usize, &mut out);
        Ok(out)
    }

    /// Copies `out.len()` bytes at `offset` into `out`.
    pub fn read_into(&self, offset: u64, out: &mut [u8]) -> Result<(), Violation> {
        let at = self.at(offset, out.len() as u64)?;
        self.map.read(at, out);
        Ok(())
    }

    /// Copies `bytes` into the area at `offset`.
    pub fn copy_in(&self, offset: u64, bytes: &[u8]) -> Result<(), Violation> {
        let at = self.at(offset, bytes.len() as u64)?;
        self.map.write(at, bytes);
        Ok(())
    }

    /// The area's first byte, for zero-copy users (the C client): valid
    /// for [`DataArea::len`] bytes while the region is mapped. The peer
    /// may change any byte at any time, so Rust code must not make a
    /// reference from it.
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.base().wrapping_add(self.offset)
    }
}
