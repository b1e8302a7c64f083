//! Regression for P2 (review of crates/log): bytes inside a record payload
//! that decode as a group header at a block boundary (same segment id and
//! epoch) were taken as proof that more had been acknowledged, so a forged
//! `acked_lsn` turned a harmless torn tail into a failed open. Checks that
//! such bytes are ignored: group headers must carry the segment's random
//! nonce, which payloads cannot know.
#![allow(clippy::unwrap_used)]

mod common;

use common::{check_prefix, open, payload, segment_path};
use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_log::Options;

/// A group header as the format lays it out, with a zero nonce field (the
/// layout before the nonce existed) and a huge `acked_lsn`.
fn fake_group_header(segment_id: u64, epoch: u64, acked: u64) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"LRDRLGRP");
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&segment_id.to_le_bytes());
    out.extend_from_slice(&epoch.to_le_bytes());
    out.extend_from_slice(&(acked + 1).to_le_bytes());
    out.extend_from_slice(&acked.to_le_bytes());
    out.extend_from_slice(&20u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    let c = crc32c::crc32c(&out);
    out.extend_from_slice(&c.to_le_bytes());
    out
}

#[test]
fn payload_bytes_cannot_forge_acked_evidence() {
    let options = Options { segment_bytes: 64 << 10, ..common::small_options() };
    let sim = SimStorage::new(9);
    let (log, _) = open(&sim, options.clone(), 0).unwrap();
    for l in 1..=10 {
        log.append(payload(l)).unwrap();
    }
    // Record 11's group starts at block 11 (one block per group above); its
    // payload puts a fake header exactly at block 12.
    let mut p = vec![0u8; 4096 - 64 - 16];
    p.extend(fake_group_header(1, 1, 1_000_000));
    p.extend(vec![0u8; 100]);
    sim.crash_after_writes(1);
    assert!(log.append(p).is_err()); // written, never synced, never acknowledged
    drop(log);
    let image = sim.crash_with(CrashMode::KeepAllPending);
    // A torn first sector of record 11.
    image.corrupt(segment_path(1), 11 * 4096 + 64 + 30, 0xff).unwrap();
    let (_, replayed) = open(&image, options, 0).unwrap();
    assert_eq!(check_prefix(&replayed, 0), 10);
}
