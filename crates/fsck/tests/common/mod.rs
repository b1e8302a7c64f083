//! A small store with one of everything fsck checks, built on the
//! simulated storage, and helpers to break it through raw index writes.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use larder_fsck::{Problem, Report};
use larder_index::WriteBatch;
use larder_io::{write_all_at, SimStorage, StorageRef};
use larder_object::meta::{
    dentry_key, fmap_prefix, onode_key, orphan_key, xattr_key, DataLocation, Dentry, DirInfo, ExtentMapEntry, Kind,
    MetaKey, MetaLimits, Name, Onode, Orphan, OrphanReason, Timestamp, XattrName, XattrValue,
};
use larder_object::{CreationOptions, Durability, Store, StoreOptions, ROOT_ID};

/// Where the tests put their store.
pub const DIR: &str = "/store";

/// Small containers and log segments.
pub fn creation() -> CreationOptions {
    CreationOptions { container_bytes: 1 << 20, log_segment_bytes: 64 << 10, ..CreationOptions::default() }
}

/// No background threads: every write happens in the calling thread, so
/// runs repeat exactly.
pub fn deterministic() -> StoreOptions {
    let mut o = StoreOptions { background_checkpoints: false, ..StoreOptions::default() };
    o.index.background_threads = false;
    o.log.buffered_sync_interval = None;
    o
}

/// The simulated storage as a store's storage.
pub fn storage(sim: &SimStorage) -> StorageRef {
    Arc::new(sim.clone())
}

/// Opens the store on `sim` again.
pub fn reopen(sim: &SimStorage) -> Store {
    Store::open(storage(sim), Path::new(DIR), deterministic()).unwrap()
}

/// The objects of the fixture:
///
/// ```text
/// /            root (1), entries: a, small (nlink 1: a's `..`)
/// /a           directory, entries: b, big (nlink 2: its name, b's `..`)
/// /a/b         directory, entries: big2 (a second name of big), link
/// /small       inline file, xattr user.colour
/// /a/big       file in two extents with a hole between, nlink 2
/// /a/b/link    symlink, inline
/// orphan       unnamed file in extents, with an orphan record
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Ids {
    pub a: u64,
    pub b: u64,
    pub small: u64,
    pub big: u64,
    pub link: u64,
    pub orphan: u64,
}

/// The fixture: its storage, the open store, the ids and every object's
/// bytes.
pub struct Fixture {
    pub sim: SimStorage,
    pub store: Store,
    pub ids: Ids,
    pub data: BTreeMap<u64, Vec<u8>>,
}

/// Bytes unique to the object and the offset.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seed as u8).wrapping_mul(31).wrapping_add((i % 251) as u8)).collect()
}

pub fn name(s: &str) -> Name {
    Name::new(s.as_bytes()).unwrap()
}

/// An onode with `nlink` names and, for a directory, its parent and entry
/// count.
pub fn onode(kind: Kind, id: u64, nlink: u32, dir: Option<(u64, u64)>) -> Onode {
    let mut o = Onode::new(kind, 0o644, 0, 0, id);
    o.nlink = nlink;
    o.dir = dir.map(|(parent, entries)| DirInfo { parent, entries });
    o
}

pub fn limits(store: &Store) -> MetaLimits {
    MetaLimits::from_superblock(store.superblock())
}

/// Commits what `f` puts in a batch, durably.
pub fn commit(store: &Store, f: impl FnOnce(&mut WriteBatch)) {
    let mut b = WriteBatch::new();
    f(&mut b);
    store.commit(&b, Durability::Durable).unwrap();
}

pub fn put_onode(b: &mut WriteBatch, limits: &MetaLimits, id: u64, o: &Onode) {
    b.put(onode_key(id), o.encode(limits).unwrap());
}

pub fn put_dentry(b: &mut WriteBatch, parent: u64, n: &str, child: u64, kind: Kind) {
    b.put(dentry_key(parent, &name(n)), Dentry { child, kind }.encode().unwrap());
}

pub fn orphan_record() -> [u8; 14] {
    Orphan { reason: OrphanReason::Unlinked, since: Timestamp { secs: 1, nanos: 0 } }.encode().unwrap()
}

/// The current onode of `id`.
pub fn stat(store: &Store, id: u64) -> Onode {
    store.stat(id).unwrap().unwrap()
}

/// Rewrites the onode of `id` as `f` changes it.
pub fn change_onode(store: &Store, id: u64, f: impl FnOnce(&mut Onode)) {
    let mut o = stat(store, id);
    f(&mut o);
    let limits = limits(store);
    commit(store, |b| put_onode(b, &limits, id, &o));
}

/// The fmap entries of `id`: (offset, encoded value, decoded entry).
pub fn fmap(store: &Store, id: u64) -> Vec<(u64, Vec<u8>, ExtentMapEntry)> {
    let limits = limits(store);
    store
        .index()
        .prefix(&fmap_prefix(id), true)
        .unwrap()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            let Ok(MetaKey::Extent { offset, .. }) = MetaKey::decode(&k) else { panic!("not an fmap key") };
            let e = ExtentMapEntry::decode(&v, &limits).unwrap();
            (offset, v, e)
        })
        .collect()
}

/// Allocates space for `data`, writes it there and returns the entry
/// describing it (not yet referenced by any key).
pub fn allocated_entry(store: &Store, data: &[u8]) -> ExtentMapEntry {
    let extents = store.space().allocate(data.len() as u64).unwrap();
    assert_eq!(extents.len(), 1, "{extents:?}");
    let e = extents[0];
    let mut block = data.to_vec();
    block.resize(e.len as usize, 0);
    let file = store.space().container_file(e.container).unwrap();
    write_all_at(&*file, &block, e.offset).unwrap();
    file.sync_data().unwrap();
    ExtentMapEntry::for_data(e, data, &limits(store)).unwrap()
}

/// Reads all of `id`.
pub fn read_all(store: &Store, id: u64) -> larder_object::Result<Vec<u8>> {
    let size = stat(store, id).size as usize;
    let mut buf = vec![0u8; size];
    let n = store.read(id, 0, &mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

/// Checks `store` with the default options.
pub fn fsck(store: &Store) -> Report {
    larder_fsck::check(store, &mut |_| {}).unwrap()
}

/// Asserts the check found exactly `expected` and skipped nothing.
pub fn assert_only(report: &Report, expected: &[Problem]) {
    assert_eq!(report.problems, expected, "{report}");
    assert!(report.skipped.is_empty(), "{report}");
    assert_eq!(report.problems_dropped, 0);
    // Every problem names what it is about.
    for p in &report.problems {
        assert!(!p.to_string().is_empty());
    }
}

/// Builds the fixture on `sim` (a new store in [`DIR`]).
pub fn build(sim: &SimStorage) -> Fixture {
    let store = Store::create(storage(sim), Path::new(DIR), creation(), deterministic()).unwrap();
    let lim = limits(&store);
    let next = || store.allocate_object_id().unwrap();
    let ids = Ids { a: next(), b: next(), small: next(), big: next(), link: next(), orphan: next() };
    let Ids { a, b, small, big, link, orphan } = ids;
    let mut root = stat(&store, ROOT_ID);
    root.dir = Some(DirInfo { parent: ROOT_ID, entries: 2 });
    root.nlink = 1;
    commit(&store, |batch| {
        put_onode(batch, &lim, ROOT_ID, &root);
        put_onode(batch, &lim, a, &onode(Kind::Directory, a, 2, Some((ROOT_ID, 2))));
        put_onode(batch, &lim, b, &onode(Kind::Directory, b, 1, Some((a, 2))));
        put_onode(batch, &lim, small, &onode(Kind::File, small, 1, None));
        put_onode(batch, &lim, big, &onode(Kind::File, big, 2, None));
        put_onode(batch, &lim, link, &onode(Kind::Symlink, link, 1, None));
        put_onode(batch, &lim, orphan, &onode(Kind::File, orphan, 0, None));
        put_dentry(batch, ROOT_ID, "a", a, Kind::Directory);
        put_dentry(batch, ROOT_ID, "small", small, Kind::File);
        put_dentry(batch, a, "b", b, Kind::Directory);
        put_dentry(batch, a, "big", big, Kind::File);
        put_dentry(batch, b, "big2", big, Kind::File);
        put_dentry(batch, b, "link", link, Kind::Symlink);
        batch.put(
            xattr_key(small, &XattrName::new("user.colour").unwrap()),
            XattrValue(b"blue".to_vec()).encode().unwrap(),
        );
        batch.put(orphan_key(orphan), orphan_record());
    });
    let mut data = BTreeMap::new();
    let mut write = |id: u64, offset: u64, bytes: Vec<u8>| {
        store.write(id, offset, &bytes, Durability::Durable).unwrap();
        let d: &mut Vec<u8> = data.entry(id).or_default();
        let end = offset as usize + bytes.len();
        if d.len() < end {
            d.resize(end, 0);
        }
        d[offset as usize..end].copy_from_slice(&bytes);
    };
    write(small, 0, pattern(small, 100));
    write(link, 0, b"../small".to_vec());
    write(big, 0, pattern(big, 20_000));
    write(big, 40_960, pattern(big + 100, 5_000));
    write(orphan, 0, pattern(orphan, 10_000));
    assert!(matches!(stat(&store, small).location, DataLocation::Inline(_)));
    assert_eq!(stat(&store, big).location, DataLocation::Extents);
    assert_eq!(fmap(&store, big).len(), 2, "big has two entries with a hole between");
    Fixture { sim: sim.clone(), store, ids, data }
}
