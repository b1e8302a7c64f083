//! The stores this process has open for its heaps: opened embedded on
//! first use, shared by every heap of the store, closed with the last.
//! A store is opened once per process (its lock is per open), so two
//! heaps of one store share one `Store`.

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

/// Why a store another process holds cannot be opened: a server answering
/// on its socket (ENOTSUP: heaps of a served store are not supported yet)
/// or some other process (EBUSY).
fn held_elsewhere(dir: &Path) -> Failure {
    let socket = client::socket_of(dir);
    if UnixStream::connect(&socket).is_ok() {
        Failure::new(
            libc::ENOTSUP,
            format!(
                "{} is served by `larder serve` (it answers on {}): heaps of a served store are not supported \
                 yet; open the heap while no server runs",
                dir.display(),
                socket.display()
            ),
        )
    } else {
        Failure::new(libc::EBUSY, format!("{}: another process has the store open", dir.display()))
    }
}

/// Opens the store in `dir` embedded, creating it if absent and `create`.
fn open_store(dir: &Path, create: bool) -> Outcome<Store> {
    let storage: StorageRef = Arc::new(RealStorage::new());
    let refused = |e: ObjectError| match e {
        ObjectError::Io(larder_io::IoError::Locked { .. }) => held_elsewhere(dir),
        other => Failure::from(other),
    };
    match Store::open(storage.clone(), dir, StoreOptions::default()) {
        Ok(store) => Ok(store),
        Err(ObjectError::NotAStore { .. }) if create => {
            let available = storage.available_bytes(&existing_ancestor(dir)).map_err(ObjectError::from)?;
            let creation = CreationOptions::fitted_to(available);
            match Store::create(storage.clone(), dir, creation, StoreOptions::default()) {
                Ok(store) => Ok(store),
                // Another process created it meanwhile: open that one.
                Err(ObjectError::AlreadyExists { .. }) => {
                    Store::open(storage, dir, StoreOptions::default()).map_err(refused)
                }
                Err(e) => Err(refused(e)),
            }
        }
        Err(ObjectError::NotAStore { .. }) => Err(Failure::new(
            libc::ENOENT,
            format!("{} holds no store (larder_mfdopen_create or LARDER_HEAP_CREATE creates one)", dir.display()),
        )),
        Err(e) => Err(refused(e)),
    }
}

/// The store in `dir` for a heap: the one this process has open already,
/// or opened now (created if absent and `create`).
pub(crate) fn acquire(dir: &Path, create: bool) -> Outcome<StoreUse> {
    let mut stores = STORES.lock();
    if let Ok(key) = std::fs::canonicalize(dir) {
        if let Some(store) = stores.get(&key).and_then(Weak::upgrade) {
            return Ok(StoreUse { key, store });
        }
    }
    let store = Arc::new(open_store(dir, create)?);
    let key = std::fs::canonicalize(dir)
        .map_err(|e| Failure::new(e.raw_os_error().unwrap_or(libc::EIO), format!("{}: {e}", dir.display())))?;
    stores.retain(|_, weak| weak.strong_count() > 0);
    stores.insert(key.clone(), Arc::downgrade(&store));
    Ok(StoreUse { key, store })
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
