//! Large transactions committed as index runs of their own, not as log
//! records: the batch of a bulk create (hundreds of thousands of names)
//! is written once, as a sorted run, instead of into the log, a memtable,
//! a flushed run and every merge after it.
//!
//! Protocol, under the append gate (no other record is appended or applied
//! meanwhile, so the next LSN is known):
//! 1. the index flushes its memtables (its flush hook makes the log
//!    durable through them) and writes and syncs the run, stamped with the
//!    next LSN `s` (`Index::prepare_ingest`);
//! 2. a marker record is appended as `s` and synced;
//! 3. the index installs the run (one manifest commit): durable seq = `s`.
//!
//! Recovery: a manifest naming the run covers `s`, and replay starts above
//! it. A crash between 2 and 3 leaves the marker as the log's last record
//! (nothing could be appended after it) with the run unreferenced (the
//! index removes it at open): replaying the marker ends the log there, the
//! transaction was never acknowledged. The index never runs ahead of the
//! log, because the marker is durable before the install.

use larder_index::WriteBatch;
use larder_log::Dependency;

use super::{observe, payload, Store};
use crate::error::{ObjectError, Result};

impl Store {
    /// Commits `batch` as an index run of its own (see the module doc):
    /// durable when this returns, visible at once to every reader. Other
    /// commits wait while the run is written. `deps` (container files the
    /// batch refers to) are synced first.
    pub(crate) fn commit_ingest(&self, batch: &WriteBatch, deps: &[Dependency]) -> Result<u64> {
        self.check_writable()?;
        for d in deps {
            d.file().sync_data()?;
        }
        let _gate = self.append_gate.write();
        // Appenders apply under the gate, so everything appended so far is
        // in the index and the next LSN is this one.
        let lsn = self.log.last_lsn() + 1;
        self.apply_order.refuse_if_stopped(&self.index)?;
        let prepared = self.index.prepare_ingest(lsn, batch)?;
        let got = self.log.append_buffered_with(payload::encode_ingested(prepared.run_id()), Vec::new())?;
        if got != lsn {
            let why = format!("the ingest marker got LSN {got}, not {lsn}");
            self.log.poison(why.clone());
            return Err(ObjectError::ApplyFailed { lsn, why });
        }
        // IMPORTANT: the marker is durable before the manifest names the
        // run, so the index's durable seq never passes the log's end.
        self.log.sync_to(lsn)?;
        self.apply_order.apply_with(&self.log, &self.meta_cache, lsn, batch, || self.index.install_ingest(prepared))?;
        if let Some(observer) = self.observer.read().clone().filter(|_| observe::observed_thread()) {
            let changes = observe::changes(batch);
            if !changes.is_empty() {
                observer(&changes);
            }
        }
        drop(_gate);
        self.checkpoint_if_needed(lsn);
        Ok(lsn)
    }
}
