//! Point lookups of many sorted keys in one run, for a sorted multi-get:
//! one pass that loads each block once for the neighbouring keys it
//! holds, and starts loading every filter line, block index line and
//! block the keys need before searching any, so their cache misses
//! overlap instead of queueing one after another.

use super::block::BlockRef;
use super::cache::BlockCache;
use super::reader::OpenRun;
use crate::entry::{Kind, Op, Stamp};
use crate::error::Result;
use crate::stats::Stats;

/// One key of a sorted multi-get, as a run sees it.
pub(crate) struct Probe<'k> {
    /// The key (probes come in ascending key order).
    pub key: &'k [u8],
    /// Its filter hash.
    pub hash: u64,
}

impl OpenRun {
    /// For each `wanted[j]` (indices into `probes`, ascending), appends the
    /// versions of that key visible at `read_seq`, newest first, to
    /// `out[wanted[j]]`, exactly as [`OpenRun::versions`] would, and sets
    /// `read_block[wanted[j]]` when a data block was consulted for it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn versions_sorted(
        &self,
        probes: &[Probe<'_>],
        wanted: &[usize],
        read_seq: u64,
        cache: &BlockCache,
        stats: &Stats,
        out: &mut [Vec<(Stamp, Op)>],
        read_block: &mut [bool],
    ) -> Result<()> {
        if let Some(bloom) = &self.bloom {
            wanted.iter().for_each(|&i| bloom.prefetch(probes[i].hash));
        }
        // The keys the filter lets through, then the block of each.
        let mut passed: Vec<usize> = Vec::with_capacity(wanted.len());
        for &i in wanted {
            if let Some(bloom) = &self.bloom {
                if !bloom.may_contain(probes[i].hash) {
                    stats.add(&stats.bloom_negatives, 1);
                    continue;
                }
            }
            passed.push(i);
        }
        let keys: Vec<&[u8]> = passed.iter().map(|&i| probes[i].key).collect();
        let mut blocks = Vec::new();
        self.index.find_many(&keys, &mut blocks);
        // (probe, block) for every key whose block exists.
        let mut found: Vec<(usize, usize)> = Vec::with_capacity(passed.len());
        for (&i, &block) in passed.iter().zip(&blocks) {
            if block == self.index.len() {
                if self.bloom.is_some() {
                    stats.add(&stats.bloom_false_positives, 1);
                }
                continue;
            }
            found.push((i, block));
        }
        for (n, &(_, block)) in found.iter().enumerate() {
            if n == 0 || found[n - 1].1 != block {
                self.touch_block(block);
            }
        }
        let mut at = 0;
        while at < found.len() {
            let block_index = found[at].1;
            let end = found[at..].iter().position(|&(_, b)| b != block_index).map_or(found.len(), |n| at + n);
            let cached;
            // The file's length is checked (where it must be) at the
            // first block only, as a scan does.
            let block: BlockRef<'_> = match self.mapped_block(block_index, at == 0, stats)? {
                Some(view) => view,
                None => {
                    cached = self.block(block_index, Some(cache), stats)?;
                    cached.view()
                }
            };
            for &(i, _) in &found[at..end] {
                read_block[i] = true;
                let _ = self.versions_in_block(&block, probes[i].key, read_seq, stats, &mut out[i], None);
            }
            at = end;
        }
        // A cut racing the reads above: what they read may be zeros.
        self.check_mapping()
    }

    /// The versions of `key` visible at `read_seq` in `block` (the one the
    /// block index names for it), appended to `out`, with the filter's
    /// count of whether it was right; with `take`, a put that settles the
    /// key is given to it instead, and the answer is true.
    pub(super) fn versions_in_block(
        &self,
        block: &BlockRef<'_>,
        key: &[u8],
        read_seq: u64,
        stats: &Stats,
        out: &mut Vec<(Stamp, Op)>,
        take: Option<TakePut<'_>>,
    ) -> bool {
        let found = block.visible(key, read_seq);
        // The filter was right if any version of the key is here, even one
        // newer than this read.
        if self.bloom.is_some() {
            let counter = if found.is_some() { &stats.bloom_true_positives } else { &stats.bloom_false_positives };
            stats.add(counter, 1);
        }
        let Some((newest, mut i)) = found else { return false };
        if let Some(TakePut { covering, take }) = take {
            let e = if newest.stamp.seq <= read_seq { Some(newest) } else { (i < block.len()).then(|| block.entry(i)) };
            if let Some(e) = e.filter(|e| e.key == key && e.kind == Kind::Put && covering.is_none_or(|c| e.stamp >= c))
            {
                take(e.payload);
                return true;
            }
        }
        while i < block.len() {
            let e = block.entry(i);
            if e.key != key {
                break;
            }
            out.push((e.stamp, e.to_op(&self.op_map)));
            i += 1;
        }
        false
    }
}

/// A point read's offer to take the value its key settles on in a run,
/// borrowed from the block (no copy into an [`Op`]): made while no newer
/// version of the key was found, with the newest range tombstone covering
/// the key so far. Taken when the run's newest version visible to the
/// read is a put that tombstone does not delete.
pub(crate) struct TakePut<'a> {
    /// The newest tombstone covering the key in the sources read so far.
    pub(crate) covering: Option<Stamp>,
    /// Receives the put's value.
    pub(crate) take: &'a mut dyn FnMut(&[u8]),
}
