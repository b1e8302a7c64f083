//! Times encode + decode of two messages in a plain loop (no benchmark
//! harness): a `KvGet` of a 16-byte key, and a `Write` of 16 KiB inline.
//! Run with `cargo run --release -p larder-protocol --example codec_timing`.

use std::hint::black_box;
use std::time::Instant;

use larder_protocol::codec::{decode_request, encode_request};
use larder_protocol::message::{Payload, Request};

/// Nanoseconds per encode + decode of `request`, best of five rounds of
/// `iterations`.
fn time(request: &Request, iterations: u32) -> (f64, usize) {
    let mut out = Vec::with_capacity(32 << 10);
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        for id in 0..iterations {
            out.clear();
            encode_request(u64::from(id), black_box(request), &mut out);
            match decode_request(black_box(&out)) {
                Ok(decoded) => {
                    black_box(decoded);
                }
                Err(error) => panic!("{request} did not decode: {error}"),
            }
        }
        best = best.min(start.elapsed().as_nanos() as f64 / f64::from(iterations));
    }
    (best, out.len())
}

fn main() {
    let get = Request::KvGet { bucket: b"photos".to_vec(), key: b"2026/11/beach.jp".to_vec(), into: None };
    let write = Request::Write { handle: 3, offset: 1 << 20, data: Payload::Inline(vec![0x5a; 16 << 10]) };
    for (what, request, iterations) in
        [("KvGet, 16-byte key", &get, 1_000_000), ("Write, 16 KiB inline", &write, 100_000)]
    {
        let (nanoseconds, bytes) = time(request, iterations);
        println!("{what}: {bytes} bytes, {nanoseconds:.0} ns per encode + decode");
    }
}
