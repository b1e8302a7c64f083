//! Versions: the set of runs at one moment, and the memtables beside them.

use std::sync::Arc;

use crate::memtable::Memtable;
use crate::run::cache::RunHandle;

/// The runs of the index, newest first.
///
/// Invariants (checked by [`Version::check_invariants`] before every commit):
/// sequence ranges are disjoint and strictly decreasing along the list,
/// no level is above [`crate::run::MAX_LEVEL`], and levels never decrease
/// along it, so the runs of a level are contiguous
/// and every run of a level is newer than every run of the next.
#[derive(Default)]
pub(crate) struct Version {
    pub runs: Vec<Arc<RunHandle>>,
}

impl Version {
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        if let Some(r) = self.runs.iter().find(|r| r.meta.level > crate::run::MAX_LEVEL) {
            return Err(format!(
                "run {} is at level {}, above the last ({})",
                r.meta.id,
                r.meta.level,
                crate::run::MAX_LEVEL
            ));
        }
        for w in self.runs.windows(2) {
            let (a, b) = (&w[0].meta, &w[1].meta);
            if a.seq_min <= b.seq_max {
                return Err(format!("runs {} and {} overlap in sequence numbers", a.id, b.id));
            }
            if a.level > b.level {
                return Err(format!("run {} (level {}) precedes run {} (level {})", a.id, a.level, b.id, b.level));
            }
        }
        Ok(())
    }

    pub(crate) fn runs_at(&self, level: u32) -> usize {
        self.runs.iter().filter(|r| r.meta.level == level).count()
    }
}

/// What a read needs: the active memtable, the frozen ones waiting for a
/// flush (newest first) and the runs. Readers clone the `Arc` and read
/// without further locking; a reader's memtables and runs stay alive (and
/// run files stay on disk) until it lets go.
pub(crate) struct SuperVersion {
    pub active: Arc<Memtable>,
    pub frozen: Vec<Arc<Memtable>>,
    pub version: Arc<Version>,
}

impl SuperVersion {
    /// Memtables newest first.
    pub(crate) fn memtables(&self) -> impl Iterator<Item = &Arc<Memtable>> {
        std::iter::once(&self.active).chain(self.frozen.iter())
    }
}
