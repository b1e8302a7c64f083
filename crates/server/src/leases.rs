//! Leases (docs/server.md, "Leases"): what the server lets clients cache,
//! and the revocation of it before another client's change.
//!
//! A client takes a lease on an object (its attributes, a file's bytes,
//! opens of it kept after close) or on the namespace (its path
//! resolutions). Each lease sits in a slot of the client's lease area with
//! a sequence number, and lasts one term from its grant or last renewal.
//!
//! Before a request that changes what leases cover executes, the worker
//! *begins a revocation* on its targets: from then until the request has
//! executed no lease on them is granted, and every other client's lease on
//! them is revoked: its sequence goes into the slot's notice word and the
//! client's lease futex is woken. The request executes once each such
//! lease is *settled*: acknowledged by its client, its term run out (it
//! was revoked within its term, and a revoked lease is not renewed, so a
//! writer waits at most one term for a silent client), or its client gone.
//!
//! Lock order: the table, then a holder's slots.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use larder_fs::FsError;
use larder_protocol::layout::MAX_LEASE_SLOTS;
use larder_protocol::message::{LeaseGrant, LeaseTarget};
use larder_protocol::region::Region;
use parking_lot::Mutex;

/// What a change revokes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Nothing: the request changes nothing a lease covers.
    #[default]
    Nothing,
    /// These targets.
    Targets(Vec<LeaseTarget>),
    /// Every lease (a KV write, which may rewrite any object in place and
    /// remove names anywhere).
    Everything,
}

/// The leases of every session of one server.
#[derive(Debug)]
pub(crate) struct LeaseTable {
    term: Duration,
    inner: Mutex<Inner>,
    next_holder: AtomicU64,
    /// `Inner::subtrees_in_use`, readable without the lock.
    subtrees_in_use: AtomicBool,
}

/// [`LeaseTable::begin`]'s refusal of targets that name no subtree once
/// subtree leases are in use: the caller computes its scope again with
/// them.
#[derive(Debug)]
pub(crate) struct NeedsSubtrees;

#[derive(Debug, Default)]
struct Inner {
    /// Per target, the sessions holding a lease on it.
    holders: HashMap<LeaseTarget, Vec<Arc<LeaseHolder>>>,
    /// Per target, changes revoking it now: no lease on it is granted.
    changing: HashMap<LeaseTarget, u32>,
    /// Changes revoking everything now: no lease is granted.
    changing_everything: u32,
    /// A subtree lease was asked for: from then on every change names
    /// the subtrees over what it changes (set once, never cleared).
    subtrees_in_use: bool,
    /// Changes in progress whose targets name no subtree (begun before
    /// `subtrees_in_use`): no subtree lease is granted until they end.
    changing_without_subtrees: u32,
}

/// One session's leases.
pub(crate) struct LeaseHolder {
    id: u64,
    max: usize,
    /// The client's lease area, once its region exists (a session driven
    /// through `execute` alone has none: its leases are only expired).
    region: OnceLock<Arc<Region>>,
    closed: AtomicBool,
    slots: Mutex<Slots>,
}

impl std::fmt::Debug for LeaseHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseHolder").field("id", &self.id).field("leases", &self.slots.lock().live).finish()
    }
}

#[derive(Default)]
struct Slots {
    entries: Vec<Slot>,
    by_target: HashMap<LeaseTarget, u32>,
    live: usize,
    /// Slots of `entries` holding no lease, so a grant takes one without
    /// scanning every slot (a client may hold 16,384).
    free: Vec<u32>,
}

#[derive(Default)]
struct Slot {
    /// The last sequence granted in this slot.
    sequence: u32,
    lease: Option<Held>,
}

struct Held {
    target: LeaseTarget,
    expiry: Instant,
    revoked: bool,
}

/// A lease a revocation waits for.
struct Awaited {
    holder: Arc<LeaseHolder>,
    target: LeaseTarget,
    slot: u32,
    sequence: u32,
    expiry: Instant,
}

/// A revocation in progress: while it lives no lease on its targets is
/// granted; it is [`Revocation::settled`] once every lease it revoked is.
/// Drop it after the change executed.
pub(crate) struct Revocation {
    table: Arc<LeaseTable>,
    scope: Scope,
    awaited: Vec<Awaited>,
    /// Counted in `Inner::changing_without_subtrees` while it lives.
    without_subtrees: bool,
}

impl LeaseTable {
    /// Leases lasting `term`; a zero term grants none.
    pub(crate) fn new(term: Duration) -> Arc<LeaseTable> {
        Arc::new(LeaseTable {
            term,
            inner: Mutex::new(Inner::default()),
            next_holder: AtomicU64::new(1),
            subtrees_in_use: AtomicBool::new(false),
        })
    }

    /// Whether a change must name the subtree leases over what it changes
    /// (`crate::conflicts`): once any client asked for one.
    pub(crate) fn subtrees_in_use(&self) -> bool {
        self.subtrees_in_use.load(Ordering::Acquire)
    }

    /// A new session's holder, allowed `max` leases at once.
    pub(crate) fn holder(&self, max: usize) -> Arc<LeaseHolder> {
        Arc::new(LeaseHolder {
            id: self.next_holder.fetch_add(1, Ordering::Relaxed),
            max: max.min(MAX_LEASE_SLOTS as usize),
            region: OnceLock::new(),
            closed: AtomicBool::new(false),
            slots: Mutex::new(Slots::default()),
        })
    }

    /// Grants `holder` a lease on `target`, or renews the one it holds.
    /// EAGAIN while a change revokes the target (or the holder's lease on
    /// it is revoked and not yet settled), ENOLCK when the holder has
    /// `max_leases` live leases, EOPNOTSUPP when leases are off.
    pub(crate) fn grant(&self, holder: &Arc<LeaseHolder>, target: LeaseTarget) -> Result<LeaseGrant, FsError> {
        if self.term.is_zero() {
            return Err(FsError::posix(libc::EOPNOTSUPP, "this server grants no leases (its lease term is 0)"));
        }
        let now = Instant::now();
        let mut inner = self.inner.lock();
        if let LeaseTarget::Subtree(_) = target {
            inner.subtrees_in_use = true;
            self.subtrees_in_use.store(true, Ordering::Release);
            // A change begun before knows nothing of subtrees: it would
            // not revoke this lease.
            if inner.changing_without_subtrees > 0 {
                return Err(busy());
            }
        }
        if inner.changing_everything > 0 || inner.changing.get(&target).is_some_and(|n| *n > 0) {
            return Err(busy());
        }
        let mut slots = holder.slots.lock();
        if let Some(&slot) = slots.by_target.get(&target) {
            let entry = &mut slots.entries[slot as usize];
            let sequence = entry.sequence;
            if let Some(held) = entry.lease.as_mut() {
                if held.revoked {
                    return Err(busy());
                }
                held.expiry = now + self.term;
                return Ok(self.granted(slot, sequence));
            }
        }
        if slots.live >= holder.max {
            let expired = slots.expired(now);
            for (target, slot) in expired {
                slots.end(target, slot);
                forget(&mut inner, holder, target);
            }
        }
        if slots.live >= holder.max {
            return Err(FsError::posix(
                libc::ENOLCK,
                format!("this client holds {} leases, the limit (max_leases)", slots.live),
            ));
        }
        let slot = match slots.free.pop() {
            Some(free) => free as usize,
            None => {
                slots.entries.push(Slot::default());
                slots.entries.len() - 1
            }
        };
        let entry = &mut slots.entries[slot];
        // Sequences of a slot only grow, so a notice of an earlier lease
        // of the slot never matches a later one; 0 is never granted.
        entry.sequence = entry.sequence.wrapping_add(1).max(1);
        let sequence = entry.sequence;
        entry.lease = Some(Held { target, expiry: now + self.term, revoked: false });
        let slot = slot as u32;
        slots.by_target.insert(target, slot);
        slots.live += 1;
        drop(slots);
        inner.holders.entry(target).or_default().push(holder.clone());
        Ok(self.granted(slot, sequence))
    }

    fn granted(&self, slot: u32, sequence: u32) -> LeaseGrant {
        LeaseGrant { slot, sequence, term_nanos: u64::try_from(self.term.as_nanos()).unwrap_or(u64::MAX) }
    }

    /// Begins revoking `scope` for a change by `writer` (whose own leases
    /// stay: its client drops what its own change makes stale).
    /// `with_subtrees` says whether the scope names the subtree leases
    /// over the change; one that does not is refused once subtree leases
    /// are in use (the caller computes it again, with them).
    pub(crate) fn begin(
        self: &Arc<LeaseTable>,
        writer: &LeaseHolder,
        scope: Scope,
        with_subtrees: bool,
    ) -> Result<Revocation, NeedsSubtrees> {
        let mut awaited = Vec::new();
        let mut notified: Vec<Arc<LeaseHolder>> = Vec::new();
        let without_subtrees = !with_subtrees && matches!(scope, Scope::Targets(_));
        {
            let mut inner = self.inner.lock();
            if without_subtrees {
                if inner.subtrees_in_use {
                    return Err(NeedsSubtrees);
                }
                inner.changing_without_subtrees += 1;
            }
            let targets: Vec<LeaseTarget> = match &scope {
                Scope::Nothing => Vec::new(),
                Scope::Targets(targets) => {
                    for target in targets {
                        *inner.changing.entry(*target).or_default() += 1;
                    }
                    targets.clone()
                }
                Scope::Everything => {
                    inner.changing_everything += 1;
                    inner.holders.keys().copied().collect()
                }
            };
            for target in targets {
                let Some(holders) = inner.holders.get(&target) else { continue };
                for holder in holders.iter().filter(|h| h.id != writer.id) {
                    let mut slots = holder.slots.lock();
                    let Some(&slot) = slots.by_target.get(&target) else { continue };
                    let entry = &mut slots.entries[slot as usize];
                    let sequence = entry.sequence;
                    let Some(held) = entry.lease.as_mut() else { continue };
                    if !held.revoked {
                        held.revoked = true;
                        if let Some(region) = holder.region.get() {
                            region.leases().notify(slot, sequence);
                        }
                        if !notified.iter().any(|h| h.id == holder.id) {
                            notified.push(holder.clone());
                        }
                    }
                    awaited.push(Awaited { holder: holder.clone(), target, slot, sequence, expiry: held.expiry });
                }
            }
        }
        for holder in notified {
            if let Some(region) = holder.region.get() {
                // A failed wake leaves the client to the lease's expiry.
                let _ = region.leases().wake_client();
            }
        }
        Ok(Revocation { table: self.clone(), scope, awaited, without_subtrees })
    }

    /// Ends the lease `sequence` of `holder`'s `slot` on `target`, if it
    /// is still that lease.
    fn end(&self, holder: &Arc<LeaseHolder>, target: LeaseTarget, slot: u32, sequence: u32) {
        let mut inner = self.inner.lock();
        let mut slots = holder.slots.lock();
        let current = slots.entries.get(slot as usize).is_some_and(|s| s.sequence == sequence && s.lease.is_some());
        if current {
            slots.end(target, slot);
            drop(slots);
            forget(&mut inner, holder, target);
        }
    }

    /// Drops every lease of a closing session.
    pub(crate) fn close(&self, holder: &Arc<LeaseHolder>) {
        holder.closed.store(true, Ordering::Release);
        let mut inner = self.inner.lock();
        let targets: Vec<(LeaseTarget, u32)> = {
            let slots = holder.slots.lock();
            slots.by_target.iter().map(|(t, s)| (*t, *s)).collect()
        };
        for (target, slot) in targets {
            holder.slots.lock().end(target, slot);
            forget(&mut inner, holder, target);
        }
    }

    /// Leases held by every session together (for tests and counters).
    pub(crate) fn held(&self) -> usize {
        self.inner.lock().holders.values().map(Vec::len).sum()
    }
}

/// Removes `holder` from `target`'s holders.
fn forget(inner: &mut Inner, holder: &LeaseHolder, target: LeaseTarget) {
    if let Some(holders) = inner.holders.get_mut(&target) {
        holders.retain(|h| h.id != holder.id);
        if holders.is_empty() {
            inner.holders.remove(&target);
        }
    }
}

fn busy() -> FsError {
    FsError::posix(libc::EAGAIN, "another client is changing what the lease would cover; try again")
}

impl Slots {
    /// Live leases whose term ran out.
    fn expired(&self, now: Instant) -> Vec<(LeaseTarget, u32)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.lease.as_ref().filter(|h| h.expiry <= now).map(|h| (h.target, i as u32)))
            .collect()
    }

    fn end(&mut self, target: LeaseTarget, slot: u32) {
        if let Some(entry) = self.entries.get_mut(slot as usize) {
            if entry.lease.take().is_some() {
                self.live -= 1;
                self.free.push(slot);
            }
        }
        if self.by_target.get(&target) == Some(&slot) {
            self.by_target.remove(&target);
        }
    }
}

impl LeaseHolder {
    /// Gives the holder its client's region, whose lease area carries the
    /// revocation notices.
    pub(crate) fn attach(&self, region: Arc<Region>) {
        let _ = self.region.set(region);
    }

    /// Leases it holds now.
    pub(crate) fn live(&self) -> usize {
        self.slots.lock().live
    }
}

impl Revocation {
    /// Whether every lease it revoked is settled (acknowledged, expired
    /// or its client gone); ends those that are.
    pub(crate) fn settled(&mut self) -> bool {
        let now = Instant::now();
        let table = self.table.clone();
        self.awaited.retain(|a| {
            let acknowledged = a.holder.region.get().is_some_and(|r| r.leases().acknowledged(a.slot, a.sequence));
            let done = acknowledged || a.expiry <= now || a.holder.closed.load(Ordering::Acquire);
            if done {
                table.end(&a.holder, a.target, a.slot, a.sequence);
            }
            !done
        });
        self.awaited.is_empty()
    }

    /// When the last awaited lease expires: by then it is settled.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.awaited.iter().map(|a| a.expiry).max()
    }

    /// Waits until settled, polling the acknowledgements; bounded by the
    /// awaited leases' expiry (at most one term).
    pub(crate) fn wait(&mut self) {
        while !self.settled() {
            let left = self.deadline().map(|d| d.saturating_duration_since(Instant::now())).unwrap_or_default();
            std::thread::sleep(left.min(Duration::from_micros(200)));
        }
    }
}

impl Drop for Revocation {
    fn drop(&mut self) {
        let mut inner = self.table.inner.lock();
        if self.without_subtrees {
            inner.changing_without_subtrees -= 1;
        }
        match &self.scope {
            Scope::Nothing => {}
            Scope::Targets(targets) => {
                for target in targets {
                    if let Some(n) = inner.changing.get_mut(target) {
                        *n -= 1;
                        if *n == 0 {
                            inner.changing.remove(target);
                        }
                    }
                }
            }
            Scope::Everything => inner.changing_everything -= 1,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn errno(e: FsError) -> i32 {
        e.errno()
    }

    #[test]
    fn grants_renew_limit_and_reclaim_expired_slots() {
        let table = LeaseTable::new(Duration::from_millis(40));
        let holder = table.holder(1);
        let first = table.grant(&holder, LeaseTarget::Object(5)).unwrap();
        assert_eq!((first.slot, first.sequence), (0, 1));
        assert_eq!(table.grant(&holder, LeaseTarget::Object(5)).unwrap(), first, "a renewal keeps slot and sequence");
        assert_eq!(errno(table.grant(&holder, LeaseTarget::Object(6)).unwrap_err()), libc::ENOLCK);
        // Once the lease's term has run out its slot is reclaimed for the
        // next lease, with a new sequence.
        let expiry = Instant::now() + Duration::from_millis(40);
        while Instant::now() <= expiry {
            std::thread::sleep(Duration::from_millis(5));
        }
        let second = table.grant(&holder, LeaseTarget::Object(6)).unwrap();
        assert_eq!((second.slot, second.sequence), (0, 2));
        assert_eq!(table.held(), 1);
        table.close(&holder);
        assert_eq!(table.held(), 0);
        assert_eq!(holder.live(), 0);
    }

    #[test]
    fn a_revocation_blocks_grants_until_dropped_and_spares_the_writer() {
        let table = LeaseTable::new(Duration::from_secs(60));
        let (reader, writer) = (table.holder(8), table.holder(8));
        table.grant(&reader, LeaseTarget::Object(9)).unwrap();
        table.grant(&writer, LeaseTarget::Object(9)).unwrap();
        let mut revocation = table.begin(&writer, Scope::Targets(vec![LeaseTarget::Object(9)]), false).unwrap();
        assert!(!revocation.settled(), "the reader has not answered and its lease has not expired");
        assert_eq!(errno(table.grant(&reader, LeaseTarget::Object(9)).unwrap_err()), libc::EAGAIN);
        assert_eq!(errno(table.grant(&holder_of(&table), LeaseTarget::Object(9)).unwrap_err()), libc::EAGAIN);
        assert!(table.grant(&reader, LeaseTarget::Object(10)).is_ok(), "other targets are not blocked");
        // The reader goes away: settled; its lease is gone, the writer's stays.
        table.close(&reader);
        assert!(revocation.settled());
        assert_eq!(writer.live(), 1);
        drop(revocation);
        assert!(table.grant(&holder_of(&table), LeaseTarget::Object(9)).is_ok());
        // Everything blocks every grant.
        let everything = table.begin(&writer, Scope::Everything, false).unwrap();
        assert_eq!(errno(table.grant(&holder_of(&table), LeaseTarget::Namespace).unwrap_err()), libc::EAGAIN);
        drop(everything);
        assert!(table.grant(&holder_of(&table), LeaseTarget::Namespace).is_ok());
    }

    fn holder_of(table: &LeaseTable) -> Arc<LeaseHolder> {
        table.holder(8)
    }

    #[test]
    fn no_subtree_lease_is_granted_past_a_change_that_names_no_subtree() {
        let table = LeaseTable::new(Duration::from_secs(30));
        let (reader, writer) = (holder_of(&table), holder_of(&table));
        let targets = || Scope::Targets(vec![LeaseTarget::Object(7)]);
        // Begun while no client had asked for a subtree lease.
        let early = table.begin(&writer, targets(), false).unwrap();
        assert_eq!(errno(table.grant(&reader, LeaseTarget::Subtree(3)).unwrap_err()), libc::EAGAIN);
        assert!(table.subtrees_in_use(), "asking is enough");
        // A change that names no subtree is refused from now on.
        assert!(table.begin(&writer, targets(), false).is_err());
        drop(early);
        let granted = table.grant(&reader, LeaseTarget::Subtree(3));
        assert!(granted.is_ok(), "granted once the early change ended");
        let with = table.begin(&writer, Scope::Targets(vec![LeaseTarget::Subtree(3)]), true).unwrap();
        assert_eq!(errno(table.grant(&reader, LeaseTarget::Subtree(3)).unwrap_err()), libc::EAGAIN);
        drop(with);
    }

    #[test]
    fn every_slot_of_the_area_is_granted_and_an_ended_one_is_reused() {
        let table = LeaseTable::new(Duration::from_secs(60));
        let holder = table.holder(MAX_LEASE_SLOTS as usize);
        let mut slots = std::collections::HashSet::new();
        for ino in 0..u64::from(MAX_LEASE_SLOTS) {
            let grant = table.grant(&holder, LeaseTarget::Object(ino)).unwrap();
            assert!(grant.slot < MAX_LEASE_SLOTS, "slot {} beyond the lease area", grant.slot);
            assert!(slots.insert(grant.slot), "slot {} granted twice", grant.slot);
        }
        let extra = LeaseTarget::Object(u64::MAX);
        assert_eq!(errno(table.grant(&holder, extra).unwrap_err()), libc::ENOLCK);
        let renewed = table.grant(&holder, LeaseTarget::Object(7)).unwrap();
        table.end(&holder, LeaseTarget::Object(7), renewed.slot, renewed.sequence);
        let next = table.grant(&holder, extra).unwrap();
        assert_eq!((next.slot, next.sequence), (renewed.slot, renewed.sequence + 1), "the ended slot, a new sequence");
        assert_eq!(holder.live(), MAX_LEASE_SLOTS as usize);
        assert_eq!(table.held(), MAX_LEASE_SLOTS as usize);
    }

    #[test]
    fn a_zero_term_grants_nothing() {
        let table = LeaseTable::new(Duration::ZERO);
        let holder = table.holder(8);
        assert_eq!(errno(table.grant(&holder, LeaseTarget::Namespace).unwrap_err()), libc::EOPNOTSUPP);
    }
}
