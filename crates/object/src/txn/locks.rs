//! Per-object locks for transactions.
//!
//! A fixed table of stripes: object `id` maps to stripe `id % STRIPES`. A
//! transaction locks the stripes of every object it changes, each once, in
//! stripe order, so two transactions never wait on each other in a cycle
//! (DESIGN.md asks for locks taken in a fixed order; stripe order is one).
//! Two objects sharing a stripe serialize needlessly but correctly.
//!
//! Each stripe remembers the LSN of the last transaction committed under
//! it. A buffered transaction's writes reach the index only when its log
//! group is written, so the next transaction on the same stripe first
//! makes that LSN durable: it must see what it serializes after.

use parking_lot::{Mutex, MutexGuard};

/// Stripes in the table.
const STRIPES: usize = 1024;

/// The lock table.
pub(crate) struct LockTable {
    stripes: Vec<Mutex<u64>>,
}

/// Held stripes; each holds the LSN of the last transaction under it.
pub(crate) struct Held<'a> {
    guards: Vec<MutexGuard<'a, u64>>,
}

impl Held<'_> {
    /// The newest LSN committed under any held stripe.
    pub(crate) fn last_lsn(&self) -> u64 {
        self.guards.iter().map(|g| **g).max().unwrap_or(0)
    }

    /// Records that a transaction under these stripes committed at `lsn`.
    pub(crate) fn set_last_lsn(&mut self, lsn: u64) {
        for g in &mut self.guards {
            **g = lsn;
        }
    }
}

impl LockTable {
    pub(crate) fn new() -> Self {
        LockTable { stripes: (0..STRIPES).map(|_| Mutex::new(0)).collect() }
    }

    /// Locks every stripe the objects map to, in stripe order, until the
    /// returned value drops.
    pub(crate) fn lock(&self, objects: &[u64]) -> Held<'_> {
        let mut stripes: Vec<usize> = objects.iter().map(|id| (id % STRIPES as u64) as usize).collect();
        stripes.sort_unstable();
        stripes.dedup();
        Held { guards: stripes.into_iter().filter_map(|s| self.stripes.get(s)).map(|m| m.lock()).collect() }
    }
}
