//! A locate table (larder-locate's format in a heap object): arbitrary
//! bytes searched for a name taken from the input must be answered or
//! refused, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte says how long the name is; the name follows, then the table.
    let Some((&len, rest)) = data.split_first() else { return };
    let len = usize::from(len % 32).min(rest.len());
    let (name, table) = rest.split_at(len);
    let _ = larder_locate::table::search(table, name, |_| {});
});
