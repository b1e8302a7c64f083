//! Crash consistency of large puts into never-written container space
//! (`space.unwritten_min_bytes`): their extents are taken past a growing
//! container's filled part by `fallocate`, with no zeros written first,
//! and the commit syncs the container for the data and the extents'
//! metadata. A workload of such puts, small puts and deletes (whose space
//! is then reused) is crashed after every write, in every crash mode.
//! After reopen: the bucket is the state after some prefix of the
//! operations that includes every acknowledged one (every acknowledged
//! value reads back whole, no unacknowledged one is half there), fsck is
//! clean, and the store goes on.
#![allow(clippy::unwrap_used)]

mod common;

use common::recorded::{self, State};
use larder_io::SimStorage;
use larder_kv::{Durability, Kv, KvError};

/// Operation `i`: large puts of two sizes (one not a whole number of
/// blocks), a small put, and a delete of an earlier large one.
fn apply(kv: &Kv, i: u64, model: &mut State) -> Result<(), KvError> {
    let key = |n: u64| format!("k{}", n % 5).into_bytes();
    let value = |n: u64, len: usize| (0..len).map(|j| (n as usize * 31 + j / 4096) as u8).collect::<Vec<u8>>();
    let (k, v) = match i % 4 {
        0 => (key(i), value(i, 256 << 10)),
        1 => (key(i), value(i, (300 << 10) + 123)),
        2 => (key(i), value(i, 100)),
        _ => {
            model.remove(&key(i + 2));
            kv.delete("b", key(i + 2), Durability::Durable)?;
            return Ok(());
        }
    };
    model.insert(k.clone(), v.clone());
    kv.put("b", k, &v, Durability::Durable)?;
    Ok(())
}

const OPS: usize = 14;

fn workload(sim: &SimStorage, history: &mut Vec<State>) -> usize {
    recorded::run(sim, OPS, history, |kv, i, model| apply(kv, i as u64, model))
}

fn check(image: &SimStorage, history: &[State], acked: usize, what: &str) {
    let Some((kv, got)) = recorded::reopen_as_prefix(image, history, acked, what) else { return };
    let report = larder_fsck::check(kv.store(), &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{what}: fsck: {report}");
    // The store goes on: another large put, then everything deleted
    // leaves no space referenced.
    let mut model = got.clone();
    apply(&kv, 0, &mut model).unwrap();
    for k in model.keys() {
        assert!(kv.delete("b", k, Durability::Durable).unwrap(), "{what}: delete {k:?}");
    }
    assert!(kv.store().used_extents().unwrap().is_empty(), "{what}: space still referenced");
}

#[test]
fn a_crash_at_any_write_of_large_puts_into_unwritten_space_keeps_every_acknowledged_one() {
    let probe = SimStorage::new(1);
    let mut history = Vec::new();
    assert_eq!(workload(&probe, &mut history), OPS);
    let writes = probe.counters().writes;
    // The workload takes the path under test: count its unfilled
    // allocations on a run of its own.
    let sim = SimStorage::new(1);
    let kv = Kv::create_with(std::sync::Arc::new(sim.clone()), std::path::Path::new(common::DIR), common::options());
    let kv = kv.unwrap();
    kv.create_bucket("b").unwrap();
    let mut model = State::new();
    for i in 0..OPS as u64 {
        apply(&kv, i, &mut model).unwrap();
    }
    let unfilled = kv.store().space().stats().unfilled_allocations;
    assert!(unfilled >= 4, "only {unfilled} large puts took unwritten space");
    drop(kv);
    recorded::crash_after_each_write(0..writes, workload, check);
}
