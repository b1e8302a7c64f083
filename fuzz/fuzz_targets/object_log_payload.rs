//! An intent-log record's payload (a batch or an ingest marker): arbitrary
//! bytes must be accepted or refused, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = larder_object::meta::fuzzing::log_payload(data);
});
