//! Locks for transactions: per object (shared or exclusive) and per name.
//!
//! A fixed table of stripes, each a reader-writer lock. Object `id` maps
//! to a stripe by its id, a name (directory id, name) by a hash of both.
//! A transaction takes every stripe it needs once, in stripe order, in the
//! strongest mode any of its requests asks for there, so two transactions
//! never wait on each other in a cycle (DESIGN.md asks for locks taken in
//! a fixed order; stripe order is one). Two requests sharing a stripe
//! serialize needlessly but correctly.
//!
//! Why shared locks and name locks: creating a name in a directory changes
//! only that name's dentry and the directory's entry count, which is
//! changed blindly (a merge operand), so creates of different names in one
//! directory need not wait for each other's log sync: each holds the
//! directory shared and its name exclusive. Removing the directory takes it
//! exclusive, and so waits for every create in it.
//!
//! A committed transaction's batch is in the index before its locks are
//! released (the store applies batches at append), so the next holder of a
//! stripe sees what it serializes after without waiting for a log sync.

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Stripes in the table.
const STRIPES: usize = 1024;

/// One lock a transaction asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockRequest {
    /// The object, exclusively: its onode, data and maps may change.
    Exclusive(u64),
    /// The object, shared: it may be read, and a directory's entry count
    /// changed blindly, while other shared holders do the same.
    Shared(u64),
    /// The name `name` in directory `dir`, exclusively: its dentry may be
    /// created, replaced or removed.
    Name(u64, Vec<u8>),
}

impl LockRequest {
    fn stripe(&self) -> usize {
        let h = match self {
            LockRequest::Exclusive(id) | LockRequest::Shared(id) => *id,
            LockRequest::Name(dir, name) => xxh3_64_with_seed(name, *dir),
        };
        (h % STRIPES as u64) as usize
    }

    fn exclusive(&self) -> bool {
        !matches!(self, LockRequest::Shared(_))
    }
}

struct Stripe {
    lock: RwLock<()>,
}

/// The lock table.
pub(crate) struct LockTable {
    stripes: Vec<Stripe>,
}

enum Guard<'a> {
    Shared(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
}

/// Held stripes, released when this drops.
pub(crate) struct Held<'a> {
    // Held for their drop, which releases the stripes.
    _guards: Vec<Guard<'a>>,
}

impl Held<'_> {
    /// Whether a stripe is held exclusively (for tests of the modes).
    #[cfg(test)]
    fn modes(&self) -> Vec<bool> {
        self._guards.iter().map(|g| matches!(g, Guard::Exclusive(_))).collect()
    }
}

impl LockTable {
    pub(crate) fn new() -> Self {
        LockTable { stripes: (0..STRIPES).map(|_| Stripe { lock: RwLock::new(()) }).collect() }
    }

    /// Like [`LockTable::lock`], but gives up (returning `None`, holding
    /// nothing) if any stripe is not free at once.
    pub(crate) fn try_lock(&self, requests: &[LockRequest]) -> Option<Held<'_>> {
        let mut guards = Vec::new();
        for (i, exclusive) in Self::wanted(requests) {
            let s = self.stripes.get(i)?;
            let g = if exclusive { Guard::Exclusive(s.lock.try_write()?) } else { Guard::Shared(s.lock.try_read()?) };
            guards.push(g);
        }
        Some(Held { _guards: guards })
    }

    /// The stripes `requests` need, in stripe order, each with whether it is
    /// needed exclusively.
    fn wanted(requests: &[LockRequest]) -> Vec<(usize, bool)> {
        let mut wanted: Vec<(usize, bool)> = requests.iter().map(|r| (r.stripe(), r.exclusive())).collect();
        // Exclusive sorts after shared for the same stripe, so keeping the
        // last of each stripe keeps the strongest mode.
        wanted.sort_unstable();
        wanted.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                earlier.1 |= later.1;
                true
            } else {
                false
            }
        });
        wanted
    }

    /// Takes every stripe the requests map to, in stripe order, each in
    /// the strongest mode asked of it, until the returned value drops.
    pub(crate) fn lock(&self, requests: &[LockRequest]) -> Held<'_> {
        let guards = Self::wanted(requests)
            .into_iter()
            .filter_map(|(i, exclusive)| self.stripes.get(i).map(|s| (s, exclusive)))
            .map(
                |(s, exclusive)| {
                    if exclusive {
                        Guard::Exclusive(s.lock.write())
                    } else {
                        Guard::Shared(s.lock.read())
                    }
                },
            )
            .collect();
        Held { _guards: guards }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_strongest_mode_of_a_stripe_wins() {
        let t = LockTable::new();
        let held = t.lock(&[LockRequest::Shared(5), LockRequest::Exclusive(5), LockRequest::Shared(6)]);
        assert_eq!(held.modes(), vec![true, false]);
        drop(held);
        let held = t.lock(&[LockRequest::Exclusive(7), LockRequest::Shared(7)]);
        assert_eq!(held.modes(), vec![true]);
    }

    #[test]
    fn shared_holders_coexist_and_exclusive_waits_for_them() {
        let t = LockTable::new();
        let a = t.lock(&[LockRequest::Shared(9)]);
        let b = t.lock(&[LockRequest::Shared(9)]);
        assert!(t.stripes[9].lock.try_write().is_none());
        drop(a);
        drop(b);
        assert!(t.stripes[9].lock.try_write().is_some());
    }
}
