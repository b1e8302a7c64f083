//! Long-lived threads that sync a group's dependency files while the
//! group's leader writes and syncs the log.
//!
//! A thread is spawned only when a job finds no thread free (at most
//! [`DepSyncers::new`]'s limit, so as many as groups in flight times the
//! files synced in parallel per group) and is kept until the log is
//! dropped: a group of a busy log hands its syncs to a waiting thread
//! (a futex wake and a wait) instead of creating one (clone, stack set-up,
//! signal masks, teardown: 35-80 µs of CPU each on the 2-core test
//! machine, against a few µs for the hand-off).

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::thread::JoinHandle;

use larder_io::FileRef;
use parking_lot::{Condvar, Mutex};

use crate::error::{LogError, Result};

/// The dependency-sync threads' name.
pub(crate) const DEP_SYNC_THREAD: &str = "larder-dep-sync";

/// A log's dependency-sync threads.
pub(crate) struct DepSyncers {
    shared: Arc<Shared>,
    /// Most threads kept.
    limit: usize,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when a job is queued or the threads must stop.
    work: Condvar,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// Threads not running a job (waiting for one, or about to look).
    /// A thread counts itself free again before it answers its job's
    /// ticket, so a caller that waits for each job in turn never finds
    /// the thread that ran the last one busy.
    free: usize,
    stop: bool,
}

struct Job {
    files: Vec<FileRef>,
    done: Arc<Done>,
}

/// One job's outcome, set once by the thread that ran it.
#[derive(Default)]
struct Done {
    result: Mutex<Option<Result<()>>>,
    cond: Condvar,
}

/// A job handed to a thread: [`Ticket::wait`] returns its result.
pub(crate) struct Ticket(Arc<Done>);

impl Ticket {
    /// Waits for the job's syncs and returns their result.
    pub(crate) fn wait(self) -> Result<()> {
        let mut result = self.0.result.lock();
        loop {
            if let Some(r) = result.take() {
                return r;
            }
            self.0.cond.wait(&mut result);
        }
    }
}

impl DepSyncers {
    /// No threads yet; at most `limit` (at least 1) are ever kept.
    pub(crate) fn new(limit: usize) -> Self {
        DepSyncers {
            shared: Arc::new(Shared { queue: Mutex::new(Queue::default()), work: Condvar::new() }),
            limit: limit.max(1),
            threads: Mutex::new(Vec::new()),
        }
    }

    /// Hands `files` to a thread, which syncs them (fdatasync) in order and
    /// stops at the first failure. Returns the files back when no thread
    /// can take them (none free, the limit reached or a spawn refused by a
    /// resource limit): the caller syncs them itself.
    pub(crate) fn submit(&self, files: Vec<FileRef>) -> std::result::Result<Ticket, Vec<FileRef>> {
        let mut threads = self.threads.lock();
        let mut q = self.shared.queue.lock();
        if q.free <= q.jobs.len() {
            // Every free thread has a job waiting already: one more, if allowed.
            if threads.len() >= self.limit {
                return Err(files);
            }
            let shared = Arc::clone(&self.shared);
            match std::thread::Builder::new().name(DEP_SYNC_THREAD.into()).spawn(move || run(&shared)) {
                Ok(h) => threads.push(h),
                Err(_) => return Err(files),
            }
            q.free += 1;
        }
        drop(threads);
        let done = Arc::new(Done::default());
        q.jobs.push_back(Job { files, done: Arc::clone(&done) });
        drop(q);
        self.shared.work.notify_one();
        Ok(Ticket(done))
    }

    /// Threads spawned so far (all still running).
    #[cfg(test)]
    pub(crate) fn threads(&self) -> usize {
        self.threads.lock().len()
    }
}

impl Drop for DepSyncers {
    fn drop(&mut self) {
        self.shared.queue.lock().stop = true;
        self.shared.work.notify_all();
        for h in self.threads.get_mut().drain(..) {
            let _ = h.join();
        }
    }
}

/// A thread's loop: runs jobs until the syncers are dropped. A queued
/// job is always run before the thread stops, so no ticket waits forever.
fn run(shared: &Shared) {
    let mut q = shared.queue.lock();
    loop {
        if let Some(job) = q.jobs.pop_front() {
            q.free -= 1;
            drop(q);
            // A panic in a sync fails the job (the group's leader poisons
            // the log) instead of leaving its ticket unanswered.
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| sync_all(&job.files)))
                .unwrap_or_else(|_| Err(LogError::Poisoned("a dependency sync panicked".into())));
            q = shared.queue.lock();
            q.free += 1;
            *job.done.result.lock() = Some(result);
            job.done.cond.notify_all();
            continue;
        }
        if q.stop {
            return;
        }
        shared.work.wait(&mut q);
    }
}

/// Syncs each file in turn; the first failure ends it.
pub(crate) fn sync_all(files: &[FileRef]) -> Result<()> {
    for f in files {
        f.sync_data()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use larder_io::sim::{SimFault, SimOp};
    use larder_io::{OpenOptions, SimStorage, Storage};
    use std::path::Path;

    fn files(storage: &SimStorage, n: usize) -> Vec<FileRef> {
        (0..n)
            .map(|i| storage.open(Path::new(&format!("/f{i}")), OpenOptions::CREATE).expect("create a sim file"))
            .collect()
    }

    fn must_take(syncers: &DepSyncers, files: Vec<FileRef>) -> Ticket {
        match syncers.submit(files) {
            Ok(t) => t,
            Err(_) => panic!("no thread took the job"),
        }
    }

    #[test]
    fn jobs_one_after_another_run_on_one_kept_thread() {
        let storage = SimStorage::new(1);
        let fs = files(&storage, 2);
        let syncers = DepSyncers::new(4);
        for _ in 0..50 {
            must_take(&syncers, fs.clone()).wait().expect("sync");
        }
        assert_eq!(syncers.threads(), 1);
        assert_eq!(storage.counters().syncs, 100);
    }

    #[test]
    fn jobs_at_once_never_spawn_past_the_limit() {
        let storage = SimStorage::new(2);
        let fs = files(&storage, 1);
        let syncers = DepSyncers::new(2);
        let mut tickets = Vec::new();
        let mut handed_back = 0;
        for _ in 0..20 {
            match syncers.submit(fs.clone()) {
                Ok(t) => tickets.push(t),
                Err(back) => {
                    // Only when every kept thread is busy; the caller syncs.
                    assert_eq!(syncers.threads(), 2);
                    sync_all(&back).expect("sync");
                    handed_back += 1;
                }
            }
        }
        assert!(syncers.threads() <= 2);
        let taken = tickets.len() as u64;
        for t in tickets {
            t.wait().expect("sync");
        }
        assert_eq!(storage.counters().syncs, taken + handed_back);
    }

    #[test]
    fn a_failed_sync_is_the_jobs_result_and_stops_the_job() {
        let storage = SimStorage::new(3);
        let fs = files(&storage, 2);
        storage.fail_path("/f0", SimOp::SyncData, SimFault::Eio);
        let syncers = DepSyncers::new(1);
        assert!(must_take(&syncers, fs.clone()).wait().is_err());
        assert_eq!(storage.counters().syncs, 0, "the file after the failed one is not synced");
        // The thread goes on with the next job.
        must_take(&syncers, fs).wait().expect("sync");
        assert_eq!(syncers.threads(), 1);
    }
}
