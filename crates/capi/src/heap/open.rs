//! An open heap as the C API holds it: the heap (embedded, or through the
//! server that serves its store), the structs handed to C, and the store
//! it uses; closed once.

use std::path::Path;

use larder_heap::{Credentials, Heap};
use parking_lot::{Mutex, RwLock};

use super::backend::Backend;
use super::handed::Handed;
use super::stores::{self, Holder, StoreUse};
use crate::status::{Failure, Outcome};

/// The heap a path names when it names none: `STORE_DIR` alone means
/// `STORE_DIR:/heap`.
pub(crate) const DEFAULT_HEAP_PATH: &str = "/heap";

/// A heap opened through the C API. Calls take the heap shared (any number
/// of threads at once); closing takes it exclusively, so it waits for the
/// calls in flight and later calls fail with EBADF.
pub(crate) struct OpenHeap {
    heap: RwLock<Option<Backend>>,
    /// The structs handed to C.
    pub(crate) handed: Mutex<Handed>,
    /// The store if this process holds it, given back at close.
    store: Mutex<Option<StoreUse>>,
}

/// The user this process runs as: the heap's checks and the owner of what
/// it creates.
fn process_credentials() -> Credentials {
    let groups = rustix::process::getgroups().unwrap_or_default();
    Credentials {
        uid: rustix::process::geteuid().as_raw(),
        gid: rustix::process::getegid().as_raw(),
        groups: groups.into_iter().map(|g| g.as_raw()).collect(),
    }
}

/// Splits `STORE_DIR:HEAP_PATH` at its last `:` followed by `/`; a path
/// without one is a store directory and the default heap.
pub(crate) fn split_heap_path(path: &str) -> (&str, &str) {
    match path.rfind(":/") {
        Some(at) if at > 0 => (&path[..at], &path[at + 1..]),
        _ => (path, DEFAULT_HEAP_PATH),
    }
}

impl OpenHeap {
    /// Opens (creating if absent) the heap `heap_path` of the store in
    /// `store_dir`: embedded (the store created if absent and `create`),
    /// or through the server if `larder serve` serves the store (the
    /// server checks this process's credentials, from its socket).
    pub(crate) fn open(store_dir: &Path, heap_path: &str, create: bool) -> Outcome<OpenHeap> {
        if heap_path.is_empty() {
            return Err(Failure::invalid("the heap path is empty"));
        }
        let opened = |backend: Backend, store: Option<StoreUse>| OpenHeap {
            heap: RwLock::new(Some(backend)),
            handed: Mutex::new(Handed::default()),
            store: Mutex::new(store),
        };
        let used = match stores::acquire(store_dir, create)? {
            Holder::Embedded(used) => used,
            Holder::Served { socket } => {
                // No leases: a heap's calls are requests whatever the cache.
                let client = client::Client::connect_socket_with(&socket, false)?;
                let heap = client.heap(heap_path)?;
                return Ok(opened(Backend::Served { heap, _client: client }, None));
            }
        };
        match Heap::open(&used.store, heap_path, process_credentials()) {
            Ok(heap) => Ok(opened(Backend::Embedded(heap), Some(used))),
            Err(e) => {
                let failure = Failure::from(e);
                // The store may be closed again; the heap's failure is the
                // one to report.
                let _ = stores::release(used);
                Err(failure)
            }
        }
    }

    /// Runs `call` on the heap, shared with other calls.
    pub(crate) fn with<T>(&self, call: impl FnOnce(&Backend, &Mutex<Handed>) -> Outcome<T>) -> Outcome<T> {
        let heap = self.heap.read();
        let heap = heap.as_ref().ok_or_else(|| Failure::new(libc::EBADF, "the heap is closed"))?;
        call(heap, &self.handed)
    }

    /// Closes the heap (PSHFS's mfclose): syncs it, unmaps every object,
    /// frees the structs handed to C and, with its last heap, closes the
    /// store. A second close is EBADF.
    pub(crate) fn close(&self) -> Outcome<()> {
        let heap = self.heap.write().take().ok_or_else(|| Failure::new(libc::EBADF, "the heap is closed"))?;
        let closed = heap.close();
        self.handed.lock().free_all();
        let released = match self.store.lock().take() {
            Some(used) => stores::release(used),
            None => Ok(()),
        };
        closed?;
        released
    }
}

impl Drop for OpenHeap {
    fn drop(&mut self) {
        // A heap dropped unclosed (its last reference gone without
        // larder_mfclose) still gives its store back.
        if let Some(heap) = self.heap.get_mut().take() {
            drop(heap);
        }
        if let Some(used) = self.store.get_mut().take() {
            let _ = stores::release(used);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split_heap_path;

    #[test]
    fn a_heap_path_follows_the_last_colon_slash() {
        assert_eq!(split_heap_path("/srv/store"), ("/srv/store", "/heap"));
        assert_eq!(split_heap_path("/srv/store:/apps/heap"), ("/srv/store", "/apps/heap"));
        assert_eq!(split_heap_path("/a:b/store:/h"), ("/a:b/store", "/h"));
        assert_eq!(split_heap_path("rel/store:x"), ("rel/store:x", "/heap"));
        assert_eq!(split_heap_path(":/h"), (":/h", "/heap"), "a store needs a directory");
    }
}
