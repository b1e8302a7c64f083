//! Background workers: one flusher and `compaction_threads` mergers, so a
//! long merge never holds up a flush.

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::db::Inner;
use crate::IndexError;

/// The first pause before a flush or merge that found no space is tried
/// again; each failure in a row doubles it, up to [`NO_SPACE_MAX_PAUSE`].
/// New work (a freeze, a commit) ends a pause early.
const NO_SPACE_FIRST_PAUSE: Duration = Duration::from_millis(10);
/// The longest pause between tries while the file system stays full.
const NO_SPACE_MAX_PAUSE: Duration = Duration::from_secs(1);

/// The file a flush or merge could not write for want of space: such a
/// failure changed nothing (the partial run is removed) and is retried.
fn no_space_path(e: &IndexError) -> Option<PathBuf> {
    match e {
        IndexError::Io(larder_io::IoError::NoSpace { path }) => Some(path.clone()),
        _ => None,
    }
}

/// Poisons the index if the worker holding it unwinds, so a dead worker
/// cannot go unnoticed while writers wait for it.
struct PoisonOnPanic<'a>(&'a Inner);

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let name = std::thread::current().name().unwrap_or("an index worker").to_string();
            self.0.set_poison(format!("{name} panicked"));
        }
    }
}

/// The workers' thread names: the flusher, then each merger.
pub(crate) fn names(options: &crate::Options) -> Vec<String> {
    if !options.background_threads {
        return Vec::new();
    }
    let mergers = (0..options.compaction_threads).map(|n| format!("larder-merge-{n}"));
    std::iter::once("larder-flush".to_string()).chain(mergers).collect()
}

pub(crate) fn spawn(inner: &Arc<Inner>) -> Vec<JoinHandle<()>> {
    let mut handles = Vec::new();
    for (n, name) in names(&inner.options).into_iter().enumerate() {
        let i = inner.clone();
        let work: fn(&Inner) = if n == 0 { flusher } else { merger };
        handles.extend(std::thread::Builder::new().name(name).spawn(move || work(&i)).ok());
    }
    handles
}

/// The longest an idle merger waits before it looks for obsolete runs to
/// remove again.
const REAP_WAIT: Duration = Duration::from_secs(1);

/// How long the active memtable must go without a seal (no 2,048 new
/// entries) before the idle flusher merges its sorted arrays into one.
const QUIET: Duration = Duration::from_millis(10);
/// The longest wait between looks at an unchanging active memtable.
const QUIET_MAX_WAIT: Duration = Duration::from_secs(1);
/// Arrays a quiet memtable must hold for the flusher to merge them: each
/// is a source every scan positions (and a search for a get that reaches
/// it). From three, so a slow, steady writer costs at most one merge of
/// the memtable's slots per two seals.
const QUIET_MIN_ARRAYS: usize = 3;

/// How long the active memtable must go without a seal before the idle
/// flusher asks for merges at rest (`Options::merge_at_rest`). An empty
/// one (a writer that stopped and flushed, as after a load) needs only
/// [`QUIET`]: a writer slowed down by a busy machine or by its own work
/// goes quiet for tens of milliseconds mid-load, and each round it set off
/// would rewrite runs the load is still adding to.
const REST: Duration = Duration::from_secs(1);

/// The idle flusher's watch over the active memtable: once its view
/// stays the same for [`QUIET`] (writes have stopped or slowed to a
/// trickle, as after a load), its arrays are merged into one, and after
/// [`REST`] the runs may be merged into one. A scan right after a load of
/// 1 KiB records positioned the memtable's skip list and 4-5 arrays beside
/// the runs.
struct QuietWatch {
    /// The view seen at the last look (weak: it pins no entries, and its
    /// address cannot be reused while held).
    seen: std::sync::Weak<crate::memtable::View>,
    /// When that view was first seen.
    since: Instant,
    wait: Duration,
}

impl QuietWatch {
    fn new() -> QuietWatch {
        QuietWatch { seen: std::sync::Weak::new(), since: Instant::now(), wait: QUIET }
    }

    /// Looks at the active memtable after a wait: merges its arrays if
    /// its view has not changed since the last look, and sets how long to
    /// wait before the next (longer and longer while nothing changes).
    /// Only an idle look (`idle`: the flusher waited with nothing frozen)
    /// may ask for merges at rest: a look right after a flush can find a
    /// view unchanged because the writer was stopped waiting for it.
    fn look(&mut self, inner: &Inner, idle: bool) {
        let active = inner.sv.read().active.clone();
        let view = active.view();
        let unchanged = std::ptr::eq(self.seen.as_ptr(), Arc::as_ptr(&view));
        if !unchanged {
            self.seen = Arc::downgrade(&view);
            self.since = Instant::now();
            self.wait = QUIET;
            return;
        }
        drop(view);
        // Not a seal: the consolidated view keeps `since`.
        if active.consolidate(QUIET_MIN_ARRAYS) {
            self.seen = Arc::downgrade(&active.view());
        }
        let quiet_for = self.since.elapsed();
        if idle && (quiet_for >= REST || quiet_for >= QUIET && active.is_empty()) {
            inner.want_rest_merge();
        }
        self.wait = (self.wait * 2).min(QUIET_MAX_WAIT);
    }
}

fn flusher(inner: &Inner) {
    let _guard = PoisonOnPanic(inner);
    let mut pause = NO_SPACE_FIRST_PAUSE;
    let mut quiet = QuietWatch::new();
    loop {
        {
            let mut bg = inner.bg.lock();
            loop {
                if bg.shutdown || inner.check_poison().is_err() {
                    return;
                }
                if !inner.sv.read().frozen.is_empty() {
                    break;
                }
                // The writer's full skip lists, sealed here rather than on
                // its thread (see the memtable's module doc).
                let active = inner.sv.read().active.clone();
                if active.has_pending() {
                    parking_lot::MutexGuard::unlocked(&mut bg, || active.seal_pending());
                    continue;
                }
                drop(active);
                // Idle: populate the runs readers began to use (queued
                // without this lock, so checked before each wait).
                if inner.run_cache.populate_pending() {
                    parking_lot::MutexGuard::unlocked(&mut bg, || inner.run_cache.populate_queued());
                    continue;
                }
                if inner.work_cv.wait_for(&mut bg, quiet.wait).timed_out() {
                    parking_lot::MutexGuard::unlocked(&mut bg, || quiet.look(inner, true));
                }
            }
            bg.flushing = true;
        }
        let r = inner.flush_oldest();
        // A flush takes longer than QUIET: a view unchanged since the look
        // before it has been quiet that long.
        quiet.look(inner, false);
        let mut bg = inner.bg.lock();
        bg.flushing = false;
        bg.flush_tries += 1;
        // Writes resumed: no more merges at rest until they stop again.
        bg.rest_merge_wanted = false;
        match r {
            Ok(_) => {
                bg.flush_no_space = None;
                pause = NO_SPACE_FIRST_PAUSE;
            }
            Err(e) => match no_space_path(&e) {
                Some(path) => {
                    tracing::warn!(path = %path.display(), ?pause, "no space to flush the index; retrying");
                    bg.flush_no_space = Some(path);
                    // Waiters for the flush get ENOSPC instead of waiting.
                    inner.done_cv.notify_all();
                    if !bg.shutdown {
                        inner.work_cv.wait_for(&mut bg, pause);
                    }
                    pause = (pause * 2).min(NO_SPACE_MAX_PAUSE);
                }
                None => {
                    drop(bg);
                    inner.set_poison(format!("flush failed: {e}"));
                    return;
                }
            },
        }
    }
}

fn merger(inner: &Inner) {
    let _guard = PoisonOnPanic(inner);
    let mut pause = NO_SPACE_FIRST_PAUSE;
    loop {
        let task = loop {
            let epoch = inner.bg.lock().work_epoch;
            // Off the writers' path (a flush is on it when frozen
            // memtables pile up): a merger removes obsolete runs.
            inner.reaper.drain();
            if let Some(t) = inner.claim_task() {
                break t;
            }
            let mut bg = inner.bg.lock();
            if bg.shutdown || inner.check_poison().is_err() {
                return;
            }
            if bg.work_epoch == epoch {
                // Timed: a run queued for removal just before this wait
                // notified no one (see `Reaper`).
                inner.work_cv.wait_for(&mut bg, REAP_WAIT);
            }
        };
        let r = if task.at_rest { run_at_lowest_priority(inner, &task) } else { inner.run_task(&task) };
        inner.release_task(&task);
        match r {
            Ok(()) => {
                inner.bg.lock().merge_no_space = None;
                pause = NO_SPACE_FIRST_PAUSE;
            }
            Err(crate::IndexError::Closed) => return,
            Err(e) => match no_space_path(&e) {
                Some(path) => {
                    tracing::warn!(path = %path.display(), ?pause, "no space to merge index runs; retrying");
                    let mut bg = inner.bg.lock();
                    bg.merge_no_space = Some(path);
                    inner.done_cv.notify_all();
                    if !bg.shutdown {
                        inner.work_cv.wait_for(&mut bg, pause);
                    }
                    pause = (pause * 2).min(NO_SPACE_MAX_PAUSE);
                }
                None => {
                    inner.set_poison(format!("merge failed: {e}"));
                    return;
                }
            },
        }
        if inner.bg.lock().shutdown {
            return;
        }
    }
}

/// Runs a merge at rest on a thread of its own at the lowest CPU priority
/// (nice 19): readers, writers and other programs come first, and the
/// merge takes what CPU they leave. A thread of its own because an
/// unprivileged thread cannot raise its priority back.
fn run_at_lowest_priority(inner: &Inner, task: &crate::compaction::Task) -> Result<(), IndexError> {
    std::thread::scope(|s| {
        let merge = std::thread::Builder::new().name("larder-rest-merge".to_string()).spawn_scoped(s, || {
            let _guard = PoisonOnPanic(inner);
            if !larder_io::lowest_thread_priority() {
                tracing::debug!("could not lower a merge at rest's priority");
            }
            inner.run_task(task)
        });
        match merge {
            Ok(handle) => {
                handle.join().unwrap_or_else(|_| Err(IndexError::Poisoned("a merge at rest panicked".into())))
            }
            // No thread to be had: the merger runs it at its own priority.
            Err(_) => inner.run_task(task),
        }
    })
}
