//! Point reads and iterator construction.

use std::ops::Bound;
use std::sync::Arc;

use crate::db::Inner;
use crate::entry::{Op, Stamp};
use crate::error::Result;
use crate::iter::{as_ref, memtable_sources, Iter, MergeIter, Source};
use crate::memtable::Newest;
use crate::resolve::resolve_read;
use crate::run::bloom::key_hash;
use crate::run::cache::{OpenRef, RunHandle};
use crate::run::iter::{RunIter, ScanRange};
use crate::run::lookup_many::TakePut;
use crate::run::reader::{Lookup, OpenRun};
use crate::version::SuperVersion;

/// Moves a source's versions of one key (newest first, in `scratch`) to
/// `collected` until one settles the key (a put or a delete) or one is
/// older than the newest tombstone covering it; says whether the key is
/// settled (no older source can change the read). `scratch` is emptied.
pub(crate) fn absorb(
    scratch: &mut Vec<(Stamp, Op)>,
    covering: Option<Stamp>,
    collected: &mut Vec<(Stamp, Op)>,
) -> bool {
    for (stamp, op) in scratch.drain(..) {
        if covering.is_some_and(|c| stamp < c) {
            return true;
        }
        let settles = !matches!(op, Op::Merge { .. });
        collected.push((stamp, op));
        if settles {
            return true;
        }
    }
    false
}

/// Runs whose candidates a point read keeps on the stack at a time (more
/// are taken in further chunks).
const STACK_RUNS: usize = 16;

/// The versions a point read gathers (its `collected` and `scratch`),
/// kept per thread between reads: a get then allocates only the value it
/// returns. A read that fails, or one inside another's merge operator,
/// starts from empty ones.
type Versions = Vec<(Stamp, Op)>;
thread_local! {
    static GET_BUFFERS: std::cell::Cell<Option<(Versions, Versions)>> = const { std::cell::Cell::new(None) };
}

/// Where a point read's search of the memtables ended.
pub(crate) enum MemtableRead<T, F> {
    /// A memtable settled the key: its value made into `T`, or absent.
    Settled(Option<T>),
    /// No memtable holds a version of the key: the runs decide, and the
    /// read's `found` (see [`Inner::get_with`]), handed back, may take a
    /// run's value borrowed.
    Runs(Option<F>),
    /// A range tombstone or a merge operand is in the way: the full read
    /// (`Inner::get_general`) folds the key's versions.
    Fold,
}

impl Inner {
    /// The value of `key` in `sv` as of `read_seq`, `found` making it into
    /// a `T` where it lies in a memtable or a run's block (borrowed),
    /// `owned` where the read built it (folded from several versions).
    pub(crate) fn get_with<T>(
        &self,
        sv: &SuperVersion,
        read_seq: u64,
        key: &[u8],
        found: impl FnOnce(&[u8]) -> T,
        owned: impl FnOnce(Vec<u8>) -> T,
    ) -> Result<Option<T>> {
        let hash = key_hash(key);
        let step = self.get_from_memtables(sv, read_seq, key, hash, found);
        self.get_after_memtables(step, || sv, read_seq, key, hash, owned)
    }

    /// The rest of a point read after its memtable step (`step`, of
    /// [`Inner::get_from_memtables`]): the memtables' answer if they
    /// settled the key, else the read of the super version `sv()` gives
    /// (taken only then), `owned` making its value into a `T`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn get_after_memtables<T, F: FnOnce(&[u8]) -> T, V: std::ops::Deref<Target = SuperVersion>>(
        &self,
        step: MemtableRead<T, F>,
        sv: impl FnOnce() -> V,
        read_seq: u64,
        key: &[u8],
        hash: u64,
        owned: impl FnOnce(Vec<u8>) -> T,
    ) -> Result<Option<T>> {
        let (memtables, found) = match step {
            MemtableRead::Settled(value) => return Ok(value),
            MemtableRead::Runs(found) => (false, found),
            MemtableRead::Fold => (true, None),
        };
        self.get_general(&sv(), read_seq, key, hash, memtables, found, owned)
    }

    /// The first step of a point read, which answers most reads of recent
    /// keys: the memtables newest first, each asked for its newest version
    /// of the key, borrowed. Counts the get, and the miss if it settles one.
    pub(crate) fn get_from_memtables<T, F: FnOnce(&[u8]) -> T>(
        &self,
        sv: &SuperVersion,
        read_seq: u64,
        key: &[u8],
        hash: u64,
        found: F,
    ) -> MemtableRead<T, F> {
        let stats = &self.stats;
        stats.add(&stats.gets, 1);
        let mut found = Some(found);
        for mem in sv.memtables() {
            if mem.has_tombstones() {
                return MemtableRead::Fold;
            }
            let step = mem.newest(key, hash, read_seq, |newest| match newest {
                Newest::Absent => None,
                Newest::Put(v) => Some(MemtableRead::Settled(found.take().map(|f| f(v)))),
                Newest::Delete => Some(MemtableRead::Settled(None)),
                Newest::Merge => Some(MemtableRead::Fold),
            });
            if let Some(step) = step {
                if matches!(step, MemtableRead::Settled(None)) {
                    stats.add(&stats.get_misses, 1);
                }
                return step;
            }
        }
        MemtableRead::Runs(found)
    }

    /// The value of `key` in `sv` as of `read_seq`.
    pub(crate) fn get_at(&self, sv: &SuperVersion, read_seq: u64, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with(sv, read_seq, key, <[u8]>::to_vec, |v| v)
    }

    /// The value of `key` in `sv` as of `read_seq` from every source
    /// (`memtables` false: from the runs alone, which the caller found
    /// the memtables leave to), newest first, stopping at the first put or
    /// delete; made into a `T` by `found` from a run's block where a single
    /// put there settles the key (no copy of it into an [`Op`]), else by
    /// `owned`. The get is counted already.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn get_general<T>(
        &self,
        sv: &SuperVersion,
        read_seq: u64,
        key: &[u8],
        hash: u64,
        memtables: bool,
        found: Option<impl FnOnce(&[u8]) -> T>,
        owned: impl FnOnce(Vec<u8>) -> T,
    ) -> Result<Option<T>> {
        let stats = &self.stats;
        let can_take = found.is_some();
        let mut found = found;
        let mut took: Option<T> = None;
        let mut take = |value: &[u8]| took = found.take().map(|f| f(value));
        let (mut collected, mut scratch) = GET_BUFFERS.take().unwrap_or_default();
        let mut covering: Option<Stamp> = None;
        let mut read_block = false;
        let mut done = false;
        let mut filter_negatives = 0;

        for mem in sv.memtables().filter(|_| memtables) {
            covering = covering.max(mem.covering_tombstone(key, read_seq));
            mem.versions(key, hash, read_seq, &mut scratch);
            if absorb(&mut scratch, covering, &mut collected) {
                done = true;
                break;
            }
        }
        if !done {
            // Start loading the filter line of every open run that may hold
            // the key before probing any: the lines then miss the cache in
            // parallel. Runs not open now are opened only if reached. The
            // candidates live on the stack (an allocation per get was a few
            // percent of a cached one).
            let mut probe = |run: &RunHandle, open: &OpenRun| -> Result<bool> {
                if run.meta.tombstone_count > 0 {
                    covering = covering.max(crate::entry::max_covering(&open.tombstones, key, read_seq));
                }
                // Nothing newer collected: a put here settles the key, and
                // its value is taken from the block.
                let offer = (can_take && collected.is_empty()).then_some(TakePut { covering, take: &mut take });
                match open.versions(key, hash, read_seq, &self.block_cache, stats, &mut scratch, offer)? {
                    Lookup::FilterSaidAbsent => filter_negatives += 1,
                    Lookup::PastLastBlock => {}
                    Lookup::ReadBlock => read_block = true,
                    Lookup::TookPut => return Ok(true),
                }
                Ok(absorb(&mut scratch, covering, &mut collected))
            };
            let may_hold = |run: &RunHandle| key >= run.meta.min_key.as_slice() && key <= run.meta.max_key.as_slice();
            // A chunk of STACK_RUNS runs at a time, newest first. The open
            // runs are pinned by their read guards for the chunk (a lock and
            // its release per run, where a counted reference cost twice
            // that); see `RunCache::pin` for why that cannot deadlock.
            'chunks: for chunk in sv.version.runs.chunks(STACK_RUNS) {
                let mut opens: [Option<OpenRef<'_>>; STACK_RUNS] = [const { None }; STACK_RUNS];
                let mut candidates = 0u32;
                for (i, run) in chunk.iter().enumerate() {
                    if may_hold(run) {
                        opens[i] = self.run_cache.pin(run);
                        candidates |= 1 << i;
                    }
                }
                // Apart from the pins: their atomic operations are full
                // barriers, which made each filter line's miss wait for the
                // one before (a quarter of a get, in perf).
                opens.iter().flatten().for_each(|o| o.prefetch_filter(hash));
                for (i, run) in chunk.iter().enumerate() {
                    if candidates & (1 << i) == 0 {
                        continue;
                    }
                    let open = match opens[i].take() {
                        Some(open) => open,
                        None => {
                            // Taking the run may wait on locks: no pin may
                            // be held across it.
                            for later in opens.iter_mut().skip(i + 1) {
                                *later = later.take().map(OpenRef::unpinned);
                            }
                            OpenRef::Owned(self.run_cache.get(run, stats)?)
                        }
                    };
                    if open.wants_populate() {
                        self.ask_populate(&open.shared());
                    }
                    if probe(run, &open)? {
                        break 'chunks;
                    }
                }
            }
        }
        if filter_negatives > 0 {
            stats.add(&stats.bloom_negatives, filter_negatives);
        }
        if let Some(value) = took {
            GET_BUFFERS.set(Some((collected, scratch)));
            return Ok(Some(value));
        }
        // `collected` ends at the settling version; deletions by a tombstone
        // stopped before it, which resolve_read reads as "no base".
        let value = match collected.as_mut_slice() {
            // A single put: its value moves out.
            [(_, Op::Put(v))] => Some(std::mem::take(v)),
            _ => resolve_read(&self.registry, key, &collected, None)?,
        };
        collected.clear();
        scratch.clear();
        GET_BUFFERS.set(Some((collected, scratch)));
        if value.is_none() {
            stats.add(&stats.get_misses, 1);
            if read_block {
                stats.add(&stats.missed_gets_reading_data_block, 1);
            }
        }
        Ok(value.map(owned))
    }

    /// Asks the idle flusher to populate the mapping of `open`, a run
    /// this index wrote that a reader uses for the first time (see
    /// `Options::populate_new_runs_bytes`); without background workers the
    /// run's pages are mapped as reads touch them.
    pub(crate) fn ask_populate(&self, open: &Arc<OpenRun>) {
        if self.options.background_threads && self.run_cache.request_populate(open) {
            self.work_cv.notify_all();
        }
    }

    /// An iterator over `[start, end]` of `sv` as of `read_seq`.
    pub(crate) fn iter_at(
        &self,
        sv: Arc<SuperVersion>,
        read_seq: u64,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        forward: bool,
    ) -> Result<Iter> {
        let range = Arc::new(ScanRange { start, end });
        let (start, end) = (&range.start, &range.end);
        let mut sources = Vec::new();
        let mut tombstones = Vec::new();
        for mem in sv.memtables() {
            tombstones.extend(mem.tombstones_in(as_ref(start), as_ref(end), read_seq));
            sources.extend(memtable_sources(mem, start, end, forward));
        }
        let mut reaches = Vec::new();
        let near = near_bound(&sv.version.runs, start, end, forward);
        for run in &sv.version.runs {
            if !overlaps(&run.meta.min_key, &run.meta.max_key, start, end) {
                continue;
            }
            if let Some(reach) = beyond(&run.meta.min_key, &run.meta.max_key, near, forward) {
                reaches.push((sources.len(), reach));
            }
            let open = self.run_cache.get(run, &self.stats)?;
            if open.wants_populate() {
                self.ask_populate(&open);
            }
            tombstones.extend(
                open.tombstones
                    .iter()
                    .filter(|t| t.stamp.seq <= read_seq && t.overlaps(as_ref(start), as_ref(end)))
                    .cloned(),
            );
            sources.push(Source::Run(RunIter::new(
                open,
                Some(self.block_cache.clone()),
                self.stats.clone(),
                range.clone(),
                forward,
            )));
        }
        let merge = MergeIter::for_read(sources, forward, read_seq).parking(reaches);
        Ok(Iter::new(merge, tombstones, read_seq, self.registry.clone(), sv))
    }
}

/// The key a scan begins at in its direction, for choosing the runs it
/// positions at once: the range's starting bound, or, when unbounded, the
/// first key of the runs it meets (the runs beginning there).
fn near_bound<'a>(
    runs: &'a [Arc<RunHandle>],
    start: &'a Bound<Vec<u8>>,
    end: &'a Bound<Vec<u8>>,
    forward: bool,
) -> Option<&'a [u8]> {
    match if forward { start } else { end } {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => {
            let meeting = runs.iter().filter(|r| overlaps(&r.meta.min_key, &r.meta.max_key, start, end));
            if forward {
                meeting.map(|r| r.meta.min_key.as_slice()).min()
            } else {
                meeting.map(|r| r.meta.max_key.as_slice()).max()
            }
        }
    }
}

/// Where a run's keys begin in the scan order (`[min, max]` its keys) if
/// that is past `near`, the key the scan begins at: the merge then
/// positions the run only once it reaches that key.
fn beyond(min: &[u8], max: &[u8], near: Option<&[u8]>, forward: bool) -> Option<Vec<u8>> {
    let near = near?;
    let (reach, past) = if forward { (min, min > near) } else { (max, max < near) };
    past.then(|| reach.to_vec())
}

/// Whether `[min, max]` meets the bounds.
fn overlaps(min: &[u8], max: &[u8], start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> bool {
    let below_end = match end {
        Bound::Included(e) => min <= e.as_slice(),
        Bound::Excluded(e) => min < e.as_slice(),
        Bound::Unbounded => true,
    };
    let above_start = match start {
        Bound::Included(s) => max >= s.as_slice(),
        Bound::Excluded(s) => max > s.as_slice(),
        Bound::Unbounded => true,
    };
    below_end && above_start
}
