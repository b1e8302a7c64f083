//! Keeping the kernel's caches right when something other than the mount
//! changes the store (the KV API in the same process): the store's change
//! observer queues what each commit changed, and a thread of its own tells
//! the kernel to drop those inodes and entries. Changes the mount makes
//! itself are skipped: the kernel already knows them.
//!
//! Why a thread: the observer runs inside a commit, under the
//! transaction's locks, while a FUSE request may hold a kernel inode lock
//! and wait for those same locks; an invalidation that needs the inode
//! lock, sent from the commit, would deadlock with it.

use std::cell::Cell;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use fuser::{INodeNo, Notifier};
use larder_fs::Fs;
use larder_object::MetaChange;

thread_local! {
    /// Set on threads that serve the mount's requests.
    static SERVING: Cell<bool> = const { Cell::new(false) };
}

/// Marks the current thread as one serving kernel requests.
pub(crate) fn serving() {
    SERVING.with(|s| s.set(true));
}

/// Invalidates the kernel's copies of what other interfaces change, until
/// dropped.
pub(crate) struct Watcher {
    fs: Arc<Fs>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    pub(crate) fn start(fs: Arc<Fs>, notifier: Notifier) -> std::io::Result<Watcher> {
        let (tx, rx) = mpsc::channel::<Vec<MetaChange>>();
        let thread = std::thread::Builder::new().name("larder-fuse-inval".into()).spawn(move || {
            for changes in rx {
                for c in changes {
                    // ENOENT: the kernel holds no copy, nothing to drop.
                    let _ = match &c {
                        MetaChange::Object(ino) => notifier.inval_inode(INodeNo(*ino), 0, 0),
                        MetaChange::Entry { dir, name } => notifier.inval_entry(INodeNo(*dir), OsStr::from_bytes(name)),
                    };
                }
            }
        })?;
        let tx = std::sync::Mutex::new(tx);
        fs.store().set_change_observer(Some(Arc::new(move |changes: &[MetaChange]| {
            if SERVING.with(|s| s.get()) {
                return;
            }
            if let Ok(tx) = tx.lock() {
                let _ = tx.send(changes.to_vec());
            }
        })));
        Ok(Watcher { fs, thread: Some(thread) })
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // Dropping the observer drops the sender: the thread ends.
        self.fs.store().set_change_observer(None);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
