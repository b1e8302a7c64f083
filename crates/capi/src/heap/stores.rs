//! The stores this process has open for its heaps: opened embedded on
//! first use, shared by every heap of the store, closed with the last.
//! A store is opened once per process (its lock is per open), so two
//! heaps of one store share one `Store`. A store that `larder serve`
//! serves is not opened here: its heaps are the server's.

use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Weak};

use larder_io::{RealStorage, StorageRef};
use larder_object::{CreationOptions, ObjectError, Store, StoreOptions};
use parking_lot::Mutex;

use crate::status::{Failure, Outcome};

/// The open stores, by canonical directory. Weak: a store lives while a
/// heap uses it.
static STORES: LazyLock<Mutex<HashMap<PathBuf, Weak<Store>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// A store a heap uses, and the key it is registered under.
pub(crate) struct StoreUse {
    pub(crate) key: PathBuf,
    pub(crate) store: Arc<Store>,
}

/// The nearest existing directory at or above `dir`: where a store
/// created in `dir` will take its space from.
fn existing_ancestor(dir: &Path) -> PathBuf {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    absolute.ancestors().find(|a| a.is_dir()).unwrap_or(Path::new("/")).to_path_buf()
}

/// Where a heap's store is: open in this process, or served by
/// `larder serve` on a socket.
pub(crate) enum Holder {
    /// Open embedded, shared with this process's other heaps of it.
    Embedded(StoreUse),
    /// Another process serves it: heaps are opened through the server.
    Served {
        /// The server's socket.
        socket: PathBuf,
    },
}

/// What opening a store found.
enum Opened {
    /// The store, open in this process now.
    Here(Arc<Store>),
    /// A server holds it and answers on this socket.
    Served(PathBuf),
}

/// Why a store another process holds cannot be opened here: a server
/// answering on its socket (the heap is then opened through it) or some
/// other process (EBUSY).
fn held_elsewhere(dir: &Path) -> Outcome<Opened> {
    let socket = client::socket_of(dir);
    if UnixStream::connect(&socket).is_ok() {
        return Ok(Opened::Served(socket));
    }
    Err(Failure::new(libc::EBUSY, format!("{}: another process has the store open", dir.display())))
}

/// Opens the store in `dir` embedded, creating it if absent and `create`,
/// or finds the server that holds it.
fn open_store(dir: &Path, create: bool) -> Outcome<Opened> {
    let storage: StorageRef = Arc::new(RealStorage::new());
    let refused = |e: ObjectError| match e {
        ObjectError::Io(larder_io::IoError::Locked { .. }) => held_elsewhere(dir),
        other => Err(Failure::from(other)),
    };
    match Store::open(storage.clone(), dir, StoreOptions::default()) {
        Ok(store) => Ok(Opened::Here(Arc::new(store))),
        Err(ObjectError::NotAStore { .. }) if create => {
            let available = storage.available_bytes(&existing_ancestor(dir)).map_err(ObjectError::from)?;
            let creation = CreationOptions::fitted_to(available);
            match Store::create(storage.clone(), dir, creation, StoreOptions::default()) {
                Ok(store) => Ok(Opened::Here(Arc::new(store))),
                // Another process created it meanwhile: open that one.
                Err(ObjectError::AlreadyExists { .. }) => match Store::open(storage, dir, StoreOptions::default()) {
                    Ok(store) => Ok(Opened::Here(Arc::new(store))),
                    Err(e) => refused(e),
                },
                Err(e) => refused(e),
            }
        }
        Err(ObjectError::NotAStore { .. }) => Err(Failure::new(
            libc::ENOENT,
            format!("{} holds no store (larder_mfdopen_create or LARDER_HEAP_CREATE creates one)", dir.display()),
        )),
        Err(e) => refused(e),
    }
}

/// The store in `dir` for a heap: the one this process has open already,
/// or opened now (created if absent and `create`), or the server that
/// serves it.
pub(crate) fn acquire(dir: &Path, create: bool) -> Outcome<Holder> {
    let mut stores = STORES.lock();
    if let Ok(key) = std::fs::canonicalize(dir) {
        if let Some(store) = stores.get(&key).and_then(Weak::upgrade) {
            return Ok(Holder::Embedded(StoreUse { key, store }));
        }
    }
    let store = match open_store(dir, create)? {
        Opened::Here(store) => store,
        Opened::Served(socket) => return Ok(Holder::Served { socket }),
    };
    let key = std::fs::canonicalize(dir)
        .map_err(|e| Failure::new(e.raw_os_error().unwrap_or(libc::EIO), format!("{}: {e}", dir.display())))?;
    stores.retain(|_, weak| weak.strong_count() > 0);
    stores.insert(key.clone(), Arc::downgrade(&store));
    Ok(Holder::Embedded(StoreUse { key, store }))
}

/// Gives back a heap's use of a store: the last use closes it (everything
/// durable, the lock released).
pub(crate) fn release(used: StoreUse) -> Outcome<()> {
    let mut stores = STORES.lock();
    match Arc::try_unwrap(used.store) {
        Ok(store) => {
            stores.remove(&used.key);
            store.close()?;
            Ok(())
        }
        // Another heap of this process still uses it.
        Err(_shared) => Ok(()),
    }
}
