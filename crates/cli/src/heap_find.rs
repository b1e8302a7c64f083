//! Finding heaps and their objects for `larder heap`: a heap by its path
//! in the store's namespace, an object by its id or one of its names, and
//! a directory's path back from its id (for listings).

use std::ops::Bound;

use anyhow::{anyhow, bail, Context, Result};
use larder_object::meta::{dentry_key, dmap_prefix, prefix_end, Dentry, HeapObject, HeapRoot, Kind, Name};
use larder_object::{Store, ROOT_ID};

/// A heap found by its path.
pub(crate) struct FoundHeap {
    /// Its path from the store's root (`/a/heap`), for messages.
    pub(crate) path: String,
    /// Its root directory.
    pub(crate) root: u64,
    /// Its record.
    pub(crate) record: HeapRoot,
}

/// The entry `name` of directory `dir`, if any.
fn lookup(store: &Store, dir: u64, name: &Name) -> Result<Option<Dentry>> {
    let value = store.index().get(&dentry_key(dir, name)).context("reading a directory entry")?;
    Ok(value.map(|v| Dentry::decode(&v)).transpose()?)
}

/// The heap at `path` (`/heap`, `heap`, `a/b/heap`: from the store's root).
pub(crate) fn heap(store: &Store, path: &str) -> Result<FoundHeap> {
    let mut dir = ROOT_ID;
    for part in path.split('/').filter(|p| !p.is_empty()) {
        let name = Name::new(part).map_err(|e| anyhow!("heap path {path:?}: {e}"))?;
        match lookup(store, dir, &name)? {
            Some(d) if d.kind == Kind::Directory => dir = d.child,
            Some(_) => bail!("heap path {path:?}: {part:?} is not a directory"),
            None => bail!("heap path {path:?}: no {part:?} there; `larder heap ls STORE` lists the heaps"),
        }
    }
    let record = store
        .heap_root(dir)
        .context("reading the heap root record")?
        .ok_or_else(|| anyhow!("{path:?} is a directory, not a heap; `larder heap ls STORE` lists the heaps"))?;
    let canonical: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    Ok(FoundHeap { path: format!("/{}", canonical.join("/")), root: dir, record })
}

/// The object of `heap` that `which` names: an object id of that heap
/// (decimal), else a name in its `names/`.
pub(crate) fn object(store: &Store, heap: &FoundHeap, which: &str) -> Result<(u64, HeapObject)> {
    if let Ok(id) = which.parse::<u64>() {
        if let Some(record) = store.heap_object(id)?.filter(|r| r.heap == heap.root) {
            return Ok((id, record));
        }
    }
    let not_found = || {
        anyhow!(
            "heap {:?} has no object {which:?} (neither an object id nor a name); `larder heap ls STORE {}` lists them",
            heap.path,
            heap.path
        )
    };
    let name = Name::new(which).map_err(|_| not_found())?;
    let dentry = lookup(store, heap.record.names_dir, &name)?.ok_or_else(not_found)?;
    let record = store.heap_object(dentry.child)?.filter(|r| r.heap == heap.root).ok_or_else(|| {
        anyhow!(
            "name {which:?} of heap {:?} names object {}, not one of its objects; run `larder fsck`",
            heap.path,
            dentry.child
        )
    })?;
    Ok((dentry.child, record))
}

/// The path of directory `dir` from the root (`/a/b`), found by walking
/// parents and looking for the entry naming each child: for listings of
/// heaps, which are few.
pub(crate) fn path_of(store: &Store, dir: u64) -> Result<String> {
    let mut parts = Vec::new();
    let mut at = dir;
    // A cycle (damage) ends the walk rather than loop.
    for _ in 0..4096 {
        if at == ROOT_ID {
            parts.reverse();
            return Ok(format!("/{}", parts.join("/")));
        }
        let parent = store
            .stat(at)?
            .and_then(|o| o.dir)
            .map(|d| d.parent)
            .ok_or_else(|| anyhow!("directory {at} has no onode or is not a directory; run `larder fsck`"))?;
        parts.push(name_in(store, parent, at)?);
        at = parent;
    }
    bail!("directory {dir}: its parents do not reach the root; run `larder fsck`")
}

/// The name `child` has in `dir`.
fn name_in(store: &Store, dir: u64, child: u64) -> Result<String> {
    let start = dmap_prefix(dir);
    let end = prefix_end(&start).unwrap_or_default();
    for kv in store.index().range(Bound::Included(&start[..]), Bound::Excluded(&end[..]), true)? {
        let (k, v) = kv?;
        if Dentry::decode(&v)?.child == child {
            let (_, name) = larder_object::meta::decode_dentry_key(&k)?;
            return Ok(String::from_utf8_lossy(name.as_bytes()).into_owned());
        }
    }
    bail!("directory {child} is not named in its parent {dir}; run `larder fsck`")
}
