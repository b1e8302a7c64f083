//! A log's clean-close marker: arbitrary bytes must be accepted or refused, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = larder_log::fuzzing::clean_marker(data);
});
