//! A set of heap arena records (each an 8-byte key, a 2-byte length and
//! the record) loaded as an arena: arbitrary bytes must be accepted or
//! refused, never panic; an accepted set must give a consistent arena.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = larder_heap::arena::fuzzing::records(data);
});
