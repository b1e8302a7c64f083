//! The steps a writer (`larder crash-writer`, `larder serve-writer`)
//! promises: `begin THREAD STEP EFFECT...` before a step, `ack THREAD STEP`
//! once it is durable.

use std::collections::{BTreeMap, BTreeSet};

/// A step of a writer: its effects, in its own words.
pub type Effects = Vec<String>;

/// Steps acknowledged, in order per thread, and each thread's step begun
/// and not acknowledged.
pub struct Steps {
    pub acked: Vec<(u64, Effects)>,
    pub pending: Vec<(u64, Effects)>,
}

/// Reads a writer's lines into the steps they promise.
pub fn steps(lines: &[String]) -> Steps {
    let mut begun: BTreeMap<(u64, u64), Effects> = BTreeMap::new();
    let mut acked_ids = BTreeSet::new();
    for l in lines {
        let mut words = l.split(' ');
        let (kind, t, step) = (words.next().unwrap(), words.next().unwrap(), words.next().unwrap());
        let id = (t.parse().unwrap(), step.parse().unwrap());
        match kind {
            "begin" => assert!(begun.insert(id, words.map(str::to_string).collect()).is_none(), "{l}"),
            "ack" => assert!(begun.contains_key(&id) && acked_ids.insert(id), "ack without begin: {l}"),
            other => panic!("unexpected line {other}: {l}"),
        }
    }
    let (mut acked, mut pending) = (Vec::new(), Vec::new());
    let mut open_threads = BTreeSet::new();
    for (id, effects) in begun {
        if acked_ids.contains(&id) {
            assert!(!open_threads.contains(&id.0), "thread {} began a step before its last was acknowledged", id.0);
            acked.push((id.0, effects));
        } else {
            assert!(open_threads.insert(id.0), "thread {} has two steps in flight", id.0);
            pending.push((id.0, effects));
        }
    }
    Steps { acked, pending }
}
