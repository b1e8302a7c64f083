//! Merging iteration over memtables and runs, and the public iterator.

use std::ops::Bound;
use std::sync::Arc;

use crate::entry::{max_covering, Entry, EntryRef, Op, OpRef, RangeTombstone, Stamp};
use crate::error::Result;
use crossbeam_skiplist::SkipMap;

use crate::memtable::{key_head16, skiplist_chunk, MemKey, MemOp, Memtable, SortedArray};
use crate::merge::Registry;
use crate::resolve::resolve_read;
use crate::run::block_index::BlockIndex;
use crate::run::iter::RunIter;

/// Entries fetched from a memtable per refill, at most.
const MEMTABLE_CHUNK: usize = 256;
/// Entries of the first refill: one, because a scan positions every
/// source but may take nothing past the first entry of a skip list that
/// holds a few recent writes among many runs' keys (YCSB E: the copies of
/// four 1 KiB entries were 3% of a scan in perf), and a seek that takes
/// one entry (the extent before an offset) should not copy a chunk's
/// worth either; refills then grow fourfold up to [`MEMTABLE_CHUNK`].
const MEMTABLE_FIRST_CHUNK: usize = 1;

/// A memtable skip list's entries over a range, fetched in chunks so the
/// iterator never borrows the skip list across calls.
pub(crate) struct SkipListSource {
    map: Arc<SkipMap<MemKey, MemOp>>,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    forward: bool,
    buf: std::collections::VecDeque<Entry>,
    last: Option<(Vec<u8>, Stamp)>,
    exhausted: bool,
    /// Entries the next refill fetches.
    chunk: usize,
}

impl SkipListSource {
    /// Fetches the next chunk when the buffer is used up.
    fn refill(&mut self) {
        if !self.buf.is_empty() || self.exhausted {
            return;
        }
        let want = self.chunk;
        self.chunk = (want * 4).min(MEMTABLE_CHUNK);
        let mut chunk = Vec::with_capacity(want);
        skiplist_chunk(
            &self.map,
            as_ref(&self.start),
            as_ref(&self.end),
            self.last.as_ref().map(|(k, s)| (k.as_slice(), *s)),
            self.forward,
            want,
            &mut chunk,
        );
        self.exhausted = chunk.len() < want;
        if let Some(e) = chunk.last() {
            self.last = Some((e.key.clone(), e.stamp));
        }
        self.buf.extend(chunk);
    }

    fn current(&self) -> Option<EntryRef<'_>> {
        self.buf.front().map(|e| EntryRef { key: &e.key, stamp: e.stamp, op: e.op.borrowed() })
    }

    fn advance(&mut self) {
        self.buf.pop_front();
        self.refill();
    }

    /// Moves a forward cursor past every remaining version of `key`: the
    /// next chunk starts after the key's oldest possible version instead
    /// of copying the versions in between.
    fn skip_key(&mut self, key: &[u8]) {
        while self.buf.front().is_some_and(|e| e.key == key) {
            self.buf.pop_front();
        }
        if self.buf.is_empty() && !self.exhausted {
            self.last = Some((key.to_vec(), OLDEST));
            self.refill();
        }
    }
}

/// A stamp no version has (sequence numbers start at 1): a bound after
/// every version of a key in the internal order (newest first).
const OLDEST: Stamp = Stamp { seq: 0, sub: 0 };

/// A memtable sorted array's entries over a range.
pub(crate) struct ArraySource {
    array: Arc<SortedArray>,
    /// Remaining entries: `[lo, hi)`.
    lo: usize,
    hi: usize,
    forward: bool,
}

impl ArraySource {
    fn current(&self) -> Option<EntryRef<'_>> {
        if self.lo >= self.hi {
            return None;
        }
        let i = if self.forward { self.lo } else { self.hi - 1 };
        let (stamp, op) = self.array.version_ref(i)?;
        Some(EntryRef { key: self.array.key(i), stamp, op })
    }

    fn advance(&mut self) {
        if self.lo < self.hi {
            if self.forward {
                self.lo += 1;
            } else {
                self.hi -= 1;
            }
        }
    }

    /// Moves a forward cursor past every remaining version of `key` by one
    /// search of the array.
    fn skip_key(&mut self, key: &[u8]) {
        self.lo = self.array.upper_bound(key, OLDEST).clamp(self.lo, self.hi);
    }
}

/// Sources reading one memtable over `[start, end]`.
pub(crate) fn memtable_sources(
    mem: &Memtable,
    start: &Bound<Vec<u8>>,
    end: &Bound<Vec<u8>>,
    forward: bool,
) -> Vec<Source> {
    let view = mem.view();
    let mut out = Vec::with_capacity(1 + view.pending.len() + view.arrays.len());
    // An empty skip list stays out: a batch the read sees was inserted
    // before the view was taken, so whatever it gains later is newer than
    // the read (a just-sealed or quiet memtable's skip list is empty).
    let lists = std::iter::once(&view.recent).chain(view.pending.iter().map(|p| &p.list));
    for list in lists.filter(|l| !l.is_empty()) {
        out.push(Source::SkipList(SkipListSource {
            map: list.clone(),
            start: start.clone(),
            end: end.clone(),
            forward,
            buf: Default::default(),
            last: None,
            exhausted: false,
            chunk: MEMTABLE_FIRST_CHUNK,
        }));
    }
    for a in &view.arrays {
        let (lo, hi) = a.span(as_ref(start), as_ref(end));
        if lo < hi {
            out.push(Source::Array(ArraySource { array: a.clone(), lo, hi, forward }));
        }
    }
    out
}

pub(crate) fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// A source of entries in one direction: a cursor whose entry under it
/// is viewed in place ([`Source::current`]) until it moves.
pub(crate) enum Source {
    SkipList(SkipListSource),
    Array(ArraySource),
    Run(RunIter),
}

impl Source {
    /// Puts the cursor on its first entry.
    fn prime(&mut self) -> Result<()> {
        match self {
            Source::SkipList(m) => {
                m.refill();
                Ok(())
            }
            Source::Array(_) => Ok(()),
            Source::Run(r) => r.prime(),
        }
    }

    fn current(&self) -> Option<EntryRef<'_>> {
        match self {
            Source::SkipList(m) => m.current(),
            Source::Array(a) => a.current(),
            Source::Run(r) => r.current(),
        }
    }

    /// The key of [`Source::current`]'s entry alone (a run's cursor then
    /// slices its key without making the rest of the entry).
    fn current_key(&self) -> Option<&[u8]> {
        match self {
            Source::Run(r) => r.current_key(),
            other => other.current().map(|e| e.key),
        }
    }

    /// The head ([`key_head16`]) of [`Source::current_key`]'s key (a
    /// run's cursor keeps it from its range check).
    fn current_head(&self) -> Option<u128> {
        match self {
            Source::Run(r) => r.current_head(),
            other => other.current_key().map(key_head16),
        }
    }

    fn advance(&mut self) -> Result<()> {
        match self {
            Source::SkipList(m) => {
                m.advance();
                Ok(())
            }
            Source::Array(a) => {
                a.advance();
                Ok(())
            }
            Source::Run(r) => r.advance(),
        }
    }

    /// Moves a forward cursor past every remaining version of `key`, the
    /// key under it. A queue's key, put and removed once per request, has
    /// thousands of versions in the memtables; a read that has found the
    /// version it sees skips the rest per source with one search instead
    /// of a step (and a copy of the key) per version.
    fn skip_key(&mut self, key: &[u8]) -> Result<()> {
        match self {
            Source::SkipList(m) => m.skip_key(key),
            Source::Array(a) => a.skip_key(key),
            Source::Run(r) => {
                while r.current_key() == Some(key) {
                    r.advance()?;
                }
            }
        }
        Ok(())
    }

    /// Vouches for what was read of the source so far (a mapped run's
    /// reads may have faulted: see `OpenRun::check_mapping`).
    fn check(&self) -> Result<()> {
        match self {
            Source::Run(r) => r.check(),
            _ => Ok(()),
        }
    }
}

/// Runs whose start blocks [`warm_runs`] loads together, at most (more
/// are positioned without).
const WARM_RUNS: usize = 16;

/// Whether source `i` is parked (`parked` is empty when none is).
fn is_parked(parked: &[bool], i: usize) -> bool {
    parked.get(i).copied().unwrap_or(false)
}

/// Starts loading the block each run source starts in, in every run
/// together: its handle, then its bytes. Positioning a cursor in a run is
/// a chain of cache misses (the block index, the handle, the block's
/// entry count, its keys); taken run after run, a prefix scan over a few
/// runs waited for each chain in turn (half of a scan's time in perf).
fn warm_runs(sources: &mut [Source], parked: &[bool]) {
    // The block index searches first, every run's together (a range
    // without a starting bound starts at a run's end: no search).
    let mut searched = [usize::MAX; WARM_RUNS];
    let mut found = [0usize; WARM_RUNS];
    let mut n = 0;
    {
        let mut searches: [Option<(&BlockIndex, &[u8])>; WARM_RUNS] = [None; WARM_RUNS];
        for (i, source) in sources.iter().enumerate() {
            if let (Source::Run(r), true) = (source, n < WARM_RUNS && !is_parked(parked, i)) {
                if let Some(key) = r.search_key() {
                    searches[n] = Some((&r.run().index, key));
                    searched[n] = i;
                    n += 1;
                }
            }
        }
        if n >= 2 {
            BlockIndex::find_each(&searches[..n], &mut found[..n]);
        } else {
            n = 0;
        }
    }
    for (&i, &f) in searched[..n].iter().zip(&found[..n]) {
        if let Some(Source::Run(r)) = sources.get_mut(i) {
            r.set_found(f);
        }
    }
    let mut blocks = [(0usize, 0usize); WARM_RUNS];
    let mut n = 0;
    for (i, source) in sources.iter_mut().enumerate() {
        if let (Source::Run(r), true) = (source, n < WARM_RUNS && !is_parked(parked, i)) {
            if let Some(block) = r.start_block() {
                blocks[n] = (i, block);
                n += 1;
            }
        }
    }
    if n < 2 {
        return;
    }
    let run = |i: usize| match &sources[i] {
        Source::Run(r) => Some(r.run()),
        _ => None,
    };
    let handles = blocks[..n].iter().fold(0u8, |t, &(i, b)| t ^ run(i).map_or(0, |r| r.touch_handle(b)));
    std::hint::black_box(handles);
    for &(i, b) in &blocks[..n] {
        if let Some(r) = run(i) {
            r.touch_block(b);
        }
    }
}

/// A used-up source's head: no key's head is greater in scan order (a
/// live key may have it too: ties read the keys).
const USED_UP: u128 = u128::MAX;

/// A key's head in scan order: backward, the bits inverted, so the next
/// key's head is the least in either direction.
fn scan_head(head: u128, forward: bool) -> u128 {
    if forward {
        head
    } else {
        !head
    }
}

/// What [`MergeIter::next_into`] found for a key.
pub(crate) enum Group {
    /// Its one version, a put with this stamp; the value is in `value`.
    Single(Stamp),
    /// Its versions, newest first, are in `versions`.
    Versions,
}

/// Merges sources and yields, per user key, every version from every
/// source, newest first.
pub(crate) struct MergeIter {
    sources: Vec<Source>,
    /// The first 16 bytes ([`key_head16`]) of the key each source's next
    /// entry has (a parked source's: its reach), taken when it moves, in
    /// scan order ([`scan_head`]: the next key's is the least);
    /// [`USED_UP`] when the source is used up. Choosing the next key
    /// compares these and reads a source's key in place only on a tie,
    /// where copying every key the cursors reach cost a memmove per entry.
    heads: Vec<u128>,
    /// The key each parked source's entries begin at in the scan order
    /// (see [`MergeIter::parking`]; empty, not allocated, when no source
    /// is parked; None for a source positioned).
    reaches: Vec<Option<Vec<u8>>>,
    /// Sources not positioned yet (see [`MergeIter::parking`]; empty, not
    /// allocated, when none is): each is positioned once the merge reaches
    /// its key in `reaches`.
    parked: Vec<bool>,
    forward: bool,
    primed: bool,
    /// For a read at this sequence number: versions of a key older than a
    /// put or delete already taken and visible at it are stepped over
    /// without being copied (no read can see through that version). None
    /// for a merge of runs, which keeps every version.
    read_seq: Option<u64>,
    /// A source's key was read in place to settle a tie since the sources
    /// were last vouched for ([`MergeIter::key_of`]): the next key may
    /// rest on it, so [`MergeIter::next_into`] checks every source before
    /// it answers.
    tie_read: std::cell::Cell<bool>,
}

impl MergeIter {
    /// Yields every version of every key (a flush or merge of runs).
    pub(crate) fn new(sources: Vec<Source>, forward: bool) -> Self {
        let heads = vec![USED_UP; sources.len()];
        MergeIter {
            sources,
            heads,
            reaches: Vec::new(),
            parked: Vec::new(),
            forward,
            primed: false,
            read_seq: None,
            tie_read: std::cell::Cell::new(false),
        }
    }

    /// Leaves sources unpositioned until the merge reaches them: each
    /// `(i, reach)` names source `i` and a key no entry of it precedes in
    /// the scan order (a run's smallest key going forward, its largest
    /// going backward). Positioning a run is a block-index search and its
    /// starting block read (and checksummed, the first time); a scan that
    /// ends before a run's keys begin (a scan of the next few entries over
    /// runs of disjoint key ranges) then never pays it.
    pub(crate) fn parking(mut self, reaches: Vec<(usize, Vec<u8>)>) -> Self {
        for (i, reach) in reaches {
            let forward = self.forward;
            if let Some(head) = self.heads.get_mut(i) {
                *head = scan_head(key_head16(&reach), forward);
                self.reaches.resize(self.sources.len(), None);
                self.reaches[i] = Some(reach);
                self.parked.resize(self.sources.len(), false);
                self.parked[i] = true;
            }
        }
        self
    }

    fn is_parked(&self, i: usize) -> bool {
        is_parked(&self.parked, i)
    }

    /// Positions parked source `i`: the merge has reached its key.
    fn unpark(&mut self, i: usize) -> Result<()> {
        self.parked[i] = false;
        self.reaches[i] = None;
        self.position(i)
    }

    /// The key of source `i`'s next entry (a parked source's reach), read
    /// in place; None when the source is used up.
    fn key_of(&self, i: usize) -> Option<&[u8]> {
        if self.is_parked(i) {
            return self.reaches.get(i)?.as_deref();
        }
        self.tie_read.set(true);
        self.sources.get(i)?.current_key()
    }

    /// Positions source `i` at its first entry and takes in its key.
    fn position(&mut self, i: usize) -> Result<()> {
        self.sources[i].prime()?;
        self.refresh(i);
        self.sources[i].check()
    }

    /// Yields, per key, at least the versions a read at `read_seq` needs:
    /// those from the newest down to the newest put or delete visible at
    /// `read_seq`. A key rewritten many times (a queue's key, put and
    /// removed once per request) then costs one copy per scan, not one
    /// per version still in the memtables.
    pub(crate) fn for_read(sources: Vec<Source>, forward: bool, read_seq: u64) -> Self {
        MergeIter { read_seq: Some(read_seq), ..Self::new(sources, forward) }
    }

    /// The stamp of `op` if it settles a read at `read_seq` (a put or a
    /// delete visible at it): older versions of its key cannot change what
    /// the read sees.
    fn settling(&self, stamp: Stamp, op: &OpRef<'_>) -> Option<Stamp> {
        let read_seq = self.read_seq?;
        (stamp.seq <= read_seq && !matches!(op, OpRef::Merge { .. })).then_some(stamp)
    }

    /// Takes the head of source `i`'s key under its cursor into `heads[i]`.
    fn refresh(&mut self, i: usize) {
        if let (Some(source), Some(head)) = (self.sources.get(i), self.heads.get_mut(i)) {
            *head = source.current_head().map_or(USED_UP, |h| scan_head(h, self.forward));
        }
    }

    /// The first source whose entry holds the next key in scan order, or
    /// a parked source whose key is not past it (which must be positioned
    /// before the next key is known: a parked source wins ties).
    fn next_source(&self) -> Option<usize> {
        // The least head, the first source holding it; keys are read only
        // where heads tie (the same key in several sources, or a used-up
        // source's [`USED_UP`] met by a live key's head).
        let (mut best, mut best_head) = (usize::MAX, USED_UP);
        for (i, &head) in self.heads.iter().enumerate() {
            if head < best_head {
                (best, best_head) = (i, head);
            } else if head == best_head && self.beats(i, best) {
                best = i;
            }
        }
        (best != usize::MAX).then_some(best)
    }

    /// Whether source `i`, whose head equals that of `best` (usize::MAX:
    /// none yet, `i` comes after it), holds an earlier key in scan order,
    /// or the same key parked where `best` is not. A used-up source never
    /// wins.
    fn beats(&self, i: usize, best: usize) -> bool {
        let Some(key) = self.key_of(i) else { return false };
        if best == usize::MAX {
            return true;
        }
        let Some(best_key) = self.key_of(best) else { return true };
        let order = key.cmp(best_key);
        (if self.forward { order.is_lt() } else { order.is_gt() })
            || (order.is_eq() && self.is_parked(i) && !self.is_parked(best))
    }

    /// Moves past the next key's versions: the key into `key`; if its only
    /// version is a put, the value into `value` ([`Group::Single`], the
    /// common case: no copy but the value's), else every version, newest
    /// first, into `versions`. None when the sources are used up.
    pub(crate) fn next_into(
        &mut self,
        key: &mut Vec<u8>,
        value: &mut Vec<u8>,
        versions: &mut Vec<(Stamp, Op)>,
    ) -> Result<Option<Group>> {
        // Each source is checked right after its key under the cursor is
        // read (a source whose read faulted could hide a newer version of
        // the key chosen); a fault stays recorded, so a key checked once
        // stays vouched for while the cursor stays on it.
        if !self.primed {
            warm_runs(&mut self.sources, &self.parked);
            for i in 0..self.sources.len() {
                if !self.is_parked(i) {
                    self.position(i)?;
                }
            }
            self.primed = true;
        }
        // Every parked source's key is then past the next key (ties go to
        // parked sources): none can hold a version of it.
        let first = loop {
            let Some(first) = self.next_source() else {
                // The end of the scan may rest on keys read in ties.
                self.vouch_for_tie_reads()?;
                return Ok(None);
            };
            if !self.is_parked(first) {
                break first;
            }
            self.unpark(first)?;
        };
        let Some(e) = self.sources[first].current() else {
            self.vouch_for_tie_reads()?;
            return Ok(None);
        };
        let head = self.heads[first];
        key.clear();
        key.extend_from_slice(e.key);
        let stamp = e.stamp;
        // The newest version taken so far that settles the read, if any.
        let mut settled = self.settling(stamp, &e.op);
        let single_put = match e.op {
            OpRef::Put(v) => {
                value.clear();
                value.extend_from_slice(v);
                true
            }
            op => {
                versions.clear();
                versions.push((stamp, op.to_owned()));
                false
            }
        };
        self.sources[first].advance()?;
        self.refresh(first);
        self.sources[first].check()?;
        // Sources before `first` hold keys later in the scan order (it is
        // the first source holding the next key), so none holds this one.
        let mut more = false;
        for i in first..self.sources.len() {
            while self.heads[i] == head && self.key_of(i) == Some(key.as_slice()) {
                let Some(e) = self.sources[i].current() else { break };
                if settled.is_some_and(|s| e.stamp < s) {
                    // This source's later versions of the key are older
                    // still (newest first going forward): none is needed.
                    if self.forward {
                        self.sources[i].skip_key(key)?;
                    } else {
                        self.sources[i].advance()?;
                    }
                    self.refresh(i);
                    self.sources[i].check()?;
                    continue;
                }
                if let Some(s) = self.settling(e.stamp, &e.op) {
                    settled = Some(settled.map_or(s, |t| t.max(s)));
                }
                if single_put && !more {
                    versions.clear();
                    versions.push((stamp, Op::Put(value.clone())));
                }
                more = true;
                versions.push((e.stamp, e.op.to_owned()));
                self.sources[i].advance()?;
                self.refresh(i);
                self.sources[i].check()?;
            }
        }
        // Ties are settled by reading the sources' keys in place (`key_of`):
        // a mapped run cut meanwhile reads as zeros there, and a zero key
        // loses a tie going backward, so the run's newer version of this
        // key would be passed over for an older one unless those reads are
        // vouched for too.
        self.vouch_for_tie_reads()?;
        if single_put && !more {
            return Ok(Some(Group::Single(stamp)));
        }
        versions.sort_by_key(|v| std::cmp::Reverse(v.0));
        Ok(Some(Group::Versions))
    }

    /// Vouches for every positioned source (one atomic load per mapped run:
    /// see `Source::check`) if a key was read in a tie since the last time.
    fn vouch_for_tie_reads(&self) -> Result<()> {
        if !self.tie_read.replace(false) {
            return Ok(());
        }
        for (i, source) in self.sources.iter().enumerate() {
            if !self.is_parked(i) {
                source.check()?;
            }
        }
        Ok(())
    }

    /// The next key and its versions (newest first) into `versions`.
    #[cfg(test)]
    pub(crate) fn next_group(&mut self, versions: &mut Vec<(Stamp, Op)>) -> Result<Option<Vec<u8>>> {
        let (mut key, mut value) = (Vec::new(), Vec::new());
        match self.next_into(&mut key, &mut value, versions)? {
            None => Ok(None),
            Some(Group::Single(stamp)) => {
                versions.clear();
                versions.push((stamp, Op::Put(value)));
                Ok(Some(key))
            }
            Some(Group::Versions) => Ok(Some(key)),
        }
    }
}

/// Iterates the live keys of an index (or snapshot) over a range, forward
/// or backward, seeing the state at one sequence number. Yields
/// `(key, value)` pairs; an I/O or corruption error ends the iteration.
/// [`Iter::next_into`] reads the same pairs into buffers the caller keeps.
pub struct Iter {
    merge: MergeIter,
    tombstones: Vec<RangeTombstone>,
    read_seq: u64,
    registry: Registry,
    versions: Vec<(Stamp, Op)>,
    failed: bool,
    // Keeps the memtables and runs the iterator reads alive.
    _pin: Arc<crate::version::SuperVersion>,
}

impl Iter {
    pub(crate) fn new(
        merge: MergeIter,
        tombstones: Vec<RangeTombstone>,
        read_seq: u64,
        registry: Registry,
        pin: Arc<crate::version::SuperVersion>,
    ) -> Self {
        Iter { merge, tombstones, read_seq, registry, versions: Vec::new(), failed: false, _pin: pin }
    }

    fn advance(&mut self, key: &mut Vec<u8>, value: &mut Vec<u8>) -> Result<bool> {
        let read_seq = self.read_seq;
        loop {
            let Some(group) = self.merge.next_into(key, value, &mut self.versions)? else { return Ok(false) };
            let covering =
                || if self.tombstones.is_empty() { None } else { max_covering(&self.tombstones, key, read_seq) };
            match group {
                Group::Single(stamp) => {
                    if stamp.seq <= read_seq && covering().is_none_or(|c| stamp >= c) {
                        return Ok(true);
                    }
                }
                Group::Versions => {
                    self.versions.retain(|(s, _)| s.seq <= read_seq);
                    if self.versions.is_empty() {
                        continue;
                    }
                    if let Some(v) = resolve_read(&self.registry, key, &self.versions, covering())? {
                        *value = v;
                        return Ok(true);
                    }
                }
            }
        }
    }

    /// The next live key and its value into `key` and `value` (what they
    /// held is replaced; once they have grown, no allocation per entry);
    /// false when the iteration is over. An error ends the iteration, as
    /// for [`Iterator::next`].
    pub fn next_into(&mut self, key: &mut Vec<u8>, value: &mut Vec<u8>) -> Result<bool> {
        if self.failed {
            return Ok(false);
        }
        self.advance(key, value).inspect_err(|_| self.failed = true)
    }
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let (mut key, mut value) = (Vec::new(), Vec::new());
        match self.next_into(&mut key, &mut value) {
            Ok(true) => Some(Ok((key, value))),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}
