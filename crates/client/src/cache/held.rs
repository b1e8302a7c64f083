//! The cached open's fast path: a walk whose every lookup the cache holds,
//! and the open it keeps of the file walked to, under one lock and one
//! look at the clock. A web server's step (open, read, close of a file
//! read before) otherwise took the cache lock seven times and read the
//! clock five times before its read (a lock and a clock per directory of
//! the path, then a check of the file's lease, the taking of its kept
//! open, and the note of the handle). Anything the fast path does not
//! hold (a lease to renew, a name not cached, a symbolic link) leaves it
//! to the general path, which asks the server.

use std::sync::atomic::Ordering;

use larder_protocol::lease::LeaseArea;
use larder_protocol::message::FileKind;

use super::{lease_now, Cache, CachedPath, State};
use crate::connection::Connection;

impl Cache {
    /// What the path of `parts` (names, `count` of them, from the root)
    /// leads to, if the cache knows the root and holds, under valid
    /// leases, the lookup of every name in its directory; `None` (without
    /// asking the server) otherwise. A symbolic link, or a name other
    /// than the last that is not a directory, is `None` too.
    pub(crate) fn walk_held<'a>(
        &self,
        connection: &Connection,
        parts: impl Iterator<Item = &'a [u8]>,
        count: usize,
    ) -> Option<CachedPath> {
        if !self.enabled || connection.is_gone() {
            return None;
        }
        let area = connection.region().leases();
        let state = self.state.lock();
        let found = walk(&state, &area, lease_now(), parts, count)?;
        drop(state);
        self.cached_lookups.fetch_add(count as u64, Ordering::Relaxed);
        Some(found)
    }

    /// The regular file the path of `parts` leads to (as
    /// [`Cache::walk_held`] walks it), a kept open of it that serves
    /// `class` and that open's own class, taken out of the cache, if its
    /// lease holds too; `None` (without
    /// asking the server, and taking nothing) otherwise. The handle stays
    /// known as open on the file (a kept open is never forgotten as
    /// open), so the caller notes nothing more.
    pub(crate) fn open_held<'a>(
        &self,
        connection: &Connection,
        parts: impl Iterator<Item = &'a [u8]>,
        count: usize,
        class: i32,
    ) -> Option<(u64, u64, i32)> {
        if !self.enabled || connection.is_gone() {
            return None;
        }
        let area = connection.region().leases();
        let mut state = self.state.lock();
        let now = lease_now();
        let found = walk(&state, &area, now, parts, count).filter(|f| f.kind == FileKind::File)?;
        let file = state.files.get_mut(&found.ino).filter(|f| f.lease.valid(&area, now))?;
        let at = super::kept_for(&file.handles, class)?;
        let (kept, handle) = file.handles.swap_remove(at);
        debug_assert!(
            state.handle_files.get(&handle).map(|o| o.ino) == Some(found.ino),
            "a kept open is known as open"
        );
        state.kept_handles -= 1;
        drop(state);
        self.cached_lookups.fetch_add(count as u64, Ordering::Relaxed);
        self.cached_opens.fetch_add(1, Ordering::Relaxed);
        Some((found.ino, handle, kept))
    }
}

/// The walk of [`Cache::walk_held`], under the cache lock (`state`), with
/// leases checked against `now`.
fn walk<'a>(
    state: &State,
    area: &LeaseArea<'_>,
    now: u64,
    parts: impl Iterator<Item = &'a [u8]>,
    count: usize,
) -> Option<CachedPath> {
    let mut dir = state.root?;
    let mut found = None;
    for (i, part) in parts.enumerate() {
        let file = state.files.get(&dir).filter(|f| f.lease.valid(area, now))?;
        let next = *file.lookups.get(part)?;
        if next.kind == FileKind::Symlink || (i + 1 < count && next.kind != FileKind::Directory) {
            return None;
        }
        dir = next.ino;
        found = Some(next);
    }
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::test_support::{lease, region};
    use super::*;

    /// The fast walk finds a path only while every directory on it holds
    /// a valid lease and its lookup: a revoked or ended lease, a symbolic
    /// link, a file in the middle, or a name not cached sends the caller
    /// to the general path.
    #[test]
    fn the_held_walk_needs_every_directory_under_a_valid_lease() {
        let region = region();
        let area = region.leases();
        let mut state = State { next_version: 1, root: Some(1), ..State::default() };
        state.install(&area, 1, lease(0, 1));
        state.install(&area, 2, lease(1, 1));
        let dir = CachedPath { ino: 2, kind: FileKind::Directory };
        let file = CachedPath { ino: 3, kind: FileKind::File };
        let link = CachedPath { ino: 4, kind: FileKind::Symlink };
        state.files.get_mut(&1).unwrap().lookups.insert(b"d".to_vec(), dir);
        state.files.get_mut(&2).unwrap().lookups.insert(b"f".to_vec(), file);
        state.files.get_mut(&2).unwrap().lookups.insert(b"l".to_vec(), link);
        let names = |path: &'static str| path.split('/').map(str::as_bytes).collect::<Vec<_>>();
        let walked = |state: &State, path: &'static str, now: u64| {
            let parts = names(path);
            walk(state, &area, now, parts.iter().copied(), parts.len()).map(|f| f.ino)
        };
        let now = lease_now();
        assert_eq!(walked(&state, "d/f", now), Some(3));
        assert_eq!(walked(&state, "d", now), Some(2));
        assert_eq!(walked(&state, "d/l", now), None, "a symbolic link");
        assert_eq!(walked(&state, "d/f/x", now), None, "a file in the middle");
        assert_eq!(walked(&state, "d/g", now), None, "a name not cached");
        assert_eq!(walked(&state, "d/f", now + 120_000_000_000), None, "leases ended");
        area.notify(1, 1);
        assert_eq!(walked(&state, "d/f", now), None, "the directory's lease revoked");
        assert_eq!(walked(&state, "d", now), Some(2), "the root's lease still holds");
    }
}
