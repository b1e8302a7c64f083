//! Crash tests against a model: a workload run on the simulated storage
//! records the bucket's state after each operation, and a crash image
//! must reopen as the state after some prefix of the operations that
//! includes every acknowledged one.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use larder_io::sim::CrashMode;
use larder_io::SimStorage;
use larder_kv::{Kv, KvError};
use larder_object::ObjectError;

use super::{bucket_state, options, DIR};

/// A bucket's contents: each key and its value.
pub type State = BTreeMap<Vec<u8>, Vec<u8>>;

/// Creates a store with the bucket `b` on `sim` and runs operations
/// `0..count` through `op`, which applies operation `i` to the store and
/// its effect to the model first (an unacknowledged operation may
/// survive). `history[i]` is the model after `i` operations; stops at the
/// first refused one. Returns how many were acknowledged.
pub fn run(
    sim: &SimStorage,
    count: usize,
    history: &mut Vec<State>,
    mut op: impl FnMut(&Kv, usize, &mut State) -> Result<(), KvError>,
) -> usize {
    let mut model = State::new();
    history.push(model.clone());
    let Ok(kv) = Kv::create_with(Arc::new(sim.clone()), Path::new(DIR), options()) else {
        return 0;
    };
    if kv.create_bucket("b").is_err() {
        return 0;
    }
    let mut acked = 0;
    for i in 0..count {
        let done = op(&kv, i, &mut model);
        history.push(model.clone());
        if done.is_err() {
            break;
        }
        acked = i + 1;
    }
    acked
}

/// Reopens `image` and checks that its bucket `b` holds the state after
/// some prefix of `history` at least `acked` long. None when the store or
/// its bucket never became durable (allowed only with nothing
/// acknowledged); else the store and the state it holds.
pub fn reopen_as_prefix(image: &SimStorage, history: &[State], acked: usize, what: &str) -> Option<(Kv, State)> {
    let kv = match Kv::open_with(Arc::new(image.clone()), Path::new(DIR), options()) {
        Ok(kv) => kv,
        Err(KvError::Object(ObjectError::NotAStore { .. })) if acked == 0 => return None,
        Err(e) => panic!("{what}: reopen failed: {e}"),
    };
    if kv.buckets().unwrap().is_empty() {
        assert_eq!(acked, 0, "{what}: the bucket is lost");
        return None;
    }
    let got = bucket_state(&kv, "b");
    let m = (0..history.len()).rev().find(|&i| history[i] == got);
    let m = m.unwrap_or_else(|| {
        let near = history.iter().position(|h| h.keys().eq(got.keys()));
        let diff: Vec<_> = near
            .map(|n| {
                got.iter()
                    .filter(|(k, v)| history[n].get(*k) != Some(v))
                    .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.len(), v.first().copied()))
                    .collect()
            })
            .unwrap_or_default();
        panic!("{what}: state is no prefix of the operations: {:?}, nearest {near:?} differs in {diff:?}", got.keys())
    });
    assert!(m >= acked, "{what}: {m} operations survive, {acked} were acknowledged");
    Some((kv, got))
}

/// For each write count `k` of `points`, in every crash mode: runs
/// `workload` on a store crashed after its `k`th write and has `check`
/// judge the image with the history and the acknowledged count.
pub fn crash_after_each_write(
    points: impl IntoIterator<Item = u64>,
    workload: impl Fn(&SimStorage, &mut Vec<State>) -> usize,
    check: impl Fn(&SimStorage, &[State], usize, &str),
) {
    for k in points {
        for mode in [CrashMode::Random, CrashMode::DropAllPending, CrashMode::KeepAllPending] {
            let sim = SimStorage::new(k);
            sim.set_unordered_dir_ops(true);
            sim.crash_after_writes(k);
            let mut history = Vec::new();
            let acked = workload(&sim, &mut history);
            check(&sim.crash_with(mode), &history, acked, &format!("crash after write {k} ({mode:?})"));
        }
    }
}
