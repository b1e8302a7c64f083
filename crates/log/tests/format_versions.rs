//! A segment written by a newer format version, or using an incompatible
//! feature this build does not know, is refused with an error naming the
//! file. How: write a log, then patch its first segment's header in the
//! simulated storage (recomputing the header crc where needed) and reopen.
#![allow(clippy::unwrap_used)]

mod common;

use common::{open, payload, segment_path, small_options};
use larder_io::SimStorage;
use larder_log::LogError;

fn patched(edit: impl Fn(&mut Vec<u8>)) -> SimStorage {
    let sim = SimStorage::new(41);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    log.append(payload(1)).unwrap();
    log.close().unwrap();
    let path = segment_path(1);
    let old = sim.read_durable(&path).unwrap();
    let mut new = old.clone();
    edit(&mut new);
    for (i, (a, b)) in old.iter().zip(&new).enumerate() {
        if a != b {
            sim.corrupt(&path, i as u64, a ^ b).unwrap();
        }
    }
    sim
}

fn reseal(b: &mut [u8]) {
    let c = crc32c::crc32c(&b[..76]);
    b[76..80].copy_from_slice(&c.to_le_bytes());
}

#[test]
fn newer_version_is_refused_naming_the_file() {
    let sim = patched(|b| {
        b[8] = 2;
        reseal(b);
    });
    let err = open(&sim, small_options(), 0).unwrap_err();
    assert!(matches!(err, LogError::NewerVersion { found: 2, supported: 1, .. }), "{err}");
    assert!(err.to_string().contains("0000000000000001.seg") && err.to_string().contains("upgrade"), "{err}");
}

#[test]
fn a_damaged_version_byte_is_damage_not_a_newer_version() {
    // The checksum is checked before the version: a flipped version byte
    // fails it, so the header is damaged (and here the segment holds the
    // log's only records, so open refuses naming it as corrupt).
    let sim = patched(|b| b[8] = 7);
    let err = open(&sim, small_options(), 0).unwrap_err();
    assert!(!matches!(err, LogError::NewerVersion { .. }), "{err}");
    assert!(err.to_string().contains("0000000000000001.seg"), "{err}");
}

#[test]
fn unknown_incompatible_feature_is_refused_naming_the_file() {
    let sim = patched(|b| {
        b[24] = 0x10;
        reseal(b);
    });
    let err = open(&sim, small_options(), 0).unwrap_err();
    assert!(matches!(err, LogError::UnknownFeature { flags: 0x10, .. }), "{err}");
    assert!(err.to_string().contains("0000000000000001.seg"), "{err}");
}

#[test]
fn unknown_compatible_feature_is_ignored() {
    let sim = patched(|b| {
        b[16] = 0x10;
        reseal(b);
    });
    let (_, replayed) = open(&sim, small_options(), 0).unwrap();
    assert_eq!(replayed.len(), 1);
}
