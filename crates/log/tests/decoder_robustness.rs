//! The log's decoders never panic on arbitrary bytes. How: a seeded loop
//! feeds random buffers, and valid segments, groups and headers with random
//! bit flips, truncations and overwritten ranges, to the `fuzzing` entry
//! points (segment header, group, and a whole segment opened by recovery).
#![allow(clippy::unwrap_used)]

mod common;

use common::{open, payload, segment_path, small_options};
use larder_io::SimStorage;
use larder_log::fuzzing;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn valid_segment() -> Vec<u8> {
    let sim = SimStorage::new(51);
    let (log, _) = open(&sim, small_options(), 0).unwrap();
    for lsn in 1..=3 {
        log.append_buffered(payload(lsn)).unwrap();
    }
    log.append(payload(4)).unwrap();
    log.append(payload(5)).unwrap();
    log.close().unwrap();
    sim.read_durable(segment_path(1)).unwrap()
}

fn mutate(rng: &mut StdRng, base: &[u8]) -> Vec<u8> {
    let mut b = base.to_vec();
    match rng.gen_range(0..4) {
        0 => {
            for _ in 0..rng.gen_range(1..8) {
                let i = rng.gen_range(0..b.len());
                b[i] ^= 1 << rng.gen_range(0..8);
            }
        }
        1 => b.truncate(rng.gen_range(0..b.len())),
        2 => {
            let start = rng.gen_range(0..b.len());
            let end = (start + rng.gen_range(1..600)).min(b.len());
            rng.fill(&mut b[start..end]);
        }
        _ => {
            // A plausible header with a random tail.
            let keep = rng.gen_range(0..b.len().min(200));
            let mut tail = vec![0u8; rng.gen_range(0..9000)];
            rng.fill(&mut tail[..]);
            b.truncate(keep);
            b.extend(tail);
        }
    }
    b
}

#[test]
fn valid_inputs_are_accepted() {
    let seg = valid_segment();
    assert!(fuzzing::segment_header(&seg));
    assert!(fuzzing::segment_file(&seg));
    // The first group (3 buffered records) starts at block 1.
    assert!(fuzzing::group(&seg[4096..8192]));
}

#[test]
fn random_and_mutated_inputs_never_panic() {
    let seg = valid_segment();
    let mut rng = StdRng::seed_from_u64(52);
    let mut accepted = 0;
    for _ in 0..3000 {
        let mut random = vec![0u8; rng.gen_range(0..300)];
        rng.fill(&mut random[..]);
        fuzzing::segment_header(&random);
        fuzzing::group(&random);

        let m = mutate(&mut rng, &seg);
        fuzzing::segment_header(&m);
        if fuzzing::segment_file(&m) {
            accepted += 1;
        }
        let g = mutate(&mut rng, &seg[4096..8192]);
        fuzzing::group(&g);
    }
    // Damage past the header mostly ends the log early rather than failing.
    assert!(accepted > 0);
}
