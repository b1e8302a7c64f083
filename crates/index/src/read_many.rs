//! Sorted multi-gets: the values of many keys in one pass over the
//! memtables and runs, for a caller that needs a batch of scattered keys
//! at once (the KV API's scans read one onode per key listed).

use crate::db::Inner;
use crate::entry::{max_covering, Op, Stamp};
use crate::error::Result;
use crate::memtable::Memtable;
use crate::read::absorb;
use crate::resolve::resolve_read;
use crate::run::bloom::key_hash;
use crate::run::lookup_many::Probe;
use crate::version::SuperVersion;

impl Inner {
    /// The values of `keys` (strictly ascending) in `sv` as of `read_seq`,
    /// in their order: for each key what [`Inner::get_at`] returns, found
    /// in one pass: each memtable's view is taken once, and each run is
    /// consulted once for the keys still unsettled that it may hold
    /// (`OpenRun::versions_sorted`).
    pub(crate) fn get_many_at(&self, sv: &SuperVersion, read_seq: u64, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let stats = &self.stats;
        stats.add(&stats.gets, keys.len() as u64);
        let probes: Vec<Probe<'_>> = keys.iter().map(|&key| Probe { key, hash: key_hash(key) }).collect();
        let mut collected: Vec<Vec<(Stamp, Op)>> = vec![Vec::new(); keys.len()];
        let mut covering: Vec<Option<Stamp>> = vec![None; keys.len()];
        let mut read_block = vec![false; keys.len()];
        // The keys no source so far settled, ascending.
        let mut pending: Vec<usize> = (0..keys.len()).collect();
        let mut scratch = Vec::new();
        for mem in sv.memtables() {
            if pending.is_empty() {
                break;
            }
            let view = mem.view();
            pending.retain(|&i| {
                let Probe { key, hash } = probes[i];
                covering[i] = covering[i].max(mem.covering_tombstone(key, read_seq));
                if mem.may_hold(hash) {
                    Memtable::versions_in(&view, key, hash, read_seq, &mut scratch);
                }
                !absorb(&mut scratch, covering[i], &mut collected[i])
            });
        }
        let mut found: Vec<Vec<(Stamp, Op)>> = vec![Vec::new(); keys.len()];
        let mut wanted = Vec::with_capacity(keys.len());
        for run in &sv.version.runs {
            if pending.is_empty() {
                break;
            }
            let (min, max) = (run.meta.min_key.as_slice(), run.meta.max_key.as_slice());
            wanted.clear();
            wanted.extend(pending.iter().copied().filter(|&i| keys[i] >= min && keys[i] <= max));
            if wanted.is_empty() {
                continue;
            }
            let open = self.run_cache.get(run, stats)?;
            if run.meta.tombstone_count > 0 {
                for &i in &wanted {
                    covering[i] = covering[i].max(max_covering(&open.tombstones, keys[i], read_seq));
                }
            }
            open.versions_sorted(&probes, &wanted, read_seq, &self.block_cache, stats, &mut found, &mut read_block)?;
            // `wanted` is a subsequence of `pending`: walk them together.
            let mut next = 0;
            pending.retain(|&i| {
                if wanted.get(next) != Some(&i) {
                    return true;
                }
                next += 1;
                !absorb(&mut found[i], covering[i], &mut collected[i])
            });
        }
        let mut values = Vec::with_capacity(keys.len());
        for (i, versions) in collected.iter_mut().enumerate() {
            let value = match versions.as_mut_slice() {
                [(_, Op::Put(v))] => Some(std::mem::take(v)),
                _ => resolve_read(&self.registry, keys[i], versions, None)?,
            };
            if value.is_none() {
                stats.add(&stats.get_misses, 1);
                if read_block[i] {
                    stats.add(&stats.missed_gets_reading_data_block, 1);
                }
            }
            values.push(value);
        }
        Ok(values)
    }
}

impl Inner {
    /// [`Inner::get_many_at`] for keys in any order, repeats allowed: the
    /// values in the order of `keys` (a repeated key's value is copied).
    /// Keys already strictly ascending are read as they are.
    pub(crate) fn get_many_any_order<K: AsRef<[u8]>>(
        &self,
        sv: &SuperVersion,
        read_seq: u64,
        keys: &[K],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        if keys.windows(2).all(|w| w[0] < w[1]) {
            return self.get_many_at(sv, read_seq, &keys);
        }
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by(|&a, &b| keys[a].cmp(keys[b]));
        // The distinct keys ascending, and where each asked key is among them.
        let mut distinct: Vec<&[u8]> = Vec::with_capacity(keys.len());
        let mut slot = vec![0usize; keys.len()];
        for &i in &order {
            if distinct.last() != Some(&keys[i]) {
                distinct.push(keys[i]);
            }
            slot[i] = distinct.len() - 1;
        }
        let mut values = self.get_many_at(sv, read_seq, &distinct)?;
        // Each distinct value moves to the last asking position, copies
        // go to the others.
        let mut last_use = vec![usize::MAX; distinct.len()];
        for (i, &s) in slot.iter().enumerate() {
            last_use[s] = i;
        }
        Ok(slot
            .iter()
            .enumerate()
            .map(|(i, &s)| if last_use[s] == i { values[s].take() } else { values[s].clone() })
            .collect())
    }
}
