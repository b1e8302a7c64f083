//! Subtree leases in the cache (Aerie's directory leases over a subtree,
//! `LeaseTarget::Subtree`): one lease on a directory covers it and every
//! directory below it. While it holds, a directory the cache finds inside
//! the subtree (the top, or a directory looked up in one inside) takes
//! the subtree's lease as its own entry's instead of asking for one of its
//! own, so a walk or listing anywhere inside costs no lease request. Every
//! entry holding it is dropped with it when the server revokes it (the
//! watcher drops entries by slot and sequence), and it ends for all of them
//! at its term.

use std::time::Instant;

use larder_protocol::lease::LeaseArea;
use larder_protocol::message::{FileKind, LeaseGrant};

use super::{answer, lease_now, release_all, Cache, CachedPath, Lease, State};
use crate::connection::Connection;

impl Cache {
    /// Takes in a subtree lease on directory `top`, granted to a request
    /// sent at `sent`; whether it is valid.
    pub(crate) fn adopt_subtree(&self, connection: &Connection, top: u64, grant: LeaseGrant, sent: Instant) -> bool {
        if !self.enabled {
            return false;
        }
        let lease = Lease::of(grant, sent);
        let area = connection.region().leases();
        let mut state = self.state.lock();
        if !lease.valid(&area, lease_now()) {
            // Revoked before it got here: answered now, as the watcher would.
            answer(&area, lease.slot, lease.sequence);
            drop(state);
            connection.ring_all_workers();
            return false;
        }
        // Subtree leases that ran out are of no more use to anyone.
        let now = lease_now();
        let ended: Vec<u64> = state.subtrees.iter().filter(|(_, l)| l.expiry <= now).map(|(top, _)| *top).collect();
        for ended in ended {
            state.subtrees.remove(&ended);
            state.inside.retain(|_, inside_of| *inside_of != ended);
        }
        if let Some(old) = state.subtrees.insert(top, lease) {
            if (old.slot, old.sequence) != (lease.slot, lease.sequence) {
                answer(&area, old.slot, old.sequence);
            }
        }
        state.inside.insert(top, top);
        true
    }

    /// Puts the subtree lease over directory `ino`, if this client holds a
    /// valid one, on `ino`'s entry; whether it did.
    pub(super) fn borrow_subtree(&self, connection: &Connection, ino: u64) -> bool {
        let area = connection.region().leases();
        let mut state = self.state.lock();
        let Some(top) = state.inside.get(&ino).copied() else { return false };
        let Some(lease) = state.subtrees.get(&top).copied() else { return false };
        if !lease.valid(&area, lease_now()) {
            return false;
        }
        let dropped = state.install(&area, ino, lease);
        drop(state);
        release_all(connection, &dropped);
        true
    }

    /// Subtree leases the server revoked: forgotten with the directories
    /// found inside them, and answered. Whether there were any.
    pub(super) fn drop_revoked_subtrees(state: &mut State, area: &LeaseArea<'_>) -> bool {
        let revoked: Vec<(u64, Lease)> = state
            .subtrees
            .iter()
            .filter(|(_, lease)| area.revoked(lease.slot, lease.sequence))
            .map(|(top, lease)| (*top, *lease))
            .collect();
        for (top, lease) in &revoked {
            state.subtrees.remove(top);
            state.inside.retain(|_, inside_of| inside_of != top);
            answer(area, lease.slot, lease.sequence);
        }
        !revoked.is_empty()
    }
}

impl State {
    /// Records that `found`, just looked up in directory `dir`, lies in
    /// the subtree whose lease `dir`'s entry holds, if it is a directory
    /// and `dir`'s entry holds one.
    pub(super) fn note_inside(&mut self, dir: u64, found: CachedPath) {
        if found.kind != FileKind::Directory {
            return;
        }
        let Some(top) = self.inside.get(&dir).copied() else { return };
        let (Some(subtree), Some(entry)) = (self.subtrees.get(&top), self.files.get(&dir)) else { return };
        if (subtree.slot, subtree.sequence) == (entry.lease.slot, entry.lease.sequence) {
            self.inside.insert(found.ino, top);
        }
    }
}
