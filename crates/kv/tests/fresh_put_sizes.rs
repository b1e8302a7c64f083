//! A fresh key's durable put at every size around the inline limit and
//! the block size (inline onode written once with its bytes, or extents
//! after a create): the values read back, fsck finds the onodes, dentries,
//! entry counts and orphan records consistent, and so it stays after a
//! crash at any write of the workload (the state then the state after some
//! prefix of the puts that includes every acknowledged one) and after a
//! put that fails part way.
#![allow(clippy::unwrap_used)]

mod common;

use common::recorded::{self, State};
use larder_io::sim::{SimFault, SimOp};
use larder_io::SimStorage;
use larder_kv::{Durability, Kv, KvError};
use larder_object::ObjectError;

/// Sizes on both sides of the inline limit (2048 in `common::options`)
/// and of a block.
const SIZES: [usize; 10] = [0, 1, 2047, 2048, 2049, 4095, 4096, 4097, 3 * 4096 + 5, 9000];

fn value(len: usize, salt: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + len + salt) as u8).collect()
}

/// The puts of the workload, each with its key and value: a fresh key in
/// the bucket's top level, one in a new level, and one replacing an empty
/// level of its name (left by a delete).
fn puts() -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    for (n, &len) in SIZES.iter().enumerate() {
        out.push((format!("top{len}").into_bytes(), Some(value(len, n))));
        out.push((format!("level{len}/k").into_bytes(), Some(value(len, n + 1))));
        out.push((format!("gives{len}/x").into_bytes(), Some(b"x".to_vec())));
        out.push((format!("gives{len}/x").into_bytes(), None));
        out.push((format!("gives{len}").into_bytes(), Some(value(len, n + 2))));
    }
    out
}

/// Runs the workload; `history[i]` is the state after `i` operations.
/// Returns how many were acknowledged.
fn workload(sim: &SimStorage, history: &mut Vec<State>) -> usize {
    let puts = puts();
    recorded::run(sim, puts.len(), history, |kv, i, model| {
        let (key, value) = &puts[i];
        match value {
            Some(v) => {
                model.insert(key.clone(), v.clone());
                kv.put("b", key, v, Durability::Durable)
            }
            None => {
                model.remove(key);
                kv.delete("b", key, Durability::Durable).map(|_| ())
            }
        }
    })
}

fn fsck_clean(kv: &Kv, what: &str) {
    let report = larder_fsck::check(kv.store(), &mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{what}: {report}");
}

fn check(image: &SimStorage, history: &[State], acked: usize, what: &str) {
    if let Some((kv, _)) = recorded::reopen_as_prefix(image, history, acked, what) {
        fsck_clean(&kv, what);
    }
}

#[test]
fn fresh_puts_of_every_size_read_back_and_check_clean() {
    let sim = SimStorage::new(3);
    let mut history = Vec::new();
    let acked = workload(&sim, &mut history);
    assert_eq!(acked, puts().len());
    let kv = common::open(&sim);
    assert_eq!(&common::bucket_state(&kv, "b"), history.last().unwrap());
    fsck_clean(&kv, "after the workload");
}

#[test]
fn a_crash_at_any_write_of_fresh_puts_keeps_a_prefix_and_checks_clean() {
    let probe = SimStorage::new(4);
    assert_eq!(workload(&probe, &mut Vec::new()), puts().len());
    recorded::crash_after_each_write(0..probe.counters().writes, workload, check);
}

#[test]
fn a_fresh_put_failing_part_way_changes_nothing() {
    for len in SIZES {
        for op in [SimOp::Write, SimOp::Allocate, SimOp::SyncData] {
            let sim = SimStorage::new(5);
            let kv = common::create(&sim);
            kv.create_bucket("b").unwrap();
            kv.put("b", "before", b"kept", Durability::Durable).unwrap();
            let what = format!("{len} bytes, {op:?} fails");
            sim.fail_nth(op, 0, SimFault::NoSpace);
            let result = kv.put("b", "fresh", &value(len, 0), Durability::Durable);
            sim.clear_faults();
            // A failed data write (not a failed sync, which poisons the store).
            if op == SimOp::Write && matches!(result, Err(KvError::Object(ObjectError::Space(_)))) {
                // The store goes on: the failed put left nothing behind.
                assert_eq!(kv.get("b", "fresh").unwrap(), None, "{what}");
                fsck_clean(&kv, &format!("{what}, before a reopen"));
                kv.put("b", "fresh", &value(len, 0), Durability::Durable).unwrap();
                kv.delete("b", "fresh", Durability::Durable).unwrap();
                assert!(kv.store().used_extents().unwrap().is_empty(), "{what}: space still referenced");
                kv.put("b", "fresh", &value(len, 0), Durability::Durable).unwrap();
            }
            drop(kv);
            let kv = common::open(&sim);
            let got = common::bucket_state(&kv, "b");
            match result {
                Ok(()) => assert_eq!(got.get(&b"fresh"[..]), Some(&value(len, 0)), "{what}"),
                Err(_) => assert!(
                    got.get(&b"fresh"[..]).is_none_or(|v| *v == value(len, 0)),
                    "{what}: a failed put left {:?}",
                    got.get(&b"fresh"[..]).map(Vec::len)
                ),
            }
            assert_eq!(got.get(&b"before"[..]), Some(&b"kept".to_vec()), "{what}");
            fsck_clean(&kv, &what);
        }
    }
}
