//! `Heap`: opening a heap (a directory of the store's namespace holding
//! `objects/` and `names/`, docs/heap.md) and the state an open heap keeps.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, LazyLock, Weak};

use larder_namespace::{list, NamespaceTxn};
use larder_object::meta::onode::FLAG_HEAP;
use larder_object::meta::{heap_root_key, HeapRoot, Kind, Name, Onode};
use larder_object::{Durability, LockRequest, Store, Transaction, ROOT_ID};
use parking_lot::{Mutex, RwLock};

use crate::arena_glue::{ArenaSlot, IdMap};
use crate::attach::Attached;
use crate::closed::ClosedMappings;
use crate::credentials::Credentials;
use crate::error::{HeapError, Result};

/// Mode of a heap's directories when it is created.
const HEAP_DIR_MODE: u32 = 0o755;
/// Mode of the objects a heap creates.
pub(crate) const OBJECT_MODE: u32 = 0o644;

/// Changes since the last `sync` that it must make durable.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// Objects whose file was created, grown or written through a mapping
    /// since the last sync: their data is synced.
    pub(crate) files: BTreeSet<u64>,
    /// Files were created in `heap/`: the directory is synced.
    pub(crate) dir_changed: bool,
    /// Objects created since a sync last synced their files (with a device
    /// flush before its commit): a sync whose changed files are all among
    /// them may image them whole instead (`images`, "whole objects").
    pub(crate) created: BTreeSet<u64>,
    /// Freed objects whose file goes once the free (at this LSN) is durable.
    pub(crate) removals: Vec<(u64, u64)>,
    /// Files of freed objects were removed since the last sync (by `free`,
    /// once their frees were durable): the directory is synced.
    pub(crate) removed: bool,
    /// Files of freed objects whose free is durable, that nothing else
    /// holds open or mapped, kept for `alloc` and `copy` to take (at most
    /// `limits::SPARE_FILES`). Files without a record: a crash leaves them
    /// for the next open to remove.
    pub(crate) spares: Vec<Spare>,
    /// An `alloc` renamed a spare file since the last sync: the directory
    /// is synced (a file's own sync need not make a rename durable).
    pub(crate) renamed: bool,
}

/// A freed object's file kept for reuse: emptied (or, if small, kept
/// whole for a copy to overwrite), renamed to the id issued for the object
/// that will take it, and mapped (when that worked) in the smallest
/// reservation, exposing none of its bytes, so that `alloc` only sizes it.
#[derive(Debug)]
pub(crate) struct Spare {
    pub(crate) id: u64,
    pub(crate) region: Option<larder_io::SharedRegion>,
    /// Bytes of the freed object the file still holds.
    pub(crate) kept: u64,
}

impl Pending {
    /// A spare for a new object of `size` bytes, the latest of the best:
    /// one that fits (for a copy, one that kept at least `size` bytes, to
    /// overwrite in place; for an allocation, an emptied one), then one
    /// already mapped.
    pub(crate) fn take_spare(&mut self, size: u64, copy: bool) -> Option<Spare> {
        let score = |spare: &Spare| {
            let fits = match copy {
                true => spare.kept >= size && spare.region.is_some(),
                false => spare.kept == 0,
            };
            u8::from(fits) * 2 + u8::from(spare.region.is_some())
        };
        // The latest spare that fits and is mapped is the usual answer.
        let best = self.spares.iter().rposition(|spare| score(spare) == 3);
        let index = match best {
            Some(index) => index,
            None => self.spares.iter().enumerate().max_by_key(|&(index, spare)| (score(spare), index))?.0,
        };
        Some(self.spares.swap_remove(index))
    }

    /// Bytes of freed objects the spares keep.
    pub(crate) fn spare_kept_bytes(&self) -> u64 {
        self.spares.iter().map(|spare| spare.kept).sum()
    }

    /// Spares kept mapped.
    pub(crate) fn mapped_spares(&self) -> usize {
        self.spares.iter().filter(|spare| spare.region.is_some()).count()
    }
}

/// What every handle of one heap in this process shares: its mappings,
/// its objects' allocators and what the next `sync` must make durable. An
/// object has one allocator per process, whatever the number of handles.
pub(crate) struct Shared {
    pub(crate) store: Arc<Store>,
    pub(crate) root: u64,
    pub(crate) objects_dir: u64,
    pub(crate) names_dir: u64,
    /// Objects mapped read-write.
    pub(crate) attached: RwLock<IdMap<Arc<Attached>>>,
    /// Objects mapped read-only, for handles that may only read them.
    pub(crate) readers: RwLock<IdMap<Arc<Attached>>>,
    /// Mappings of objects closed lately, reused by the next attach once
    /// checked (`closed::ClosedMappings`). Taken before `attached` or
    /// `readers` when both are held.
    pub(crate) closed: Mutex<ClosedMappings>,
    pub(crate) pending: Mutex<Pending>,
    /// Each object's allocator, loaded on first use and kept while the
    /// heap is open (its changes wait for `sync`).
    pub(crate) arenas: RwLock<IdMap<Arc<ArenaSlot>>>,
    /// Generation checks answered from the index so far, without loading
    /// an allocator (`arena_glue::LAZY_CHECKS` of them at most).
    pub(crate) lazy_checks: std::sync::atomic::AtomicU64,
    /// One sync at a time: each commits the durable sizes it measured.
    pub(crate) sync_lock: Mutex<()>,
    /// Frees of this heap's objects committed by this process, counted
    /// as the freed object leaves `attached`: an attach that saw no
    /// change across its reads and its insert cannot have raced a free.
    pub(crate) frees: std::sync::atomic::AtomicU64,
    /// Held exclusively by a free while it counts itself and removes its
    /// object from the maps, shared by an attach while it checks the count
    /// and inserts: an attach that raced a free never shows the object in
    /// the maps after the free returned.
    pub(crate) free_gate: RwLock<()>,
    /// Whether a sync of a heap file created since the `heap/` directory's
    /// last sync makes its name durable too (asked once, at the first sync
    /// that created files).
    pub(crate) file_sync_keeps_entry: std::sync::OnceLock<bool>,
    /// Each object's page images and hole-free length, for one-flush syncs
    /// (`images`). Taken after `sync_lock`.
    pub(crate) images: Mutex<IdMap<crate::images::ObjectImages>>,
    /// Whether the log's sync flushes the device of the heap's files
    /// (asked once, at the first sync that could take one flush).
    pub(crate) log_flush_covers_files: std::sync::OnceLock<bool>,
    /// The mappings keeping their file's descriptor for one-flush syncs,
    /// least recently synced first (`Heap::keep_descriptor`).
    pub(crate) descriptors: Mutex<std::collections::VecDeque<std::sync::Weak<larder_io::SharedRegion>>>,
}

/// The heaps open in this process, by store (its address, which its
/// `Arc` keeps while a heap holds it) and root directory.
static OPEN: LazyLock<Mutex<OpenHeaps>> = LazyLock::new(Mutex::default);

/// (store address, root directory id) -> the heap's shared state.
type OpenHeaps = HashMap<(usize, u64), Weak<Shared>>;

/// An open heap: named objects mapped into memory, persistent pointers,
/// types and clone (paper 003's PSHFS, durable). `Send + Sync`: any number
/// of threads may use one heap, and a process may open many heaps of one
/// store. Handles of one heap opened in one process (with any credentials)
/// share its mappings and allocators, so `close_object` unmaps an object
/// for all of them. Metadata changes are object-layer transactions
/// (atomic, durable at the next log sync or at [`Heap::sync`]); object
/// bytes are mapped memory, durable at `sync`.
pub struct Heap {
    pub(crate) shared: Arc<Shared>,
    pub(crate) credentials: Credentials,
}

// Any number of threads may share a heap.
const _: fn() = || {
    fn shared_between_threads<T: Send + Sync>() {}
    shared_between_threads::<Heap>();
};

impl std::fmt::Debug for Heap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heap").field("root", &self.shared.root).field("uid", &self.credentials.uid).finish()
    }
}

fn name(text: &str) -> Result<Name> {
    Ok(Name::new(text)?)
}

/// The components of an absolute or relative path, without empty ones.
fn components(path: &str) -> Result<Vec<Name>> {
    let parts: Vec<Name> = path.split('/').filter(|c| !c.is_empty()).map(name).collect::<Result<_>>()?;
    if parts.is_empty() {
        return Err(HeapError::NotAHeap { path: path.to_string(), why: "the store's root cannot be a heap".into() });
    }
    Ok(parts)
}

impl Heap {
    /// Opens the heap at `path` (a directory of `store`'s namespace; its
    /// parent must exist), creating it with its `objects/` and `names/`
    /// directories if absent. Refuses a directory that is not a heap and a
    /// big-endian machine. The heap acts as `credentials`.
    pub fn open(store: &Arc<Store>, path: &str, credentials: Credentials) -> Result<Heap> {
        let (parent, last) = Self::parent_of(store, path)?;
        loop {
            if let Some(d) = list::lookup(store, parent, &last)? {
                return Self::existing(store, path, d.child, credentials);
            }
            match Self::create(store, parent, &last, &credentials) {
                Ok(root) => {
                    // The store's `heap/` directory, made once here rather
                    // than by the heap's first allocation.
                    store.ensure_heap_dir()?;
                    return Self::existing(store, path, root, credentials);
                }
                // Another opener made it first: open theirs.
                Err(HeapError::AlreadyExists { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Opens the heap at `path` only if it exists (NotFound otherwise):
    /// for a process that only reads, so opening writes nothing.
    pub fn open_existing(store: &Arc<Store>, path: &str, credentials: Credentials) -> Result<Heap> {
        let (parent, last) = Self::parent_of(store, path)?;
        match list::lookup(store, parent, &last)? {
            Some(d) => Self::existing(store, path, d.child, credentials),
            None => Err(crate::error::not_found(format!("heap {path}"))),
        }
    }

    /// The directory that holds the heap at `path`, and the heap's name in
    /// it. Refuses a big-endian machine.
    fn parent_of(store: &Arc<Store>, path: &str) -> Result<(u64, Name)> {
        if cfg!(target_endian = "big") {
            return Err(HeapError::BigEndian);
        }
        let mut parts = components(path)?;
        let last = parts.pop().ok_or_else(|| crate::error::invalid("empty path"))?;
        let mut parent = ROOT_ID;
        for dir in &parts {
            match list::lookup(store, parent, dir)? {
                Some(d) if d.kind == Kind::Directory => parent = d.child,
                Some(_) => {
                    return Err(HeapError::NotAHeap { path: path.into(), why: format!("{dir} is not a directory") })
                }
                None => return Err(crate::error::not_found(format!("directory {dir} of {path}"))),
            }
        }
        Ok((parent, last))
    }

    /// Creates a heap named `last` in `parent`: its root and two
    /// directories flagged `FLAG_HEAP`, and its root record, durably.
    fn create(store: &Arc<Store>, parent: u64, last: &Name, credentials: &Credentials) -> Result<u64> {
        let locks = [LockRequest::Shared(parent), LockRequest::Name(parent, last.as_bytes().to_vec())];
        let (root, _) = store.transact_locked(&locks, Durability::Durable, |txn| -> Result<u64> {
            let parent_onode = txn.onode(parent)?.ok_or_else(|| crate::error::not_found("the heap's parent"))?;
            if !credentials.may_write(&parent_onode) {
                return Err(HeapError::PermissionDenied { what: format!("create heap {last}") });
            }
            let (uid, gid) = (credentials.uid, credentials.gid);
            let root = txn.create_in(parent, last, Kind::Directory, HEAP_DIR_MODE, uid, gid)?;
            let objects_dir = txn.create_in(root, &name("objects")?, Kind::Directory, HEAP_DIR_MODE, uid, gid)?;
            let names_dir = txn.create_in(root, &name("names")?, Kind::Directory, HEAP_DIR_MODE, uid, gid)?;
            for dir in [root, objects_dir, names_dir] {
                flag_heap(txn, dir)?;
            }
            txn.put(&heap_root_key(root), &HeapRoot { objects_dir, names_dir }.encode()?);
            Ok(root)
        })?;
        Ok(root)
    }

    /// Opens the heap rooted at `root`, checking it is one.
    fn existing(store: &Arc<Store>, path: &str, root: u64, credentials: Credentials) -> Result<Heap> {
        let not_heap = |why: &str| HeapError::NotAHeap { path: path.to_string(), why: why.to_string() };
        let onode = store.stat(root)?.ok_or_else(|| not_heap("it vanished"))?;
        if onode.kind != Kind::Directory || onode.flags & FLAG_HEAP == 0 {
            return Err(not_heap("a directory made by something else than the heap"));
        }
        let record = store.index().get(&heap_root_key(root))?.ok_or_else(|| not_heap("it has no heap root record"))?;
        let HeapRoot { objects_dir, names_dir } = HeapRoot::decode(&record)?;
        if !credentials.may_read(&onode) {
            return Err(HeapError::PermissionDenied { what: format!("open heap {path}") });
        }
        let key = (Arc::as_ptr(store) as usize, root);
        let mut open = OPEN.lock();
        open.retain(|_, shared| shared.strong_count() > 0);
        let shared = match open.get(&key).and_then(Weak::upgrade) {
            Some(shared) => shared,
            None => {
                let shared = Arc::new(Shared {
                    store: store.clone(),
                    root,
                    objects_dir,
                    names_dir,
                    attached: RwLock::new(IdMap::default()),
                    readers: RwLock::new(IdMap::default()),
                    closed: Mutex::new(ClosedMappings::default()),
                    pending: Mutex::new(Pending::default()),
                    arenas: RwLock::new(IdMap::default()),
                    lazy_checks: std::sync::atomic::AtomicU64::new(0),
                    sync_lock: Mutex::new(()),
                    frees: std::sync::atomic::AtomicU64::new(0),
                    free_gate: RwLock::new(()),
                    file_sync_keeps_entry: std::sync::OnceLock::new(),
                    images: Mutex::new(IdMap::default()),
                    log_flush_covers_files: std::sync::OnceLock::new(),
                    descriptors: Mutex::new(std::collections::VecDeque::new()),
                });
                open.insert(key, Arc::downgrade(&shared));
                shared
            }
        };
        Ok(Heap { shared, credentials })
    }

    /// The store the heap lives in.
    pub fn store(&self) -> &Arc<Store> {
        &self.shared.store
    }

    /// The id of the heap's root directory.
    pub fn root_id(&self) -> u64 {
        self.shared.root
    }

    /// The id of the heap's `objects/` directory.
    pub fn objects_dir_id(&self) -> u64 {
        self.shared.objects_dir
    }

    /// The id of the heap's `names/` directory.
    pub fn names_dir_id(&self) -> u64 {
        self.shared.names_dir
    }

    /// How many closed objects' mappings this heap keeps now, for reuse by
    /// their next attach (at most [`crate::limits::CLOSED_MAPPINGS`]).
    pub fn kept_mappings(&self) -> usize {
        self.shared.closed.lock().len()
    }

    /// Every object of this heap, in id order.
    pub fn objects(&self) -> Result<Vec<crate::ObjectId>> {
        let all = self.shared.store.heap_objects()?;
        Ok(all.into_iter().filter(|(_, r)| r.heap == self.shared.root).map(|(id, _)| crate::ObjectId(id)).collect())
    }

    /// Refuses unless the caller may change the heap (write its root).
    pub(crate) fn check_writable(&self, what: &str) -> Result<()> {
        let onode =
            self.shared.store.stat(self.shared.root)?.ok_or_else(|| crate::error::not_found("the heap's root"))?;
        if self.credentials.may_write(&onode) {
            Ok(())
        } else {
            Err(HeapError::PermissionDenied { what: what.to_string() })
        }
    }

    /// The name of object `id` in `objects/`.
    pub(crate) fn object_name(id: u64) -> Result<Name> {
        name(&id.to_string())
    }
}

/// Sets `FLAG_HEAP` on a directory this transaction created.
fn flag_heap(txn: &mut Transaction<'_>, dir: u64) -> Result<()> {
    let mut onode: Onode = txn.onode(dir)?.ok_or_else(|| crate::error::not_found("a new heap directory"))?;
    onode.flags |= FLAG_HEAP;
    txn.put_onode(dir, &onode)?;
    Ok(())
}
