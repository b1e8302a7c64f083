//! A locate database in a heap: building its table into a named object
//! ([`write_table`]) and, in a process of its own, opening the store,
//! attaching the object by name and searching it in place ([`Database`]).

use std::path::Path;
use std::sync::Arc;

use larder_heap::{Credentials, Heap, ObjectId};
use larder_io::{CheckedStorage, RealStorage};
use larder_object::{Store, StoreOptions};

use crate::{table, LocateError, Result};

/// Builds the table of `paths` (sorted) into a new object of `heap` sized
/// to it and names it `name`. The table is written with `write_at`, which
/// hands a large write to the object's file: no fault per page of the
/// mapping, and `sync` writes the pages back without unmapping them. The
/// caller syncs the heap to make it durable.
pub fn write_table(heap: &Heap, name: &str, paths: &[String]) -> Result<ObjectId> {
    let built = table::build(paths)?;
    let object = heap.alloc((built.head.len() + built.data.len()) as u64)?;
    heap.write_at(object, 0, &built.head)?;
    heap.write_at(object, built.head.len() as u64, &built.data)?;
    heap.add_name(object, name)?;
    Ok(object)
}

/// Searches the table in `object` (attached) for the paths whose last
/// component is `name`: calls `found` with each; returns how many.
#[allow(unsafe_code)]
pub fn search_object(heap: &Heap, object: ObjectId, name: &[u8], found: impl FnMut(&[u8])) -> Result<u64> {
    let size = heap.size(object)?;
    let len = usize::try_from(size).map_err(|_| LocateError::TooLargeToMap(size))?;
    let at = heap.pointer(object)?;
    // SAFETY: the object is attached with `len` mapped bytes for the whole
    // search (`heap` is borrowed, so nothing here closes or frees it); a
    // table is written once, before it is named, and never changed after,
    // so nothing writes these bytes while this shared view exists. A file
    // shrunk behind the heap's back is refused at attach.
    let bytes = unsafe { std::slice::from_raw_parts(at.cast_const(), len) };
    Ok(table::search(bytes, name, found)?)
}

/// How a searching process opens the store.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// The heap's path in the store.
    pub heap: String,
    /// The table object's name in the heap.
    pub table: String,
}

/// A locate database opened by a process that only searches it: the
/// store, its heap and the table object, attached.
pub struct Database {
    heap: Heap,
    object: ObjectId,
    _store: Arc<Store>,
}

/// The store's options for a process that only reads: no background
/// thread (index flusher and mergers, log flusher, checkpointer): a reader
/// commits nothing, so none would ever have work, and starting and
/// stopping them was most of a store open's time. A write it did make
/// (opening recovers a crashed store) is flushed inline instead, as the
/// options document. No metadata cache, small index caches and a small
/// memtable: one search reads a few dentries and onodes once, and a
/// memtable's filter is sized (and zeroed, page by page) for its full
/// size at open: 860 KB for the default 64 MiB.
fn read_store_options() -> StoreOptions {
    let mut options = StoreOptions::default();
    options.index.background_threads = false;
    options.index.block_cache_bytes = READER_CACHE_BYTES;
    options.index.metadata_cache_bytes = READER_CACHE_BYTES;
    options.index.memtable_size_bytes = READER_CACHE_BYTES;
    options.log.buffered_sync_interval = None;
    options.background_checkpoints = false;
    options.meta_cache_bytes = 0;
    options
}

/// Bytes of each index cache, and of the memtable, of a process that only
/// searches (under 64 blocks of 4 KiB, so the block cache is one shard).
const READER_CACHE_BYTES: usize = 128 << 10;

impl Database {
    /// Opens the store in `store_dir`, its heap and the table object, as
    /// this process's uid and gid.
    pub fn open(store_dir: &Path, options: &ReadOptions) -> Result<Database> {
        let storage = CheckedStorage::new(Arc::new(RealStorage::new())).storage_ref();
        let store = Arc::new(Store::open(storage, store_dir, read_store_options())?);
        let credentials = Credentials::user(rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
        let heap = Heap::open_existing(&store, &options.heap, credentials)?;
        let object = heap.get_by_name(&options.table)?;
        Ok(Database { heap, object, _store: store })
    }

    /// Calls `found` with each path whose last component is `name`;
    /// returns how many.
    pub fn search(&self, name: &[u8], found: impl FnMut(&[u8])) -> Result<u64> {
        search_object(&self.heap, self.object, name, found)
    }
}
