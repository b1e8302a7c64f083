//! Where requests are served: which workers are active, each client's
//! home worker, each open file's owner, and the moves the load manager
//! asks for.
//!
//! Rules (docs/server.md, "Workers"):
//! - the primary (worker 0) takes every change to the namespace;
//! - a request on an open file goes to the file's owner, set when the file
//!   is opened (the opening client's home) and kept while any handle of it
//!   is open;
//! - every other request goes to the client's home worker.
//!
//! A file moves only in its owner's thread, between two requests: the
//! owner takes the move from its mailbox at the top of a round and hands
//! the file over. Until then the new owner redirects the file's requests
//! to the old one, and after it the old owner redirects them to the new
//! one, so no two workers ever execute requests of one file at once, and a
//! request is redirected, never dropped or run twice.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use parking_lot::{Mutex, RwLock};

use larder_protocol::id_hash::IdMap;

/// The primary worker.
pub(crate) const PRIMARY: u32 = 0;

/// An open file's owner and how many handles keep it placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Owner {
    worker: u32,
    handles: u32,
}

/// A file to hand over, and to whom.
type Move = (u64, u32);

/// Placement of clients and files on workers.
pub(crate) struct Placement {
    /// Workers that take work: 0..active. Workers at or above it are
    /// parked: they redirect whatever reaches them.
    active: AtomicU32,
    /// The most workers there may be.
    max: u32,
    files: RwLock<IdMap<Owner>>,
    /// Per worker: files to hand over, and to whom.
    mailboxes: Vec<Mutex<Vec<Move>>>,
    /// Per worker, the length of its mailbox, written under its lock: a
    /// worker looks here every round and takes the lock only for mail.
    mail: Vec<AtomicUsize>,
    /// Where the next client's home goes.
    next_home: AtomicU32,
}

impl Placement {
    /// `active` workers of at most `max`.
    pub(crate) fn new(active: u32, max: u32) -> Placement {
        Placement {
            active: AtomicU32::new(active),
            max,
            files: RwLock::new(IdMap::default()),
            mailboxes: (0..max).map(|_| Mutex::new(Vec::new())).collect(),
            mail: (0..max).map(|_| AtomicUsize::new(0)).collect(),
            next_home: AtomicU32::new(0),
        }
    }

    /// Workers taking work now.
    pub(crate) fn active(&self) -> u32 {
        self.active.load(Ordering::Acquire)
    }

    /// The most workers.
    pub(crate) fn max(&self) -> u32 {
        self.max
    }

    /// Sets the number of active workers (the load manager's call).
    pub(crate) fn set_active(&self, active: u32) {
        self.active.store(active.clamp(1, self.max), Ordering::Release);
    }

    /// Whether worker `worker` takes work.
    pub(crate) fn is_active(&self, worker: u32) -> bool {
        worker < self.active()
    }

    /// A home for a new client: the active workers in turn.
    pub(crate) fn home_for_new_client(&self) -> u32 {
        self.next_home.fetch_add(1, Ordering::Relaxed) % self.active().max(1)
    }

    /// The owner of open file `ino`, if it is placed.
    pub(crate) fn owner(&self, ino: u64) -> Option<u32> {
        self.files.read().get(&ino).map(|o| o.worker)
    }

    /// A handle of `ino` was opened by a client at home on `home`: the file
    /// is placed there unless it is placed already.
    pub(crate) fn opened(&self, ino: u64, home: u32) {
        let mut files = self.files.write();
        let owner = files.entry(ino).or_insert(Owner { worker: home, handles: 0 });
        owner.handles += 1;
    }

    /// A handle of `ino` was closed: the file is no longer placed once its
    /// last handle is.
    pub(crate) fn closed(&self, ino: u64) {
        let mut files = self.files.write();
        if let Some(owner) = files.get_mut(&ino) {
            owner.handles = owner.handles.saturating_sub(1);
            if owner.handles == 0 {
                files.remove(&ino);
            }
        }
    }

    /// Asks the owner of `ino` to hand it to worker `to`.
    pub(crate) fn request_move(&self, ino: u64, to: u32) {
        if to >= self.max {
            return;
        }
        if let Some(from) = self.owner(ino) {
            if from != to {
                let mut mailbox = self.mailboxes[from as usize].lock();
                mailbox.push((ino, to));
                self.mail[from as usize].store(mailbox.len(), Ordering::Release);
            }
        }
    }

    /// Runs in worker `worker`'s thread between requests: hands over the
    /// files it was asked to move, except those in `held` (a request on
    /// them waits in this worker, and must run before another worker runs
    /// the next): their moves stay in the mailbox. Returns how many moved.
    pub(crate) fn hand_over(&self, worker: u32, held: &[u64]) -> usize {
        if !self.has_moves(worker) {
            return 0;
        }
        let mut mailbox = self.mailboxes[worker as usize].lock();
        let (kept, moves): (Vec<Move>, Vec<Move>) =
            std::mem::take(&mut *mailbox).into_iter().partition(|(ino, _)| held.contains(ino));
        *mailbox = kept;
        self.mail[worker as usize].store(mailbox.len(), Ordering::Release);
        drop(mailbox);
        let mut files = self.files.write();
        let mut moved = 0;
        for (ino, to) in moves {
            if let Some(owner) = files.get_mut(&ino) {
                if owner.worker == worker {
                    owner.worker = to;
                    moved += 1;
                }
            }
        }
        moved
    }

    /// Whether worker `worker` has files to hand over.
    pub(crate) fn has_moves(&self, worker: u32) -> bool {
        self.mail[worker as usize].load(Ordering::Acquire) > 0
    }

    /// The files worker `worker` owns.
    pub(crate) fn files_of(&self, worker: u32) -> Vec<u64> {
        self.files.read().iter().filter(|(_, o)| o.worker == worker).map(|(&ino, _)| ino).collect()
    }

    /// Placed files.
    pub(crate) fn placed_files(&self) -> usize {
        self.files.read().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_placed_while_a_handle_is_open() {
        let p = Placement::new(2, 4);
        p.opened(7, 1);
        p.opened(7, 0);
        assert_eq!(p.owner(7), Some(1), "the first opener's home places it");
        p.closed(7);
        assert_eq!(p.owner(7), Some(1));
        p.closed(7);
        assert_eq!(p.owner(7), None, "unplaced at its last close");
    }

    #[test]
    fn a_file_moves_only_when_its_owner_hands_it_over() {
        let p = Placement::new(2, 4);
        p.opened(7, 0);
        p.request_move(7, 1);
        assert_eq!(p.owner(7), Some(0), "asked, not yet handed over");
        assert_eq!(p.hand_over(1, &[]), 0, "only the owner hands over");
        assert_eq!(p.hand_over(0, &[7]), 0, "a file with a request waiting in its owner stays");
        assert_eq!(p.owner(7), Some(0));
        assert_eq!(p.hand_over(0, &[]), 1, "and moves once that request ran");
        assert_eq!(p.owner(7), Some(1));
        // A stale move (the file moved on, or closed) is ignored.
        p.request_move(7, 2);
        p.closed(7);
        assert_eq!(p.hand_over(1, &[]), 0);
        assert_eq!(p.owner(7), None);
    }

    #[test]
    fn homes_go_round_the_active_workers() {
        let p = Placement::new(3, 4);
        let homes: Vec<u32> = (0..6).map(|_| p.home_for_new_client()).collect();
        assert_eq!(homes, [0, 1, 2, 0, 1, 2]);
        p.set_active(9);
        assert_eq!(p.active(), 4, "never more than the most workers");
        p.set_active(0);
        assert_eq!(p.active(), 1, "never fewer than one");
    }
}
