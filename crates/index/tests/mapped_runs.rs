//! Point gets that read data blocks in mapped run files (`map_runs`, the
//! real backend) answer exactly as reads through the block cache do, check
//! each block once, and report a damaged block naming its file, never
//! wrong data. How: the same writes (puts, overwrites, deletes, merges of
//! runs) go to two indexes on the real file system, one mapping its runs
//! and one not; every key's get must agree with a model in both, and the
//! counters must show the mapped reads. Then a byte of a data block is
//! flipped on disk and the index reopened.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use larder_index::{Index, IndexError, Options, WriteBatch};
use larder_io::{RealStorage, StorageRef};

const KEYS: u32 = 3000;

fn options(map_runs: bool) -> Options {
    // Runs stay open (and their blocks' checked bits with them).
    Options {
        memtable_size_bytes: 64 << 10,
        block_size_bytes: 1024,
        max_open_runs: 64,
        metadata_cache_bytes: 16 << 20,
        map_runs,
        ..common::tiny_options(false)
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000).into_bytes()
}

/// Writes the workload, flushing and merging along the way; returns the model.
fn fill(index: &Index) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    let mut seq = 0;
    for round in 0..3u32 {
        for i in (0..KEYS).filter(|i| i % (round + 1) == 0) {
            seq += 1;
            let value = format!("value {i} round {round}").into_bytes();
            index.write(seq, WriteBatch::new().put(key(i), value.clone())).unwrap();
            model.insert(key(i), value);
        }
        for i in (0..KEYS).filter(|i| i % 7 == round) {
            seq += 1;
            index.write(seq, WriteBatch::new().delete(key(i))).unwrap();
            model.remove(&key(i));
        }
        index.flush().unwrap();
    }
    model
}

fn open(dir: &Path, map_runs: bool) -> Index {
    let storage: StorageRef = Arc::new(RealStorage::new());
    Index::open(storage, dir, options(map_runs)).unwrap()
}

fn check_gets(index: &Index, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for i in 0..KEYS + 500 {
        assert_eq!(index.get(&key(i)).unwrap().as_ref(), model.get(&key(i)), "key {i}");
    }
}

#[test]
fn mapped_point_gets_agree_with_cached_ones_and_a_model() {
    let tmp = tempfile::tempdir().unwrap();
    for map_runs in [true, false] {
        let dir = tmp.path().join(format!("map-{map_runs}"));
        let index = open(&dir, map_runs);
        let model = fill(&index);
        check_gets(&index, &model);
        index.close().unwrap();

        // After a reopen every block comes from disk again.
        let index = open(&dir, map_runs);
        check_gets(&index, &model);
        check_gets(&index, &model);
        let s = index.stats();
        if map_runs {
            assert!(s.mapped_block_reads > 0, "{s:?}");
            assert_eq!(s.mapped_block_reads, s.block_reads, "every point get read the mapping: {s:?}");
            assert_eq!(s.block_cache_misses, 0, "{s:?}");
        } else {
            assert_eq!(s.mapped_block_reads, 0, "{s:?}");
            assert!(s.block_cache_misses > 0, "{s:?}");
        }
        index.close().unwrap();
    }
}

#[test]
fn a_damaged_block_in_a_mapped_run_is_reported_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("index");
    let index = open(&dir, true);
    let model = fill(&index);
    index.close().unwrap();
    let mut runs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "run"))
        .collect();
    runs.sort();
    let run = runs.pop().unwrap();
    // A byte inside the first data block (blocks start at offset 0).
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&run).unwrap();
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, 40).unwrap();
    file.write_all_at(&[byte[0] ^ 0x20], 40).unwrap();
    file.sync_all().unwrap();

    let index = open(&dir, true);
    let mut reported = 0;
    for round in 0..2 {
        let before = reported;
        for i in 0..KEYS {
            match index.get(&key(i)) {
                Ok(got) => assert_eq!(got.as_ref(), model.get(&key(i)), "wrong data for key {i}"),
                Err(e) => {
                    assert!(matches!(e, IndexError::Corrupt { .. }), "{e}");
                    assert!(e.to_string().contains(&*run.to_string_lossy()), "{e} does not name {}", run.display());
                    reported += 1;
                }
            }
        }
        // A block that failed its check is checked again, not trusted.
        assert!(reported > before, "round {round}: the damaged block went unnoticed");
    }
}

/// The run files of the index in `dir`, sorted by name (oldest first).
fn run_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut runs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "run"))
        .collect();
    runs.sort();
    runs
}

#[test]
fn a_run_cut_short_under_a_live_index_is_an_error_naming_it_not_a_fault() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("index");
    let index = open(&dir, true);
    let model = fill(&index);
    // Every run is open and mapped, every block viewed once and trusted.
    check_gets(&index, &model);
    assert!(index.stats().mapped_block_reads > 0);
    let runs = run_files(&dir);
    let run = runs.last().unwrap().clone();
    let len = std::fs::metadata(&run).unwrap().len();
    // Cut to a quarter: the pages past the new end fault if touched.
    std::fs::OpenOptions::new().write(true).open(&run).unwrap().set_len(len / 4).unwrap();

    let mut refused = 0;
    for i in 0..KEYS {
        match index.get(&key(i)) {
            Ok(got) => assert_eq!(got.as_ref(), model.get(&key(i)), "wrong data for key {i}"),
            Err(e) => {
                assert!(matches!(e, IndexError::Corrupt { .. }), "{e}");
                assert!(e.to_string().contains(&*run.to_string_lossy()), "{e} does not name {}", run.display());
                assert!(e.to_string().contains("truncated"), "{e}");
                refused += 1;
            }
        }
    }
    assert!(refused > 0, "no get read the cut run");
    drop(index);

    // Opening again refuses the run by its length, before mapping it.
    let storage: StorageRef = Arc::new(RealStorage::new());
    let e = Index::open(storage, &dir, options(true)).map(|_| ()).unwrap_err();
    assert!(matches!(e, IndexError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains(&*run.to_string_lossy()), "{e} does not name {}", run.display());
}

/// Every scan shape over the model's keys: bounds included, excluded and
/// open, both directions, and prefixes.
fn check_scans(index: &Index, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    use std::ops::Bound::{self, Excluded, Included, Unbounded};
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let picks = [0, 1, keys.len() / 3, keys.len() / 2, keys.len() - 2, keys.len() - 1];
    let mut bounds: Vec<Bound<Vec<u8>>> = vec![Unbounded];
    for &p in &picks {
        bounds.push(Included(keys[p].clone()));
        bounds.push(Excluded(keys[p].clone()));
        // A key between two stored ones.
        let mut between = keys[p].clone();
        between.push(0);
        bounds.push(Included(between));
    }
    use std::ops::RangeBounds;
    fn as_ref(b: &std::ops::Bound<Vec<u8>>) -> std::ops::Bound<&[u8]> {
        b.as_ref().map(Vec::as_slice)
    }
    for start in &bounds {
        for end in &bounds {
            let (s, e) = (as_ref(start), as_ref(end));
            let ordered = match (s, e) {
                (Included(a) | Excluded(a), Included(b) | Excluded(b)) => a <= b,
                _ => true,
            };
            if !ordered {
                continue;
            }
            // Filtered, not `BTreeMap::range`, which refuses an empty
            // range such as (Excluded(k), Excluded(k)).
            let want: Vec<(Vec<u8>, Vec<u8>)> = model
                .iter()
                .filter(|(k, _)| (s, e).contains(k.as_slice()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for forward in [true, false] {
                let got: Vec<(Vec<u8>, Vec<u8>)> = index.range(s, e, forward).unwrap().map(|kv| kv.unwrap()).collect();
                let mut want = want.clone();
                if !forward {
                    want.reverse();
                }
                assert_eq!(got, want, "range {start:?}..{end:?} forward {forward}");
                let mut iter = index.range(s, e, forward).unwrap();
                let (mut key, mut value, mut got) = (Vec::new(), Vec::new(), Vec::new());
                while iter.next_into(&mut key, &mut value).unwrap() {
                    got.push((key.clone(), value.clone()));
                }
                assert_eq!(got, want, "next_into {start:?}..{end:?} forward {forward}");
            }
        }
    }
    for prefix in [&b"key0001"[..], b"key00099", b"key9", b"k", b""] {
        let want: Vec<(Vec<u8>, Vec<u8>)> =
            model.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(k, v)| (k.clone(), v.clone())).collect();
        let got: Vec<(Vec<u8>, Vec<u8>)> = index.prefix(prefix, true).unwrap().map(|kv| kv.unwrap()).collect();
        assert_eq!(got, want, "prefix {prefix:?}");
    }
}

/// Scans view the blocks of mapped runs in place (no block read goes
/// through the cache) and agree with a model, as scans of the same index
/// through the block cache do.
#[test]
fn mapped_scans_agree_with_cached_ones_and_a_model() {
    let tmp = tempfile::tempdir().unwrap();
    for map_runs in [true, false] {
        let dir = tmp.path().join(format!("map-{map_runs}"));
        let index = open(&dir, map_runs);
        let model = fill(&index);
        index.close().unwrap();
        let index = open(&dir, map_runs);
        check_scans(&index, &model);
        let s = index.stats();
        if map_runs {
            assert!(s.mapped_block_reads > 0, "{s:?}");
            assert_eq!(s.block_cache_misses, 0, "every scan viewed the mapping: {s:?}");
        } else {
            assert_eq!(s.mapped_block_reads, 0, "{s:?}");
            assert!(s.block_cache_misses > 0, "{s:?}");
        }
        index.close().unwrap();
    }
}

/// Every get and a full scan each way: each answer is the model's, or a
/// `Corrupt` error naming `run` as truncated (a scan stops at its error,
/// having returned the model's entries up to there). Returns the errors.
fn answers_are_right_or_refused(index: &Index, model: &BTreeMap<Vec<u8>, Vec<u8>>, run: &Path) -> usize {
    let refused = |e: &IndexError| {
        assert!(matches!(e, IndexError::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains(&*run.to_string_lossy()), "{e} does not name {}", run.display());
        assert!(e.to_string().contains("truncated"), "{e}");
    };
    let mut errors = 0;
    for i in 0..KEYS + 500 {
        match index.get(&key(i)) {
            Ok(got) => assert_eq!(got.as_ref(), model.get(&key(i)), "wrong data for key {i}"),
            Err(e) => {
                refused(&e);
                errors += 1;
            }
        }
    }
    for forward in [true, false] {
        let mut want: Vec<(&Vec<u8>, &Vec<u8>)> = model.iter().collect();
        if !forward {
            want.reverse();
        }
        let mut scan = index.iter(forward).unwrap();
        let (mut key, mut value, mut at) = (Vec::new(), Vec::new(), 0);
        loop {
            match scan.next_into(&mut key, &mut value) {
                Ok(true) => {
                    assert_eq!((&key, &value), want[at], "entry {at} of a scan forward {forward}");
                    at += 1;
                }
                Ok(false) => {
                    assert_eq!(at, want.len(), "a scan forward {forward} ended early without an error");
                    break;
                }
                Err(e) => {
                    refused(&e);
                    errors += 1;
                    break;
                }
            }
        }
    }
    errors
}

/// Copies the files of index directory `from` into a new directory `to`.
fn copy_index(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

/// A run cut at offsets anywhere (on a page boundary, inside a page, inside
/// a block, a byte before a block's end) under an index that has read and
/// trusted every block: no get or scan returns wrong data or faults, and
/// reads of the cut part are refused naming the run. Bytes of the cut
/// page past the new end read as zeros without a fault; pages past it
/// fault, and the guard turns the fault into the error.
#[test]
fn a_run_cut_anywhere_under_a_live_index_never_yields_wrong_data() {
    let fixture = CutFixture::new();
    let len = std::fs::metadata(fixture.base.join(&fixture.newest)).unwrap().len();
    let mut total_refused = 0;
    for tenth in [1u64, 3, 5, 7] {
        for nudge in [0u64, 1, 333, 1023, 4095] {
            let cut = (len * tenth / 10 / 4096 * 4096 + nudge).min(len - 1);
            let refused = fixture.cut_a_copy(cut, |index, run| {
                // Once refused, always refused: the run's mapping is not
                // trusted again.
                assert!(answers_are_right_or_refused(index, &fixture.model, run) > 0);
            });
            assert!(refused > 0, "a cut at {cut} of {len} bytes went unnoticed");
            total_refused += refused;
        }
    }
    assert!(total_refused > 0);
}

/// An index filled and closed in `base`, its model, and the name of its
/// newest run, for tests that cut a copy of it.
struct CutFixture {
    tmp: tempfile::TempDir,
    base: PathBuf,
    model: BTreeMap<Vec<u8>, Vec<u8>>,
    newest: std::ffi::OsString,
}

impl CutFixture {
    fn new() -> CutFixture {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("base");
        let index = open(&base, true);
        let model = fill(&index);
        index.close().unwrap();
        let newest = run_files(&base).last().unwrap().file_name().unwrap().to_owned();
        CutFixture { tmp, base, model, newest }
    }

    /// Opens a copy of the index, checks every answer, cuts the copy's
    /// newest run to `cut` bytes under it, and returns how many answers
    /// were refused after the cut; `then` runs on the cut index before
    /// the copy is removed.
    fn cut_a_copy(&self, cut: u64, then: impl FnOnce(&Index, &Path)) -> usize {
        let dir = self.tmp.path().join(format!("cut-{cut}"));
        copy_index(&self.base, &dir);
        let run = dir.join(&self.newest);
        let index = open(&dir, true);
        assert_eq!(answers_are_right_or_refused(&index, &self.model, &run), 0, "before the cut");
        std::fs::OpenOptions::new().write(true).open(&run).unwrap().set_len(cut).unwrap();
        let refused = answers_are_right_or_refused(&index, &self.model, &run);
        then(&index, &run);
        drop(index);
        std::fs::remove_dir_all(&dir).unwrap();
        refused
    }
}

/// Readers getting and scanning on four threads while the main thread cuts
/// a run under them at a page boundary (every cut page faults when read):
/// every answer is right or a truncation error, and no reader faults (a
/// fault kills the test process). A cut inside a page racing a read of
/// that page's tail can still be read as zeros (see docs/design.md).
#[test]
fn a_run_cut_while_readers_read_it_faults_no_reader() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("index");
    let index = open(&dir, true);
    let model = fill(&index);
    check_gets(&index, &model);
    let run = run_files(&dir).last().unwrap().clone();
    let len = std::fs::metadata(&run).unwrap().len();
    let cut = AtomicBool::new(false);
    let passes_after_cut = AtomicUsize::new(0);
    let refused = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let mut after = 0;
                while after < 2 {
                    let was_cut = cut.load(Ordering::Acquire);
                    refused.fetch_add(answers_are_right_or_refused(&index, &model, &run), Ordering::Relaxed);
                    if was_cut {
                        after += 1;
                    }
                }
                passes_after_cut.fetch_add(after, Ordering::Relaxed);
            });
        }
        // Let the readers get going, then cut.
        while index.stats().gets < u64::from(KEYS) {
            std::thread::yield_now();
        }
        std::fs::OpenOptions::new().write(true).open(&run).unwrap().set_len(len / 3 / 4096 * 4096).unwrap();
        cut.store(true, Ordering::Release);
    });
    assert_eq!(passes_after_cut.load(Ordering::Relaxed), 8);
    assert!(refused.load(Ordering::Relaxed) > 0, "no reader noticed the cut");
}

/// A backward scan over two runs holding the same keys (the newer run's
/// versions newer), the newer run cut under the scan once both cursors
/// sit on one key: the tie between the runs is settled by reading both
/// keys in place, the cut run's as zeros, and a zero key loses a tie going
/// backward. The scan must refuse, never answer with the older run's
/// version.
#[test]
fn a_backward_scan_refuses_a_tie_read_from_a_run_cut_under_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("index");
    // Flushes only when asked, no merge: the two runs stay two.
    let index = Index::open(
        Arc::new(RealStorage::new()),
        &dir,
        Options {
            memtable_size_bytes: 16 << 20,
            merge_fanout: 8,
            l0_slowdown_runs: 16,
            l0_stop_runs: 32,
            ..options(true)
        },
    )
    .unwrap();
    let name = |i: u32| format!("key{i:05}").into_bytes();
    let mut seq = 0;
    for version in ["old", "new"] {
        for i in 0..2_000 {
            seq += 1;
            index.write(seq, WriteBatch::new().put(name(i), format!("{version} {i}").into_bytes())).unwrap();
        }
        index.flush().unwrap();
    }
    let runs = run_files(&dir);
    assert_eq!(runs.len(), 2, "{runs:?}");
    let newer = runs.last().unwrap().clone();
    assert!(std::fs::metadata(&newer).unwrap().len() > 16 << 10, "the cut must leave the last blocks out");
    let mut scan = index.iter(false).unwrap();
    let (mut key, mut value) = (Vec::new(), Vec::new());
    // The last keys, from the newer run; both cursors then rest on the
    // next key, near the end of each run.
    for i in (1_990..2_000).rev() {
        assert!(scan.next_into(&mut key, &mut value).unwrap());
        assert_eq!((key.as_slice(), value.as_slice()), (name(i).as_slice(), format!("new {i}").as_bytes()));
    }
    std::fs::OpenOptions::new().write(true).open(&newer).unwrap().set_len(4096).unwrap();
    match scan.next_into(&mut key, &mut value) {
        Err(e) => assert!(e.to_string().contains("truncated"), "{e}"),
        Ok(found) => panic!(
            "the scan answered {found} ({}, {}) from the older run",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        ),
    }
}

/// Where run file `run`'s data blocks end (its filter's offset, from the
/// meta block the footer points at; docs/format.md, "Run file").
fn data_blocks_end(run: &Path) -> u64 {
    let bytes = std::fs::read(run).unwrap();
    let footer = &bytes[bytes.len() - 44..];
    let meta_offset = u64::from_le_bytes(footer[..8].try_into().unwrap()) as usize;
    // Entry count, block count, seq min and max, then the filter's handle.
    u64::from_le_bytes(bytes[meta_offset + 32..meta_offset + 40].try_into().unwrap())
}

/// A cut inside the last page of a run's data blocks: the pages past it
/// hold the filter, block index and footer, which reads never touch in
/// the mapping, so no read faults; the cut page's tail reads as zeros.
/// Gets and scans of the blocks there are refused, never answered from
/// the zeros.
#[test]
fn a_cut_in_the_last_data_page_is_refused_without_a_fault() {
    let fixture = CutFixture::new();
    let blocks_end = data_blocks_end(&fixture.base.join(&fixture.newest));
    for back in [1u64, 4, 8, 9, 100, 700, 1500] {
        let refused = fixture.cut_a_copy(blocks_end - back, |_, _| {});
        // Zeros in the checksum alone leave the entries right, and may go
        // unnoticed; from the entry count on they must not.
        if back >= 8 {
            assert!(refused > 0, "a cut {back} bytes before the data blocks' end went unnoticed");
        }
    }
}

/// Where the data block at the start of `bytes` ends: the first length
/// whose last four bytes are the crc32c of those before them.
fn first_block_len(bytes: &[u8]) -> usize {
    (8..bytes.len())
        .find(|&end| {
            let stored = u32::from_le_bytes(bytes[end - 4..end].try_into().unwrap());
            larder_io::codec::crc(&bytes[..end - 4]) == stored
        })
        .unwrap()
}

/// A merge reads mapped runs in place: it writes what a model says, and
/// a damaged block (a flipped bit; an entry of an unknown kind behind a
/// valid checksum) fails the merge with an error naming the run, never a
/// panic or a merged run of wrong data.
#[test]
fn a_merge_of_mapped_runs_refuses_a_damaged_block_naming_its_run() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    let index = open(&base, true);
    let model = fill(&index);
    index.close().unwrap();

    let whole = tmp.path().join("whole");
    copy_index(&base, &whole);
    let index = open(&whole, true);
    index.compact_all().unwrap();
    assert_eq!(index.stats().runs, 1);
    check_gets(&index, &model);
    index.close().unwrap();

    for (name, damage) in [("flipped", 0), ("unknown-kind", 1)] {
        let dir = tmp.path().join(name);
        copy_index(&base, &dir);
        let run = run_files(&dir).pop().unwrap();
        let mut bytes = std::fs::read(&run).unwrap();
        let len = first_block_len(&bytes);
        if damage == 0 {
            bytes[len / 2] ^= 0x10;
        } else {
            // The first entry: its key's length (one byte), key, kind.
            let kind_at = 1 + usize::from(bytes[0]);
            bytes[kind_at] = 9;
            let c = larder_io::codec::crc(&bytes[..len - 4]);
            bytes[len - 4..len].copy_from_slice(&c.to_le_bytes());
        }
        std::fs::write(&run, &bytes).unwrap();
        let index = open(&dir, true);
        let e = index.compact_all().unwrap_err();
        assert!(e.to_string().contains(&*run.to_string_lossy()), "{name}: {e} does not name {}", run.display());
        assert!(e.to_string().contains("corrupt"), "{name}: {e}");
    }
}

/// A merge operator that cuts a run file short the first time it is
/// applied once armed: a hook inside a merge, after the merge's cursors
/// checked the blocks they stand in and before they read the rest.
struct CutOnMerge {
    armed: std::sync::Mutex<Option<(PathBuf, u64)>>,
}

impl larder_index::MergeOperator for CutOnMerge {
    fn name(&self) -> &str {
        "append"
    }

    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Result<Option<Vec<u8>>, String> {
        if let Some((run, at)) = self.armed.lock().unwrap().take() {
            std::fs::OpenOptions::new().write(true).open(&run).unwrap().set_len(at).unwrap();
        }
        let mut value = existing.unwrap_or_default().to_vec();
        for o in operands {
            value.extend_from_slice(o);
        }
        Ok(Some(value))
    }
}

/// A merge reads a mapped run's block in place after checking it: a cut
/// inside the block's page landing after that check reads as zeros from
/// the cut on without a fault (the kernel zeroes the page's tail). The
/// merge must refuse (naming the run), never write those zeros out as
/// entries and drop the run's real ones. The older run is one block in
/// one page; the merge operator cuts it while the merge resolves the
/// first key, after both cursors checked their blocks.
#[test]
fn a_merge_refuses_a_run_cut_inside_a_page_it_reads_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("index");
    let operator = Arc::new(CutOnMerge { armed: std::sync::Mutex::new(None) });
    let index = Index::open(
        Arc::new(RealStorage::new()),
        &dir,
        Options {
            memtable_size_bytes: 1 << 20,
            block_size_bytes: 64 << 10,
            merge_fanout: 8,
            l0_slowdown_runs: 16,
            l0_stop_runs: 32,
            merge_at_rest: false,
            merge_operators: vec![operator.clone()],
            ..options(true)
        },
    )
    .unwrap();
    let name = |i: u32| format!("k{i:03}").into_bytes();
    let mut model = BTreeMap::new();
    for i in 0..40 {
        let value = format!("value {i:02} of the older run").into_bytes();
        index.write(u64::from(i) + 1, WriteBatch::new().put(name(i), value.clone())).unwrap();
        model.insert(name(i), value);
    }
    index.flush().unwrap();
    index.write(100, WriteBatch::new().merge("append", name(0), b" merged")).unwrap();
    model.get_mut(&name(0)).unwrap().extend_from_slice(b" merged");
    index.flush().unwrap();
    let runs = run_files(&dir);
    assert_eq!(runs.len(), 2, "{runs:?}");
    let older = runs[0].clone();
    let len = std::fs::metadata(&older).unwrap().len();
    assert!(len < 4096, "the older run must lie in one page ({len} bytes)");
    // Past the first two entries: the rest of the block reads as zeros.
    *operator.armed.lock().unwrap() = Some((older.clone(), 120));
    match index.compact_all() {
        Err(e) => {
            assert!(e.to_string().contains(&*older.to_string_lossy()), "{e} does not name {}", older.display());
        }
        Ok(()) => {
            assert!(operator.armed.lock().unwrap().is_none(), "the merge applied no operator");
            let found: Vec<(Vec<u8>, Vec<u8>)> = index.iter(true).unwrap().map(Result::unwrap).collect();
            let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
            assert_eq!(found.len(), want.len(), "the merge kept {} keys of {}", found.len(), want.len());
            assert_eq!(found, want);
        }
    }
}
