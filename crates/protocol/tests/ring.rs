//! The rings between a well-behaved client and server: round trips,
//! wrap-around with padding, full and empty rings, every record size, a
//! model of the ring as a queue, and two threads pushing a million
//! checksummed records.

#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use larder_protocol::error::SendError;
use larder_protocol::layout::{Layout, PAGE_BYTES};
use larder_protocol::region::Region;
use larder_protocol::ring::{max_record, record_bytes, Received, PADDING_FLAG};
use proptest::prelude::*;

fn layout(ring_bytes: u32) -> Layout {
    Layout { workers: 2, request_ring_bytes: ring_bytes, completion_ring_bytes: ring_bytes, data_bytes: PAGE_BYTES }
}

/// Payload `index` of length `length`: every byte depends on both, so a
/// record read from the wrong place or a stale slot does not match.
fn payload(index: u64, length: usize) -> Vec<u8> {
    let mut state = index.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ length as u64;
    (0..length)
        .map(|_| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect()
}

#[test]
fn round_trip_both_directions_on_every_worker() {
    let region = Region::anonymous(layout(4096)).unwrap();
    let mut out = Vec::new();
    for worker in 0..2 {
        let client = region.client_rings(worker).unwrap();
        let server = region.server_rings(worker).unwrap();
        assert!(!server.receive(&mut out).unwrap(), "empty ring gave a record");
        assert!(client.send(b"request").unwrap());
        assert!(server.has_request());
        assert!(server.receive(&mut out).unwrap());
        assert_eq!(out, b"request");
        assert!(!server.has_request());
        assert!(!server.receive(&mut out).unwrap());
        assert!(server.send(format!("completion {worker}").as_bytes()).unwrap());
        assert!(client.has_completion());
        assert!(client.receive(&mut out).unwrap());
        assert_eq!(out, format!("completion {worker}").as_bytes());
        assert!(!client.receive(&mut out).unwrap());
    }
    assert!(region.client_rings(2).is_err());
    assert!(region.server_rings(u32::MAX).is_err());
}

#[test]
fn every_size_up_to_the_largest_round_trips_and_one_more_is_refused() {
    let region = Region::anonymous(layout(4096)).unwrap();
    let client = region.client_rings(0).unwrap();
    let server = region.server_rings(0).unwrap();
    let max = max_record(4096);
    assert_eq!(client.max_record(), max);
    let mut out = Vec::new();
    // Under Miri (scripts/miri.sh) a sample of the lengths: each is slow there.
    let step = if cfg!(miri) { 61 } else { 1 };
    for length in (0..=max as usize).step_by(step).chain([max as usize]) {
        let record = payload(length as u64, length);
        assert!(client.send(&record).unwrap(), "send of {length} bytes into an empty ring");
        assert!(server.receive(&mut out).unwrap());
        assert_eq!(out, record, "record of {length} bytes");
    }
    let too_large = vec![0u8; max as usize + 1];
    assert_eq!(client.send(&too_large), Err(SendError::TooLarge { length: max as usize + 1, max }));
    assert!(!server.receive(&mut out).unwrap(), "a refused send published something");
}

#[test]
fn a_completion_sent_in_parts_is_their_concatenation_at_every_split_and_wrap() {
    let region = Region::anonymous(layout(4096)).unwrap();
    let client = region.client_rings(0).unwrap();
    let server = region.server_rings(0).unwrap();
    let max = max_record(4096) as usize;
    let mut out = Vec::new();
    // Lengths and splits that land the parts at every alignment, and
    // enough records that some follow a padding record at the ring's end.
    for index in 0..200u64 {
        let length = (index as usize * 37) % (max + 1);
        let record = payload(index, length);
        let split = (index as usize * 13) % (length + 1);
        let (head, tail) = record.split_at(split);
        assert!(server.send_parts(&[head, tail]).unwrap(), "send of {length} bytes split at {split}");
        assert!(client.receive(&mut out).unwrap(), "its crc32c checked on receipt");
        assert_eq!(out, record, "{length} bytes split at {split}");
    }
    let too_large = vec![0u8; max + 1];
    assert_eq!(
        server.send_parts(&[&too_large[..8], &too_large[8..]]),
        Err(SendError::TooLarge { length: max + 1, max: max as u32 })
    );
    assert!(!client.receive(&mut out).unwrap(), "a refused send published something");
}

#[test]
fn a_record_that_would_cross_the_end_follows_a_padding_record() {
    let region = Region::anonymous(layout(4096)).unwrap();
    let client = region.client_rings(0).unwrap();
    let server = region.server_rings(0).unwrap();
    let slots = region.layout().request_ring(0).slots;
    let mut out = Vec::new();
    // 100-byte payloads take 112 bytes: 36 of them end at 4032, leaving 64.
    for index in 0..36 {
        assert!(client.send(&payload(index, 100)).unwrap());
        assert!(server.receive(&mut out).unwrap());
    }
    let big = payload(99, 200);
    assert!(client.send(&big).unwrap());
    let mut header = [0u8; 8];
    region.read_bytes(slots + 4032, &mut header).unwrap();
    let length = u32::from_le_bytes(header[..4].try_into().unwrap());
    assert_eq!(length, PADDING_FLAG | (64 - 8), "padding record at the end");
    region.read_bytes(slots, &mut header).unwrap();
    assert_eq!(u32::from_le_bytes(header[..4].try_into().unwrap()), 200, "record at the ring's start");
    assert!(server.receive(&mut out).unwrap());
    assert_eq!(out, big);
    assert!(!server.receive(&mut out).unwrap());
}

#[test]
fn a_full_ring_refuses_until_the_consumer_takes_a_record() {
    let region = Region::anonymous(layout(4096)).unwrap();
    let client = region.client_rings(0).unwrap();
    let server = region.server_rings(0).unwrap();
    // 56-byte payloads take 64 bytes: exactly 64 fit a 4096-byte ring.
    let mut sent = 0u64;
    while client.send(&payload(sent, 56)).unwrap() {
        sent += 1;
        assert!(sent <= 64, "more records than the ring holds");
    }
    assert_eq!(sent, 64);
    let mut out = Vec::new();
    assert!(server.receive(&mut out).unwrap());
    assert_eq!(out, payload(0, 56));
    assert!(client.send(&payload(sent, 56)).unwrap(), "room after one receive");
    assert!(!client.send(&payload(sent + 1, 56)).unwrap());
    for index in 1..=sent {
        assert!(server.receive(&mut out).unwrap());
        assert_eq!(out, payload(index, 56));
    }
    assert!(!server.receive(&mut out).unwrap());
}

/// The ring as a queue of records with the byte accounting of the format:
/// a record takes its header and padded payload, plus a padding record
/// when it would cross the end.
#[derive(Default)]
struct Model {
    queue: VecDeque<(Vec<u8>, u32)>,
    head: u64,
    used: u32,
}

impl Model {
    fn send(&mut self, ring: u32, record: Vec<u8>) -> bool {
        let size = record_bytes(record.len() as u32);
        let offset = (self.head % u64::from(ring)) as u32;
        let padding = if offset + size > ring { ring - offset } else { 0 };
        if self.used + padding + size > ring {
            return false;
        }
        self.head += u64::from(padding + size);
        self.used += padding + size;
        self.queue.push_back((record, padding + size));
        true
    }

    fn receive(&mut self) -> Option<Vec<u8>> {
        let (record, taken) = self.queue.pop_front()?;
        self.used -= taken;
        Some(record)
    }
}

#[derive(Debug, Clone)]
enum Operation {
    Send(usize),
    Receive,
}

fn operation() -> impl Strategy<Value = Operation> {
    prop_oneof![
        3 => (0usize..=1024).prop_map(Operation::Send),
        2 => Just(Operation::Receive),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn the_ring_behaves_as_its_model(operations in prop::collection::vec(operation(), 1..400)) {
        let region = Region::anonymous(layout(4096)).unwrap();
        let client = region.client_rings(1).unwrap();
        let server = region.server_rings(1).unwrap();
        let mut model = Model::default();
        let mut out = Vec::new();
        for (index, op) in operations.into_iter().enumerate() {
            match op {
                Operation::Send(length) => {
                    let record = payload(index as u64, length);
                    let sent = client.send(&record).unwrap();
                    prop_assert_eq!(sent, model.send(4096, record), "send {} of {} bytes", index, length);
                }
                Operation::Receive => {
                    let got = server.receive(&mut out).unwrap();
                    let expected = model.receive();
                    prop_assert_eq!(got, expected.is_some());
                    if let Some(expected) = expected {
                        prop_assert_eq!(&out, &expected);
                    }
                }
            }
        }
    }
}

#[test]
fn two_threads_move_a_million_checksummed_records_in_order() {
    const RECORDS: u64 = if cfg!(miri) { 300 } else { 1_000_000 };
    let region = Arc::new(Region::anonymous(layout(64 << 10)).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let producer = {
        let region = Arc::clone(&region);
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let client = region.client_rings(0).unwrap();
            for index in 0..RECORDS {
                let record = payload(index, (index * 7919 % 301) as usize);
                while !client.send(&record).unwrap() {
                    assert!(!done.load(Ordering::Relaxed), "consumer stopped");
                    std::thread::yield_now();
                }
            }
        })
    };
    let server = region.server_rings(0).unwrap();
    let mut out = Vec::new();
    let mut bytes = 0u64;
    for index in 0..RECORDS {
        loop {
            match server.receive(&mut out) {
                Ok(true) => break,
                Ok(false) => {
                    assert!(!producer.is_finished(), "producer ended before record {index}");
                    std::thread::yield_now();
                }
                Err(violation) => {
                    done.store(true, Ordering::Relaxed);
                    panic!("record {index}: {violation}");
                }
            }
        }
        let expected = payload(index, (index * 7919 % 301) as usize);
        assert_eq!(out, expected, "record {index}");
        bytes += out.len() as u64;
    }
    producer.join().unwrap();
    assert!(!server.receive(&mut out).unwrap());
    assert!(bytes > 100 * RECORDS);
}

#[test]
fn a_completion_split_into_a_target_is_the_record_at_every_length_and_wrap() {
    let region = Region::anonymous(layout(4096)).unwrap();
    let client = region.client_rings(0).unwrap();
    let server = region.server_rings(0).unwrap();
    let max = max_record(4096) as usize;
    let prefix = 16;
    let mut out = Vec::new();
    let mut target = vec![0u8; max];
    // Lengths at every alignment, enough records to follow padding at the
    // ring's end, and the split taken or declined in turn.
    for index in 0..300u64 {
        let length = (index as usize * 37) % (max + 1);
        let record = payload(index, length);
        assert!(server.send(&record).unwrap());
        let take = index % 3 != 0;
        let mut seen = None;
        let received = client
            .receive_split(&mut out, prefix, &mut target, |first, total| {
                seen = Some((first.to_vec(), total));
                take
            })
            .unwrap();
        if length < prefix {
            assert_eq!(received, Received::Whole, "a record shorter than the prefix is not split");
            assert_eq!(seen, None);
            assert_eq!(out, record);
            continue;
        }
        assert_eq!(seen, Some((record[..prefix].to_vec(), length)), "split is shown the prefix and the length");
        if take {
            assert_eq!(received, Received::Split(length - prefix));
            assert_eq!(out, &record[..prefix]);
            assert_eq!(&target[..length - prefix], &record[prefix..]);
        } else {
            assert_eq!(received, Received::Whole);
            assert_eq!(out, record);
        }
    }
    assert_eq!(client.receive_split(&mut out, prefix, &mut target, |_, _| true).unwrap(), Received::Nothing);
}

#[test]
fn a_completion_longer_than_the_target_is_received_whole_and_the_target_untouched() {
    let region = Region::anonymous(layout(4096)).unwrap();
    let client = region.client_rings(0).unwrap();
    let server = region.server_rings(0).unwrap();
    let record = payload(7, 16 + 100);
    assert!(server.send(&record).unwrap());
    let mut out = Vec::new();
    let mut target = [0xEEu8; 99];
    let received = client
        .receive_split(&mut out, 16, &mut target, |_, _| panic!("asked to split a record that does not fit"))
        .unwrap();
    assert_eq!(received, Received::Whole);
    assert_eq!(out, record);
    assert!(target.iter().all(|&b| b == 0xEE), "a byte written into a target too short for the record");
}
