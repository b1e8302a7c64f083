//! A heap built with the object layer alone, for tests of the layers that
//! show heaps (fs, KV, fsck, the CLI) without the heap crate: a root
//! directory and its `objects/` and `names/` directories flagged
//! `FLAG_HEAP`, the heap root record, and objects made by
//! `Transaction::create_heap_object`, linked as the heap links them (one
//! entry named by the id in `objects/`, one per name in `names/`, a name
//! record each). Shared by path (`#[path]`) from those crates' tests.
#![allow(dead_code, clippy::unwrap_used)]

use larder_object::meta::onode::FLAG_HEAP;
use larder_object::meta::{heap_name_key, heap_root_key, Dentry, DirDelta, HeapObject, HeapRoot, Kind, Name};
use larder_object::{Durability, Store, Transaction};

/// A heap's directories.
#[derive(Clone, Copy, Debug)]
pub struct TestHeap {
    /// The heap's root directory.
    pub root: u64,
    /// Its `objects/` directory.
    pub objects_dir: u64,
    /// Its `names/` directory.
    pub names_dir: u64,
}

/// Creates `child` of `kind` named `name` in `dir`, as the namespace's
/// `create_in` does.
fn create_in(txn: &mut Transaction<'_>, dir: u64, name: &str, kind: Kind, mode: u32, flags: u32) -> u64 {
    let id = txn
        .create_object_as(kind, mode, 0, 0, |o| {
            o.nlink = 1;
            o.flags = flags;
            if let Some(info) = o.dir.as_mut() {
                info.parent = dir;
            }
        })
        .unwrap();
    link(txn, dir, name, id, kind);
    id
}

/// Puts the dentry `name` -> `child` in `dir` and counts it.
fn link(txn: &mut Transaction<'_>, dir: u64, name: &str, child: u64, kind: Kind) {
    let name = Name::new(name).unwrap();
    txn.put_dentry(dir, &name, &Dentry { child, kind }).unwrap();
    let links = i64::from(kind == Kind::Directory);
    txn.change_dir(dir, DirDelta { entries: 1, links }).unwrap();
}

/// Creates a heap named `name` in directory `parent`, durable.
pub fn create_heap(store: &Store, parent: u64, name: &str) -> TestHeap {
    let (heap, _) = store
        .transact(&[parent], Durability::Durable, |txn| {
            let root = create_in(txn, parent, name, Kind::Directory, 0o755, FLAG_HEAP);
            let objects_dir = create_in(txn, root, "objects", Kind::Directory, 0o755, FLAG_HEAP);
            let names_dir = create_in(txn, root, "names", Kind::Directory, 0o755, FLAG_HEAP);
            let record = HeapRoot { objects_dir, names_dir }.encode()?;
            txn.put(&heap_root_key(root), &record);
            Ok(TestHeap { root, objects_dir, names_dir })
        })
        .unwrap();
    heap
}

/// Creates a heap object holding `data` (its file synced) with `names`,
/// durable; returns its id.
pub fn add_object(store: &Store, heap: &TestHeap, data: &[u8], names: &[&str]) -> u64 {
    let record = HeapObject { heap: heap.root, type_id: 0, durable_size: data.len() as u64, flags: 0 };
    let id = store.allocate_object_id().unwrap();
    store
        .transact(&[heap.objects_dir, heap.names_dir, id], Durability::Buffered, |txn| {
            txn.create_heap_object(id, data.len() as u64, (0o644, 0, 0), &record)?;
            let mut onode = txn.onode(id)?.unwrap();
            onode.nlink = 1 + names.len() as u32;
            txn.put_onode(id, &onode)?;
            link(txn, heap.objects_dir, &id.to_string(), id, Kind::File);
            for name in names {
                link(txn, heap.names_dir, name, id, Kind::File);
                txn.put(&heap_name_key(id, &Name::new(*name).unwrap()), &[]);
            }
            Ok(())
        })
        .unwrap();
    let file = store.open_heap_file(id, true).unwrap();
    larder_io::write_all_at(&*file, data, 0).unwrap();
    file.sync_data().unwrap();
    store.sync_heap_dir().unwrap();
    store.sync().unwrap();
    id
}
