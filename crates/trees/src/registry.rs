//! One writer lock and one catalog per store in a process, however many
//! times its trees are opened: the write transactions of two `Trees` on
//! one store must be serialized against each other, and a tree one of
//! them creates must exist for the other.

use std::sync::{Arc, Mutex, Weak};

use larder_object::Store;

use crate::catalog::Catalog;
use crate::counts::CommittedCounts;
use crate::start_hint::StartHints;
use crate::writer::WriterLock;
use crate::Result;

/// What every `Trees` of one store shares.
pub(crate) struct Serial {
    /// Held by the one write transaction running (and by catalog changes),
    /// from its start until its record is ordered in the log.
    pub(crate) writer: WriterLock,
    /// The trees that exist; changed only under `writer`.
    pub(crate) catalog: parking_lot::RwLock<Catalog>,
    /// Where forward scans of each tree may start.
    pub(crate) hints: StartHints,
    /// The trees' committed entry counts; used under `writer` only.
    pub(crate) counts: CommittedCounts,
}

/// The stores whose trees are open, each with what its `Trees` share.
static OPEN: Mutex<Vec<(Weak<Store>, Weak<Serial>)>> = Mutex::new(Vec::new());

/// The writer lock and catalog of `store`'s trees: those of a `Trees`
/// already open on it, else new ones with the catalog loaded.
pub(crate) fn serial_for(store: &Arc<Store>) -> Result<Arc<Serial>> {
    // A panic elsewhere while the list was held leaves it whole: only
    // pushes and retains change it.
    let mut open = OPEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    open.retain(|(s, v)| s.strong_count() > 0 && v.strong_count() > 0);
    let existing = open
        .iter()
        .find(|(s, _)| std::ptr::eq(s.as_ptr(), Arc::as_ptr(store)))
        .and_then(|(_, serial)| serial.upgrade());
    if let Some(serial) = existing {
        return Ok(serial);
    }
    let serial = Arc::new(Serial {
        writer: WriterLock::default(),
        catalog: parking_lot::RwLock::new(Catalog::load(store)?),
        hints: StartHints::default(),
        counts: CommittedCounts::default(),
    });
    open.push((Arc::downgrade(store), Arc::downgrade(&serial)));
    Ok(serial)
}
