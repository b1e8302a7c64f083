//! A hostile peer: garbage positions, bad lengths and checksums, records
//! crossing the ring's end, slots rewritten after publication, a client
//! that never reaps completions, slices outside the data area, garbage in
//! the flags and the doorbell. The consumer returns a `Violation` (or a
//! record whose crc32c matched the bytes it copied), never panics and
//! never reads outside the ring.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use larder_protocol::doorbell::Doorbell;
use larder_protocol::error::{RingKind, SendError, Violation};
use larder_protocol::futex::Wake;
use larder_protocol::fuzzing;
use larder_protocol::layout::{
    Layout, CONSUMER_POSITION_OFFSET, PAGE_BYTES, PRODUCER_POSITION_OFFSET, SLEEPING_OFFSET,
};
use larder_protocol::region::Region;
use larder_protocol::ring::PADDING_FLAG;

const RING: u32 = 4096;

fn new_region() -> Region {
    Region::anonymous(Layout {
        workers: 1,
        request_ring_bytes: RING,
        completion_ring_bytes: RING,
        data_bytes: 4 * PAGE_BYTES,
    })
    .unwrap()
}

/// Stores a 32-bit word at `offset` of the region, as a peer would.
fn poke(region: &Region, offset: u64, value: u32) {
    region.write_word32(offset, value).unwrap();
}

fn request_producer(region: &Region) -> u64 {
    region.layout().request_ring(0).control + u64::from(PRODUCER_POSITION_OFFSET)
}

fn request_slots(region: &Region) -> u64 {
    region.layout().request_ring(0).slots
}

/// A header (length, crc) at `offset` of the request ring's slots.
fn header(region: &Region, offset: u32, length: u32, crc: u32) {
    poke(region, request_slots(region) + u64::from(offset), length);
    poke(region, request_slots(region) + u64::from(offset) + 4, crc);
}

fn receive(region: &Region) -> Result<bool, Violation> {
    region.server_rings(0).unwrap().receive(&mut Vec::new())
}

#[test]
fn producer_positions_beyond_a_ring_or_unaligned_are_violations() {
    for producer in [RING + 8, 4, 12, u32::MAX - 7, u32::MAX, 0x8000_0000] {
        let region = new_region();
        poke(&region, request_producer(&region), producer);
        match receive(&region) {
            Err(Violation::ProducerPosition { producer: seen, consumer: 0, .. }) => assert_eq!(seen, producer),
            other => panic!("producer position {producer}: {other:?}"),
        }
    }
}

#[test]
fn bad_lengths_are_violations() {
    // Longer than the largest record.
    let region = new_region();
    header(&region, 0, 2000, 0);
    poke(&region, request_producer(&region), RING);
    assert!(matches!(receive(&region), Err(Violation::RecordTooLarge { length: 2000, max: 1024, .. })));
    // Longer than what was published.
    let region = new_region();
    header(&region, 0, 100, 0);
    poke(&region, request_producer(&region), 16);
    assert!(matches!(receive(&region), Err(Violation::RecordBeyondPublished { record_bytes: 112, published: 16, .. })));
    // A padding record that does not run to the end.
    let region = new_region();
    header(&region, 0, PADDING_FLAG | 100, 0);
    poke(&region, request_producer(&region), 112);
    assert!(matches!(receive(&region), Err(Violation::Padding { length: 100, .. })));
    // A padding record to the end, but the producer published less.
    let region = new_region();
    header(&region, 0, PADDING_FLAG | (RING - 8), 0);
    poke(&region, request_producer(&region), 64);
    assert!(matches!(receive(&region), Err(Violation::RecordBeyondPublished { published: 64, .. })));
}

#[test]
fn a_record_crossing_the_end_is_a_violation() {
    let region = new_region();
    let client = region.client_rings(0).unwrap();
    let server = region.server_rings(0).unwrap();
    let mut out = Vec::new();
    // 36 records of 112 bytes: the consumer is at 4032, 64 bytes before the end.
    for _ in 0..36 {
        assert!(client.send(&[7u8; 100]).unwrap());
        assert!(server.receive(&mut out).unwrap());
    }
    header(&region, 4032, 100, crc32c::crc32c(&[7u8; 100]));
    poke(&region, request_producer(&region), 4032 + 112);
    match server.receive(&mut out) {
        Err(Violation::RecordCrossesEnd { ring: RingKind::Request, offset: 4032, length: 100, ring_bytes: RING }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_payload_changed_after_publication_fails_its_checksum() {
    let region = new_region();
    let client = region.client_rings(0).unwrap();
    assert!(client.send(b"an honest request").unwrap());
    region.write_bytes(request_slots(&region) + 8, b"A").unwrap();
    let mut out = Vec::new();
    match region.server_rings(0).unwrap().receive(&mut out) {
        Err(Violation::Checksum { length: 17, .. }) => assert!(out.is_empty(), "a refused record was handed out"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_completion_changed_after_publication_fails_its_checksum_when_split_into_a_target() {
    let completion_slots = |region: &Region| region.layout().completion_ring(0).slots;
    // A byte changed in the part that goes to the vector, then in the part
    // that goes to the target.
    for changed_at in [3u64, 16 + 200] {
        let region = new_region();
        let record: Vec<u8> = (0..16 + 500u32).map(|i| (i * 7) as u8).collect();
        assert!(region.server_rings(0).unwrap().send(&record).unwrap());
        region.write_bytes(completion_slots(&region) + 8 + changed_at, b"X").unwrap();
        let mut out = Vec::new();
        let mut target = [0xEEu8; 600];
        match region.client_rings(0).unwrap().receive_split(&mut out, 16, &mut target, |_, _| true) {
            Err(Violation::Checksum { length: 516, .. }) => assert!(out.is_empty(), "a refused record was handed out"),
            other => panic!("byte {changed_at} changed: {other:?}"),
        }
        assert!(target[500..].iter().all(|&b| b == 0xEE), "written past the record's bytes in the target");
    }
}

/// The crc32c of a split completion is the one of the bytes copied, not of
/// the ring read again: a prefix byte changed before the copy and changed
/// back after it (while `split` looks at the copy) leaves the ring holding
/// the bytes the header's crc32c is of, and the copy not.
#[test]
fn a_completion_changed_back_after_its_prefix_was_copied_fails_its_checksum() {
    let region = new_region();
    let at = region.layout().completion_ring(0).slots + 8 + 3;
    let record: Vec<u8> = (0..16 + 500u32).map(|i| (i * 7) as u8).collect();
    assert!(region.server_rings(0).unwrap().send(&record).unwrap());
    region.write_bytes(at, b"X").unwrap();
    let mut out = Vec::new();
    let mut target = [0u8; 600];
    let split = |prefix: &[u8], _: usize| {
        assert_eq!(prefix[3], b'X', "split shown the ring's bytes of before the copy");
        region.write_bytes(at, &record[3..4]).unwrap();
        true
    };
    match region.client_rings(0).unwrap().receive_split(&mut out, 16, &mut target, split) {
        Err(Violation::Checksum { length: 516, .. }) => assert!(out.is_empty(), "a refused record was handed out"),
        other => panic!("a prefix changed back after its copy: {other:?}"),
    }
}

#[test]
fn a_slot_rewritten_while_the_server_copies_gives_one_whole_version_or_a_violation() {
    let versions: [Vec<u8>; 2] = [vec![0xAA; 1000], (0..1000).map(|i| i as u8).collect()];
    let crcs = versions.each_ref().map(|v| crc32c::crc32c(v));
    let (mut whole, mut refused) = (0, 0);
    // Miri (scripts/miri.sh) checks the racing copy itself; a few rounds do.
    let rounds = if cfg!(miri) { 3 } else { 300 };
    for _ in 0..rounds {
        let region = new_region();
        let client = region.client_rings(0).unwrap();
        assert!(client.send(&versions[0]).unwrap());
        let stop = AtomicBool::new(false);
        let slots = request_slots(&region);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut which = 1;
                while !stop.load(Ordering::Relaxed) {
                    region.write_bytes(slots + 8, &versions[which]).unwrap();
                    poke(&region, slots + 4, crcs[which]);
                    which ^= 1;
                }
            });
            let mut out = Vec::new();
            match region.server_rings(0).unwrap().receive(&mut out) {
                Ok(true) => {
                    assert!(out == versions[0] || out == versions[1], "a mixed record passed its checksum");
                    whole += 1;
                }
                Err(Violation::Checksum { length: 1000, .. }) => refused += 1,
                other => panic!("{other:?}"),
            }
            stop.store(true, Ordering::Relaxed);
        });
    }
    assert_eq!(whole + refused, rounds);
}

#[test]
fn a_hostile_consumer_position_stops_completions_with_a_violation() {
    let completion_consumer =
        |region: &Region| region.layout().completion_ring(0).control + u64::from(CONSUMER_POSITION_OFFSET);
    // Ahead of the producer (at 0), or not a multiple of 8 from it. A
    // consumer position up to a ring *behind* is not detectable: it only
    // makes the client's own ring look fuller.
    for consumer in [12345, 8, RING + 8, u32::MAX - 3] {
        let region = new_region();
        poke(&region, completion_consumer(&region), consumer);
        match region.server_rings(0).unwrap().send(b"completion") {
            Err(SendError::Violation(Violation::ConsumerPosition { consumer: seen, producer: 0, .. })) => {
                assert_eq!(seen, consumer)
            }
            other => panic!("consumer position {consumer}: {other:?}"),
        }
    }
}

#[test]
fn a_client_that_never_reaps_fills_its_ring_and_the_server_does_not_wait() {
    let region = new_region();
    let server = region.server_rings(0).unwrap();
    let mut sent = 0;
    while server.send(&[1u8; 120]).unwrap() {
        sent += 1;
    }
    assert_eq!(sent, 4096 / 128);
    for _ in 0..1000 {
        assert!(!server.send(&[1u8; 120]).unwrap());
    }
    let client = region.client_rings(0).unwrap();
    let mut out = Vec::new();
    assert!(client.receive(&mut out).unwrap());
    assert!(server.send(&[2u8; 120]).unwrap(), "room again once the client reaps one");
}

#[test]
fn after_a_violation_further_receives_stay_safe() {
    let region = new_region();
    poke(&region, request_producer(&region), 5);
    for _ in 0..10 {
        assert!(receive(&region).is_err());
    }
    poke(&region, request_producer(&region), 0);
    assert_eq!(receive(&region), Ok(false));
}

#[test]
fn random_garbage_over_the_rings_never_panics_and_every_receive_loop_ends() {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut clean = 0;
    for round in 0..if cfg!(miri) { 30 } else { 3000 } {
        let mut input = vec![0u8; fuzzing::RING_INPUT_BYTES];
        for byte in input.iter_mut() {
            *byte = next() as u8;
        }
        // Plausible positions more often than random ones.
        if round % 2 == 0 {
            // The first a zero position: a ring with nothing published,
            // which must read cleanly.
            let producer = if round == 0 { 0 } else { (next() % u64::from(RING + 64)) as u32 & !7 };
            input[..4].copy_from_slice(&producer.to_le_bytes());
            input[64..68].copy_from_slice(&0u32.to_le_bytes());
        }
        if fuzzing::ring(&input) {
            clean += 1;
        }
    }
    assert!(clean > 0, "no input received cleanly (a zero producer position must)");
}

#[test]
fn data_area_slices_outside_it_are_violations() {
    let region = new_region();
    let data = region.data();
    let bytes = data.len();
    assert_eq!(bytes, 4 * PAGE_BYTES);
    for (offset, length) in [(bytes, 1), (bytes - 1, 2), (u64::MAX, 1), (u64::MAX - 3, 8), (1, u32::MAX)] {
        assert_eq!(
            data.copy_out(offset, length),
            Err(Violation::DataSlice { offset, length: u64::from(length), data_bytes: bytes })
        );
        assert!(data.copy_in(offset, &vec![0u8; (length as usize).min(16)]).is_err() || length > 16);
    }
    assert_eq!(data.copy_out(bytes, 0), Ok(Vec::new()));
    let whole = region.len();
    assert_eq!(
        region.write_bytes(whole - 1, b"xy"),
        Err(Violation::OutsideRegion { offset: whole - 1, length: 2, region_bytes: whole })
    );
    assert!(region.read_bytes(u64::MAX, &mut [0u8; 1]).is_err());
    data.copy_in(bytes - 3, b"end").unwrap();
    assert_eq!(data.copy_out(bytes - 3, 3).unwrap(), b"end");
    // The server's copy is its own: the client rewriting its buffer
    // afterwards changes nothing the server holds.
    data.copy_in(100, b"written").unwrap();
    let copy = data.copy_out(100, 7).unwrap();
    data.copy_in(100, b"changed").unwrap();
    assert_eq!(copy, b"written");
    let mut read = [0u8; 7];
    data.read_into(100, &mut read).unwrap();
    assert_eq!(&read, b"changed");
}

#[test]
fn garbage_flags_and_doorbell_words_only_cause_spurious_wake_ups() {
    let region = new_region();
    let sleeping = region.layout().completion_ring(0).control + u64::from(SLEEPING_OFFSET);
    poke(&region, sleeping, 0xDEAD_BEEF);
    assert!(region.server_rings(0).unwrap().wake_client().unwrap(), "a garbage flag wakes for nothing");
    poke(&region, sleeping, 0);
    assert!(!region.server_rings(0).unwrap().wake_client().unwrap());

    let doorbell = Doorbell::anonymous(2).unwrap();
    let seen = doorbell.seen(1).unwrap();
    // A client bumped the word: the worker's wait returns at once.
    doorbell.ring(1).unwrap();
    assert_eq!(doorbell.wait(1, seen, Duration::from_secs(30)).unwrap(), Wake::Woken);
    // Nobody rings: the wait ends at its timeout, never later.
    let seen = doorbell.seen(1).unwrap();
    let started = std::time::Instant::now();
    assert_eq!(doorbell.wait(1, seen, Duration::from_millis(20)).unwrap(), Wake::TimedOut);
    assert!(started.elapsed() >= Duration::from_millis(20));
    assert!(doorbell.wait(2, 0, Duration::from_millis(1)).is_err(), "worker beyond the doorbell");
}

#[test]
fn raw_word_stores_are_little_endian_and_checked_for_bounds_and_alignment() {
    let region = new_region();
    let at = request_slots(&region);
    region.write_word32(at, 0x0102_0304).unwrap();
    let mut bytes = [0u8; 4];
    region.read_bytes(at, &mut bytes).unwrap();
    assert_eq!(bytes, [4, 3, 2, 1]);
    assert_eq!(region.write_word32(at + 2, 1), Err(Violation::UnalignedWord { offset: at + 2, bytes: 4 }));
    let end = region.len() - 2;
    assert!(
        matches!(region.write_word32(end, 1), Err(Violation::OutsideRegion { offset, length: 4, .. }) if offset == end)
    );
    region.read_bytes(at, &mut bytes).unwrap();
    assert_eq!(bytes, [4, 3, 2, 1], "a refused store changed nothing");
}
