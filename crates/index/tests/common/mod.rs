//! Shared helpers for the index tests: a BTreeMap model and option presets.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use larder_index::{CounterOperator, Options};

/// Small options so a few dozen writes flush and merge.
pub fn tiny_options(background: bool) -> Options {
    Options {
        memtable_size_bytes: 4096,
        max_immutable_memtables: 2,
        block_size_bytes: 256,
        block_cache_bytes: 64 << 10,
        metadata_cache_bytes: 16 << 10,
        max_open_runs: 4,
        merge_fanout: 2,
        l0_slowdown_runs: 3,
        l0_stop_runs: 6,
        compaction_threads: 2,
        background_threads: background,
        merge_operators: vec![Arc::new(CounterOperator)],
        ..Options::default()
    }
}

/// The reference: the state the index must show.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    pub map: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Model {
    pub fn put(&mut self, k: &[u8], v: &[u8]) {
        self.map.insert(k.to_vec(), v.to_vec());
    }

    pub fn delete(&mut self, k: &[u8]) {
        self.map.remove(k);
    }

    pub fn delete_range(&mut self, a: &[u8], b: &[u8]) {
        if a >= b {
            return;
        }
        let keys: Vec<_> =
            self.map.range::<[u8], _>((Bound::Included(a), Bound::Excluded(b))).map(|(k, _)| k.clone()).collect();
        for k in keys {
            self.map.remove(&k);
        }
    }

    /// Counter merge, as CounterOperator does it.
    pub fn merge(&mut self, k: &[u8], delta: i64) {
        let cur = self.map.get(k).map(|v| i64::from_le_bytes(v.as_slice().try_into().unwrap())).unwrap_or(0);
        let n = cur.wrapping_add(delta);
        if n == 0 {
            self.map.remove(k);
        } else {
            self.map.insert(k.to_vec(), n.to_le_bytes().to_vec());
        }
    }

    pub fn range(&self, start: Bound<&[u8]>, end: Bound<&[u8]>, forward: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
        if let (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) = (start, end) {
            if a > b || (a == b && !(matches!(start, Bound::Included(_)) && matches!(end, Bound::Included(_)))) {
                return Vec::new();
            }
        }
        let it = self.map.range::<[u8], _>((start, end)).map(|(k, v)| (k.clone(), v.clone()));
        if forward {
            it.collect()
        } else {
            let mut v: Vec<_> = it.collect();
            v.reverse();
            v
        }
    }

    pub fn prefix(&self, p: &[u8], forward: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut v: Vec<_> =
            self.map.iter().filter(|(k, _)| k.starts_with(p)).map(|(k, v)| (k.clone(), v.clone())).collect();
        if !forward {
            v.reverse();
        }
        v
    }
}
