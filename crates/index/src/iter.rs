//! Merging iteration over memtables and runs, and the public iterator.

use std::ops::Bound;
use std::sync::Arc;

use crate::entry::{max_covering, Entry, Op, RangeTombstone, Stamp};
use crate::error::Result;
use crossbeam_skiplist::SkipMap;

use crate::memtable::{skiplist_chunk, MemKey, MemOp, Memtable, SortedArray};
use crate::merge::Registry;
use crate::resolve::resolve_read;
use crate::run::iter::RunIter;

/// Entries fetched from a memtable per refill, at most.
const MEMTABLE_CHUNK: usize = 256;
/// Entries of the first refill: a seek that takes one entry (the extent
/// before an offset) should not copy a chunk's worth; refills then grow
/// fourfold up to [`MEMTABLE_CHUNK`].
const MEMTABLE_FIRST_CHUNK: usize = 4;

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
    fn next_entry(&mut self) -> Option<Entry> {
        if self.buf.is_empty() && !self.exhausted {
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
        self.buf.pop_front()
    }
}

/// A memtable sorted array's entries over a range.
pub(crate) struct ArraySource {
    array: Arc<SortedArray>,
    /// Remaining entries: `[lo, hi)`.
    lo: usize,
    hi: usize,
    forward: bool,
}

impl ArraySource {
    fn next_entry(&mut self) -> Option<Entry> {
        if self.lo >= self.hi {
            return None;
        }
        let i = if self.forward {
            self.lo += 1;
            self.lo - 1
        } else {
            self.hi -= 1;
            self.hi
        };
        (i < self.array.len()).then(|| self.array.entry(i))
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
    let mut out = vec![Source::SkipList(SkipListSource {
        map: view.recent.clone(),
        start: start.clone(),
        end: end.clone(),
        forward,
        buf: Default::default(),
        last: None,
        exhausted: false,
        chunk: MEMTABLE_FIRST_CHUNK,
    })];
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

/// A source of entries in one direction.
pub(crate) enum Source {
    SkipList(SkipListSource),
    Array(ArraySource),
    Run(RunIter),
}

impl Source {
    fn next_entry(&mut self) -> Result<Option<Entry>> {
        match self {
            Source::SkipList(m) => Ok(m.next_entry()),
            Source::Array(a) => Ok(a.next_entry()),
            Source::Run(r) => r.next_entry(),
        }
    }
}

struct Head {
    source: Source,
    head: Option<Entry>,
}

/// Merges sources and yields, per user key, every version from every source,
/// newest first.
pub(crate) struct MergeIter {
    heads: Vec<Head>,
    forward: bool,
    primed: bool,
}

impl MergeIter {
    pub(crate) fn new(sources: Vec<Source>, forward: bool) -> Self {
        MergeIter {
            heads: sources.into_iter().map(|source| Head { source, head: None }).collect(),
            forward,
            primed: false,
        }
    }

    /// The next key and its versions (newest first) into `versions`.
    pub(crate) fn next_group(&mut self, versions: &mut Vec<(Stamp, Op)>) -> Result<Option<Vec<u8>>> {
        if !self.primed {
            for h in &mut self.heads {
                h.head = h.source.next_entry()?;
            }
            self.primed = true;
        }
        let forward = self.forward;
        let mut best: Option<(usize, &[u8])> = None;
        for (i, h) in self.heads.iter().enumerate() {
            if let Some(e) = &h.head {
                let better = match best {
                    None => true,
                    Some((_, b)) => (forward && e.key.as_slice() < b) || (!forward && e.key.as_slice() > b),
                };
                if better {
                    best = Some((i, &e.key));
                }
            }
        }
        let Some((first, _)) = best else { return Ok(None) };
        // The key moves out of the first source's entry: no copy.
        let Some(h) = self.heads.get_mut(first) else { return Ok(None) };
        let Some(e) = h.head.take() else { return Ok(None) };
        let key = e.key;
        versions.clear();
        versions.push((e.stamp, e.op));
        h.head = h.source.next_entry()?;
        // Sources before `first` hold keys later in the scan order (it is
        // the first source holding the next key), so none holds this one.
        for h in self.heads.iter_mut().skip(first) {
            while let Some(e) = h.head.take_if(|e| e.key == key) {
                versions.push((e.stamp, e.op));
                h.head = h.source.next_entry()?;
            }
        }
        versions.sort_by_key(|v| std::cmp::Reverse(v.0));
        Ok(Some(key))
    }
}

/// Iterates the live keys of an index (or snapshot) over a range, forward
/// or backward, seeing the state at one sequence number. Yields
/// `(key, value)` pairs; an I/O or corruption error ends the iteration.
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

    fn advance(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        loop {
            let Some(key) = self.merge.next_group(&mut self.versions)? else { return Ok(None) };
            let read_seq = self.read_seq;
            self.versions.retain(|(s, _)| s.seq <= read_seq);
            if self.versions.is_empty() {
                continue;
            }
            let covering =
                if self.tombstones.is_empty() { None } else { max_covering(&self.tombstones, &key, read_seq) };
            if let Some(v) = resolve_read(&self.registry, &key, &self.versions, covering)? {
                return Ok(Some((key, v)));
            }
        }
    }
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.advance() {
            Ok(Some(kv)) => Some(Ok(kv)),
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}
