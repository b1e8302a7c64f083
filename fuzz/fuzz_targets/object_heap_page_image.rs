//! A heap page image record: arbitrary bytes must be accepted or refused, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = larder_object::meta::fuzzing::heap_page_image(data);
});
