//! A server request message: arbitrary bytes must be accepted or refused,
//! never panic; a request that decodes must re-encode to the same bytes
//! and decode again to the same request.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = larder_protocol::codec::fuzzing::request(data);
});
