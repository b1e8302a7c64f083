//! A descriptor frame (the server's answer to a heap attach, on the
//! socket): arbitrary bytes must be accepted or refused, never panic; an
//! accepted frame re-encodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = larder_protocol::fuzzing::descriptor_frame(data);
});
