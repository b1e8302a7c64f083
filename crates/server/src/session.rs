//! One connected client: who it is (from the kernel, never from the
//! client), the handles it holds, what it is executing, and counters.
//!
//! Handle numbers are the session's own: they start at 1 in every session
//! and map to the fs layer's file and directory handles, KV writers and KV
//! readers. A number of one session means nothing in another, and a
//! handle of one kind named where another is expected is EBADF. The table
//! is behind a lock, so requests of one client may run on several workers
//! at once; no lock is held while a request calls the engine.
//!
//! Inode numbers are checked too. A process reaches a file on ext4 only
//! through a path, with search permission on every directory of it; a
//! client names objects by number, and could guess one. So a session
//! accepts only the numbers it has *reached*: the root, and every object a
//! lookup, a path resolution or a create of this session returned (each
//! of those checked search permission on the way). Any other number is
//! ENOENT, as for an object that does not exist. A reached object stays
//! reachable for the session, as a file stays reachable to a process
//! through a descriptor or a working directory inside it after its
//! directory's mode changes.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use larder_fs::{Cred, Fs, FsError};
use larder_kv::{Kv, KvWriter};
use larder_protocol::message::Response;
use parking_lot::Mutex;

use crate::client_count::ClientCount;
use crate::error::ServerError;
use crate::limits::Limits;
use larder_protocol::id_hash::{IdMap, IdSet};

/// What a handle is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandleKind {
    /// An open file (`Open`, `Create`).
    File,
    /// An open directory (`OpenDirectory`).
    Directory,
    /// A KV value being written (`KvWriterOpen`).
    KvWriter,
    /// A KV value being read (`KvReaderOpen`).
    KvReader,
}

impl HandleKind {
    fn name(self) -> &'static str {
        match self {
            HandleKind::File => "a file",
            HandleKind::Directory => "a directory",
            HandleKind::KvWriter => "a KV writer",
            HandleKind::KvReader => "a KV reader",
        }
    }
}

/// A KV writer kept between requests; `None` once finished.
pub(crate) type SharedWriter = Arc<Mutex<Option<KvWriter<'static>>>>;

/// What a session handle stands for.
pub(crate) enum Entry {
    /// A file: the fs layer's handle and the file.
    File { fs_handle: u64, ino: u64 },
    /// A directory: the fs layer's handle and the directory.
    Directory { fs_handle: u64, ino: u64 },
    /// A KV value being written: the writer, its object, and the bucket
    /// and key it will be stored under (checked again at finish).
    Writer { writer: SharedWriter, object: u64, bucket: Vec<u8>, key: Vec<u8> },
    /// A KV value being read: its object.
    Reader { object: u64 },
}

impl Entry {
    fn kind(&self) -> HandleKind {
        match self {
            Entry::File { .. } => HandleKind::File,
            Entry::Directory { .. } => HandleKind::Directory,
            Entry::Writer { .. } => HandleKind::KvWriter,
            Entry::Reader { .. } => HandleKind::KvReader,
        }
    }

    fn object(&self) -> u64 {
        match self {
            Entry::File { ino, .. } | Entry::Directory { ino, .. } => *ino,
            Entry::Writer { object, .. } | Entry::Reader { object, .. } => *object,
        }
    }
}

/// What a handle reads from or writes to ([`Session::io_target`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum IoTarget {
    /// An open file, by its fs handle.
    File { fs_handle: u64 },
    /// A handle of another kind, on `object`.
    Other { kind: HandleKind, object: u64 },
}

/// The handle table.
#[derive(Default)]
struct Table {
    next: u64,
    entries: IdMap<Entry>,
    /// Slots taken by opens in progress (counted against the limit).
    reserved: usize,
}

/// A session's counters, as of one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionCounters {
    /// Requests executed.
    pub requests: u64,
    /// Requests answered with an error.
    pub errors: u64,
    /// Bytes returned by reads and gets.
    pub bytes_read: u64,
    /// Bytes written by writes and puts.
    pub bytes_written: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    errors: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

/// Counts a session among the server's clients while it lives.
struct ClientSlot(Arc<ClientCount>);

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.0.remove();
    }
}

/// One connected client (see the module doc). Made by
/// [`ServerState::open_session`](crate::ServerState::open_session);
/// [`Session::close`], or dropping it, releases everything it holds.
pub struct Session {
    cred: Cred,
    groups: Vec<u32>,
    fs: Arc<Fs>,
    kv: Arc<Kv>,
    limits: Limits,
    table: Mutex<Table>,
    /// Inode numbers the session has reached (see the module doc).
    known: Mutex<IdSet>,
    /// Directories its paths led to (`crate::path_cache`).
    directories: Mutex<crate::path_cache::DirectoryCache>,
    in_flight: AtomicU32,
    counters: Counters,
    /// Its leases, and the table they are in (none for a session made
    /// without a server state).
    leases: Option<(Arc<crate::leases::LeaseTable>, Arc<crate::leases::LeaseHolder>)>,
    /// The heaps it opened and its descriptor socket.
    heaps: crate::heaps::SessionHeaps,
    _slot: ClientSlot,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("uid", &self.cred.uid)
            .field("gid", &self.cred.gid)
            .field("groups", &self.groups)
            .field("handles", &self.handle_count())
            .finish()
    }
}

/// A request being executed: counted against `max_in_flight` until
/// dropped.
#[derive(Debug)]
pub struct InFlight<'a> {
    session: &'a Session,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.session.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A slot of the handle table taken by an open in progress: released if
/// the open fails, filled if it succeeds.
pub(crate) struct Reservation<'a> {
    session: &'a Session,
    filled: bool,
}

impl Reservation<'_> {
    /// Puts `entry` in the reserved slot; returns its handle number.
    pub(crate) fn fill(mut self, entry: Entry) -> u64 {
        let mut table = self.session.table.lock();
        table.reserved -= 1;
        table.next += 1;
        let handle = table.next;
        table.entries.insert(handle, entry);
        self.filled = true;
        handle
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.filled {
            self.session.table.lock().reserved -= 1;
        }
    }
}

impl Session {
    /// A session of a client with these ids (from SO_PEERCRED and
    /// SO_PEERGROUPS), counted in `clients`.
    pub(crate) fn new(
        fs: Arc<Fs>,
        limits: Limits,
        (uid, gid, groups): (u32, u32, Vec<u32>),
        clients: Arc<ClientCount>,
    ) -> Session {
        // Deletes through the KV API keep an object the file system has
        // open until its last release.
        let opens = Arc::new(crate::open_objects::FsOpens(Arc::clone(&fs)));
        let kv = Arc::new(Kv::with_store(Arc::clone(fs.store()), (uid, gid)).sharing_opens(opens));
        let known = Mutex::new(IdSet::from_iter([fs.root()]));
        Session {
            known,
            directories: Mutex::new(crate::path_cache::DirectoryCache::default()),
            cred: Cred::new(uid, gid, groups.clone()),
            groups,
            fs,
            kv,
            limits,
            table: Mutex::new(Table::default()),
            in_flight: AtomicU32::new(0),
            counters: Counters::default(),
            leases: None,
            heaps: crate::heaps::SessionHeaps::default(),
            _slot: ClientSlot(clients),
        }
    }

    /// Makes the session a holder of leases in `table`.
    pub(crate) fn hold_leases(&mut self, table: Arc<crate::leases::LeaseTable>) {
        let holder = table.holder(self.limits.max_leases);
        self.leases = Some((table, holder));
    }

    /// Its heaps.
    pub(crate) fn heaps(&self) -> &crate::heaps::SessionHeaps {
        &self.heaps
    }

    /// Heaps it has open.
    pub fn open_heaps(&self) -> usize {
        self.heaps.count()
    }

    /// Gives the session the client's socket (a duplicate), on which heap
    /// attaches send their descriptors.
    pub fn set_descriptor_socket(&self, socket: std::os::unix::net::UnixStream) {
        self.heaps.set_socket(socket);
    }

    /// Its lease holder.
    pub(crate) fn lease_holder(&self) -> Option<&Arc<crate::leases::LeaseHolder>> {
        self.leases.as_ref().map(|(_, holder)| holder)
    }

    /// Leases the session holds now.
    pub fn lease_count(&self) -> usize {
        self.lease_holder().map_or(0, |h| h.live())
    }

    /// The client's credentials, against which every request is checked.
    pub fn cred(&self) -> &Cred {
        &self.cred
    }

    /// The client's supplementary groups.
    pub fn groups(&self) -> &[u32] {
        &self.groups
    }

    /// The session's KV API: objects and levels it creates belong to the
    /// client's uid and gid.
    pub fn kv(&self) -> &Arc<Kv> {
        &self.kv
    }

    /// The limits the session was opened with.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Handles open now.
    pub fn handle_count(&self) -> usize {
        self.table.lock().entries.len()
    }

    /// What handle `handle` is and the object it is open on (a file's or
    /// directory's inode, a KV value's object), if open. The workers use
    /// it to find a file's owning worker.
    pub fn handle(&self, handle: u64) -> Option<(HandleKind, u64)> {
        self.table.lock().entries.get(&handle).map(|e| (e.kind(), e.object()))
    }

    /// What handle `handle` is, for a read or a write: a file's fs handle,
    /// or another kind and its object; `None` if not open. One look at the
    /// table where [`Session::handle`] and [`Session::file`] take two.
    pub(crate) fn io_target(&self, handle: u64) -> Option<IoTarget> {
        self.table.lock().entries.get(&handle).map(|e| match e {
            Entry::File { fs_handle, .. } => IoTarget::File { fs_handle: *fs_handle },
            other => IoTarget::Other { kind: other.kind(), object: other.object() },
        })
    }

    /// Whether the session has reached object `ino` (the root, or an
    /// object a lookup, path or create of this session returned), so that
    /// requests may name it by number.
    pub fn knows(&self, ino: u64) -> bool {
        self.known.lock().contains(&ino)
    }

    /// ENOENT unless the session has reached `ino`.
    pub(crate) fn check_known(&self, ino: u64) -> Result<(), FsError> {
        if self.knows(ino) {
            Ok(())
        } else {
            Err(FsError::posix(libc::ENOENT, format!("object {ino} was not reached by a lookup of this client")))
        }
    }

    /// Resolves `path` for the session as [`Fs::resolve`] does, through
    /// its cache of resolved directories (`crate::path_cache`).
    pub(crate) fn resolve(
        &self,
        changes: &crate::path_cache::PathChanges,
        path: &[u8],
        follow: bool,
    ) -> Result<larder_fs::Resolved, FsError> {
        let max = self.limits.max_cached_directories;
        crate::path_cache::resolve(&self.fs, changes, &self.directories, max, &self.cred, path, follow)
    }

    /// Directories the session's cache holds now.
    pub fn cached_directories(&self) -> usize {
        self.directories.lock().len()
    }

    /// Records that the session reached `ino`; ENFILE when it knows
    /// `max_known_objects` already.
    pub(crate) fn learn(&self, ino: u64) -> Result<(), FsError> {
        self.learn_all(&[ino])
    }

    /// [`Session::learn`] of each of `inos` in turn, under one lock: the
    /// ones before a refusal are learnt, as by separate calls.
    pub(crate) fn learn_all(&self, inos: &[u64]) -> Result<(), FsError> {
        let mut known = self.known.lock();
        for &ino in inos {
            if known.len() >= self.limits.max_known_objects && !known.contains(&ino) {
                return Err(FsError::posix(
                    libc::ENFILE,
                    format!("this client knows {} objects, the limit (max_known_objects)", known.len()),
                ));
            }
            known.insert(ino);
        }
        Ok(())
    }

    /// Requests being executed now.
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Acquire)
    }

    /// The counters so far.
    pub fn counters(&self) -> SessionCounters {
        let c = &self.counters;
        SessionCounters {
            requests: c.requests.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
            bytes_read: c.bytes_read.load(Ordering::Relaxed),
            bytes_written: c.bytes_written.load(Ordering::Relaxed),
        }
    }

    /// Counts a request as in flight, or refuses it
    /// ([`ServerError::TooManyInFlight`], EAGAIN) when
    /// `max_in_flight` are already. [`execute`](crate::execute) calls
    /// this; a caller that queues requests may hold the guard from the
    /// moment it takes a request and pass it to
    /// [`execute_admitted`](crate::execute_admitted).
    pub fn admit(&self) -> Result<InFlight<'_>, ServerError> {
        let max = self.limits.max_in_flight;
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
            .map_err(|_| ServerError::TooManyInFlight { max })?;
        Ok(InFlight { session: self })
    }

    /// Counts one executed request and its outcome.
    pub(crate) fn count(&self, response: &Response, read: u64, written: u64) {
        let c = &self.counters;
        c.requests.fetch_add(1, Ordering::Relaxed);
        if matches!(response, Response::Error { .. }) {
            c.errors.fetch_add(1, Ordering::Relaxed);
        }
        // Most requests move no bytes: no locked add for them.
        if read > 0 {
            c.bytes_read.fetch_add(read, Ordering::Relaxed);
        }
        if written > 0 {
            c.bytes_written.fetch_add(written, Ordering::Relaxed);
        }
    }

    /// Takes a slot of the handle table for an open about to be made, or
    /// EMFILE if `max_open_handles` are open or being opened.
    pub(crate) fn reserve(&self) -> Result<Reservation<'_>, FsError> {
        let mut table = self.table.lock();
        let used = table.entries.len() + table.reserved;
        if used >= self.limits.max_open_handles {
            return Err(FsError::posix(
                libc::EMFILE,
                format!("{used} handles are open, the limit (max_open_handles) of this client"),
            ));
        }
        table.reserved += 1;
        Ok(Reservation { session: self, filled: false })
    }

    /// Looks handle `handle` up as `kind`; `f` maps its entry. EBADF if
    /// it is not open, or is of another kind.
    pub(crate) fn with_entry<T>(
        &self,
        handle: u64,
        kind: HandleKind,
        f: impl FnOnce(&Entry) -> T,
    ) -> Result<T, FsError> {
        let table = self.table.lock();
        match table.entries.get(&handle) {
            Some(e) if e.kind() == kind => Ok(f(e)),
            Some(e) => Err(wrong_kind(handle, e.kind(), kind)),
            None => Err(not_open(handle)),
        }
    }

    /// The fs handle and inode of file handle `handle`.
    pub(crate) fn file(&self, handle: u64) -> Result<(u64, u64), FsError> {
        self.with_entry(handle, HandleKind::File, |e| match e {
            Entry::File { fs_handle, ino } => (*fs_handle, *ino),
            _ => (0, 0),
        })
    }

    /// The fs handle of directory handle `handle`.
    pub(crate) fn directory(&self, handle: u64) -> Result<u64, FsError> {
        self.with_entry(handle, HandleKind::Directory, |e| match e {
            Entry::Directory { fs_handle, .. } => *fs_handle,
            _ => 0,
        })
    }

    /// Removes handle `handle`, which must be of `kind`, from the table.
    pub(crate) fn take(&self, handle: u64, kind: HandleKind) -> Result<Entry, FsError> {
        self.take_if(handle, |k| k == kind).map_err(|found| match found {
            Some(other) => wrong_kind(handle, other, kind),
            None => not_open(handle),
        })
    }

    /// Removes handle `handle`, of any kind but `unless`, from the table;
    /// a handle of that kind stays open (`Err(Some(kind))`), and one not
    /// open is `Err(None)`.
    pub(crate) fn take_unless(&self, handle: u64, unless: HandleKind) -> Result<Entry, Option<HandleKind>> {
        self.take_if(handle, |k| k != unless)
    }

    /// Removes handle `handle` from the table if `accept` takes its kind:
    /// one lock and, for an accepted handle, one hash operation. A handle
    /// of a kind refused stays open (`Err(Some(kind))`); one not open is
    /// `Err(None)`.
    fn take_if(&self, handle: u64, accept: impl FnOnce(HandleKind) -> bool) -> Result<Entry, Option<HandleKind>> {
        let mut table = self.table.lock();
        match table.entries.remove(&handle) {
            Some(entry) if accept(entry.kind()) => Ok(entry),
            Some(entry) => {
                let kind = entry.kind();
                table.entries.insert(handle, entry);
                Err(Some(kind))
            }
            None => Err(None),
        }
    }

    /// Releases what `entry` holds in the engine.
    pub(crate) fn release(&self, entry: Entry) -> Result<(), FsError> {
        match entry {
            Entry::File { fs_handle, .. } => self.fs.release(fs_handle),
            Entry::Directory { fs_handle, .. } => self.fs.releasedir(fs_handle),
            Entry::Writer { writer, .. } => {
                // Unfinished: dropping it frees its anonymous object (a
                // failure there is logged by the writer, and the store's
                // next open frees the orphan).
                drop(writer.lock().take());
                Ok(())
            }
            Entry::Reader { .. } => Ok(()),
        }
    }

    /// Releases every handle; the first failure and how many failed.
    fn release_all(&self) -> Result<(), ServerError> {
        if let Some((table, holder)) = &self.leases {
            table.close(holder);
        }
        self.heaps.release_all();
        let entries: Vec<Entry> = self.table.lock().entries.drain().map(|(_, e)| e).collect();
        let mut first = None;
        let mut failed = 0;
        for entry in entries {
            if let Err(e) = self.release(entry) {
                failed += 1;
                first.get_or_insert(e);
            }
        }
        match first {
            None => Ok(()),
            Some(source) => Err(ServerError::Release { failed, source }),
        }
    }

    /// Ends the session: releases every handle (open files, a file
    /// unlinked while open freed at its last release; directory handles;
    /// unfinished KV writers, whose objects are freed) and frees the
    /// client's slot. Every handle is released even if some fail; the
    /// first failure is returned.
    pub fn close(self) -> Result<(), ServerError> {
        self.release_all()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Err(e) = self.release_all() {
            tracing::warn!(uid = self.cred.uid, error = %e, "a dropped session's handles were not all released");
        }
    }
}

/// EBADF: `handle` is not open in this session.
fn not_open(handle: u64) -> FsError {
    FsError::posix(libc::EBADF, format!("handle {handle} is not open in this session"))
}

/// EBADF: `handle` is of another kind than the request needs.
fn wrong_kind(handle: u64, is: HandleKind, wanted: HandleKind) -> FsError {
    FsError::posix(libc::EBADF, format!("handle {handle} is {}, not {}", is.name(), wanted.name()))
}
