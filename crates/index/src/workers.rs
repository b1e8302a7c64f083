//! Background workers: one flusher and `compaction_threads` mergers, so a
//! long merge never holds up a flush.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::db::Inner;

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

fn flusher(inner: &Inner) {
    let _guard = PoisonOnPanic(inner);
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
                inner.work_cv.wait(&mut bg);
            }
            bg.flushing = true;
        }
        let r = inner.flush_oldest();
        inner.bg.lock().flushing = false;
        if let Err(e) = r {
            inner.set_poison(format!("flush failed: {e}"));
            return;
        }
    }
}

fn merger(inner: &Inner) {
    let _guard = PoisonOnPanic(inner);
    loop {
        let task = loop {
            let epoch = inner.bg.lock().work_epoch;
            if let Some(t) = inner.claim_task() {
                break t;
            }
            let mut bg = inner.bg.lock();
            if bg.shutdown || inner.check_poison().is_err() {
                return;
            }
            if bg.work_epoch == epoch {
                inner.work_cv.wait(&mut bg);
            }
        };
        let r = inner.run_task(&task);
        inner.release_task(&task);
        match r {
            Ok(()) => {}
            Err(crate::IndexError::Closed) => return,
            Err(e) => {
                inner.set_poison(format!("merge failed: {e}"));
                return;
            }
        }
        if inner.bg.lock().shutdown {
            return;
        }
    }
}
