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

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use fuser::{INodeNo, Notifier};
use larder_fs::Fs;
use larder_object::MetaChange;

/// Marks the current thread as one serving kernel requests: the store
/// does not tell the observer of its commits (the kernel knows them from
/// the replies).
pub(crate) fn serving() {
    larder_object::unobserved_thread();
}

/// Invalidates the kernel's copies of what other interfaces change, until
/// dropped.
pub(crate) struct Watcher {
    fs: Arc<Fs>,
    thread: Option<JoinHandle<()>>,
    progress: Arc<Progress>,
}

/// How far the invalidation thread got: batches queued and done.
#[derive(Default)]
pub(crate) struct Progress {
    queued: AtomicU64,
    done: Mutex<u64>,
    advanced: Condvar,
}

/// Longest wait for the kernel to take invalidations (it takes them at
/// once unless a request of the mount holds the inode).
const SETTLE_LIMIT: Duration = Duration::from_secs(1);

impl Progress {
    /// Waits until every invalidation queued so far was given to the
    /// kernel (at most `SETTLE_LIMIT`).
    pub(crate) fn settle(&self) {
        let target = self.queued.load(Ordering::Acquire);
        let deadline = Instant::now() + SETTLE_LIMIT;
        let mut done = self.done.lock();
        while *done < target {
            if self.advanced.wait_until(&mut done, deadline).timed_out() {
                return;
            }
        }
    }
}

impl Watcher {
    pub(crate) fn start(fs: Arc<Fs>, notifier: Notifier) -> std::io::Result<Watcher> {
        let (tx, rx) = mpsc::channel::<Vec<MetaChange>>();
        let progress = Arc::new(Progress::default());
        let advancing = progress.clone();
        let thread = std::thread::Builder::new().name("larder-fuse-inval".into()).spawn(move || {
            for changes in rx {
                for c in changes {
                    // ENOENT: the kernel holds no copy, nothing to drop.
                    let _ = match &c {
                        MetaChange::Object(ino) => notifier.inval_inode(INodeNo(*ino), 0, 0),
                        MetaChange::Entry { dir, name } => notifier.inval_entry(INodeNo(*dir), OsStr::from_bytes(name)),
                    };
                }
                *advancing.done.lock() += 1;
                advancing.advanced.notify_all();
            }
        })?;
        let queued = progress.clone();
        let tx = std::sync::Mutex::new(tx);
        fs.store().set_change_observer(Some(Arc::new(move |changes: &[MetaChange]| {
            if let Ok(tx) = tx.lock() {
                if tx.send(changes.to_vec()).is_ok() {
                    queued.queued.fetch_add(1, Ordering::AcqRel);
                }
            }
        })));
        Ok(Watcher { fs, thread: Some(thread), progress })
    }

    /// Its progress, to wait on.
    pub(crate) fn progress(&self) -> Arc<Progress> {
        self.progress.clone()
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
