//! Reading directories outside transactions: one entry, or entries in name
//! order from a position, as of one index snapshot.

use std::ops::Bound;

use larder_object::meta::{decode_dentry_key, dentry_key, dmap_prefix, prefix_end, Dentry, DentryKey, Name, Onode};
use larder_object::Store;

use crate::error::Result;

/// The entry `name` in `dir`, if any: no lock, so a concurrent change may
/// make it stale at once. Transactions re-check under locks. The key is
/// built on the stack: a lookup keeps it only if the cache does.
pub fn lookup(store: &Store, dir: u64, name: &Name) -> Result<Option<Dentry>> {
    Ok(store.get_meta(DentryKey::of(dir, name).as_bytes())?.map(|v| Dentry::decode(&v)).transpose()?)
}

/// As [`lookup`], without keeping the entry in the metadata cache when it
/// was not there: for a caller that keeps what it derives from it itself
/// (the KV API's path entries hold the dentry a key leads to).
pub fn lookup_unkept(store: &Store, dir: u64, name: &Name) -> Result<Option<Dentry>> {
    Ok(store.get_meta_unkept(DentryKey::of(dir, name).as_bytes())?.map(|v| Dentry::decode(&v)).transpose()?)
}

/// The entry `name` in `dir` and `f` of it and the attributes (the onode) of
/// the object it names (`None` if that object does not exist); `None` if
/// there is no such entry. `name` is checked as [`Name::new`] checks it
/// (an error for bytes it refuses), but neither it nor the key is kept.
/// No lock, as [`lookup`]. The entry's cached value remembers the onode
/// it led to, so while nothing is committed a repeated lookup costs one
/// metadata-cache search instead of two.
pub fn lookup_attributes<T>(
    store: &Store,
    dir: u64,
    name: &[u8],
    f: impl FnOnce(&Dentry, &Onode) -> T,
) -> Result<Option<(Dentry, Option<T>)>> {
    let Some(value) = store.get_meta(DentryKey::new(dir, name)?.as_bytes())? else { return Ok(None) };
    let dentry = Dentry::decode(&value)?;
    let attributes = store.with_attributes_linked(&value, dentry.child, |o| f(&dentry, o))?;
    Ok(Some((dentry, attributes)))
}

/// Up to `limit` entries of `dir` in name order: after `after` (exclusive)
/// when given, else from the first. Reads one consistent snapshot.
pub fn list(store: &Store, dir: u64, after: Option<&Name>, limit: usize) -> Result<Vec<(Name, Dentry)>> {
    match after {
        Some(name) => list_range(store, dir, Bound::Excluded(dentry_key(dir, name)), limit),
        None => list_range(store, dir, Bound::Included(dmap_prefix(dir).to_vec()), limit),
    }
}

/// Up to `limit` entries of `dir` in name order whose names are at or after
/// `from` (any bytes, not necessarily a valid name), as of one snapshot.
pub fn list_from(store: &Store, dir: u64, from: &[u8], limit: usize) -> Result<Vec<(Name, Dentry)>> {
    let mut start = dmap_prefix(dir).to_vec();
    start.extend_from_slice(from);
    list_range(store, dir, Bound::Included(start), limit)
}

/// Up to `limit` entries of `dir` from the dmap key bound `start`.
fn list_range(store: &Store, dir: u64, start: Bound<Vec<u8>>, limit: usize) -> Result<Vec<(Name, Dentry)>> {
    let end = prefix_end(&dmap_prefix(dir)).unwrap_or_default();
    let start = match &start {
        Bound::Included(k) => Bound::Included(&k[..]),
        Bound::Excluded(k) => Bound::Excluded(&k[..]),
        Bound::Unbounded => Bound::Unbounded,
    };
    let mut out = Vec::new();
    for kv in store.index().range(start, Bound::Excluded(&end[..]), true)?.take(limit) {
        let (k, v) = kv?;
        let (_, name) = decode_dentry_key(&k)?;
        out.push((name, Dentry::decode(&v)?));
    }
    Ok(out)
}
