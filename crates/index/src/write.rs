//! The write path: sequence checks, stalls, memtable insert, freezing.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::batch::{tombstone, BatchOp, WriteBatch};
use crate::db::{Inner, WriterState};
use crate::entry::{Kind, Stamp};
use crate::error::{IndexError, Result};
use crate::memtable::Memtable;
use crate::run::bloom::key_hash;
use crate::version::SuperVersion;

impl Inner {
    /// Checks `batch` (its operators' registry ids returned), takes the
    /// write lock, refuses `seq` if it may not come next, and delays while
    /// flushing or merging is behind: what every write and ingest does
    /// first.
    pub(crate) fn begin_write(
        &self,
        seq: u64,
        batch: &WriteBatch,
    ) -> Result<(Vec<u32>, parking_lot::MutexGuard<'_, WriterState>)> {
        // Validate before taking the lock: a refused batch changes nothing.
        let operators = batch.check(&self.registry)?;
        let w = self.writer.lock();
        // Checked after taking the lock, so no write slips past a poisoning.
        self.check_poison()?;
        self.check_next_seq(&w, seq)?;
        if self.options.background_threads {
            self.stall_if_behind()?;
        }
        Ok((operators, w))
    }

    pub(crate) fn write(&self, seq: u64, batch: &WriteBatch) -> Result<()> {
        let (operators, mut w) = self.begin_write(seq, batch)?;
        let active = self.sv.read().active.clone();
        let mut operators = operators.into_iter();
        let mut to_seal = false;
        for (i, op) in batch.iter().enumerate() {
            let stamp = Stamp { seq, sub: i as u32 };
            to_seal |= match op {
                BatchOp::Put { key, value } => active.insert(key, key_hash(key), value, stamp, Kind::Put, 0),
                BatchOp::Delete { key } => active.insert(key, key_hash(key), &[], stamp, Kind::Delete, 0),
                BatchOp::Merge { key, operand, .. } => {
                    let operator = operators.next().unwrap_or(u32::MAX);
                    active.insert(key, key_hash(key), operand, stamp, Kind::Merge, operator)
                }
                BatchOp::DeleteRange { start, end } => {
                    if let Some(t) = tombstone(start, end, seq, i as u32) {
                        active.insert_tombstone(t);
                    }
                    false
                }
            };
        }
        active.set_last_seq(seq);
        w.last_seq = seq;
        // IMPORTANT: publish only after every entry is in: readers see the
        // whole batch or none of it.
        self.visible_seq.store(seq, Ordering::Release);
        self.stats.add(&self.stats.user_bytes_written, batch.payload_bytes());
        if to_seal {
            // The flusher seals it (checked under `bg`, so this cannot
            // slip between its look and its wait).
            let _bg = self.bg.lock();
            self.work_cv.notify_all();
        }
        if active.size_bytes() >= self.options.memtable_size_bytes {
            self.freeze(&mut w);
            if !self.options.background_threads {
                drop(w);
                // The batch is applied; a failed flush poisons the index and
                // is reported by the next call, as with a background flush.
                let _ = self.run_pending_work_inline();
            }
        }
        Ok(())
    }

    /// Swaps in a new active memtable and queues the old one for flushing.
    /// Caller holds the write lock.
    pub(crate) fn freeze(&self, w: &mut WriterState) {
        let mut g = self.sv.write();
        let old = g.clone();
        let mut frozen = Vec::with_capacity(old.frozen.len() + 1);
        frozen.push(old.active.clone());
        frozen.extend(old.frozen.iter().cloned());
        let active = Memtable::with_deferred_seals(
            w.last_seq + 1,
            self.options.memtable_size_bytes,
            self.options.background_threads,
        );
        old.active.hand_spare_to(&active);
        *g = Arc::new(SuperVersion { active: Arc::new(active), frozen, version: old.version.clone() });
        drop(g);
        self.wake_all();
    }

    /// Delays or stops the writer while flushing or merging is behind.
    pub(crate) fn stall_if_behind(&self) -> Result<()> {
        let started = Instant::now();
        let mut stopped = false;
        loop {
            let (frozen, l0) = {
                let sv = self.sv.read();
                (sv.frozen.len(), sv.version.runs_at(0))
            };
            if frozen < self.options.max_immutable_memtables && l0 < self.options.l0_stop_runs {
                if l0 >= self.options.l0_slowdown_runs && !stopped {
                    self.stats.add(&self.stats.slowdowns, 1);
                    std::thread::sleep(Duration::from_millis(1));
                    self.stats.add(&self.stats.stall_micros, started.elapsed().as_micros() as u64);
                } else if stopped {
                    self.stats.add(&self.stats.stall_micros, started.elapsed().as_micros() as u64);
                }
                return Ok(());
            }
            if !stopped {
                stopped = true;
                self.stats.add(&self.stats.stops, 1);
            }
            let mut bg = self.bg.lock();
            self.check_poison()?;
            if bg.shutdown {
                return Err(IndexError::Closed);
            }
            if let Some(path) = bg.flush_no_space.as_ref().or(bg.merge_no_space.as_ref()) {
                return Err(larder_io::IoError::NoSpace { path: path.clone() }.into());
            }
            // Re-check under the lock: workers notify while holding it.
            let sv = self.sv.read().clone();
            if sv.frozen.len() >= self.options.max_immutable_memtables
                || sv.version.runs_at(0) >= self.options.l0_stop_runs
            {
                self.done_cv.wait_for(&mut bg, Duration::from_millis(100));
            }
        }
    }
}
