//! The block index of an open run: the last key of every data block and
//! where the block lives, laid out so that a lookup touches few cache lines.
//!
//! Each key's first 8 bytes (its head, big-endian, zero padded) are kept in
//! a small B+-tree of 64-byte lines: level 0 holds the heads of all blocks,
//! eight to a line, and each level above holds the largest head of every
//! line below, up to a single line. A search reads one line per level, and
//! the upper levels stay in cache. Keys whose heads tie (a long shared
//! prefix, such as one directory's entries) are separated by bytes 8..16
//! (their tail), and only blocks whose heads and tails both tie compare
//! full keys.

use crate::codec::Decoder;
use crate::memtable::key_head;
use crate::MAX_KEY_BYTES;

use super::BlockHandle;

/// Heads per line: 8 × 8 bytes = one cache line.
const FANOUT: usize = 8;

/// One cache line of heads; unused slots hold `u64::MAX`.
#[repr(align(64))]
#[derive(Clone, Copy, Debug)]
struct Line([u64; FANOUT]);

/// Bytes 8..16 of `key`, zero padded: orders keys whose heads tie.
fn key_tail(key: &[u8]) -> u64 {
    key_head(key.get(8..).unwrap_or_default())
}

/// The block index of one run.
#[derive(Debug)]
pub(crate) struct BlockIndex {
    /// `levels[0]` holds every block's head; `levels[j + 1]` line `i` holds
    /// the last head of each line of `levels[j]` from line `8i` on. The last
    /// level is one line. Empty when the run has no data blocks.
    levels: Vec<Vec<Line>>,
    tails: Vec<u64>,
    keys: Vec<u8>,
    key_ends: Vec<u32>,
    handles: Vec<BlockHandle>,
}

impl BlockIndex {
    /// Decodes the block index section's body; blocks must lie end to end
    /// from offset 0 and end by `blocks_end` (where the filter starts).
    pub(crate) fn decode(body: &[u8], blocks_end: u64) -> Result<BlockIndex, String> {
        let mut d = Decoder::new(body);
        let count = d.u32("block count")? as usize;
        let cap = count.min(1 << 20);
        let mut heads = Vec::with_capacity(cap);
        let mut idx = BlockIndex {
            levels: Vec::new(),
            tails: Vec::with_capacity(cap),
            keys: Vec::new(),
            key_ends: Vec::with_capacity(cap),
            handles: Vec::with_capacity(cap),
        };
        let mut next_offset = 0u64;
        for i in 0..count {
            let key = d.length_prefixed(MAX_KEY_BYTES, "index key")?;
            let offset = d.u64("block offset")?;
            let len = d.u32("block length")?;
            if offset != next_offset || offset + u64::from(len) > blocks_end || len < 8 {
                return Err(format!(
                    "index entry {i}: block at {offset}+{len} is not where blocks end ({next_offset})"
                ));
            }
            if i > 0 && key < idx.key(i - 1) {
                return Err(format!("index entry {i} is out of order"));
            }
            next_offset = offset + u64::from(len);
            heads.push(key_head(key));
            idx.tails.push(key_tail(key));
            idx.keys.extend_from_slice(key);
            idx.key_ends.push(idx.keys.len() as u32);
            idx.handles.push(BlockHandle { offset, len });
        }
        if d.remaining() != 0 {
            return Err(format!("{} trailing bytes after the block index", d.remaining()));
        }
        idx.levels = build_levels(&heads);
        Ok(idx)
    }

    pub(crate) fn len(&self) -> usize {
        self.handles.len()
    }

    pub(crate) fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.key_ends[i - 1] as usize };
        &self.keys[start..self.key_ends[i] as usize]
    }

    pub(crate) fn handle(&self, i: usize) -> BlockHandle {
        self.handles[i]
    }

    fn head(&self, i: usize) -> u64 {
        self.levels[0][i / FANOUT].0[i % FANOUT]
    }

    /// The first block whose head is >= `head` (== len() if none).
    fn first_head_at_least(&self, head: u64) -> usize {
        let mut at = 0;
        for level in self.levels.iter().rev() {
            // A slot past the level's last line (padding above) means every
            // head in the run is smaller.
            let Some(line) = level.get(at) else { return self.len() };
            at = at * FANOUT + line.0.iter().filter(|&&h| h < head).count();
        }
        at.min(self.len())
    }

    /// The first block whose last key is >= `key` (== len() if none).
    pub(crate) fn find(&self, key: &[u8]) -> usize {
        if self.levels.is_empty() {
            return 0;
        }
        // Heads order keys as the bytes do, except that equal heads say
        // nothing: narrow to the blocks whose head ties, then whose tail
        // ties, then compare keys.
        let head = key_head(key);
        let mut lo = self.first_head_at_least(head);
        if lo == self.len() || self.head(lo) != head {
            return lo;
        }
        let mut hi = match head.checked_add(1) {
            Some(next) => self.first_head_at_least(next),
            None => self.len(),
        };
        let tail = key_tail(key);
        lo += self.tails[lo..hi].partition_point(|&t| t < tail);
        hi = lo + self.tails[lo..hi].partition_point(|&t| t == tail);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.key(mid) < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Memory held (counted against the metadata budget).
    pub(crate) fn size_bytes(&self) -> usize {
        self.levels.iter().map(|l| l.len() * 64).sum::<usize>()
            + self.tails.len() * 8
            + self.keys.len()
            + self.key_ends.len() * 4
            + self.handles.len() * 16
    }
}

/// Builds the levels over `heads` (sorted).
fn build_levels(heads: &[u64]) -> Vec<Vec<Line>> {
    let mut levels: Vec<Vec<Line>> = Vec::new();
    let mut current: Vec<u64> = heads.to_vec();
    while !current.is_empty() {
        let lines: Vec<Line> = current
            .chunks(FANOUT)
            .map(|c| {
                let mut line = Line([u64::MAX; FANOUT]);
                line.0[..c.len()].copy_from_slice(c);
                line
            })
            .collect();
        let top = lines.len() == 1;
        current = lines.iter().map(|l| l.0[FANOUT - 1]).collect();
        levels.push(lines);
        if top {
            break;
        }
    }
    levels
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn index(keys: &[Vec<u8>]) -> BlockIndex {
        let mut body = Vec::new();
        crate::codec::put_u32(&mut body, keys.len() as u32);
        for (i, k) in keys.iter().enumerate() {
            crate::codec::put_bytes(&mut body, k);
            crate::codec::put_u64(&mut body, i as u64 * 100);
            crate::codec::put_u32(&mut body, 100);
        }
        BlockIndex::decode(&body, keys.len() as u64 * 100).unwrap()
    }

    fn check_against_plain_search(keys: &[Vec<u8>], extra_probes: &[Vec<u8>]) {
        let idx = index(keys);
        let plain = |key: &[u8]| keys.partition_point(|k| k.as_slice() < key);
        let mut probes: Vec<Vec<u8>> = keys.to_vec();
        probes.extend(keys.iter().map(|k| [k.as_slice(), b"\0"].concat()));
        probes.extend(keys.iter().filter(|k| !k.is_empty()).map(|k| k[..k.len() - 1].to_vec()));
        probes.extend(extra_probes.iter().cloned());
        for p in probes {
            assert_eq!(idx.find(&p), plain(&p), "{} keys, probe {p:?}", keys.len());
        }
    }

    /// The tree search agrees with a plain binary search over keys,
    /// including long runs of keys sharing their first 8 or 16 bytes.
    #[test]
    fn find_agrees_with_a_plain_search() {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for i in 0..700u32 {
            // Groups of 50 keys share an 8-byte head, groups of 10 a 16-byte prefix.
            let mut k = format!("{:08}{:08}", i / 50 * 50, i / 10 * 10).into_bytes();
            k.extend_from_slice(&i.to_be_bytes());
            keys.push(k);
        }
        keys.sort();
        let extra = [vec![], b"0".to_vec(), b"zzzzzzzzzz".to_vec(), b"00000050".to_vec(), vec![0xff; 20]];
        check_against_plain_search(&keys, &extra);
        // Every size around the line and level boundaries.
        for n in (1..=200).chain([511, 512, 513, 576, 640]) {
            check_against_plain_search(&keys[..n], &extra);
        }
    }

    /// Keys of every length from 0 to 17 bytes, including ones made of
    /// 0x00 and 0xff bytes, where padding and the largest head tie.
    #[test]
    fn short_keys_and_extreme_bytes() {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for len in 0..=17usize {
            keys.push(vec![0; len]);
            keys.push(vec![0xff; len]);
            keys.push((0..len as u8).collect());
        }
        keys.sort();
        keys.dedup();
        check_against_plain_search(&keys, &[vec![0xff; 30], vec![0, 0xff]]);
    }

    #[test]
    fn an_index_without_blocks_finds_nothing() {
        let idx = index(&[]);
        assert_eq!(idx.find(b"any"), 0);
        assert_eq!(idx.len(), 0);
    }
}
