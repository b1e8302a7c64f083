//! Regenerates the committed seed corpus of the index's fuzz targets in
//! `fuzz/corpus/{manifest,data_block,run_file}/` (and the same manifest and
//! block seeds for `manifest_crc_fixed` and `data_block_crc_fixed`) from a
//! real index.
//!
//! Ignored by default (it rewrites committed files); run it with
//!
//! ```text
//! cargo test -p larder-index --test gen_fuzz_corpus -- --ignored
//! ```
//!
//! It opens an [`Index`] on a [`SimStorage`] with tiny options (256-byte
//! blocks, 4 KiB memtables, merges of two runs, inline flushing), writes a
//! few hundred deterministic batches of puts, deletes, range deletes and
//! counter merges, and after every batch copies each manifest and run file
//! then on disk. From those it keeps a spread of small ones (< 16 KiB) as
//! `valid-*` seeds, cuts `valid-*` data blocks out of run files (a data
//! block is the shortest prefix at a block boundary that the block decoder
//! accepts), and derives a few `near-*` seeds: valid files with one field
//! broken, some with their checksums recomputed so a fuzzer starts past the
//! checksum. It asserts that every `valid-*` seed is accepted and every
//! `near-*` seed rejected by its decoder in `larder_index::fuzzing`.
//! Files with other names (inputs a fuzzer added) are left alone.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use larder_index::{fuzzing, CounterOperator, Index, Options, WriteBatch};
use larder_io::{SimStorage, StorageRef};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Largest seed kept.
const MAX_SEED_BYTES: usize = 16 << 10;
/// Valid seeds kept per target.
const SEEDS_PER_TARGET: usize = 10;

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target)
}

fn crc(b: &[u8]) -> u32 {
    crc32c::crc32c(b)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Recomputes the trailing crc32c of `b[start..end]` (the last 4 bytes of the range).
fn fix_crc(b: &mut [u8], start: usize, end: usize) {
    let c = crc(&b[start..end - 4]);
    b[end - 4..end].copy_from_slice(&c.to_le_bytes());
}

/// Every manifest and run file now on the machine, as (file name, bytes).
fn snapshot_files(sim: &SimStorage) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for path in sim.file_names() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("MANIFEST-") || name.ends_with(".run") {
            out.push((name, sim.read_durable(&path).unwrap()));
        }
    }
    out
}

/// Writes a few hundred batches and returns every distinct manifest and run
/// file seen along the way, in the order first seen.
fn collect_files() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let sim = SimStorage::new(42);
    let storage: StorageRef = Arc::new(sim.clone());
    let options = Options {
        memtable_size_bytes: 4096,
        block_size_bytes: 256,
        merge_fanout: 2,
        l0_slowdown_runs: 3,
        l0_stop_runs: 6,
        background_threads: false,
        merge_operators: vec![Arc::new(CounterOperator)],
        ..Default::default()
    };
    let index = Index::open(storage, Path::new("/db"), options).unwrap();
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut seen = BTreeSet::new();
    let (mut manifests, mut runs) = (Vec::new(), Vec::new());
    let mut keep = |sim: &SimStorage| {
        for (name, bytes) in snapshot_files(sim) {
            if seen.insert(bytes.clone()) {
                if name.starts_with("MANIFEST-") {
                    manifests.push(bytes);
                } else {
                    runs.push(bytes);
                }
            }
        }
    };
    keep(&sim);
    let key = |rng: &mut StdRng| format!("key{:03}", rng.gen_range(0..120)).into_bytes();
    for seq in 1..=400u64 {
        let mut batch = WriteBatch::new();
        for _ in 0..rng.gen_range(1..=3) {
            let k = key(&mut rng);
            match rng.gen_range(0..100) {
                0..=54 => {
                    let len = rng.gen_range(0..24);
                    let v: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                    batch.put(k, v);
                }
                55..=69 => {
                    batch.delete(k);
                }
                70..=77 => {
                    let mut end = key(&mut rng);
                    end.push(b'~');
                    let (a, b) = if k < end { (k, end) } else { (end, k) };
                    batch.delete_range(a, b);
                }
                _ => {
                    let mk = format!("ctr{:02}", rng.gen_range(0..20)).into_bytes();
                    batch.merge(CounterOperator::NAME, mk, CounterOperator::operand(rng.gen_range(-2..=3)));
                }
            }
        }
        index.write(seq, &batch).unwrap();
        if seq % 90 == 0 {
            index.flush().unwrap();
        }
        keep(&sim);
    }
    index.flush().unwrap();
    keep(&sim);
    index.close().unwrap();
    (manifests, runs)
}

/// Up to `n` of `files` (those under the size cap), spread evenly by size.
fn spread(files: &[Vec<u8>], n: usize) -> Vec<Vec<u8>> {
    let mut small: Vec<&Vec<u8>> = files.iter().filter(|f| f.len() < MAX_SEED_BYTES).collect();
    small.sort_by_key(|f| f.len());
    if small.len() <= n {
        return small.into_iter().cloned().collect();
    }
    let mut picked: Vec<Vec<u8>> = (0..n).map(|i| small[i * (small.len() - 1) / (n - 1)].clone()).collect();
    picked.dedup();
    picked
}

/// The data blocks at the start of a run file: from offset 0, each is the
/// shortest prefix the block decoder accepts.
fn cut_blocks(run: &[u8], max: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    'blocks: while out.len() < max {
        for end in at + 8..=run.len() {
            if fuzzing::data_block(&run[at..end]) {
                out.push(run[at..end].to_vec());
                at = end;
                continue 'blocks;
            }
        }
        break;
    }
    out
}

/// Removes the generated seeds (`valid-*`, `near-*`) of `dir`.
fn clear_generated(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("valid-") || name.starts_with("near-") {
            std::fs::remove_file(&path).unwrap();
        }
    }
}

fn write_seeds(target: &str, decode: fn(&[u8]) -> bool, valid: &[Vec<u8>], near: &[(&str, Vec<u8>)]) {
    let dir = corpus_dir(target);
    clear_generated(&dir);
    for (i, v) in valid.iter().enumerate() {
        assert!(v.len() < MAX_SEED_BYTES, "{target} seed {i} is {} bytes", v.len());
        assert!(decode(v), "{target}: valid seed {i} ({} bytes) was rejected", v.len());
        std::fs::write(dir.join(format!("valid-{i:02}")), v).unwrap();
    }
    for (name, v) in near {
        assert!(!decode(v), "{target}: near-valid seed {name} was accepted");
        std::fs::write(dir.join(format!("near-{name}")), v).unwrap();
    }
    println!("{target}: {} valid, {} near-valid seeds in {}", valid.len(), near.len(), dir.display());
}

/// Manifest header: magic (8), version (4), body length (4); body: compat (8),
/// incompat (8), generation (8), durable seq (8), ...
fn near_manifests(valid: &[Vec<u8>]) -> Vec<(&'static str, Vec<u8>)> {
    let with_runs = valid.iter().max_by_key(|m| m.len()).unwrap();
    let mut near = Vec::new();
    near.push(("truncated", with_runs[..with_runs.len() - 1].to_vec()));
    let mut flip = with_runs.clone();
    flip[with_runs.len() / 2] ^= 0x10;
    near.push(("bitflip", flip));
    let mut newer = with_runs.clone();
    newer[8..12].copy_from_slice(&2u32.to_le_bytes());
    near.push(("newer-version", newer));
    // A durable seq of 0 with runs that hold batches: the checksum is right,
    // the run consistency check must refuse it.
    let mut seq0 = with_runs.clone();
    seq0[40..48].copy_from_slice(&0u64.to_le_bytes());
    let len = seq0.len();
    fix_crc(&mut seq0, 0, len);
    near.push(("durable-seq-0-crc-fixed", seq0));
    // An unknown incompatible feature bit, checksum fixed.
    let mut feat = with_runs.clone();
    feat[24] |= 1;
    fix_crc(&mut feat, 0, len);
    near.push(("incompat-feature-crc-fixed", feat));
    // Counts and levels past any plausible value, checksums fixed: each
    // must be refused before it sizes an allocation or a loop.
    let first_run = manifest_first_run(with_runs);
    let mut count = with_runs.clone();
    count[first_run - 4..first_run].copy_from_slice(&u32::MAX.to_le_bytes());
    fix_crc(&mut count, 0, len);
    near.push(("run-count-huge-crc-fixed", count));
    // The last run, so the level order (never decreasing) still holds.
    let last_run = manifest_last_run(with_runs, first_run);
    let mut level = with_runs.clone();
    level[last_run + 8..last_run + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    fix_crc(&mut level, 0, len);
    near.push(("run-level-huge-crc-fixed", level));
    let mut ops = with_runs.clone();
    ops[56..58].copy_from_slice(&u16::MAX.to_le_bytes());
    fix_crc(&mut ops, 0, len);
    near.push(("operator-count-huge-crc-fixed", ops));
    near
}

/// Offset of the first run entry of a manifest with runs: after the
/// header (16), the fixed body fields (40), the operator count (2), the
/// operator names (one-byte length each) and the run count (4).
fn manifest_first_run(m: &[u8]) -> usize {
    let ops = u16::from_le_bytes([m[56], m[57]]);
    let mut at = 58;
    for _ in 0..ops {
        assert!(m[at] < 0x80, "operator names here are short");
        at += 1 + m[at] as usize;
    }
    assert!(u32_at(m, at) > 0, "the manifest has runs");
    at + 4
}

/// Offset of the last run entry: each is 48 bytes of fixed fields and two
/// keys (one-byte length each).
fn manifest_last_run(m: &[u8], first: usize) -> usize {
    let mut at = first;
    for _ in 1..u32_at(m, first - 4) {
        at += 48;
        for _ in 0..2 {
            assert!(m[at] < 0x80, "keys here are short");
            at += 1 + m[at] as usize;
        }
    }
    at
}

/// Block layout: entries, `count` u32 offsets, `count` u32, crc32c.
fn near_blocks(valid: &[Vec<u8>]) -> Vec<(&'static str, Vec<u8>)> {
    let b = valid.iter().max_by_key(|b| b.len()).unwrap();
    let len = b.len();
    let mut near = Vec::new();
    near.push(("truncated", b[..len - 1].to_vec()));
    let mut flip = b.clone();
    flip[len / 3] ^= 0x01;
    near.push(("bitflip", flip));
    let mut count = b.clone();
    let c = u32_at(b, len - 8) + 1;
    count[len - 8..len - 4].copy_from_slice(&c.to_le_bytes());
    fix_crc(&mut count, 0, len);
    near.push(("count-plus-one-crc-fixed", count));
    // Swap the first two offsets: entries out of order, checksum fixed.
    let table = len - 8 - 4 * u32_at(b, len - 8) as usize;
    let mut swapped = b.clone();
    let (o0, o1) = (u32_at(b, table), u32_at(b, table + 4));
    swapped[table..table + 4].copy_from_slice(&o1.to_le_bytes());
    swapped[table + 4..table + 8].copy_from_slice(&o0.to_le_bytes());
    fix_crc(&mut swapped, 0, len);
    near.push(("offsets-swapped-crc-fixed", swapped));
    near
}

/// Run file footer (last 44 bytes): meta offset (8), meta length (4),
/// version (4), compat (8), incompat (8), crc of those 32 (4), magic (8).
fn near_runs(valid: &[Vec<u8>]) -> Vec<(&'static str, Vec<u8>)> {
    let r =
        valid.iter().find(|r| r.windows(CounterOperator::NAME.len()).any(|w| w == CounterOperator::NAME.as_bytes()));
    let r = r.unwrap_or(&valid[0]);
    let len = r.len();
    let footer = len - 44;
    let mut near = Vec::new();
    near.push(("truncated", r[..len - 1].to_vec()));
    near.push(("first-byte-dropped", r[1..].to_vec()));
    let mut newer = r.clone();
    newer[footer + 12..footer + 16].copy_from_slice(&2u32.to_le_bytes());
    fix_crc(&mut newer, footer, footer + 36);
    near.push(("newer-version-crc-fixed", newer));
    let mut magic = r.clone();
    magic[len - 1] = b'X';
    near.push(("bad-magic", magic));
    // Rename the merge operator the meta block lists; meta checksum fixed.
    let meta_at = u64_at(r, footer) as usize;
    let meta_end = meta_at + u32_at(r, footer + 8) as usize;
    if let Some(p) =
        r[meta_at..meta_end].windows(CounterOperator::NAME.len()).position(|w| w == CounterOperator::NAME.as_bytes())
    {
        let mut op = r.clone();
        op[meta_at + p] = b'L';
        fix_crc(&mut op, meta_at, meta_end);
        near.push(("unknown-operator-crc-fixed", op));
    }
    // The meta block lists the filter, block index and tombstone sections
    // (offset u64, length u32 each) after four u64s; each of the last two
    // starts with a u32 count. Huge counts, checksums fixed.
    for (name, handle) in [("block-count-huge-crc-fixed", 1), ("tombstone-count-huge-crc-fixed", 2)] {
        let at = meta_at + 32 + handle * 12;
        let (offset, len) = (u64_at(r, at) as usize, u32_at(r, at + 8) as usize);
        let mut huge = r.clone();
        huge[offset..offset + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        fix_crc(&mut huge, offset, offset + len);
        near.push((name, huge));
    }
    near
}

#[test]
#[ignore = "rewrites the committed fuzz seed corpus; run with --ignored"]
fn generate_fuzz_corpus() {
    let (manifests, runs) = collect_files();
    for m in &manifests {
        assert!(fuzzing::manifest(m), "a manifest the index wrote was rejected");
    }
    for r in &runs {
        assert!(fuzzing::run_file(r), "a run file the index wrote was rejected");
    }
    println!("index wrote {} distinct manifests and {} distinct run files", manifests.len(), runs.len());

    let valid_manifests = spread(&manifests, SEEDS_PER_TARGET);
    let valid_runs = spread(&runs, SEEDS_PER_TARGET);
    let mut blocks: Vec<Vec<u8>> = Vec::new();
    for r in &valid_runs {
        for b in cut_blocks(r, 3) {
            if !blocks.contains(&b) {
                blocks.push(b);
            }
        }
    }
    let valid_blocks = spread(&blocks, SEEDS_PER_TARGET);
    assert!(valid_manifests.len() >= 5 && valid_runs.len() >= 5 && valid_blocks.len() >= 5);

    write_seeds("manifest", fuzzing::manifest, &valid_manifests, &near_manifests(&valid_manifests));
    write_seeds("data_block", fuzzing::data_block, &valid_blocks, &near_blocks(&valid_blocks));
    write_seeds("run_file", fuzzing::run_file, &valid_runs, &near_runs(&valid_runs));
    // The checksum-fixing targets start from the same seeds, less the near
    // ones that recomputing the checksum makes valid.
    let near = near_manifests(&valid_manifests);
    let near: Vec<_> = near.into_iter().filter(|(_, v)| !fuzzing::manifest_crc_fixed(v)).collect();
    write_seeds("manifest_crc_fixed", fuzzing::manifest_crc_fixed, &valid_manifests, &near);
    let near = near_blocks(&valid_blocks);
    let near: Vec<_> = near.into_iter().filter(|(_, v)| !fuzzing::data_block_crc_fixed(v)).collect();
    write_seeds("data_block_crc_fixed", fuzzing::data_block_crc_fixed, &valid_blocks, &near);
}
