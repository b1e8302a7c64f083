//! Stable-toolchain replay of the `larder_space::fuzzing` entry points:
//! the extent decoder and the rebuild never panic on arbitrary bytes, and
//! accept exactly the well-formed inputs they should.

#![allow(clippy::unwrap_used)]

use std::panic::{catch_unwind, AssertUnwindSafe};

use larder_space::{fuzzing, Extent};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn no_panic(name: &str, f: fn(&[u8]) -> bool, data: &[u8]) -> bool {
    match catch_unwind(AssertUnwindSafe(|| f(data))) {
        Ok(accepted) => accepted,
        Err(_) => panic!("{name} panicked on {}", data.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

/// A byte string of one of a few shapes: random, small fields, or
/// block-aligned fields.
fn input(rng: &mut StdRng) -> Vec<u8> {
    let extents = rng.gen_range(0..6);
    let mut out = Vec::new();
    for _ in 0..extents {
        let e = match rng.gen_range(0..3) {
            0 => Extent { container: rng.gen(), offset: rng.gen(), len: rng.gen() },
            1 => Extent {
                container: rng.gen_range(0..3),
                offset: rng.gen_range(0..70_000),
                len: rng.gen_range(0..70_000),
            },
            _ => Extent {
                container: rng.gen_range(0..3),
                offset: rng.gen_range(0..17) * 4096,
                len: rng.gen_range(0..5) * 4096,
            },
        };
        out.extend_from_slice(&e.encode());
    }
    if rng.gen_bool(0.2) {
        out.push(rng.gen());
    }
    out
}

#[test]
fn extent_decoder_never_panics() {
    let mut rng = StdRng::seed_from_u64(1);
    let mut accepted = 0;
    for _ in 0..20_000 {
        let mut data = input(&mut rng);
        data.truncate(rng.gen_range(0..30));
        accepted += u32::from(no_panic("extent", fuzzing::extent, &data));
    }
    assert!(accepted > 100, "only {accepted} accepted: the inputs miss the valid shapes");
    assert!(fuzzing::extent(&Extent { container: 1, offset: 4096, len: 8192 }.encode()));
    assert!(!fuzzing::extent(&[0; 24]));
}

#[test]
fn rebuild_never_panics() {
    let mut rng = StdRng::seed_from_u64(2);
    let mut accepted = 0;
    for _ in 0..500 {
        let data = input(&mut rng);
        accepted += u32::from(no_panic("rebuild", fuzzing::rebuild, &data));
    }
    assert!(accepted > 50, "only {accepted} accepted");
}
