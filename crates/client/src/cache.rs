//! What the client caches under leases (docs/server.md, "Leases"): per
//! directory under its object lease (or the subtree lease over it, see
//! `subtrees`), the lookups of its entries made and its listing; per regular file under its object lease, its attributes,
//! the 4 KiB pages read, and opens kept after close (handle leases),
//! reused by a later open of the same access class without a round trip.
//!
//! A lease is used only while it is valid: before its term, counted from
//! when the request for it was sent, has run out, and while its slot's
//! notice word does not hold its sequence. The watcher thread
//! ([`watch`]) sleeps on the lease area's futex; when the server revokes a
//! lease it drops what the lease covered under the cache lock (so no call
//! is using it then), acknowledges, rings the workers and releases the
//! opens the lease kept. A call that fetched something from the server
//! inserts it only if the lease is still valid and nothing this client
//! changed meanwhile (a version per object).
//!
//! The client's own changes revoke nothing of its own on the server: it
//! drops what they make stale itself, after each answer
//! ([`Cache::after_own`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use larder_protocol::lease::LeaseArea;
use larder_protocol::message::{
    Attributes, DirectoryEntry, FileKind, LeaseGrant, LeaseTarget, Payload, Request, Response,
};
use larder_protocol::region::Region;
use parking_lot::Mutex;

use crate::connection::Connection;
use larder_protocol::id_hash::IdMap;

mod clock;
mod held;
mod subtrees;
mod written;

use clock::lease_now;

/// Bytes of a cached page.
pub(crate) const PAGE: usize = 4096;

/// Pages cached per file at most: an eighth of the cache's page bytes
/// (16 MiB of the default 128 MiB), so a few large files cannot take all
/// of it, and at least 1 MiB.
fn max_file_pages(max_page_bytes: usize) -> usize {
    (max_page_bytes / 8 / PAGE).max(256)
}

/// Objects cached at once at most: as many leases as a server grants one
/// client at most (`max_leases`, at most the 16,384 slots of a lease
/// area).
const MAX_FILES: usize = larder_protocol::layout::MAX_LEASE_SLOTS as usize;

/// Bytes of cached pages at most, over all files, unless the client's
/// options say otherwise (`ClientOptions::cache_page_bytes`): a page that
/// would go beyond is not cached (the read is served, uncached).
pub(crate) const DEFAULT_PAGE_BYTES: usize = 128 << 20;

/// Opens kept after close at most, over all files, given the session's
/// limit of open handles: seven eighths of it, so the application's own
/// opens rarely meet EMFILE (which releases every kept open and tries
/// again). A client that opens and closes files of a set larger than
/// this pays an open's round trip for each file beyond it.
pub(crate) fn max_kept_handles(max_open_handles: u32) -> usize {
    let max = max_open_handles as usize;
    max - max / 8
}

/// Versions this client's own `Create` takes in [`Cache::after_own`]
/// (the file's and the listings'), whose answer [`Cache::created`] takes
/// in after.
const CREATE_VERSIONS: u64 = 2;

/// Lookups cached per directory at most.
const MAX_LOOKUPS: usize = 16_384;

/// How long the watcher sleeps between checks that the client is still
/// in use.
const WATCH_SLICE: Duration = Duration::from_millis(100);

/// A lease as the client sees it.
#[derive(Clone, Copy, Debug)]
struct Lease {
    slot: u32,
    sequence: u32,
    /// When its term ends, in nanoseconds of CLOCK_MONOTONIC.
    expiry: u64,
}

impl Lease {
    fn of(grant: LeaseGrant, sent: Instant) -> Lease {
        // `sent` on CLOCK_MONOTONIC (`Instant`'s clock), read so that it
        // comes out no later than it was: the clock before the elapsed time.
        let now = clock::monotonic_nanos();
        let elapsed = u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let expiry = now.saturating_sub(elapsed).saturating_add(grant.term_nanos);
        Lease { slot: grant.slot, sequence: grant.sequence, expiry }
    }

    /// Whether the lease holds at `now` (from [`clock::lease_now`]).
    fn valid(&self, area: &LeaseArea<'_>, now: u64) -> bool {
        now < self.expiry && !area.revoked(self.slot, self.sequence)
    }
}

/// A cached lookup: what a path walk and open need.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CachedPath {
    pub(crate) ino: u64,
    pub(crate) kind: FileKind,
}

struct FileCache {
    lease: Lease,
    attributes: Option<Attributes>,
    /// A regular file's size, when known under the lease: from its
    /// attributes, then moved by this client's own writes (which make
    /// the other attributes stale). Cached pages end where it says.
    size: Option<u64>,
    /// Page index to bytes: a full page, or a short one ending the file.
    pages: IdMap<Vec<u8>>,
    /// Opens kept after close: their access class and handle.
    handles: Vec<(i32, u64)>,
    /// A directory's whole listing.
    entries: Option<Arc<Vec<DirectoryEntry>>>,
    /// A directory's entries looked up: name to object. Hashed by
    /// foldhash, seeded at random per process as std's SipHash is, at a
    /// fraction of its cost: every component of every cached walk is
    /// looked up here, and names can be another user's choosing.
    lookups: HashMap<Vec<u8>, CachedPath, foldhash::quality::RandomState>,
    version: u64,
}

/// An open handle of this client, as the cache knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OpenFile {
    ino: u64,
    /// Opened with O_APPEND: its writes are not kept in cached pages.
    append: bool,
}

#[derive(Default)]
struct State {
    /// The root directory's object (it never changes).
    root: Option<u64>,
    files: IdMap<FileCache>,
    /// The next version to hand out. Every version a file's entry takes
    /// (when made, when its lease is replaced, when the client changes
    /// it) comes from here, so a version is never handed out twice: a
    /// fetch that began under one entry is never cached into a later one
    /// of the same file that happened to count to the same number.
    next_version: u64,
    /// Which file an open handle of this client is on.
    handle_files: IdMap<OpenFile>,
    kept_handles: usize,
    /// Bytes of pages cached over all files (at most the cache's
    /// `max_page_bytes`).
    page_bytes: usize,
    /// Subtree leases held, by the directory at the top of each.
    subtrees: IdMap<Lease>,
    /// Directories found inside a held subtree, each with its top.
    inside: IdMap<u64>,
}

/// Counters of the cache, for tests and measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheCounters {
    /// Opens served from a kept open, without a round trip.
    pub cached_opens: u64,
    /// Reads served from cached pages.
    pub cached_reads: u64,
    /// Attributes served from the cache.
    pub cached_attributes: u64,
    /// Directory listings served from the cache.
    pub cached_listings: u64,
    /// Lookups of a name in a directory served from the cache.
    pub cached_lookups: u64,
    /// Leases dropped because the server revoked them.
    pub revocations: u64,
}

/// The cache of one connection.
pub(crate) struct Cache {
    enabled: bool,
    /// Opens kept after close at most (`max_kept_handles`).
    max_kept_handles: usize,
    /// Bytes of cached pages at most, over all files.
    max_page_bytes: usize,
    /// Pages cached per file at most (`max_file_pages`).
    max_file_pages: usize,
    state: Mutex<State>,
    cached_opens: AtomicU64,
    cached_reads: AtomicU64,
    cached_attributes: AtomicU64,
    cached_listings: AtomicU64,
    cached_lookups: AtomicU64,
    revocations: AtomicU64,
}

/// The access class of `open(2)` flags whose opens may be kept and
/// reused, if they may: no truncate, no exclusive create.
pub(crate) fn open_class(flags: i32) -> Option<i32> {
    if flags & (libc::O_TRUNC | libc::O_EXCL) != 0 {
        return None;
    }
    Some(flags & (libc::O_ACCMODE | libc::O_APPEND))
}

/// Whether `mode`'s owner bits grant the access of open class `class`
/// (read, write or both): a create's open is not checked against the
/// mode it sets, so a later open of the creator may reuse it only if a
/// check would have passed. (The superuser, whom the bits do not bind,
/// is refused reuse as anyone else: a new open is checked by the server.)
pub(crate) fn owner_may(mode: u32, class: i32) -> bool {
    let needs = match class & libc::O_ACCMODE {
        libc::O_RDONLY => 0o400,
        libc::O_WRONLY => 0o200,
        _ => 0o600,
    };
    mode & needs == needs
}

/// Where in `handles` (kept opens and their classes) an open of `wanted`
/// finds one to reuse: one of the same class, else a read-write one (not
/// appending) for a read-only open. That open was checked for reading
/// when it was made, and a change of the file's permissions since would
/// have revoked the lease it is kept under (or, made by this client,
/// released it); the `File` that takes it refuses writes itself.
fn kept_for(handles: &[(i32, u64)], wanted: i32) -> Option<usize> {
    handles
        .iter()
        .position(|(c, _)| *c == wanted)
        .or_else(|| handles.iter().position(|(c, _)| wanted == libc::O_RDONLY && *c == libc::O_RDWR))
}

impl Cache {
    pub(crate) fn new(enabled: bool, max_kept_handles: usize, max_page_bytes: usize) -> Cache {
        Cache {
            enabled,
            max_kept_handles,
            max_page_bytes,
            max_file_pages: max_file_pages(max_page_bytes),
            state: Mutex::new(State { next_version: 1, ..State::default() }),
            cached_opens: AtomicU64::new(0),
            cached_reads: AtomicU64::new(0),
            cached_attributes: AtomicU64::new(0),
            cached_listings: AtomicU64::new(0),
            cached_lookups: AtomicU64::new(0),
            revocations: AtomicU64::new(0),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    pub(crate) fn counters(&self) -> CacheCounters {
        CacheCounters {
            cached_opens: self.cached_opens.load(Ordering::Relaxed),
            cached_reads: self.cached_reads.load(Ordering::Relaxed),
            cached_attributes: self.cached_attributes.load(Ordering::Relaxed),
            cached_listings: self.cached_listings.load(Ordering::Relaxed),
            cached_lookups: self.cached_lookups.load(Ordering::Relaxed),
            revocations: self.revocations.load(Ordering::Relaxed),
        }
    }

    /// Asks for (or renews) a lease on `target`; `None` when the server
    /// refuses (busy, at the limit, leases off) or the connection fails:
    /// the caller goes on uncached.
    fn take_lease(connection: &Connection, target: LeaseTarget) -> Option<Lease> {
        let sent = Instant::now();
        match connection.call(&Request::Lease { target }) {
            Ok(Response::Lease(grant)) => Some(Lease::of(grant, sent)),
            _ => None,
        }
    }

    /// Whether file `ino` has a valid lease (`Some(true)`), or may get an
    /// entry for one (`Some(false)`); `None` when the cache is full of
    /// valid leases. Objects whose leases ran out make room; their kept
    /// opens are released.
    fn room_for(&self, connection: &Connection, ino: u64) -> Option<bool> {
        let area = connection.region().leases();
        let state = self.state.lock();
        match state.files.get(&ino) {
            Some(file) if file.lease.valid(&area, lease_now()) => Some(true),
            None => self.make_room(connection, state).then_some(false),
            Some(_) => Some(false),
        }
    }

    /// Whether the cache has room for one more entry, once the objects
    /// whose leases ran out made room (their kept opens are released).
    fn make_room(&self, connection: &Connection, mut state: parking_lot::MutexGuard<'_, State>) -> bool {
        if state.files.len() < MAX_FILES {
            return true;
        }
        let evicted = state.evict_expired(lease_now());
        let full = state.files.len() >= MAX_FILES;
        drop(state);
        release_all(connection, &evicted);
        !full
    }

    /// Makes sure the lease on file `ino` is valid; false if it cannot be.
    fn file_lease(&self, connection: &Connection, ino: u64) -> bool {
        match self.room_for(connection, ino) {
            Some(true) => return true,
            None => return false,
            Some(false) => {}
        }
        if self.borrow_subtree(connection, ino) {
            return true;
        }
        let Some(lease) = Cache::take_lease(connection, LeaseTarget::Object(ino)) else { return false };
        self.adopt(connection, ino, lease, |_| {})
    }

    /// Puts `lease` on file `ino`'s entry, just granted; then, under the
    /// same lock, `fill` may cache what came with the grant into the entry
    /// (when the lease is valid). Whether the lease is valid.
    fn adopt(&self, connection: &Connection, ino: u64, lease: Lease, fill: impl FnOnce(&mut State)) -> bool {
        let area = connection.region().leases();
        let mut state = self.state.lock();
        if !lease.valid(&area, lease_now()) {
            // Revoked (or ended) before this thread got here: another thread
            // may have taken the same lease, used and answered it, and hold
            // a later one of the file now, which this must not replace.
            let mut dropped = Vec::new();
            let held =
                state.files.get(&ino).is_some_and(|f| f.lease.slot == lease.slot && f.lease.sequence == lease.sequence);
            if held {
                dropped = self.drop_one(&mut state, &area, ino);
            } else {
                answer(&area, lease.slot, lease.sequence);
            }
            drop(state);
            if area.revoked(lease.slot, lease.sequence) {
                connection.ring_all_workers();
            }
            release_all(connection, &dropped);
            return false;
        }
        let mut dropped = state.install(&area, ino, lease);
        // A lease revoked before its grant got here: the watcher may have
        // looked at the notices before the entry existed, and would answer
        // only at its next look (up to WATCH_SLICE later) while the writer
        // waits. The entry is dropped and the revocation answered now, as
        // the watcher would.
        let revoked_already = area.revoked(lease.slot, lease.sequence);
        if revoked_already {
            dropped.extend(self.drop_one(&mut state, &area, ino));
        } else {
            fill(&mut state);
        }
        drop(state);
        if revoked_already {
            connection.ring_all_workers();
        }
        release_all(connection, &dropped);
        lease.valid(&area, lease_now())
    }

    /// A mark of the client's own changes so far, taken before a request
    /// whose answer may be cached: [`Cache::opened_by_path`] caches the
    /// answer's attributes and bytes only if no change (and no lease
    /// installed) came between.
    pub(crate) fn stamp(&self) -> u64 {
        self.state.lock().next_version
    }

    /// Whether the client holds a valid lease on `ino` now.
    pub(crate) fn holds(&self, connection: &Connection, ino: u64) -> bool {
        if !self.enabled || connection.is_gone() {
            return false;
        }
        let area = connection.region().leases();
        self.state.lock().files.get(&ino).is_some_and(|f| f.lease.valid(&area, lease_now()))
    }

    /// Whether an open by path should ask for a lease on the file: the
    /// cache is on and has room for one more entry.
    pub(crate) fn wants_lease(&self, connection: &Connection) -> bool {
        self.enabled && !connection.is_gone() && self.make_room(connection, self.state.lock())
    }

    /// Takes in the answer to an `OpenPath` sent at `sent` (with the
    /// cache's `stamp` then): the lease granted on the file, and under it
    /// the file's attributes and its first bytes (`asked` were asked
    /// for, a multiple of [`PAGE`], so a shorter answer ends the file).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn opened_by_path(
        &self,
        connection: &Connection,
        grant: LeaseGrant,
        sent: Instant,
        stamp: u64,
        attributes: &Attributes,
        data: Option<&[u8]>,
        asked: usize,
    ) {
        if !self.enabled {
            return;
        }
        let lease = Lease::of(grant, sent);
        let ino = attributes.ino;
        self.adopt(connection, ino, lease, |state| {
            // Installing the lease took one version; any other since the
            // request was sent is a change the answer may predate.
            if state.next_version != stamp + 1 || attributes.kind != FileKind::File {
                return;
            }
            if let Some(file) = state.files.get_mut(&ino) {
                file.attributes = Some(attributes.clone());
                file.size = Some(attributes.size);
                if let Some(bytes) = data {
                    if asked > 0 && asked.is_multiple_of(PAGE) {
                        let room = self.max_page_bytes.saturating_sub(state.page_bytes);
                        if let Some(file) = state.files.get_mut(&ino) {
                            let (added, replaced) = put_pages(file, 0, asked, bytes, room, self.max_file_pages);
                            state.page_bytes = state.page_bytes + added - replaced;
                        }
                    }
                }
            }
        });
    }

    /// Takes in the answer to this client's `Create` sent at `sent` (with
    /// the cache's `stamp` then), which granted `grant` on the file: the
    /// lease, and under it the file's attributes and size, and for an
    /// empty file its (empty) pages, so that the client's writes through
    /// the handle fill its pages ([`Cache::after_own`]). With `named`,
    /// the directory the walk found and the name, the lookup of the name
    /// is cached too, under the directory's lease if that held from
    /// before the request.
    pub(crate) fn created(
        &self,
        connection: &Connection,
        grant: LeaseGrant,
        sent: Instant,
        stamp: u64,
        attributes: &Attributes,
        named: Option<(u64, &[u8])>,
    ) {
        if !self.enabled {
            return;
        }
        let area = connection.region().leases();
        let ino = attributes.ino;
        self.adopt(connection, ino, Lease::of(grant, sent), |state| {
            // The create's own changes (`after_own`) took CREATE_VERSIONS
            // versions and installing the lease one more; any other is a
            // change the answer may predate.
            if state.next_version != stamp + CREATE_VERSIONS + 1 || attributes.kind != FileKind::File {
                return;
            }
            if let Some((dir, name)) = named {
                // A lease on the directory valid now, with no lease installed
                // since before the request, held while the create executed:
                // another client's change of the name since would have
                // revoked it.
                if let Some(file) = state.files.get_mut(&dir).filter(|f| f.lease.valid(&area, lease_now())) {
                    if file.lookups.len() >= MAX_LOOKUPS {
                        file.lookups.clear();
                    }
                    let found = CachedPath { ino, kind: FileKind::File };
                    file.lookups.insert(name.to_vec(), found);
                }
            }
            if let Some(file) = state.files.get_mut(&ino) {
                file.attributes = Some(attributes.clone());
                file.size = Some(attributes.size);
                if attributes.size == 0 && file.pages.is_empty() {
                    // An empty file: its one (empty) page is known.
                    file.pages.insert(0, Vec::new());
                }
            }
        });
    }

    /// The root directory's object, once known.
    pub(crate) fn root(&self) -> Option<u64> {
        self.state.lock().root
    }

    /// Records the root directory's object.
    pub(crate) fn set_root(&self, ino: u64) {
        self.state.lock().root = Some(ino);
    }

    /// The cached lookup of `name` in directory `dir`, if the directory's
    /// lease holds.
    pub(crate) fn lookup(&self, connection: &Connection, dir: u64, name: &[u8]) -> Option<CachedPath> {
        if !self.enabled || connection.is_gone() {
            return None;
        }
        let area = connection.region().leases();
        // Under a valid lease (the common case) one lock and one look at
        // the clock; otherwise the lease is renewed first.
        let held = self
            .state
            .lock()
            .files
            .get(&dir)
            .map(|file| file.lease.valid(&area, lease_now()).then(|| file.lookups.get(name).copied()));
        let found = match held.flatten() {
            Some(found) => found,
            None => {
                if !self.file_lease(connection, dir) {
                    return None;
                }
                let state = self.state.lock();
                let file = state.files.get(&dir).filter(|f| f.lease.valid(&area, lease_now()))?;
                file.lookups.get(name).copied()
            }
        };
        if found.is_some() {
            self.cached_lookups.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// Caches the lookup of `name` in `dir` fetched since `version`.
    pub(crate) fn insert_lookup(
        &self,
        connection: &Connection,
        dir: u64,
        version: u64,
        name: &[u8],
        found: CachedPath,
    ) {
        let area = connection.region().leases();
        let mut state = self.state.lock();
        if let Some(file) = state.files.get_mut(&dir) {
            if file.version == version && file.lease.valid(&area, lease_now()) {
                if file.lookups.len() >= MAX_LOOKUPS {
                    file.lookups.clear();
                }
                file.lookups.insert(name.to_vec(), found);
                state.note_inside(dir, found);
            }
        }
    }

    /// A kept open of `ino` that serves `class` (`kept_for`) and its own
    /// class, taken out of the cache, if the file's lease holds.
    pub(crate) fn take_handle(&self, connection: &Connection, ino: u64, class: i32) -> Option<(u64, i32)> {
        if !self.enabled || connection.is_gone() {
            return None;
        }
        let area = connection.region().leases();
        let mut state = self.state.lock();
        // Under a valid lease (the common case) one lock and one look at
        // the clock; otherwise the lease is renewed first.
        let valid = |state: &State| state.files.get(&ino).is_some_and(|file| file.lease.valid(&area, lease_now()));
        if !valid(&state) {
            drop(state);
            if !self.file_lease(connection, ino) {
                return None;
            }
            state = self.state.lock();
            if !valid(&state) {
                return None;
            }
        }
        let file = state.files.get_mut(&ino)?;
        let at = kept_for(&file.handles, class)?;
        let (kept, handle) = file.handles.swap_remove(at);
        state.kept_handles -= 1;
        self.cached_opens.fetch_add(1, Ordering::Relaxed);
        Some((handle, kept))
    }

    /// Whether the cache keeps an open of `ino` in `class`, under a lease
    /// valid or run out: [`Cache::take_handle`] renews a lease that ran
    /// out, which keeps the open when the server held the lease unrevoked.
    pub(crate) fn keeps_open(&self, ino: u64, class: i32) -> bool {
        self.enabled && self.state.lock().files.get(&ino).is_some_and(|f| kept_for(&f.handles, class).is_some())
    }

    /// Records that `handle` is open on `ino` (with O_APPEND: `append`).
    pub(crate) fn opened(&self, handle: u64, ino: u64, append: bool) {
        if self.enabled {
            self.state.lock().handle_files.insert(handle, OpenFile { ino, append });
        }
    }

    /// Keeps a closed open for reuse if the file's lease holds; false if
    /// the caller must release it.
    pub(crate) fn keep_handle(&self, connection: &Connection, ino: u64, class: i32, handle: u64) -> bool {
        if !self.enabled {
            return false;
        }
        let area = connection.region().leases();
        let mut state = self.state.lock();
        if state.kept_handles >= self.max_kept_handles {
            state.handle_files.remove(&handle);
            return false;
        }
        let kept = match state.files.get_mut(&ino) {
            Some(file) if file.lease.valid(&area, lease_now()) => {
                file.handles.push((class, handle));
                true
            }
            _ => false,
        };
        if kept {
            state.kept_handles += 1;
        } else {
            state.handle_files.remove(&handle);
        }
        kept
    }

    /// Takes every kept open out (to release them when handles run out).
    pub(crate) fn take_kept_handles(&self) -> Vec<u64> {
        self.state.lock().take_all_handles()
    }

    /// Cached attributes of file `ino`, if its lease holds.
    pub(crate) fn attributes(&self, connection: &Connection, ino: u64) -> Option<Attributes> {
        if !self.enabled || connection.is_gone() {
            return None;
        }
        let area = connection.region().leases();
        let state = self.state.lock();
        let file = state.files.get(&ino).filter(|f| f.lease.valid(&area, lease_now()))?;
        let attributes = file.attributes.clone()?;
        self.cached_attributes.fetch_add(1, Ordering::Relaxed);
        Some(attributes)
    }

    /// The version of file `ino` before fetching something of it, with its
    /// lease made valid; `None` when it cannot be cached.
    pub(crate) fn file_version(&self, connection: &Connection, ino: u64) -> Option<u64> {
        if !self.enabled || !self.file_lease(connection, ino) {
            return None;
        }
        self.state.lock().files.get(&ino).map(|f| f.version)
    }

    /// Caches attributes of a regular file fetched since `version`.
    pub(crate) fn insert_attributes(&self, connection: &Connection, version: u64, attributes: &Attributes) {
        if attributes.kind != FileKind::File {
            return;
        }
        let area = connection.region().leases();
        let mut state = self.state.lock();
        if let Some(file) = state.files.get_mut(&attributes.ino) {
            if file.version == version && file.lease.valid(&area, lease_now()) {
                file.attributes = Some(attributes.clone());
                file.size = Some(attributes.size);
            }
        }
    }

    /// The cached listing of directory `ino`, if its lease holds.
    pub(crate) fn listing(&self, connection: &Connection, ino: u64) -> Option<Arc<Vec<DirectoryEntry>>> {
        if !self.enabled || connection.is_gone() {
            return None;
        }
        let area = connection.region().leases();
        let state = self.state.lock();
        let entries = state.files.get(&ino).filter(|f| f.lease.valid(&area, lease_now()))?.entries.clone()?;
        self.cached_listings.fetch_add(1, Ordering::Relaxed);
        Some(entries)
    }

    /// Caches the whole listing of directory `ino` fetched since `version`.
    pub(crate) fn insert_listing(
        &self,
        connection: &Connection,
        ino: u64,
        version: u64,
        entries: Arc<Vec<DirectoryEntry>>,
    ) {
        let area = connection.region().leases();
        let mut state = self.state.lock();
        if let Some(file) = state.files.get_mut(&ino) {
            if file.version == version && file.lease.valid(&area, lease_now()) {
                file.entries = Some(entries);
            }
        }
    }

    /// Serves a read of `out.len()` bytes at `offset` of `ino` from cached
    /// pages, if they cover it (up to the file's end) and the lease holds.
    pub(crate) fn read(&self, connection: &Connection, ino: u64, offset: u64, out: &mut [u8]) -> Option<usize> {
        if !self.enabled || connection.is_gone() {
            return None;
        }
        let area = connection.region().leases();
        let state = self.state.lock();
        let file = state.files.get(&ino).filter(|f| f.lease.valid(&area, lease_now()))?;
        let mut done = 0;
        while done < out.len() {
            let at = offset + done as u64;
            let page = file.pages.get(&(at / PAGE as u64))?;
            let within = (at % PAGE as u64) as usize;
            if within >= page.len() {
                break; // the file ends in this page
            }
            let n = (page.len() - within).min(out.len() - done);
            out[done..done + n].copy_from_slice(&page[within..within + n]);
            done += n;
            if page.len() < PAGE {
                break;
            }
        }
        self.cached_reads.fetch_add(1, Ordering::Relaxed);
        Some(done)
    }

    /// Caches `bytes` read at page-aligned `start` of `ino`, fetched since
    /// `version`; `asked` bytes were asked for, so a shorter answer ends
    /// the file.
    pub(crate) fn insert_pages(
        &self,
        connection: &Connection,
        ino: u64,
        version: u64,
        start: u64,
        asked: usize,
        bytes: &[u8],
    ) {
        let area = connection.region().leases();
        let mut state = self.state.lock();
        let room = self.max_page_bytes.saturating_sub(state.page_bytes);
        let Some(file) = state.files.get_mut(&ino) else { return };
        if file.version != version || !file.lease.valid(&area, lease_now()) {
            return;
        }
        if bytes.len() < asked && (start == 0 || !bytes.is_empty()) {
            // The file ends there, as of `version`: its size is known
            // again (a zero-copy or redirected write drops it), so the
            // client's next writes are kept in the pages. (Nothing at all
            // from past the start says only that it ends before.)
            file.size = Some(start + bytes.len() as u64);
        }
        let (added, replaced) = put_pages(file, start, asked, bytes, room, self.max_file_pages);
        state.page_bytes = state.page_bytes + added - replaced;
    }

    /// Drops what this client's own `request`, answered by `response`,
    /// made stale; returns kept opens it made unusable (a change of
    /// permissions: a later open must be checked again), to release. A
    /// write answered in full is kept in the file's cached pages instead
    /// (`written`) if `stamp`, the cache's [`Cache::stamp`] when the
    /// request was sent, says no change of this client came between.
    pub(crate) fn after_own(
        &self,
        request: &Request,
        response: &Result<Response, crate::ClientError>,
        stamp: Option<u64>,
    ) -> Vec<u64> {
        if !self.enabled {
            return Vec::new();
        }
        let mut state = self.state.lock();
        let mut unusable = Vec::new();
        match request {
            Request::Write { handle, offset, data } => {
                let written = match (response, data) {
                    (Ok(Response::Length(n)), Payload::Inline(bytes)) => bytes.get(..*n as usize),
                    _ => None,
                };
                let clean = stamp == Some(state.next_version);
                self.patch_or_drop(&mut state, *handle, *offset, written.filter(|_| clean));
            }
            Request::Fallocate { handle, .. } => {
                if let Some(open) = state.handle_files.get(handle).copied() {
                    state.file_changed(open.ino);
                }
            }
            Request::SetAttributes { ino, set, .. } => {
                state.file_changed(*ino);
                if set.mode.is_some() || set.uid.is_some() || set.gid.is_some() {
                    state.paths_changed();
                    unusable = state.take_handles(*ino);
                }
            }
            Request::Open { ino, flags } if flags & libc::O_TRUNC != 0 => state.file_changed(*ino),
            Request::Create { .. } => {
                // CREATE_VERSIONS: two versions, whatever the answer.
                match response {
                    Ok(Response::Created { attributes, .. }) => state.file_changed(attributes.ino),
                    _ => {
                        state.new_version();
                    }
                }
                state.listings_changed();
            }
            Request::Link { ino, .. } => {
                state.file_changed(*ino);
                state.listings_changed();
            }
            Request::Mknod { .. } | Request::Mkdir { .. } | Request::Symlink { .. } | Request::CreateBucket { .. } => {
                state.listings_changed();
            }
            Request::SetXattr { ino, .. } | Request::RemoveXattr { ino, .. } => {
                state.file_changed(*ino);
                state.paths_changed();
                unusable = state.take_handles(*ino);
            }
            Request::Unlink { parent, name } => unusable = state.unlinked(*parent, name),
            Request::Rmdir { .. } | Request::Rename { .. } | Request::MetadataBatch { .. } => {
                // Opens kept of a name removed or replaced would keep the
                // file alive after the application closed it; and an open
                // closed later must not be kept either: the file's lease is
                // forgotten here (the server grants none on an object left
                // without a name).
                unusable = match request {
                    Request::Rename { new_parent, new_name, .. } => state.forget_named(&[(*new_parent, new_name)]),
                    Request::Rmdir { .. } => Vec::new(),
                    _ => state.take_all_handles(),
                };
                state.paths_changed();
                let version = state.new_version();
                for file in state.files.values_mut() {
                    file.attributes = None;
                    file.entries = None;
                    file.version = version;
                }
            }
            Request::KvPut { .. }
            | Request::KvDelete { .. }
            | Request::KvWriteBatch { .. }
            | Request::KvWriterFinish { .. }
            | Request::DeleteBucket { .. } => {
                // A put or delete may replace or remove any value's name.
                unusable = state.take_all_handles();
                state.paths_changed();
                let inos: Vec<u64> = state.files.keys().copied().collect();
                for ino in inos {
                    state.file_changed(ino);
                }
            }
            Request::Release { handle } => {
                state.handle_files.remove(handle);
            }
            _ => {}
        }
        unusable
    }

    /// Keeps this client's write of `bytes` at `offset` through `handle`
    /// in the file's cached pages (see `written`), or, given no bytes or
    /// when the pages cannot take them, drops what the file's entry
    /// caches.
    fn patch_or_drop(&self, state: &mut State, handle: u64, offset: u64, bytes: Option<&[u8]>) {
        let Some(open) = state.handle_files.get(&handle).copied() else { return };
        let version = state.new_version();
        let room = self.max_page_bytes.saturating_sub(state.page_bytes);
        // Appends (a log) are not kept: such files are seldom read back, and
        // each would cost the client new pages.
        let bytes = bytes.filter(|_| !open.append);
        let patched = match (bytes, state.files.get_mut(&open.ino)) {
            (Some(bytes), Some(file)) => {
                let patched = written::apply(file, offset, bytes, room, self.max_file_pages);
                if patched.is_some() {
                    // Times and blocks moved; the size is kept by the patch.
                    file.attributes = None;
                    file.version = version;
                }
                patched
            }
            // Nothing cached of the file: nothing to keep or drop.
            (Some(_), None) => return,
            (None, _) => None,
        };
        match patched {
            Some(patched) => state.page_bytes = state.page_bytes + patched.added - patched.removed,
            None => state.file_changed(open.ino),
        }
    }

    /// Keeps a write posted through `handle` in the file's cached pages,
    /// as one answered in full would be. Called just after the write was
    /// put on its ring, under the ring's lock, so posts patch in the
    /// order they execute.
    pub(crate) fn posted_write(&self, handle: u64, offset: u64, bytes: &[u8]) {
        if self.enabled {
            self.patch_or_drop(&mut self.state.lock(), handle, offset, Some(bytes));
        }
    }

    /// Drops what the cache holds of file `ino`, a posted write to which
    /// failed or was sent again elsewhere (it then executes after writes
    /// posted later: their patches may be out of order).
    pub(crate) fn write_failed(&self, ino: u64) {
        if self.enabled {
            self.state.lock().file_changed(ino);
        }
    }

    /// Drops every revoked lease and what it covered; acknowledges each.
    /// Returns whether any was, and the kept opens to release.
    fn drop_revoked(&self, area: &LeaseArea<'_>) -> (bool, Vec<u64>) {
        let mut state = self.state.lock();
        let mut any = Cache::drop_revoked_subtrees(&mut state, area);
        let revoked: Vec<u64> = state
            .files
            .iter()
            .filter(|(_, f)| area.revoked(f.lease.slot, f.lease.sequence))
            .map(|(ino, _)| *ino)
            .collect();
        let mut handles = Vec::new();
        for ino in revoked {
            handles.extend(self.drop_one(&mut state, area, ino));
            any = true;
        }
        (any, handles)
    }

    /// Drops file `ino`'s entry, whose lease was revoked, and acknowledges
    /// the revocation; returns its kept opens, to release.
    fn drop_one(&self, state: &mut State, area: &LeaseArea<'_>, ino: u64) -> Vec<u64> {
        let Some(file) = state.files.remove(&ino) else { return Vec::new() };
        state.page_bytes -= page_bytes(&file);
        answer(area, file.lease.slot, file.lease.sequence);
        self.revocations.fetch_add(1, Ordering::Relaxed);
        let handles: Vec<u64> = file.handles.iter().map(|(_, h)| *h).collect();
        state.kept_handles -= handles.len();
        for h in &handles {
            state.handle_files.remove(h);
        }
        handles
    }
}

impl State {
    /// Puts `lease`, just granted or renewed, on file `ino`'s entry (made
    /// if missing). A renewal keeps what the entry holds; another lease
    /// empties it, and its old lease, if revoked, is acknowledged here
    /// (nothing of it is left to drop). Returns the kept opens taken out,
    /// to release.
    fn install(&mut self, area: &LeaseArea<'_>, ino: u64, lease: Lease) -> Vec<u64> {
        let version = self.new_version();
        let mut dropped = Vec::new();
        match self.files.get_mut(&ino) {
            Some(file) if file.lease.slot == lease.slot && file.lease.sequence == lease.sequence => {
                file.lease = lease;
            }
            Some(file) => {
                // Another lease: nothing cached under the old one stays.
                if area.revoked(file.lease.slot, file.lease.sequence) {
                    answer(area, file.lease.slot, file.lease.sequence);
                }
                file.lease = lease;
                file.attributes = None;
                file.size = None;
                self.page_bytes -= page_bytes(file);
                file.pages.clear();
                file.entries = None;
                file.lookups.clear();
                dropped = file.handles.drain(..).map(|(_, h)| h).collect();
                file.version = version;
            }
            None => {
                self.files.insert(
                    ino,
                    FileCache {
                        lease,
                        attributes: None,
                        size: None,
                        pages: IdMap::default(),
                        handles: Vec::new(),
                        entries: None,
                        lookups: HashMap::default(),
                        version,
                    },
                );
            }
        }
        self.kept_handles -= dropped.len();
        for h in &dropped {
            self.handle_files.remove(h);
        }
        dropped
    }

    /// A version never handed out before.
    fn new_version(&mut self) -> u64 {
        let version = self.next_version;
        self.next_version += 1;
        version
    }

    fn file_changed(&mut self, ino: u64) {
        let version = self.new_version();
        if let Some(file) = self.files.get_mut(&ino) {
            file.attributes = None;
            file.size = None;
            self.page_bytes -= page_bytes(file);
            file.pages.clear();
            file.entries = None;
            file.lookups.clear();
            file.version = version;
        }
    }

    /// Drops every cached listing (the client changed a directory); a
    /// listing being fetched meanwhile is not cached.
    fn listings_changed(&mut self) {
        let version = self.new_version();
        for file in self.files.values_mut() {
            file.entries = None;
            file.version = version;
        }
    }

    /// Forgets every object whose lease has run out; returns their kept
    /// opens, to release.
    fn evict_expired(&mut self, now: u64) -> Vec<u64> {
        let expired: Vec<u64> = self.files.iter().filter(|(_, f)| f.lease.expiry <= now).map(|(i, _)| *i).collect();
        let mut handles = Vec::new();
        for ino in expired {
            if let Some(file) = self.files.remove(&ino) {
                self.page_bytes -= page_bytes(&file);
                handles.extend(file.handles.iter().map(|(_, h)| *h));
            }
        }
        self.kept_handles -= handles.len();
        for h in &handles {
            self.handle_files.remove(h);
        }
        handles
    }

    /// Forgets the objects `names` name (as cached lookups say), lease and
    /// all, or every object when one is not known; returns their kept
    /// opens, to release.
    fn forget_named(&mut self, names: &[(u64, &Vec<u8>)]) -> Vec<u64> {
        let mut found = Vec::new();
        for (dir, name) in names {
            match self.files.get(dir).and_then(|d| d.lookups.get(name.as_slice())).copied() {
                Some(named) => found.push(named.ino),
                None => {
                    let all: Vec<u64> = self.files.keys().copied().collect();
                    return all.into_iter().flat_map(|ino| self.forget(ino)).collect();
                }
            }
        }
        found.into_iter().flat_map(|ino| self.forget(ino)).collect()
    }

    /// What this client's own unlink of `name` in `parent` made stale: the
    /// directory's lookup of that name, its listing and attributes; and
    /// the file it named, lease and all (opens kept of it would keep it
    /// alive after the application closed it, and an open closed later
    /// must not be kept either: the server grants no lease on an object
    /// left without a name). Other directories' lookups, and the
    /// directory's lookups of other names, stay. When the cache does not
    /// know which file the name named, every entry that is not a directory
    /// with something cached (lookups or a listing) is forgotten instead:
    /// one of them may be that file, under another name. Returns the kept
    /// opens to release.
    fn unlinked(&mut self, parent: u64, name: &[u8]) -> Vec<u64> {
        let version = self.new_version();
        let named = match self.files.get_mut(&parent) {
            Some(dir) => {
                dir.entries = None;
                dir.attributes = None;
                dir.version = version;
                dir.lookups.remove(name)
            }
            None => None,
        };
        match named {
            // Entries are per object: its other names, if it has any, lead
            // to the entry forgotten here.
            Some(named) => self.forget(named.ino),
            None => {
                let files: Vec<u64> = self
                    .files
                    .iter()
                    .filter(|(_, f)| f.lookups.is_empty() && f.entries.is_none())
                    .map(|(ino, _)| *ino)
                    .collect();
                files.into_iter().flat_map(|ino| self.forget(ino)).collect()
            }
        }
    }

    /// Drops object `ino` from the cache, lease and all; returns its kept
    /// opens, to release.
    fn forget(&mut self, ino: u64) -> Vec<u64> {
        let handles = self.take_handles(ino);
        if let Some(file) = self.files.remove(&ino) {
            self.page_bytes -= page_bytes(&file);
        }
        handles
    }

    /// Takes out every kept open.
    fn take_all_handles(&mut self) -> Vec<u64> {
        let mut out = Vec::new();
        for file in self.files.values_mut() {
            out.extend(file.handles.drain(..).map(|(_, h)| h));
        }
        self.kept_handles = 0;
        for h in &out {
            self.handle_files.remove(h);
        }
        out
    }

    /// Takes the kept opens of `ino` out.
    fn take_handles(&mut self, ino: u64) -> Vec<u64> {
        let Some(file) = self.files.get_mut(&ino) else { return Vec::new() };
        let handles: Vec<u64> = file.handles.drain(..).map(|(_, h)| h).collect();
        self.kept_handles -= handles.len();
        for h in &handles {
            self.handle_files.remove(h);
        }
        handles
    }

    /// Drops every cached lookup (the client removed or renamed a name,
    /// or changed permissions); a lookup being fetched meanwhile is not
    /// cached.
    fn paths_changed(&mut self) {
        let version = self.new_version();
        for file in self.files.values_mut() {
            file.lookups.clear();
            file.version = version;
        }
    }
}

/// Caches `bytes` read at page-aligned `start` of `file`; `asked` bytes
/// were asked for, so a shorter answer ends the file.
/// Caches no more than `room` bytes more; returns the bytes cached and
/// the bytes of the pages they replaced.
fn put_pages(
    file: &mut FileCache,
    start: u64,
    asked: usize,
    bytes: &[u8],
    room: usize,
    max_pages: usize,
) -> (usize, usize) {
    let first = start / PAGE as u64;
    let pages = asked.div_ceil(PAGE);
    let (mut added, mut replaced) = (0usize, 0usize);
    for i in 0..pages {
        if file.pages.len() >= max_pages && !file.pages.contains_key(&(first + i as u64)) {
            break;
        }
        let from = (i * PAGE).min(bytes.len());
        let to = ((i + 1) * PAGE).min(bytes.len());
        if added + (to - from) > room {
            break;
        }
        if let Some(old) = file.pages.insert(first + i as u64, bytes[from..to].to_vec()) {
            replaced += old.len();
        }
        added += to - from;
        if to - from < PAGE {
            break;
        }
    }
    (added, replaced)
}

/// Bytes of `file`'s cached pages.
fn page_bytes(file: &FileCache) -> usize {
    file.pages.values().map(Vec::len).sum()
}

/// Acknowledges the revocation of lease `sequence` of `slot` if it is the
/// one the slot's notice holds (the one the server waits for): an earlier
/// lease's acknowledgement would overwrite a later one's.
fn answer(area: &LeaseArea<'_>, slot: u32, sequence: u32) {
    if area.notice_is(slot, sequence) {
        area.acknowledge(slot, sequence);
    }
}

pub(crate) fn release_all(connection: &Connection, handles: &[u64]) {
    for &handle in handles {
        // A failure leaves the handle to the session's end.
        let _ = connection.call(&Request::Release { handle });
        connection.forget_handle(handle);
    }
}

/// The watcher: answers revocations while the client lives, whether or
/// not it makes calls. It holds the region, not the connection, while it
/// waits, so a dropped client closes its socket at once; the watcher ends
/// at its next look.
pub(crate) fn watch(connection: Weak<Connection>, cache: Arc<Cache>, region: Arc<Region>) {
    let area = region.leases();
    loop {
        let seen = area.seen();
        let (any, handles) = cache.drop_revoked(&area);
        {
            let Some(live) = connection.upgrade() else { return };
            if any {
                live.ring_all_workers();
                release_all(&live, &handles);
            }
            if live.is_gone() || (!any && live.check_alive().is_err()) {
                return;
            }
        }
        if !any {
            // A failed wait only means looking again at once.
            let _ = area.wait(seen, WATCH_SLICE);
        }
    }
}

/// What the cache's unit tests share: leases a minute long and a lease
/// area in an anonymous region.
#[cfg(test)]
mod test_support {
    #![allow(clippy::unwrap_used)]

    use larder_protocol::layout::{Layout, PAGE_BYTES};
    use larder_protocol::region::Region;

    use super::{lease_now, Lease};

    /// A lease in `slot` at `sequence` that ends in a minute.
    pub(super) fn lease(slot: u32, sequence: u32) -> Lease {
        Lease { slot, sequence, expiry: lease_now() + 60_000_000_000 }
    }

    /// A one-worker region of its own, not shared with a server: its
    /// lease area is the tests' (`Region::leases`).
    pub(super) fn region() -> Region {
        let layout =
            Layout { workers: 1, request_ring_bytes: 4096, completion_ring_bytes: 4096, data_bytes: PAGE_BYTES };
        Region::anonymous(layout).unwrap()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::test_support::{lease, region};
    use super::*;

    /// A fetch records its file's version before it asks the server and
    /// caches the answer only if the version is unchanged. Whatever
    /// happens to the entry meanwhile (the client's own change, the lease
    /// revoked and the entry dropped, a new lease and entry), the entry
    /// never shows that version again.
    #[test]
    fn an_entry_never_takes_a_version_it_or_an_earlier_one_had() {
        let region = region();
        let area = region.leases();
        let mut state = State { next_version: 1, ..State::default() };
        let mut seen = Vec::new();
        let version = |state: &State| state.files.get(&7).map(|f| f.version).unwrap();
        state.install(&area, 7, lease(0, 1));
        seen.push(version(&state));
        // The client's own write, then the revocation drops the entry.
        state.file_changed(7);
        seen.push(version(&state));
        state.files.remove(&7);
        // A new lease: a new entry.
        state.install(&area, 7, lease(0, 2));
        assert!(!seen.contains(&version(&state)), "a new entry reused version {}", version(&state));
        seen.push(version(&state));
        // Changes of every entry's lookups or listings, then another lease
        // on the same entry.
        state.paths_changed();
        seen.push(version(&state));
        state.listings_changed();
        seen.push(version(&state));
        state.install(&area, 7, lease(1, 1));
        assert!(!seen.contains(&version(&state)), "a replaced lease reused version {}", version(&state));
        seen.push(version(&state));
        state.files.remove(&7);
        state.install(&area, 7, lease(1, 2));
        assert!(!seen.contains(&version(&state)), "a new entry reused version {}", version(&state));
    }

    /// An entry's lease replaced while its old lease was revoked and not
    /// yet answered: the old one is acknowledged, so its writer does not
    /// wait for it to expire.
    #[test]
    fn a_replaced_revoked_lease_is_acknowledged() {
        let region = region();
        let area = region.leases();
        let mut state = State { next_version: 1, ..State::default() };
        state.install(&area, 7, lease(3, 1));
        state.files.get_mut(&7).unwrap().pages.insert(0, vec![1; 8]);
        state.page_bytes += 8;
        area.notify(3, 1);
        state.install(&area, 7, lease(4, 1));
        assert!(area.acknowledged(3, 1));
        let file = state.files.get(&7).unwrap();
        assert!(file.pages.is_empty(), "nothing cached under the old lease stays");
        assert_eq!(state.page_bytes, 0, "and its bytes are no longer counted");
        assert_eq!((file.lease.slot, file.lease.sequence), (4, 1));
    }
}
