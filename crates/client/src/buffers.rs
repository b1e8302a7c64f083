//! Zero-copy buffers (uFS's `uFS_malloc`): stretches of the client's data
//! area, which the server maps too. A program fills a buffer in place and
//! names it in a write or put; the server copies the bytes once, into its
//! own memory, before it checks and checksums them. A read or get into a
//! buffer is written there by the server.

use std::collections::BTreeMap;
use std::sync::Arc;

use larder_protocol::message::BufferSlice;
use parking_lot::Mutex;

use crate::connection::Connection;
use crate::error::{ClientError, Result};
use crate::Client;

/// Buffers start and end on this boundary (a cache line), so two buffers
/// never share one.
const ALIGN: u64 = 64;

/// First-fit allocation over the data area: free stretches by offset.
pub(crate) struct Allocator {
    area: u64,
    free: Mutex<BTreeMap<u64, u64>>,
}

impl Allocator {
    /// An allocator over a data area of `area` bytes, all free.
    pub(crate) fn new(area: u64) -> Allocator {
        let area = area - area % ALIGN;
        let mut free = BTreeMap::new();
        if area > 0 {
            free.insert(0, area);
        }
        Allocator { area, free: Mutex::new(free) }
    }

    /// A free stretch of at least `length` bytes, taken; none if no
    /// stretch is long enough.
    fn take(&self, length: u64) -> Option<(u64, u64)> {
        let want = length.max(1).div_ceil(ALIGN) * ALIGN;
        let mut free = self.free.lock();
        let (&offset, &have) = free.iter().find(|(_, &have)| have >= want)?;
        free.remove(&offset);
        if have > want {
            free.insert(offset + want, have - want);
        }
        Some((offset, want))
    }

    /// Gives a stretch back, merging it with free neighbours.
    fn give(&self, mut offset: u64, mut length: u64) {
        let mut free = self.free.lock();
        if let Some((&before, &before_length)) = free.range(..offset).next_back() {
            if before + before_length == offset {
                free.remove(&before);
                offset = before;
                length += before_length;
            }
        }
        if let Some(&after_length) = free.get(&(offset + length)) {
            free.remove(&(offset + length));
            length += after_length;
        }
        free.insert(offset, length);
    }
}

/// A buffer in the data area shared with the server; given back when
/// dropped.
pub struct Buffer {
    connection: Arc<Connection>,
    allocator: Arc<Allocator>,
    offset: u64,
    /// The length asked for (the stretch taken may be longer).
    length: u64,
    taken: u64,
}

impl Client {
    /// A zero-copy buffer of `length` bytes (zeroed or holding earlier
    /// bytes of this client: the area is this client's alone).
    pub fn alloc_buffer(&self, length: usize) -> Result<Buffer> {
        let length = length as u64;
        if length > u64::from(u32::MAX) {
            return Err(ClientError::Invalid(format!("a buffer of {length} bytes: the most is {}", u32::MAX)));
        }
        let (offset, taken) =
            self.buffers.take(length).ok_or(ClientError::NoBufferRoom { wanted: length, area: self.buffers.area })?;
        Ok(Buffer { connection: self.connection.clone(), allocator: self.buffers.clone(), offset, length, taken })
    }
}

impl Buffer {
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.length as usize
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// Its bytes, to fill in place.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let base = self.connection.region().data().as_ptr();
        #[allow(unsafe_code)]
        // SAFETY: the stretch [offset, offset + length) lies inside the
        // data area (the allocator takes stretches from [0, area) only) and
        // the area stays mapped while `self.connection` lives. Nothing else
        // in this process touches it: the allocator handed it to this buffer
        // alone. The server (which this client trusts: it owns the store)
        // writes into it only while a read or get naming it is in flight,
        // and such a call borrows the buffer mutably, so it cannot overlap
        // this borrow.
        unsafe {
            std::slice::from_raw_parts_mut(base.add(self.offset as usize), self.length as usize)
        }
    }

    /// Its bytes, to read.
    pub fn as_slice(&self) -> &[u8] {
        let base = self.connection.region().data().as_ptr();
        #[allow(unsafe_code)]
        // SAFETY: as for `as_mut_slice`; the server writes the stretch only
        // during a call that borrows the buffer mutably, which cannot
        // happen while this shared borrow lives.
        unsafe {
            std::slice::from_raw_parts(base.add(self.offset as usize), self.length as usize)
        }
    }

    /// The stretch to name in a request of `client`: refused for a buffer
    /// of another connection, whose offset means another client's memory
    /// (and whose bytes the server would read or write where this
    /// process holds another buffer).
    pub(crate) fn checked_slice(&self, client: &Client) -> Result<BufferSlice> {
        self.checked_prefix(client, self.length as usize)
    }

    /// The stretch of its first `length` bytes, to name in a request of
    /// `client` (as [`Buffer::checked_slice`]).
    pub(crate) fn checked_prefix(&self, client: &Client, length: usize) -> Result<BufferSlice> {
        if !Arc::ptr_eq(&self.connection, &client.connection) {
            return Err(ClientError::Invalid("a buffer of another connection".into()));
        }
        match u64::try_from(length) {
            Ok(length) if length <= self.length => Ok(BufferSlice { offset: self.offset, length: length as u32 }),
            _ => Err(ClientError::Invalid(format!("{length} bytes of a buffer of {} bytes", self.length))),
        }
    }

    /// The stretch of the data area it is, as a request names it (a
    /// batch operation's value, [`Payload::Buffer`](crate::Payload)).
    pub fn slice(&self) -> BufferSlice {
        BufferSlice { offset: self.offset, length: self.length as u32 }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.allocator.give(self.offset, self.taken);
    }
}

#[cfg(test)]
mod tests {
    use super::Allocator;

    #[test]
    fn stretches_are_taken_first_fit_and_merged_when_given_back() {
        let a = Allocator::new(1024);
        let x = a.take(100).map(|t| t.0);
        let y = a.take(64).map(|t| t.0);
        let z = a.take(600);
        assert_eq!((x, y, z), (Some(0), Some(128), Some((192, 640))), "600 rounds up to 640");
        assert!(a.take(300).is_none(), "only 1024 - 832 = 192 bytes are left");
        a.give(128, 64);
        a.give(0, 128);
        assert_eq!(a.take(192).map(|t| t.0), Some(0), "the two freed neighbours merged");
        a.give(0, 192);
        a.give(192, 640);
        assert_eq!(a.take(1024).map(|t| t.0), Some(0), "everything merged back");
    }
}
