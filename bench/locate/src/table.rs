//! The locate table a heap user builds in one heap object: a hash index
//! over a front-coded path list, laid out in one pass from the sorted list
//! and written into an object sized up front (one `Heap::alloc`, no
//! per-entry block), so a fresh process attaches the object and searches
//! it in place.
//!
//! The bytes, little-endian, offsets from the object's first byte:
//!
//! - header ([`HEADER_BYTES`]): magic [`MAGIC`] (8 bytes), then u64s:
//!   entries, bucket count (a power of two), group count, slot width
//!   (bytes), data length, total length;
//! - buckets: bucket count + 1 u32s, the first slot of each bucket (the
//!   last one is the entry count): the paths whose last component's hash
//!   selects the bucket (its low bits), in list order;
//! - slots: one per path, `slot width` bytes (the fewest holding the
//!   path's number and 12 more bits): the path's number in the list shifted
//!   left by the bits left over, or'ed with that many top bits of the hash
//!   (so a search decodes only the paths whose name has them);
//! - groups: group count u32s, each group's first byte in the data;
//! - data: the paths in list order, [`GROUP`] to a group, each as the
//!   change in the count of bytes shared with the previous path (zigzag
//!   LEB128; the count is 0 at a group's first path), a LEB128 count of
//!   bytes that follow, and those bytes: the front coding of GNU locate's
//!   frcode, restarted at every group so a search decodes one group's
//!   start per path it looks at.
//!
//! A search hashes the name, reads its bucket's slots, decodes the paths
//! whose slot has the hash's top bits (walking their group's lengths from
//! its start, then copying only the bytes of the path itself) and
//! counts those whose last component is the name; every read is
//! bounds-checked, so a damaged table is an error, not a crash.

use crate::error::TableError;

/// What the table's functions return.
pub type Result<T> = std::result::Result<T, TableError>;

/// Returns a [`TableError::Damaged`] made of the message unless `cond` holds.
macro_rules! ensure_intact {
    ($cond:expr, $($message:tt)+) => {
        if !$cond {
            return Err(TableError::Damaged(format!($($message)+)));
        }
    };
}

/// A damaged-table error saying `what`.
fn damaged(what: &str) -> TableError {
    TableError::Damaged(what.to_string())
}

/// Paths per group (a restart of the front coding: a whole path, 132
/// bytes on average in the 1M tree, so fewer restarts make a smaller
/// table; a search walks half a group's lengths per path it looks at).
pub const GROUP: usize = 64;
/// The table's magic: format and hash function version.
pub const MAGIC: [u8; 8] = *b"LDLOCAT6";
/// Bytes of the header.
pub const HEADER_BYTES: usize = 64;
/// Paths per bucket, about (a power of two of buckets at least entries /
/// this): few buckets keep the build's counting in the first-level cache
/// (a third of the build's time went to counting in 64K buckets), the
/// slots' hash bits keep a search from decoding the bucket's other paths.
const PATHS_PER_BUCKET: u64 = 256;
/// Fewest hash bits in a slot: one path of a bucket's 256 in 16 is
/// decoded for nothing.
const MIN_HASH_BITS: u32 = 12;
/// Paths per bucket of a small table, about.
const SMALL_PATHS_PER_BUCKET: u64 = 4;
/// Buckets a table gets at least, when it has 4 paths for each.
const SMALL_BUCKETS: u64 = 1024;
/// Fewest buckets.
const MIN_BUCKETS: u64 = 16;

/// The hash of a last component: 8 bytes at a time (names are short; a
/// byte-at-a-time hash was a sixth of the build), then a final mix. It is
/// part of the format ([`MAGIC`]): never change it without the magic.
pub fn name_hash(name: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (name.len() as u64).wrapping_mul(K);
    let mut chunks = name.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(29);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(29);
    }
    h ^= h >> 32;
    h = h.wrapping_mul(0xd6e8_feb8_6659_fd93);
    h ^ (h >> 32)
}

/// The last component of a path (all of it without a `/`).
fn last_component(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(slash) => &path[slash + 1..],
        None => path,
    }
}

/// Bytes `a` and `b` share at their start, 8 at a time.
fn shared_prefix(a: &[u8], b: &[u8]) -> usize {
    let max = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= max {
        let mut x = [0u8; 8];
        let mut y = [0u8; 8];
        x.copy_from_slice(&a[i..i + 8]);
        y.copy_from_slice(&b[i..i + 8]);
        let diff = u64::from_le_bytes(x) ^ u64::from_le_bytes(y);
        if diff != 0 {
            return i + (diff.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < max && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Writes `v` as LEB128 at `at`; returns the position after it.
fn put_varint(out: &mut [u8], mut at: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        out[at] = (v as u8) | 0x80;
        v >>= 7;
        at += 1;
    }
    out[at] = v as u8;
    at + 1
}

/// Reads a LEB128 number at `*at` of `data`, advancing `*at`.
fn get_varint(data: &[u8], at: &mut usize) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *data.get(*at).ok_or_else(|| damaged("the table's data ends inside a number"))?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(damaged("the table's data holds a number longer than 64 bits"))
}

/// The size of each part of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    entries: u64,
    bucket_count: u64,
    group_count: u64,
    slot_width: u64,
    data_len: u64,
}

impl Layout {
    fn buckets_at(&self) -> usize {
        HEADER_BYTES
    }

    fn slots_at(&self) -> usize {
        self.buckets_at() + (self.bucket_count as usize + 1) * 4
    }

    fn groups_at(&self) -> usize {
        self.slots_at() + (self.entries * self.slot_width) as usize
    }

    fn data_at(&self) -> usize {
        self.groups_at() + self.group_count as usize * 4
    }

    fn total(&self) -> usize {
        self.data_at() + self.data_len as usize
    }

    fn encode_header(&self, out: &mut [u8]) {
        out[..8].copy_from_slice(&MAGIC);
        let fields =
            [self.entries, self.bucket_count, self.group_count, self.slot_width, self.data_len, self.total() as u64];
        for (i, f) in fields.iter().enumerate() {
            out[8 + i * 8..16 + i * 8].copy_from_slice(&f.to_le_bytes());
        }
    }

    /// The layout a table's header gives, checked against the table's length.
    fn decode(table: &[u8]) -> Result<Layout> {
        ensure_intact!(table.len() >= HEADER_BYTES, "the table is shorter than its header");
        ensure_intact!(table[..8] == MAGIC, "not a locate table (magic)");
        let field = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&table[8 + i * 8..16 + i * 8]);
            u64::from_le_bytes(b)
        };
        let l = Layout {
            entries: field(0),
            bucket_count: field(1),
            group_count: field(2),
            slot_width: field(3),
            data_len: field(4),
        };
        ensure_intact!(l.bucket_count.is_power_of_two(), "the table's bucket count is not a power of two");
        let width = slot_width(l.entries);
        ensure_intact!(l.slot_width == width as u64, "the table's slot width {} is not {width}", l.slot_width);
        ensure_intact!(
            l.group_count == l.entries.div_ceil(GROUP as u64),
            "the table's group count is not its entries'"
        );
        // Each part is bounded by the table's length before any is multiplied out.
        let len = table.len() as u64;
        ensure_intact!(
            l.bucket_count < len && l.entries < len && l.data_len < len,
            "the table's header gives parts longer than the table"
        );
        ensure_intact!(
            l.total() as u64 == field(5) && l.total() <= table.len(),
            "the table's parts ({} bytes) do not fit its {} bytes",
            l.total(),
            table.len()
        );
        Ok(l)
    }
}

/// Bits of a path's number in a table of `entries` paths.
fn entry_bits(entries: u64) -> u32 {
    64 - entries.saturating_sub(1).leading_zeros()
}

/// Bytes of a slot in a table of `entries` paths: the number and at least
/// [`MIN_HASH_BITS`] of the hash.
fn slot_width(entries: u64) -> usize {
    (entry_bits(entries) + MIN_HASH_BITS).div_ceil(8) as usize
}

/// Bits of the hash in a slot.
fn hash_bits(entries: u64) -> u32 {
    slot_width(entries) as u32 * 8 - entry_bits(entries)
}

/// Zigzag: small changes of either sign as small numbers.
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends `path` to the front-coded `data`: it shares `shared` bytes with
/// the path before, which shared `before`.
fn encode(data: &mut Vec<u8>, path: &[u8], shared: usize, before: usize) {
    let mut number = [0u8; 20];
    let at = put_varint(&mut number, 0, zigzag(shared as i64 - before as i64));
    let at = put_varint(&mut number, at, (path.len() - shared) as u64);
    data.extend_from_slice(&number[..at]);
    data.extend_from_slice(&path[shared..]);
}

/// A built table: the header and index, then the data (the table is the
/// two one after the other).
pub struct Table {
    /// Header, buckets, slots and groups.
    pub head: Vec<u8>,
    /// The front-coded paths.
    pub data: Vec<u8>,
}

/// A table of `paths` (sorted; every engine gets the list sorted): one
/// pass over the list front-codes it and hashes its names, then the index
/// is laid out in memory, for the caller to write into an object sized
/// to it.
pub fn build(paths: &[String]) -> Result<Table> {
    let entries = paths.len() as u64;
    // A small table gets a bucket per few paths: the counts stay in cache
    // anyway, and a search then reads a few slots instead of 256.
    let buckets = (entries / PATHS_PER_BUCKET).max((entries / SMALL_PATHS_PER_BUCKET).min(SMALL_BUCKETS));
    let bucket_count = buckets.next_power_of_two().max(MIN_BUCKETS);
    let mask = bucket_count - 1;
    let group_count = entries.div_ceil(GROUP as u64);
    let slot_width = slot_width(entries);
    let hash_bits = hash_bits(entries);
    let mut data: Vec<u8> = Vec::with_capacity(paths.len() * 16);
    let mut group_at: Vec<u32> = Vec::with_capacity(group_count as usize);
    // Each path's name hash; `starts[b + 1]` counts bucket b's paths.
    let mut hashes: Vec<u64> = Vec::with_capacity(paths.len());
    let mut starts = vec![0u32; bucket_count as usize + 1];
    let (mut previous, mut before): (&[u8], usize) = (&[], 0);
    for (i, path) in paths.iter().enumerate() {
        let path = path.as_bytes();
        let hash = name_hash(last_component(path));
        hashes.push(hash);
        starts[(hash & mask) as usize + 1] += 1;
        let shared = if i % GROUP == 0 {
            group_at.push(
                u32::try_from(data.len()).map_err(|_| TableError::TooLarge("the paths' front coding is over 4 GiB"))?,
            );
            before = 0;
            0
        } else {
            shared_prefix(previous, path)
        };
        encode(&mut data, path, shared, before);
        (previous, before) = (path, shared);
    }
    if data.len() > u32::MAX as usize {
        return Err(TableError::TooLarge("the paths' front coding is over 4 GiB"));
    }
    if entries > u64::from(u32::MAX) {
        return Err(TableError::TooLarge("over 2^32 paths"));
    }
    for b in 0..bucket_count as usize {
        starts[b + 1] += starts[b];
    }
    let layout =
        Layout { entries, bucket_count, group_count, slot_width: slot_width as u64, data_len: data.len() as u64 };
    let mut out = vec![0u8; layout.data_at()];
    layout.encode_header(&mut out);
    let buckets_at = layout.buckets_at();
    for (b, start) in starts.iter().enumerate() {
        out[buckets_at + b * 4..buckets_at + b * 4 + 4].copy_from_slice(&start.to_le_bytes());
    }
    let groups_at = layout.groups_at();
    for (g, at) in group_at.iter().enumerate() {
        out[groups_at + g * 4..groups_at + g * 4 + 4].copy_from_slice(&at.to_le_bytes());
    }
    // `starts` becomes each bucket's next free slot.
    let slots_at = layout.slots_at();
    for (i, hash) in hashes.iter().enumerate() {
        let bucket = (hash & mask) as usize;
        let slot = ((i as u64) << hash_bits) | (hash >> (64 - hash_bits));
        let at = slots_at + starts[bucket] as usize * slot_width;
        out[at..at + slot_width].copy_from_slice(&slot.to_le_bytes()[..slot_width]);
        starts[bucket] += 1;
    }
    Ok(Table { head: out, data })
}

/// A little-endian number of `width` bytes at `at` of `table`.
fn number(table: &[u8], at: usize, width: usize) -> Result<u64> {
    let bytes = table.get(at..at + width).ok_or_else(|| damaged("a table offset is past its end"))?;
    let mut b = [0u8; 8];
    b[..width].copy_from_slice(bytes);
    Ok(u64::from_le_bytes(b))
}

/// Path `index` of the group starting at `at` of `data`, into `path`:
/// walks the group's lengths up to it (skipping their bytes), then copies
/// the path's bytes from the last path that holds each of them.
fn decode(data: &[u8], mut at: usize, index: usize, path: &mut Vec<u8>) -> Result<()> {
    // (shared, first byte of the rest, its length) of each path up to `index`.
    let mut walked = [(0usize, 0usize, 0usize); GROUP];
    let (mut shared, mut length) = (0usize, 0usize);
    for (j, step) in walked.iter_mut().enumerate().take(index + 1) {
        let change = unzigzag(get_varint(data, &mut at)?);
        let rest = get_varint(data, &mut at)? as usize;
        shared = usize::try_from(shared as i64 + change)
            .ok()
            .filter(|&s| s <= length && (j > 0 || s == 0))
            .ok_or_else(|| damaged("the table's data shares more bytes than the path before has"))?;
        ensure_intact!(at.checked_add(rest).is_some_and(|end| end <= data.len()), "a path is past the data");
        *step = (shared, at, rest);
        at += rest;
        length = shared + rest;
    }
    path.clear();
    path.resize(length, 0);
    let mut need = length;
    for &(shared, rest_at, _) in walked[..=index].iter().rev() {
        if shared < need {
            // need <= this path's length, checked by the walk: in bounds.
            let bytes =
                data.get(rest_at..rest_at + (need - shared)).ok_or_else(|| damaged("a path is past the data"))?;
            path[shared..need].copy_from_slice(bytes);
            need = shared;
        }
        if need == 0 {
            break;
        }
    }
    Ok(())
}

/// Searches `table` for the paths whose last component is `name`: calls
/// `found` with each; returns how many.
pub fn search(table: &[u8], name: &[u8], mut found: impl FnMut(&[u8])) -> Result<u64> {
    let layout = Layout::decode(table)?;
    let hash = name_hash(name);
    let bucket = (hash & (layout.bucket_count - 1)) as usize;
    let at = layout.buckets_at() + bucket * 4;
    let (first, end) = (number(table, at, 4)?, number(table, at + 4, 4)?);
    ensure_intact!(first <= end && end <= layout.entries, "the table's bucket {bucket} is damaged");
    let data = &table[layout.data_at()..layout.total()];
    let width = layout.slot_width as usize;
    let bits = hash_bits(layout.entries);
    let (top, mask) = (hash >> (64 - bits), (1u64 << bits) - 1);
    let mut path: Vec<u8> = Vec::with_capacity(256);
    let mut matches = 0;
    for slot in first..end {
        let value = number(table, layout.slots_at() + slot as usize * width, width)?;
        if value & mask != top {
            continue;
        }
        let entry = value >> bits;
        ensure_intact!(entry < layout.entries, "the table's slot {slot} names no path");
        let group = entry / GROUP as u64;
        let at = number(table, layout.groups_at() + group as usize * 4, 4)? as usize;
        decode(data, at, (entry % GROUP as u64) as usize, &mut path)?;
        if last_component(&path) == name {
            matches += 1;
            found(&path);
        }
    }
    Ok(matches)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64's finaliser: the tests' random draws.
    fn mix64(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The last component of a path.
    fn base_name(path: &str) -> &str {
        path.rsplit('/').next().unwrap_or(path)
    }

    /// A sorted list of `count` distinct paths in a small tree (repeated
    /// names in different directories).
    fn tree(count: u64, seed: u64) -> Vec<String> {
        let mut list: Vec<String> = (0..count)
            .map(|i| {
                let d = mix64(seed ^ i);
                format!("/home/u{}/src/d{}/file{}.c", d % 7, (d >> 8) % 50, i % 97)
            })
            .collect();
        list.sort();
        list.dedup();
        list
    }

    /// Builds a table of `paths` into a buffer (a test's stand-in for the
    /// heap object).
    fn table(paths: &[String]) -> Vec<u8> {
        let Table { mut head, data } = build(paths).expect("build");
        head.extend_from_slice(&data);
        head
    }

    /// The paths whose last component is `name`, by a scan.
    fn scan(paths: &[String], name: &str) -> Vec<String> {
        paths.iter().filter(|p| base_name(p) == name).cloned().collect()
    }

    fn found(t: &[u8], name: &str) -> Vec<String> {
        let mut out = Vec::new();
        let n = search(t, name.as_bytes(), |p| out.push(String::from_utf8_lossy(p).into_owned())).expect("search");
        assert_eq!(n as usize, out.len());
        out
    }

    /// Random lists: long shared prefixes (over 127 and 16K bytes), names
    /// that are whole paths (no `/`), repeated names, empty components.
    /// Few buckets (16) for so few paths: names share buckets and hash bytes.
    #[test]
    fn random_lists_answer_as_a_scan() {
        for seed in 0..40u64 {
            let draw = |i: u64| mix64(seed ^ (i << 16));
            let words = ["a", "bb", "a/b", "long", "x.txt", "", "dir"];
            let n = draw(0) % 300;
            let mut list: Vec<String> = (0..n)
                .map(|i| {
                    let depth = 1 + draw(i * 7 + 1) % 6;
                    let mut p = String::new();
                    if draw(i * 7 + 2) % 5 == 0 {
                        p.push_str(&"p".repeat(100 + (draw(i * 7 + 3) % 20_000) as usize));
                    }
                    for d in 0..depth {
                        if d > 0 || draw(i * 7 + 4) % 2 == 0 {
                            p.push('/');
                        }
                        p.push_str(words[(draw(i * 7 + 5 + d) % words.len() as u64) as usize]);
                    }
                    p
                })
                .collect();
            list.sort();
            list.dedup();
            let t = &table(&list);
            let mut names: Vec<String> = list.iter().map(|p| base_name(p).to_string()).collect();
            names.extend(["absent", "", "p"].map(String::from));
            for name in &names {
                let mut want = scan(&list, name);
                let mut got = found(t, name);
                want.sort();
                got.sort();
                assert_eq!(got, want, "seed {seed}: {name:?}");
            }
        }
    }

    #[test]
    fn a_damaged_table_is_an_error_not_a_crash() {
        let tree = tree(500, 9);
        let t = table(&tree);
        let name = base_name(&tree[7]).to_string();
        assert!(search(&t[..HEADER_BYTES - 1], name.as_bytes(), |_| {}).is_err(), "short header");
        assert!(search(&t[..t.len() - 1], name.as_bytes(), |_| {}).is_err(), "truncated");
        let mut bad_magic = t.clone();
        bad_magic[0] ^= 1;
        assert!(search(&bad_magic, name.as_bytes(), |_| {}).is_err());
        // Every single damaged byte of the header or index, and a sample of
        // the data: an error or an answer, never a panic.
        let data_at = {
            let l = Layout::decode(&t).expect("layout");
            l.data_at()
        };
        for i in (0..data_at).chain((data_at..t.len()).step_by(13)) {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut d = t.clone();
                d[i] ^= flip;
                let _ = search(&d, name.as_bytes(), |_| {});
            }
        }
    }

    /// Bytes of `v` as LEB128.
    fn varint_len(v: u64) -> usize {
        (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
    }

    #[test]
    fn numbers_round_trip_as_leb128() {
        for v in [0u64, 1, 127, 128, 300, 16_383, 16_384, u64::from(u32::MAX), u64::MAX] {
            let mut buf = [0u8; 10];
            let end = put_varint(&mut buf, 0, v);
            assert_eq!(end, varint_len(v), "{v}");
            let mut at = 0;
            assert_eq!(get_varint(&buf, &mut at).expect("decodes"), v);
            assert_eq!(at, end);
        }
    }

    #[test]
    fn zigzag_round_trips() {
        for v in [0i64, 1, -1, 63, -64, 127, -128, 4096, -4096, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert!(zigzag(-1) < 2 && zigzag(1) < 3);
    }

    #[test]
    fn slots_hold_the_number_and_some_hash_bits() {
        for entries in [0u64, 1, 2, 4095, 4096, 4097, 999_709, 1 << 20, (1 << 20) + 1, 1 << 40] {
            let (width, bits) = (slot_width(entries), hash_bits(entries));
            assert!((MIN_HASH_BITS..MIN_HASH_BITS + 8).contains(&bits), "{entries}");
            assert_eq!(width as u32 * 8, bits + entry_bits(entries));
            assert!(entries.saturating_sub(1) < 1u64 << entry_bits(entries).max(1) || entries <= 1);
        }
        assert_eq!(slot_width(999_709), 4);
    }

    #[test]
    fn shared_prefix_counts_bytes_in_common() {
        assert_eq!(shared_prefix(b"", b"abc"), 0);
        assert_eq!(shared_prefix(b"abcdefghij", b"abcdefghiX"), 9);
        assert_eq!(shared_prefix(b"abcdefgh", b"abcdefgh"), 8);
        assert_eq!(shared_prefix(b"abcdefghijklmnopq", b"abcdefghijklmnopqrs"), 17);
        assert_eq!(shared_prefix(b"xbc", b"abc"), 0);
    }
}
