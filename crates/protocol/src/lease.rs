//! The lease area of a client's region (`docs/format.md`, "Lease area"):
//! how the server revokes a lease by callback.
//!
//! A lease the server grants lives in one of the client's slots and has a
//! sequence number, both in the grant (`Response::Lease`). To revoke it the
//! server writes the sequence into the slot's notice word, bumps the
//! area's futex word and wakes it. The client drops what the lease let it
//! cache, then writes the sequence into the slot's acknowledgement word
//! and rings the workers' doorbells. A lease whose notice word holds its
//! sequence is revoked; the client checks that before every use.
//!
//! Everything here is plain words in shared memory. The server writes the
//! notices and the futex word and only ever reads an acknowledgement,
//! comparing it with a sequence it keeps itself: a client that writes
//! anything else only makes its own revocations wait for the lease's
//! expiry, and one that acknowledges falsely only risks its own cached
//! copies.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::futex;
use crate::layout::{LEASE_FUTEX_OFFSET, LEASE_SLOTS_OFFSET, LEASE_SLOT_BYTES, MAX_LEASE_SLOTS};
use crate::mapping::Mapping;

/// A server that grants leases answers a read of up to this many bytes in
/// full unless the file ends first, so a client that caches pages may take
/// a shorter answer for the file's end.
pub const FULL_READ_BYTES: u32 = 64 << 10;

/// The lease area of one region.
#[derive(Clone, Copy)]
pub struct LeaseArea<'a> {
    map: &'a Mapping,
    offset: usize,
}

impl<'a> LeaseArea<'a> {
    pub(crate) fn new(map: &'a Mapping, offset: u64) -> LeaseArea<'a> {
        LeaseArea { map, offset: offset as usize }
    }

    fn slot_word(&self, slot: u32, word: usize) -> Option<&'a AtomicU32> {
        (slot < MAX_LEASE_SLOTS).then(|| {
            self.map
                .word32(self.offset + LEASE_SLOTS_OFFSET as usize + slot as usize * LEASE_SLOT_BYTES as usize + word)
        })
    }

    fn futex_word(&self) -> &'a AtomicU32 {
        self.map.word32(self.offset + LEASE_FUTEX_OFFSET as usize)
    }

    /// Server: marks lease `sequence` of `slot` revoked. A slot beyond the
    /// area is ignored (the server never grants one).
    pub fn notify(&self, slot: u32, sequence: u32) {
        if let Some(word) = self.slot_word(slot, 0) {
            word.store(sequence, Ordering::SeqCst);
        }
    }

    /// Server: after notices, bumps the futex word and wakes the client's
    /// waiter. The word is the client's memory too; the server never waits
    /// on it.
    pub fn wake_client(&self) -> io::Result<()> {
        let word = self.futex_word();
        word.fetch_add(1, Ordering::SeqCst);
        futex::wake(word)
    }

    /// Server: whether the client acknowledged the revocation of lease
    /// `sequence` of `slot`.
    pub fn acknowledged(&self, slot: u32, sequence: u32) -> bool {
        self.slot_word(slot, 4).is_some_and(|word| word.load(Ordering::SeqCst) == sequence)
    }

    /// Client: whether lease `sequence` of `slot` was revoked, or has
    /// ended: the notice holds its sequence or a later one (the server
    /// grants a later lease in a slot only once the earlier one ended, so
    /// a grant answered before a revocation and read after a later lease
    /// of the slot was revoked is not taken for a live one). A slot beyond
    /// the area counts as revoked.
    pub fn revoked(&self, slot: u32, sequence: u32) -> bool {
        self.slot_word(slot, 0).is_none_or(|word| {
            let notice = word.load(Ordering::SeqCst);
            // Sequences wrap (0 is skipped): "later" is within half the range.
            notice != 0 && notice.wrapping_sub(sequence) < 1 << 31
        })
    }

    /// Client: whether the notice of `slot` holds `sequence` itself: the
    /// revocation the server waits for. Only that one is acknowledged: an
    /// earlier lease's acknowledgement would overwrite a later one's.
    pub fn notice_is(&self, slot: u32, sequence: u32) -> bool {
        self.slot_word(slot, 0).is_some_and(|word| word.load(Ordering::SeqCst) == sequence)
    }

    /// Client: says the revocation of lease `sequence` of `slot` is done
    /// (nothing it let the client cache is used any more).
    pub fn acknowledge(&self, slot: u32, sequence: u32) {
        if let Some(word) = self.slot_word(slot, 4) {
            word.store(sequence, Ordering::SeqCst);
        }
    }

    /// Client: the futex word's value, read before looking at the notices
    /// and passed to [`LeaseArea::wait`].
    pub fn seen(&self) -> u32 {
        self.futex_word().load(Ordering::SeqCst)
    }

    /// Client: sleeps until the server bumps the futex word past `seen`,
    /// or `timeout` passes. Returns whether the timeout passed.
    pub fn wait(&self, seen: u32, timeout: Duration) -> io::Result<bool> {
        futex::wait(self.futex_word(), seen, timeout)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use crate::layout::{Layout, MAX_LEASE_SLOTS, PAGE_BYTES};
    use crate::region::Region;

    #[test]
    fn notices_and_acknowledgements_pair_by_sequence() {
        let layout =
            Layout { workers: 1, request_ring_bytes: 4096, completion_ring_bytes: 4096, data_bytes: PAGE_BYTES };
        let region = Region::anonymous(layout).unwrap();
        let area = region.leases();
        assert!(!area.revoked(5, 1));
        assert!(!area.acknowledged(5, 1));
        let before = area.seen();
        area.notify(5, 1);
        area.wake_client().unwrap();
        assert_ne!(area.seen(), before);
        assert!(area.revoked(5, 1));
        assert!(!area.revoked(5, 2), "a later lease of the slot is not the revoked one");
        assert!(!area.revoked(6, 1), "slots are apart");
        area.acknowledge(5, 1);
        assert!(area.acknowledged(5, 1));
        assert!(!area.acknowledged(5, 2));
        // A later lease of the slot revoked: the earlier one is over too,
        // and its acknowledgement does not overwrite the later one's.
        area.notify(5, 2);
        assert!(area.revoked(5, 1) && area.revoked(5, 2) && !area.revoked(5, 3));
        assert!(area.notice_is(5, 2) && !area.notice_is(5, 1), "only the later one is waited for");
        // Sequences wrap past u32::MAX to 1.
        area.notify(7, 1);
        assert!(area.revoked(7, u32::MAX) && !area.revoked(7, 2));
        assert!(area.revoked(MAX_LEASE_SLOTS, 1), "a slot beyond the area is never valid");
        assert!(!area.acknowledged(MAX_LEASE_SLOTS, 0));
        // The last slot lies inside the region.
        area.notify(MAX_LEASE_SLOTS - 1, 9);
        assert!(area.revoked(MAX_LEASE_SLOTS - 1, 9));
        assert!(area.wait(area.seen(), std::time::Duration::from_millis(1)).unwrap());
    }
}
