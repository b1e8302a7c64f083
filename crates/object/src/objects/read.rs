//! Reads at a consistent point: one index snapshot, with the space manager
//! told about it, so no extent the snapshot maps is reused while its bytes
//! are read.

use std::ops::Bound;
use std::sync::Arc;

use larder_index::Snapshot;
use larder_space::{ReaderGuard, SpaceError};

use super::extent_cache::{CachedMap, MAX_CACHED_ENTRIES};
use super::fmap::{copy_from_entries, successor, Mapped};
use super::heap_data::read_heap_into;
use super::{align_down, to_usize};
use crate::error::{ObjectError, Result};
use crate::meta::{fmap_key, fmap_prefix, onode_key, prefix_end, DataLocation, Onode};
use crate::store::{DerivedPath, MetaValue, Store};

/// Attempts at a snapshot the space manager accepts before giving up.
const SNAPSHOT_ATTEMPTS: usize = 16;

impl Store {
    /// Reads bytes of `object` from `offset` into `buf`; returns how many:
    /// 0 at or past the end, fewer than `buf.len()` when the object ends
    /// first. Holes read as zeros. Every 4 KiB block read from a container
    /// is checked against its crc32c: a mismatch is
    /// [`ObjectError::Corrupt`] naming the file, offset and object, never
    /// wrong data. Sees every transaction that was visible when it began.
    pub fn read(&self, object: u64, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let (snapshot, _guard) = self.read_view()?;
        let limits = self.limits();
        // The cached onode is at least as new as the snapshot (taken
        // first; the cache never holds a value older than the index's).
        // Its bytes, inline or through the extent map cached for its
        // generation, may be read under the snapshot's registration: any
        // extent it maps is freed, if ever, by a commit above the
        // snapshot. Without a cached map, the onode and map are read at
        // the snapshot instead, so that they agree.
        let meta = self.get_meta(&onode_key(object))?.ok_or(ObjectError::NoSuchObject { object })?;
        if let Some(bytes) = meta.inline_bytes(&limits)? {
            // Copied straight from the cached value.
            let from = to_usize(offset.min(bytes.len() as u64));
            let n = (bytes.len() - from).min(buf.len());
            buf[..n].copy_from_slice(&bytes[from..from + n]);
            return Ok(n);
        }
        let cached = meta.onode(&limits)?;
        let mut map = None;
        let fast = match &cached.location {
            DataLocation::Extents => match self.extent_cache().get(object, cached.generation) {
                Some(CachedMap::Whole(entries)) => {
                    map = Some(entries);
                    true
                }
                _ => false,
            },
            DataLocation::Inline(_) | DataLocation::OwnFile { .. } => true,
        };
        let onode = if fast {
            cached
        } else {
            match snapshot.get(&onode_key(object))? {
                Some(v) => Onode::decode(&v, &limits)?,
                None => return Err(ObjectError::NoSuchObject { object }),
            }
        };
        if offset >= onode.size || buf.is_empty() {
            return Ok(0);
        }
        let n = to_usize(onode.size - offset).min(buf.len());
        let out = buf.get_mut(..n).unwrap_or_default();
        match &onode.location {
            DataLocation::Inline(bytes) => {
                let src = bytes.get(to_usize(offset)..to_usize(offset) + n).ok_or_else(|| ObjectError::BadRecord {
                    record: "onode",
                    what: format!("object {object}: inline bytes shorter than its size"),
                })?;
                out.copy_from_slice(src);
            }
            DataLocation::Extents => {
                let end = offset + n as u64;
                let entries = match map {
                    Some(entries) => entries,
                    None => self.extent_map(&snapshot, object, &onode, (offset, end), &limits)?,
                };
                copy_from_entries(self.space(), object, &entries, offset, out)?;
            }
            DataLocation::OwnFile { file } => read_heap_into(self, object, *file, onode.size, offset, out)?,
        }
        Ok(n)
    }

    /// Replaces `out` with the whole of `object` and returns true, or
    /// returns false (leaving `out` alone) if it does not exist. An inline
    /// object is copied straight from its cached onode into `out`, with no
    /// allocation once `out` has room. Checked as [`Store::read`] checks.
    pub fn read_to_end_into(&self, object: u64, out: &mut Vec<u8>) -> Result<bool> {
        let meta = self.get_meta(&onode_key(object))?;
        self.read_to_end_from(meta, object, out)
    }

    /// As [`Store::read_to_end_via`], answered from memory alone:
    /// `Some(found)` when the object's onode is cached and holds the bytes
    /// inline (or the object is gone), `None` when the answer needs the
    /// disk (the onode not cached, or the bytes in extents). Never blocks
    /// on I/O, so a caller can try it where blocking is costly (Python,
    /// holding the interpreter lock) before the full read.
    pub fn read_cached_via(&self, path: &DerivedPath, object: u64, out: &mut Vec<u8>) -> Result<Option<bool>> {
        let Some((meta, inline)) = self.reached_cached(path, &onode_key(object)) else { return Ok(None) };
        Ok(copy_inline(meta.as_deref(), inline, out))
    }

    /// As [`Store::read_to_end_into`] for the object `path` leads to (its
    /// id from the path's value): through the path's cache entry, which
    /// holds the object's onode (and knows where an inline object's bytes
    /// are) while no batch rewrote it.
    pub fn read_to_end_via(&self, path: &DerivedPath, object: u64, out: &mut Vec<u8>) -> Result<bool> {
        let (meta, inline) = self.reach(path, &onode_key(object))?;
        if let Some(found) = copy_inline(meta.as_deref(), inline, out) {
            return Ok(found);
        }
        self.read_to_end_from(meta, object, out)
    }

    /// The read, given the object's cached onode value (`meta`).
    pub(super) fn read_to_end_from(
        &self,
        meta: Option<Arc<MetaValue>>,
        object: u64,
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        let Some(meta) = meta else { return Ok(false) };
        // An inline object is wholly in its onode: the cached one will do.
        if let Some(bytes) = meta.inline_bytes(&self.limits())? {
            out.clear();
            out.extend_from_slice(bytes);
            return Ok(true);
        }
        let (snapshot, _guard) = self.read_view()?;
        let limits = self.limits();
        let onode = match snapshot.get(&onode_key(object))? {
            Some(v) => Onode::decode(&v, &limits)?,
            None => return Ok(false),
        };
        match onode.location {
            DataLocation::Inline(bytes) => {
                *out = bytes;
                Ok(true)
            }
            DataLocation::Extents => {
                // Into a buffer of its own: a failed read leaves `out` alone.
                let mut data = vec![0u8; to_usize(onode.size)];
                let entries = self.extent_map(&snapshot, object, &onode, (0, onode.size), &limits)?;
                copy_from_entries(self.space(), object, &entries, 0, &mut data)?;
                *out = data;
                Ok(true)
            }
            DataLocation::OwnFile { file } => {
                let mut data = vec![0u8; to_usize(onode.size)];
                read_heap_into(self, object, file, onode.size, 0, &mut data)?;
                *out = data;
                Ok(true)
            }
        }
    }

    /// The whole of `object` as of one snapshot, or `None` if it does not
    /// exist. Checked as [`Store::read`] checks.
    pub fn read_to_end(&self, object: u64) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.read_to_end_into(object, &mut out)?.then_some(out))
    }

    /// The entries of extent-mapped `object` (whose onode at `snapshot` is
    /// `onode`) overlapping `range`, perhaps more: its whole map, from the
    /// extent cache when it holds the map of this onode generation, else
    /// scanned at `snapshot` (and cached when small).
    fn extent_map(
        &self,
        snapshot: &Snapshot,
        object: u64,
        onode: &Onode,
        (start, end): (u64, u64),
        limits: &crate::meta::MetaLimits,
    ) -> Result<Arc<[Mapped]>> {
        match self.extent_cache().get(object, onode.generation) {
            Some(CachedMap::Whole(entries)) => return Ok(entries),
            Some(CachedMap::TooLarge) => return Ok(snapshot_entries(snapshot, object, start, end, limits)?.into()),
            None => {}
        }
        let prefix = fmap_prefix(object);
        let stop = prefix_end(&prefix).unwrap_or_default();
        let mut entries = Vec::new();
        for kv in snapshot.range(Bound::Included(&prefix[..]), Bound::Excluded(&stop[..]), true)? {
            if entries.len() == MAX_CACHED_ENTRIES {
                // Too large to keep: say so, and read only the range.
                self.extent_cache().insert(object, onode.generation, &[], false);
                return Ok(snapshot_entries(snapshot, object, start, end, limits)?.into());
            }
            let (k, v) = kv?;
            entries.push(Mapped::decode(&k, &v, limits)?);
        }
        self.extent_cache().insert(object, onode.generation, &entries, true);
        Ok(entries.into())
    }

    /// An index snapshot and the space manager's registration of it. A
    /// snapshot older than frees already released is refused by the space
    /// manager; a newer one is taken then.
    fn read_view(&self) -> Result<(Snapshot, ReaderGuard)> {
        let mut attempt = 0;
        loop {
            let snapshot = self.index().snapshot();
            match self.space().register_reader(snapshot.seq()) {
                Ok(guard) => return Ok((snapshot, guard)),
                Err(SpaceError::ReaderTooOld { .. }) if attempt + 1 < SNAPSHOT_ATTEMPTS => attempt += 1,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// The entries of `object` overlapping `[start, end)` as of `snapshot`,
/// the first found by a backward seek from `start`'s block.
fn snapshot_entries(
    snapshot: &Snapshot,
    object: u64,
    start: u64,
    end: u64,
    limits: &crate::meta::MetaLimits,
) -> Result<Vec<Mapped>> {
    let mut out = Vec::new();
    let prefix = fmap_prefix(object);
    let stop = fmap_key(object, end);
    if start == 0 {
        // No entry starts before offset 0: one forward range finds them all
        // (a whole-file read, the common case, seeks once, not twice).
        for kv in snapshot.range(Bound::Included(&prefix[..]), Bound::Excluded(&stop[..]), true)? {
            let (k, v) = kv?;
            out.push(Mapped::decode(&k, &v, limits)?);
        }
        return Ok(out);
    }
    let first = successor(&fmap_key(object, align_down(start)));
    if let Some(kv) = snapshot.range(Bound::Included(&prefix[..]), Bound::Excluded(&first[..]), false)?.next() {
        let (k, v) = kv?;
        let m = Mapped::decode(&k, &v, limits)?;
        if m.end() > start {
            out.push(m);
        }
    }
    for kv in snapshot.range(Bound::Included(&first[..]), Bound::Excluded(&stop[..]), true)? {
        let (k, v) = kv?;
        out.push(Mapped::decode(&k, &v, limits)?);
    }
    Ok(out)
}

/// An inline object's bytes copied into `out` (the last `inline` bytes of
/// its onode value `meta`): `Some(true)`; `Some(false)` if there is no
/// object; `None` if its bytes are elsewhere.
fn copy_inline(meta: Option<&MetaValue>, inline: Option<usize>, out: &mut Vec<u8>) -> Option<bool> {
    let Some(meta) = meta else { return Some(false) };
    let n = inline?;
    out.clear();
    out.extend_from_slice(&meta[meta.len() - n..]);
    Some(true)
}
