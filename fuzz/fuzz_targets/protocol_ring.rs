//! A server ring under a hostile client: arbitrary bytes over a request
//! ring's control words and slots (and a completion ring's), then receive
//! until empty or a violation. Must end, never panic, never read outside
//! the ring.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = larder_protocol::fuzzing::ring(data);
});
