//! Ingestion: a large batch written straight into a sorted run, bypassing
//! the memtable (and the caller's log), then installed as the newest run.
//!
//! Two steps, so a caller with a log can record the batch's sequence
//! number between them: [`Index::prepare_ingest`] flushes every memtable
//! (the new run must be newer than everything written before it), writes
//! and syncs the run, and holds the sequence number: writes are refused
//! until [`Index::install_ingest`] commits a manifest naming the run, which
//! makes the batch visible and durable at once. A prepared run dropped
//! without being installed is removed, and a crash in between leaves a
//! file no manifest names, removed at the next open.
//!
//! Why not stamp the run when it is installed (RocksDB's "global sequence
//! number")? It needs a per-run sequence override in the manifest and in
//! every read; holding writes while the run is written keeps the run format
//! unchanged and costs a bulk load nothing it was not already paying.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::batch::{tombstone, BatchOp, WriteBatch};
use crate::db::{Index, Inner, WriterState};
use crate::entry::{max_covering, Op, OpRef, Stamp};
use crate::error::{IndexError, Result};
use crate::flush::Edit;
use crate::memtable::Memtable;
use crate::merge_order::merged_ranges;
use crate::resolve::resolve_output;
use crate::run::writer::RunWriter;
use crate::run::RunMeta;

/// A run written from a batch and not yet part of the index (see the
/// module doc). Dropping it unused removes the file and allows writes again.
pub struct PreparedRun {
    inner: Arc<Inner>,
    seq: u64,
    meta: Option<RunMeta>,
    path: PathBuf,
    payload_bytes: u64,
    installed: bool,
    /// A manifest naming the run may have been written (an install was
    /// tried): the file stays, and the next open removes it if no manifest
    /// names it.
    keep_file: bool,
}

impl std::fmt::Debug for PreparedRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedRun").field("seq", &self.seq).field("path", &self.path).finish()
    }
}

impl PreparedRun {
    /// The sequence number the batch takes when installed.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The run file's id (its name is the id in 16 hex digits, `.run`);
    /// None when the batch wrote nothing a run would hold.
    pub fn run_id(&self) -> Option<u64> {
        self.meta.as_ref().map(|m| m.id)
    }
}

impl Drop for PreparedRun {
    fn drop(&mut self) {
        if self.installed {
            return;
        }
        if self.meta.is_some() && !self.keep_file {
            if let Err(e) = self.inner.storage.remove_file(&self.path) {
                tracing::warn!(path = %self.path.display(), error = %e, "could not remove an abandoned ingest run");
            }
        }
        let mut w = self.inner.writer.lock();
        if w.ingesting == Some(self.seq) {
            w.ingesting = None;
        }
    }
}

impl Index {
    /// Writes `batch` as a run that will hold it at sequence number `seq`
    /// (greater than every one written before), first flushing every
    /// memtable so the run is newer than all of them. Until the returned
    /// run is installed ([`Index::install_ingest`]) or dropped, every write
    /// and ingest is refused. A refused batch changes nothing.
    pub fn prepare_ingest(&self, seq: u64, batch: &WriteBatch) -> Result<PreparedRun> {
        let inner = &self.inner;
        let (operators, mut w) = inner.begin_write(seq, batch)?;
        inner.flush_memtables_locked(&mut w)?;
        let bottom = inner.sv.read().version.runs.is_empty();
        let (id, mut writer, unnamed) = inner.new_run(batch.len() as u64)?;
        let path = writer.path().to_path_buf();
        // On failure `unnamed` removes the partial file as it drops.
        let written = write_batch(inner, &mut writer, batch, seq, operators, bottom).and_then(|()| {
            if writer.is_empty() {
                return Ok(None);
            }
            let meta = writer.finish(id, 0, (seq, seq), &inner.registry)?;
            // The run's name is durable before anyone may refer to it.
            inner.storage.sync_dir(&inner.dir)?;
            Ok(Some(meta))
        })?;
        let meta = match written {
            Some(m) => {
                // From here PreparedRun owns the file.
                unnamed.keep();
                Some(m)
            }
            None => {
                unnamed.remove()?;
                None
            }
        };
        w.ingesting = Some(seq);
        Ok(PreparedRun {
            inner: inner.clone(),
            seq,
            meta,
            path,
            payload_bytes: batch.payload_bytes(),
            installed: false,
            keep_file: false,
        })
    }

    /// Makes a prepared run the index's newest: its batch becomes visible
    /// and durable ([`Index::durable_seq`] reaches its sequence number)
    /// with one manifest commit.
    pub fn install_ingest(&self, mut run: PreparedRun) -> Result<()> {
        let inner = &self.inner;
        if !Arc::ptr_eq(inner, &run.inner) {
            return Err(IndexError::InvalidOption { name: "run", reason: "prepared by another index".into() });
        }
        let mut w = inner.writer.lock();
        inner.check_poison()?;
        if w.ingesting != Some(run.seq) {
            return Err(IndexError::Poisoned(format!("ingest at {} is no longer pending", run.seq)));
        }
        let mem = Arc::new(Memtable::with_deferred_seals(
            run.seq + 1,
            inner.options.memtable_size_bytes,
            inner.options.background_threads,
        ));
        run.keep_file = true;
        inner.commit(Edit::Ingest { run: run.meta.clone(), seq: run.seq, active: mem })?;
        run.installed = true;
        w.ingesting = None;
        w.last_seq = run.seq;
        inner.visible_seq.store(run.seq, Ordering::Release);
        inner.stats.add(&inner.stats.user_bytes_written, run.payload_bytes);
        inner.stats.add(&inner.stats.ingests, 1);
        if let Some(m) = &run.meta {
            inner.stats.add(&inner.stats.bytes_ingested, m.file_size);
        }
        Ok(())
    }
}

impl Inner {
    /// Refuses `seq` unless it may be written next: above the last, and not
    /// while an ingest holds the next one.
    pub(crate) fn check_next_seq(&self, w: &WriterState, seq: u64) -> Result<()> {
        if let Some(pending) = w.ingesting {
            return Err(IndexError::IngestPending { seq: pending });
        }
        if seq <= w.last_seq {
            return Err(IndexError::SequenceNotIncreasing { given: seq, last: w.last_seq });
        }
        if seq == u64::MAX {
            // Reserved: the next memtable starts at seq + 1.
            return Err(IndexError::TooLarge { what: "sequence number", len: seq, limit: u64::MAX - 1 });
        }
        Ok(())
    }

    /// Freezes the active memtable and waits until every batch written is
    /// in durable runs, holding the write lock throughout.
    fn flush_memtables_locked(&self, w: &mut WriterState) -> Result<()> {
        self.freeze_unflushed(w);
        if !self.options.background_threads {
            return self.run_pending_work_inline();
        }
        let mut bg = self.bg.lock();
        while self.durable_seq.load(Ordering::Acquire) < w.last_seq {
            self.check_poison()?;
            if bg.shutdown {
                return Err(IndexError::Closed);
            }
            self.done_cv.wait_for(&mut bg, Duration::from_millis(100));
        }
        Ok(())
    }
}

/// One operation of a batch, borrowing the batch's bytes.
pub(crate) struct Slot<'a> {
    key: &'a [u8],
    sub: u32,
    op: OpRef<'a>,
}

/// The allocation of an ingest's sort buffer (one [`Slot`] per operation,
/// 48 bytes: 100 MiB for a bulk create's chunk of 1M files), kept empty
/// between ingests. A bulk load ingests chunk after chunk; a fresh buffer
/// for each was mapped, faulted in and zeroed page by page, then unmapped
/// (perf, 4M creates in four chunks: 8% of the creating thread's time in
/// those faults). The next memtable flush drops it: writes are no longer
/// ingests alone, and the index does not keep the memory.
#[derive(Default)]
pub(crate) struct SpareSlots(Vec<Slot<'static>>);

impl SpareSlots {
    /// The kept allocation, empty, for slots borrowing a batch.
    fn take<'a>(&mut self) -> Vec<Slot<'a>> {
        std::mem::take(&mut self.0)
    }

    /// Keeps `slots`' allocation for the next ingest, dropping its slots.
    fn keep(&mut self, mut slots: Vec<Slot<'_>>) {
        slots.clear();
        // Collected in place: a Vec's iterator collected into a Vec of a
        // type of the same size and alignment reuses its allocation. The
        // filter_map is what changes the element type (the test below
        // checks the allocation is kept).
        #[allow(clippy::unnecessary_filter_map)]
        let kept: Vec<Slot<'static>> = slots.into_iter().filter_map(|_| None).collect();
        self.0 = kept;
    }

    /// Drops the kept allocation.
    pub(crate) fn release(&mut self) {
        self.0 = Vec::new();
    }

    /// Slots the kept allocation holds room for.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.0.capacity()
    }
}

/// Sorted stretches of a batch visited in order without sorting it: a
/// bulk create's are three; more, and the batch is sorted.
const MERGED_STRETCHES: usize = 16;

/// Writes `batch`'s entries, stamped `seq`, into `w` in internal order,
/// each key resolved as a flush would (`bottom`: no older run exists).
fn write_batch(
    inner: &Inner,
    w: &mut RunWriter,
    batch: &WriteBatch,
    seq: u64,
    operators: Vec<u32>,
    bottom: bool,
) -> Result<()> {
    let mut slots = inner.spare_slots.lock().take();
    slots.reserve(batch.len());
    let mut tombstones = Vec::new();
    let mut operators = operators.into_iter();
    for (i, op) in batch.iter().enumerate() {
        let sub = i as u32;
        let (key, op) = match op {
            BatchOp::Put { key, value } => (key, OpRef::Put(value)),
            BatchOp::Delete { key } => (key, OpRef::Delete),
            BatchOp::Merge { key, operand, .. } => {
                (key, OpRef::Merge { operator: operators.next().unwrap_or(u32::MAX), operand })
            }
            BatchOp::DeleteRange { start, end } => {
                tombstones.extend(tombstone(start, end, seq, sub));
                continue;
            }
        };
        slots.push(Slot { key, sub, op });
    }
    // A bulk batch is a few sorted stretches (new onodes by id, new
    // dentries by name), visited in order without moving them; any other
    // is sorted. Within a stretch keys strictly increase: a key written
    // twice has a greater sub the second time, so it starts a stretch.
    let less = |a: &Slot<'_>, b: &Slot<'_>| a.key.cmp(b.key).then(b.sub.cmp(&a.sub)).is_lt();
    let (ranges, distinct_within) = match merged_ranges(&slots, less, MERGED_STRETCHES) {
        Some(ranges) => (ranges, true),
        None => {
            slots.sort_by(|a, b| a.key.cmp(b.key).then(b.sub.cmp(&a.sub)));
            (std::iter::once(0..slots.len()).collect(), false)
        }
    };
    let mut versions: Vec<(Stamp, Op)> = Vec::new();
    let mut out: Vec<(Stamp, Op)> = Vec::new();
    let mut group: Vec<&Slot<'_>> = Vec::new();
    let mut group_out = |group: &[&Slot<'_>]| -> Result<()> {
        let Some(first) = group.first() else { return Ok(()) };
        let key = first.key;
        let stamp = |s: &Slot<'_>| Stamp { seq, sub: s.sub };
        // The common case, one put or delete and no range delete, is
        // written as it stands: what resolve_output would keep.
        if group.len() == 1 && tombstones.is_empty() {
            match first.op {
                OpRef::Put(_) => return w.add_ref(key, stamp(first), first.op),
                OpRef::Delete if bottom => return Ok(()),
                OpRef::Delete => return w.add_ref(key, stamp(first), OpRef::Delete),
                OpRef::Merge { .. } => {}
            }
        }
        versions.clear();
        versions.extend(group.iter().map(|s| (stamp(s), s.op.to_owned())));
        let covering = max_covering(&tombstones, key, u64::MAX);
        out.clear();
        resolve_output(&inner.registry, key, &versions, covering, bottom, &mut out);
        for (stamp, op) in &out {
            w.add(key, *stamp, op)?;
        }
        Ok(())
    };
    for range in &ranges {
        for (at, slot) in slots[range.clone()].iter().enumerate() {
            // Equal keys meet only where ranges join, unless sorted.
            let same = group.last().is_some_and(|last| (at == 0 || !distinct_within) && last.key == slot.key);
            if !same {
                group_out(&group)?;
                group.clear();
            }
            group.push(slot);
        }
    }
    group_out(&group)?;
    drop(group);
    if !bottom {
        for t in tombstones {
            w.add_tombstone(t);
        }
    }
    inner.spare_slots.lock().keep(slots);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spare_keeps_its_allocation_from_one_batch_to_the_next_until_released() {
        let mut spare = SpareSlots::default();
        let first = b"first batch".to_vec();
        let mut slots = spare.take();
        slots.reserve(1000);
        slots.extend((0..1000).map(|i| Slot { key: &first[..], sub: i, op: OpRef::Put(&first[..]) }));
        let (capacity, address) = (slots.capacity(), slots.as_ptr() as usize);
        spare.keep(slots);
        assert_eq!(spare.capacity(), capacity);
        // A later batch, borrowing other bytes, gets the same memory.
        let second = b"second".to_vec();
        let mut again = spare.take();
        assert!(again.is_empty());
        assert_eq!((again.capacity(), again.as_ptr() as usize), (capacity, address));
        again.push(Slot { key: &second[..], sub: 0, op: OpRef::Delete });
        assert_eq!(again.as_ptr() as usize, address);
        spare.keep(again);
        spare.release();
        assert_eq!(spare.capacity(), 0);
        assert_eq!(spare.take().capacity(), 0);
    }
}
