//! A durable put allocates little: the allocations one `Kv::put` of a new
//! 1 KiB value makes on the calling thread (alone, it leads its own log
//! group), counted by this binary's allocator, stay at what its path needs
//! (the key's parse, the plan, the transaction's batch and lock requests,
//! the onode's encoding, the log record, the memtable's nodes, the cache's
//! write-through). A durable put's I/O is the ceiling's, one write and one
//! sync, so its distance from that ceiling is CPU, and allocation is a
//! share of it that a change can grow unnoticed: this test notices.
#![allow(clippy::unwrap_used)]

mod common;

use larder_io::SimStorage;
use larder_kv::Durability;

#[global_allocator]
static ALLOCATOR: larder_testkit::CountingAllocator = larder_testkit::CountingAllocator;

/// Most allocations the median durable put of a new key may make.
const MOST: u64 = MEASURED + 4;

/// The median when this test was written (after a8d3f71: the put no longer
/// looks its name up twice; the values inline, on the simulated storage).
const MEASURED: u64 = 69;

#[test]
fn a_durable_put_of_a_new_key_allocates_at_most_a_few_dozen_times() {
    let sim = SimStorage::new(33);
    let kv = common::create(&sim);
    kv.create_bucket("b").unwrap();
    let value = vec![7u8; 1024];
    let keys: Vec<Vec<u8>> = (0..2_000).map(|i| format!("key{i:06}").into_bytes()).collect();
    let mut per_put = Vec::with_capacity(keys.len());
    for key in &keys {
        let before = larder_testkit::allocation_calls();
        kv.put("b", key, &value, Durability::Durable).unwrap();
        per_put.push(larder_testkit::allocation_calls() - before);
    }
    per_put.sort_unstable();
    let median = per_put[per_put.len() / 2];
    eprintln!(
        "allocations per durable put: median {median}, least {}, most {}",
        per_put[0],
        per_put[per_put.len() - 1]
    );
    assert!(median <= MOST, "the median durable put allocated {median} times (at most {MOST} expected)");
    // The values are there: the puts did their work.
    assert_eq!(kv.get("b", &keys[1_234]).unwrap().as_deref(), Some(&value[..]));
}
