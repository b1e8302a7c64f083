//! The default metadata cache holds the Python benchmark's keys: 100,000
//! of 16 bytes with values of 100 (issue 23's gets bar is measured with
//! the default cache).
#![allow(clippy::unwrap_used)]

mod common;

use larder_io::SimStorage;
use larder_kv::Durability;

fn key(i: usize) -> String {
    format!("{:016x}", (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// The Python benchmark's keys (100,000 of 16 bytes, values of 100) in a
/// store with the default metadata cache: after one pass of gets, a second
/// is answered from the cache alone. The cache is sharded by a hash seeded
/// at random per process and each shard has its share of the budget, so a
/// shard that drew more than its share of keys evicts a few (the keys use
/// 97.5% of the budget); a tenth of a percent allows for that (a 48 MiB
/// cache misses 23%).
#[test]
fn the_default_cache_holds_a_hundred_thousand_small_keys() {
    const MANY: usize = 100_000;
    let sim = SimStorage::new(4);
    let kv = common::create(&sim);
    assert_eq!(common::options().store.meta_cache_bytes, larder_object::StoreOptions::default().meta_cache_bytes);
    kv.create_bucket("b").unwrap();
    for i in 0..MANY {
        kv.put("b", key(i), &[i as u8; 100], Durability::Buffered).unwrap();
    }
    let mut out = Vec::new();
    for i in 0..MANY {
        assert!(kv.get_into("b", key(i), &mut out).unwrap());
    }
    let missed = (0..MANY).filter(|&i| kv.get_cached_into("b", key(i), &mut out).unwrap() != Some(true)).count();
    assert!(missed <= MANY / 1000, "{missed} keys of {MANY} the cache no longer held");
}
