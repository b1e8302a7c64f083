//! Each session's cache of resolved directories: a path's prefix (all but
//! its last component, as the client wrote it) to the directory the
//! session's own walk from the root found there, so that `Resolve` and
//! `OpenPath` look up only the last component, as an embedded caller
//! holding the directory does (docs/server.md, "Path resolution").
//!
//! A prefix's directory depends on every directory on the way: their
//! names (a rename or removal), and their modes and owners (the search
//! permission checked on each, for the session's fixed credentials). The
//! requests that may change those are the ones that revoke the namespace
//! lease (`crate::conflicts`), less an unlink, which removes no directory
//! ([`changes_paths`]); each runs inside a
//! [`PathChanges::begin`] .. drop, which moves the server's path
//! generation on both before and after it. An entry is used only while
//! the generation is the one read before the walk that made it and no
//! such request is running: so a cached prefix answers exactly what a
//! walk would have answered at that moment, and never after a change to
//! a directory on it has been answered. Changes the server does not see
//! (a FUSE mount of the same store) would make entries stale: a server
//! sharing its store so keeps none ([`Limits::max_cached_directories`]).
//!
//! [`Limits::max_cached_directories`]: crate::Limits::max_cached_directories

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use larder_fs::{Attr, Cred, Fs, Resolved};
use larder_protocol::message::{HeapOperation, Request};

/// The server's path generation (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct PathChanges {
    /// Path-changing requests running now.
    running: AtomicU64,
    /// Moved on at the start and at the end of each of them.
    generation: AtomicU64,
}

/// A path-changing request running: the generation moves on again, and
/// the request stops counting as running, when this is dropped.
#[must_use]
pub(crate) struct PathChange<'a>(&'a PathChanges);

impl Drop for PathChange<'_> {
    fn drop(&mut self) {
        self.0.generation.fetch_add(1, Ordering::SeqCst);
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

impl PathChanges {
    /// Marks a path-changing request as running until the guard drops.
    pub(crate) fn begin(&self) -> PathChange<'_> {
        self.running.fetch_add(1, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
        PathChange(self)
    }

    /// The generation, when no path-changing request is running (read it
    /// before the walk an entry comes from, and before using one).
    pub(crate) fn settled(&self) -> Option<u64> {
        let generation = self.generation.load(Ordering::SeqCst);
        let idle = self.running.load(Ordering::SeqCst) == 0;
        // A change that began and ended between the two loads above moved
        // the generation on twice: read it again, so that it is not missed.
        (idle && self.generation.load(Ordering::SeqCst) == generation).then_some(generation)
    }
}

/// Whether `request` may change how an existing path resolves to a
/// directory, or whether its search is allowed: every request whose lease
/// scope names the namespace or everything (`crate::conflicts`), without
/// the look-ups that scope makes (a mode or owner change of any object
/// counts, directory or not), except an unlink: it removes no directory
/// (EISDIR), and a cache holds directories only, the last name of a path
/// being looked up every time.
pub(crate) fn changes_paths(request: &Request) -> bool {
    match request {
        Request::SetAttributes { set, .. } => set.mode.is_some() || set.uid.is_some() || set.gid.is_some(),
        Request::Rmdir { .. }
        | Request::Rename { .. }
        | Request::SetXattr { .. }
        | Request::RemoveXattr { .. }
        | Request::MetadataBatch { .. }
        | Request::KvPut { .. }
        | Request::KvDelete { .. }
        | Request::KvWriteBatch { .. }
        | Request::KvWriterFinish { .. }
        | Request::DeleteBucket { .. }
        | Request::HeapOpen { .. } => true,
        Request::Heap { operation, .. } => matches!(operation, HeapOperation::Free { .. }),
        _ => false,
    }
}

/// Longest path prefix a cache keeps: with the entry limit, this bounds a
/// client's cache to about `max_cached_directories` KiB of keys (a longer
/// prefix is walked every time, as without the cache).
pub(crate) const MAX_CACHED_PREFIX_BYTES: usize = 1024;

/// One session's cache: prefixes to directories, all made at one
/// generation (entries of an older one are dropped together).
#[derive(Debug, Default)]
pub(crate) struct DirectoryCache {
    generation: u64,
    entries: HashMap<Box<[u8]>, Attr>,
}

impl DirectoryCache {
    /// The directory `prefix` led to, if cached at `generation`.
    fn get(&mut self, prefix: &[u8], generation: u64) -> Option<Attr> {
        if generation != self.generation {
            if generation > self.generation {
                self.entries.clear();
                self.generation = generation;
            }
            return None;
        }
        self.entries.get(prefix).cloned()
    }

    /// Keeps `directory` for `prefix`, found by a walk that began at
    /// `generation`; at most `max` entries (a full cache starts over).
    fn put(&mut self, prefix: &[u8], directory: Attr, generation: u64, max: usize) {
        if generation < self.generation || max == 0 || prefix.len() > MAX_CACHED_PREFIX_BYTES {
            return;
        }
        if generation > self.generation || self.entries.len() >= max {
            self.entries.clear();
            self.generation = generation;
        }
        self.entries.insert(prefix.into(), directory);
    }

    /// Entries held (for tests and limits).
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// [`Fs::resolve`] of `path` for `cred`, the walk to its last directory
/// taken from `cache` when it holds it at the current generation, and
/// kept there when walked.
pub(crate) fn resolve(
    fs: &Fs,
    changes: &PathChanges,
    cache: &parking_lot::Mutex<DirectoryCache>,
    max: usize,
    cred: &Cred,
    path: &[u8],
    follow: bool,
) -> larder_fs::Result<Resolved> {
    if max == 0 {
        return fs.resolve(cred, path, follow);
    }
    let split = larder_fs::split_parent(path);
    let (Some(generation), Some((prefix, name, dir_only))) = (changes.settled(), split) else {
        return fs.resolve(cred, path, follow);
    };
    let cached = cache.lock().get(prefix, generation);
    if let Some(directory) = cached {
        if let Some(resolved) = fs.resolve_in(cred, &directory, name, follow, dir_only)? {
            return Ok(resolved);
        }
        return fs.resolve(cred, path, follow);
    }
    let walked = fs.resolve_walk(cred, path, follow)?;
    if let Some(directory) = walked.parent {
        cache.lock().put(prefix, directory, generation, max);
    }
    Ok(walked.resolved)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn dir(ino: u64) -> Attr {
        larder_fs::Attr {
            ino,
            kind: larder_fs::Kind::Directory,
            mode: 0o40755,
            nlink: 2,
            uid: 0,
            gid: 0,
            rdev: 0,
            size: 0,
            blocks: 0,
            atime: Default::default(),
            mtime: Default::default(),
            ctime: Default::default(),
            btime: Default::default(),
            generation: 0,
        }
    }

    #[test]
    fn a_change_running_or_done_voids_entries_of_before() {
        let changes = PathChanges::default();
        let mut cache = DirectoryCache::default();
        let g = changes.settled().unwrap();
        cache.put(b"/a", dir(5), g, 8);
        assert_eq!(cache.get(b"/a", g).map(|a| a.ino), Some(5));
        let change = changes.begin();
        assert_eq!(changes.settled(), None, "nothing cached is used while a change runs");
        drop(change);
        let after = changes.settled().unwrap();
        assert_ne!(after, g);
        assert_eq!(cache.get(b"/a", after), None);
        // A walk that began before the change keeps nothing now.
        cache.put(b"/a", dir(5), g, 8);
        assert_eq!(cache.get(b"/a", after), None);
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn a_prefix_longer_than_the_bound_is_not_kept() {
        let changes = PathChanges::default();
        let mut cache = DirectoryCache::default();
        let g = changes.settled().unwrap();
        let long = vec![b'a'; MAX_CACHED_PREFIX_BYTES + 1];
        cache.put(&long, dir(5), g, 8);
        assert_eq!(cache.len(), 0);
        let longest = vec![b'a'; MAX_CACHED_PREFIX_BYTES];
        cache.put(&longest, dir(6), g, 8);
        assert_eq!(cache.get(&longest, g).map(|a| a.ino), Some(6));
    }

    /// Every request whose lease scope names the namespace or everything
    /// moves the path generation on (and so does a mode change of a file,
    /// which `changes_paths` does not tell from a directory's).
    #[test]
    fn every_request_that_revokes_the_namespace_changes_paths() {
        use larder_protocol::message::{Durability, LeaseTarget, Payload, RenameFlags, SetAttributes, XattrFlags};
        let dir = tempfile::tempdir().unwrap();
        let fs = std::sync::Arc::new(Fs::create(&dir.path().join("store"), larder_fs::FsOptions::default()).unwrap());
        let root = fs.root();
        let d = fs.mkdir(&Cred::root(), root, b"d", 0o755).unwrap().ino;
        let state = crate::ServerState::new(fs.clone(), crate::Limits::default(), 1);
        let session = state.open_session(0, 0, Vec::new()).unwrap();
        let name = |s: &str| s.as_bytes().to_vec();
        let set = |mode, size| SetAttributes { mode, size, ..SetAttributes::default() };
        let requests = vec![
            Request::Lookup { parent: root, name: name("d") },
            Request::Create { parent: root, name: name("f"), mode: 0o644, flags: libc::O_RDWR, lease: false },
            Request::Mkdir { parent: root, name: name("e"), mode: 0o755 },
            Request::Symlink { parent: root, name: name("l"), target: name("d") },
            Request::Link { ino: d, parent: root, name: name("g") },
            Request::SetAttributes { ino: d, set: set(Some(0o700), None), handle: None },
            Request::SetAttributes { ino: d, set: set(None, Some(0)), handle: None },
            Request::Unlink { parent: root, name: name("f") },
            Request::Rmdir { parent: root, name: name("d") },
            Request::Rename {
                parent: root,
                name: name("d"),
                new_parent: root,
                new_name: name("e"),
                flags: RenameFlags::default(),
            },
            Request::SetXattr { ino: d, name: name("user.a"), value: name("v"), flags: XattrFlags::default() },
            Request::RemoveXattr { ino: d, name: name("user.a") },
            Request::MetadataBatch { operations: vec![], durability: Durability::Buffered },
            Request::KvPut {
                bucket: name("b"),
                key: name("k"),
                value: Payload::Inline(name("v")),
                durability: Durability::Buffered,
            },
            Request::KvDelete { bucket: name("b"), key: name("k"), durability: Durability::Buffered },
            Request::KvWriteBatch { bucket: name("b"), operations: vec![], durability: Durability::Buffered },
            Request::KvWriterFinish { handle: 1 },
            Request::DeleteBucket { bucket: name("b") },
            Request::CreateBucket { bucket: name("c") },
            Request::HeapOpen { path: name("/h") },
        ];
        for request in &requests {
            let scope = crate::conflicts::scope(&fs, &session, request, false);
            let revokes_paths = match &scope {
                crate::leases::Scope::Everything => true,
                crate::leases::Scope::Targets(t) => t.contains(&LeaseTarget::Namespace),
                crate::leases::Scope::Nothing => false,
            };
            if revokes_paths && !matches!(request, Request::Unlink { .. }) {
                assert!(changes_paths(request), "{request:?} revokes {scope:?}");
            }
        }
        assert!(!changes_paths(&Request::Unlink { parent: root, name: name("f") }), "an unlink removes no directory");
        assert!(!changes_paths(&requests[1]) && !changes_paths(&requests[2]), "creations change no path");
    }

    #[test]
    fn a_full_cache_starts_over() {
        let mut cache = DirectoryCache::default();
        for i in 0..4u64 {
            cache.put(format!("/d{i}").as_bytes(), dir(i + 10), 0, 4);
        }
        assert_eq!(cache.len(), 4);
        cache.put(b"/e", dir(20), 0, 4);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get(b"/e", 0).map(|a| a.ino), Some(20));
        assert_eq!(cache.get(b"/d0", 0), None);
    }
}
