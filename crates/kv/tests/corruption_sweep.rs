//! A corruption sweep on a real store (the real file system, in a temporary
//! directory): values inline and in containers, several index runs, and
//! durable log records not yet checkpointed. One byte at a time, at sampled
//! offsets of every file (both superblock copies, manifest, `CURRENT`,
//! runs, log segments, containers), is flipped in a copy of the store;
//! then open, a get of every key, a scan of every bucket and fsck run on
//! it. Each must either recover (the byte was unused, or a redundant copy
//! took over) and return exactly the bytes written, or fail with an error
//! naming the damaged file. A panic, a wrong byte, a key vanishing without
//! an error, or an error that does not name the file fails the test.
//!
//! `LARDER_SWEEP_SAMPLES` sets the offsets tried per file kind (default
//! 12, a few seconds); the table of outcomes in docs/design.md is from a
//! run with 400. `LARDER_SWEEP_VERBOSE=1` prints every trial;
//! `LARDER_SWEEP_FIXTURES=N` builds and sweeps N fixtures (their
//! timestamps, uuid and log nonces differ, and with them sizes and run
//! layouts); `LARDER_SWEEP_KINDS=run` sweeps only the kinds whose names
//! contain the text.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use larder_fsck::Problem;
use larder_kv::{Kv, KvError};
use larder_object::Durability;

/// Offsets tried per file kind unless `LARDER_SWEEP_SAMPLES` says.
const DEFAULT_SAMPLES: usize = 12;
const BUCKETS: [&str; 2] = ["docs", "blobs"];
/// Written last: the one record no later log header proves acknowledged.
const SENTINEL: (&str, &str) = ("docs", "tail/last");

/// Every (bucket, key) and its value.
type Expected = BTreeMap<(String, Vec<u8>), Vec<u8>>;

/// Bytes unique to `seed` and the position.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Builds the store in `dir`: three rounds of puts each made into an index
/// run by a checkpoint, then a round left in the log, then the sentinel;
/// dropped without a close, as a crash after the last sync.
fn build(dir: &Path) -> Expected {
    let kv = Kv::create(dir, common::options()).unwrap();
    let mut expected = Expected::new();
    for b in BUCKETS {
        kv.create_bucket(b).unwrap();
    }
    let put = |expected: &mut Expected, kv: &Kv, bucket: &str, key: String, seed: u64, len: usize| {
        let value = pattern(seed, len);
        kv.put(bucket, &key, &value, Durability::Durable).unwrap();
        expected.insert((bucket.to_string(), key.into_bytes()), value);
    };
    for round in 0..4u64 {
        for i in 0..8u64 {
            let seed = round * 100 + i;
            // Inline (at most 2 KiB in these options) and in containers.
            let len = [60, 700, 1900, 3000, 9000, 20_000][(seed % 6) as usize];
            let bucket = BUCKETS[(i % 2) as usize];
            put(&mut expected, &kv, bucket, format!("r{round}/k{i}"), seed, len);
        }
        // Rewrite a key of the first round: the runs hold old versions.
        put(&mut expected, &kv, "docs", "r0/k0".into(), 1000 + round, 500 + round as usize * 3000);
        if round < 3 {
            kv.store().checkpoint().unwrap();
        }
    }
    kv.delete("blobs", "r1/k1", Durability::Durable).unwrap();
    expected.remove(&("blobs".to_string(), b"r1/k1".to_vec()));
    put(&mut expected, &kv, SENTINEL.0, SENTINEL.1.into(), 4242, 100);
    let store = kv.store();
    assert!(store.index().durable_seq() < store.durable_lsn(), "log records left to replay");
    drop(kv);
    expected
}

/// Every file under `root` (relative path, bytes), and every directory.
fn read_tree(root: &Path) -> (BTreeMap<PathBuf, Vec<u8>>, Vec<PathBuf>) {
    let mut files = BTreeMap::new();
    let mut dirs = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            if p.is_dir() {
                dirs.push(rel);
                stack.push(p);
            } else {
                files.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    dirs.sort();
    (files, dirs)
}

/// Makes `work` hold exactly the pristine files, writing only those that
/// differ (a trial's open rewrites a few).
fn restore(work: &Path, pristine: &BTreeMap<PathBuf, Vec<u8>>, dirs: &[PathBuf]) {
    for d in dirs {
        std::fs::create_dir_all(work.join(d)).unwrap();
    }
    let (now, _) = read_tree(work);
    for (rel, bytes) in &now {
        if pristine.get(rel) != Some(bytes) {
            std::fs::remove_file(work.join(rel)).unwrap();
        }
    }
    for (rel, bytes) in pristine {
        if now.get(rel) != Some(bytes) {
            std::fs::write(work.join(rel), bytes).unwrap();
        }
    }
}

/// The kind of a store file, as the table names it.
fn kind_of(rel: &Path, offset: u64) -> String {
    let name = rel.file_name().unwrap().to_string_lossy().into_owned();
    if name == "SUPERBLOCK" {
        return if offset < 4096 { "SUPERBLOCK copy A" } else { "SUPERBLOCK copy B" }.into();
    }
    if name.starts_with("MANIFEST-") {
        return "MANIFEST".into();
    }
    match rel.extension().and_then(|e| e.to_str()) {
        Some("run") => "index run".into(),
        Some("seg") => "log segment".into(),
        _ if rel.starts_with("data") => "container".into(),
        _ => name,
    }
}

/// What one flipped byte led to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Outcome {
    /// Everything read back right and fsck is clean: the byte was unused.
    Unused,
    /// Everything read back right; fsck names the damaged superblock copy
    /// (the store ran on the other).
    CopyUsed,
    /// Open failed naming the file.
    OpenRefused,
    /// Open worked; a get or the scan failed naming the file (the rest
    /// read right), and fsck reported it.
    ReadRefused,
    /// Everything read back right; fsck named the file.
    FsckReported,
    /// The newest record, which no later log header proves acknowledged,
    /// was dropped as a torn tail: indistinguishable from a write the
    /// crash cut (docs/design.md).
    TailDropped,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Unused => "unused byte",
            Outcome::CopyUsed => "other copy used, fsck names it",
            Outcome::OpenRefused => "open refused, naming the file",
            Outcome::ReadRefused => "get/scan refused, naming the file",
            Outcome::FsckReported => "fsck names the file",
            Outcome::TailDropped => "unproven log tail dropped",
        })
    }
}

/// Opens `dir`, reads everything and checks it; returns the outcome or
/// why the trial broke a promise.
fn trial(dir: &Path, file: &Path, expected: &Expected) -> Result<(Outcome, String), String> {
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let names = |text: &str| text.contains(&name);
    let kv = match Kv::open(dir, common::options()) {
        Ok(kv) => kv,
        Err(e) if names(&e.to_string()) => return Ok((Outcome::OpenRefused, e.to_string())),
        Err(e) => return Err(format!("open failed without naming {name}: {e}")),
    };
    let mut read_error: Option<String> = None;
    let note = |read_error: &mut Option<String>, e: KvError| -> Result<(), String> {
        let text = e.to_string();
        if !names(&text) {
            return Err(format!("a read failed without naming {name}: {text}"));
        }
        read_error.get_or_insert(text);
        Ok(())
    };
    let mut sentinel_lost = false;
    for ((bucket, key), value) in expected {
        match kv.get(bucket, key) {
            Ok(Some(got)) if got == *value => {}
            Ok(Some(got)) => {
                return Err(format!("{bucket}/{}: read {} other bytes", String::from_utf8_lossy(key), got.len()))
            }
            Ok(None) if (bucket.as_str(), key.as_slice()) == (SENTINEL.0, SENTINEL.1.as_bytes()) => {
                sentinel_lost = true
            }
            Ok(None) => return Err(format!("{bucket}/{} vanished without an error", String::from_utf8_lossy(key))),
            // A get of an open store fails only on damaged stored bytes
            // here, and says so (a replica holder replaces the value).
            Err(e) if !e.is_corrupt() => {
                return Err(format!("a get failed without reporting corruption: {e}"));
            }
            Err(e) => note(&mut read_error, e)?,
        }
    }
    for bucket in BUCKETS {
        let want: Vec<(Vec<u8>, u64)> = expected
            .iter()
            .filter(|((b, k), _)| {
                b == bucket && !(sentinel_lost && (b.as_str(), k.as_slice()) == (SENTINEL.0, SENTINEL.1.as_bytes()))
            })
            .map(|((_, k), v)| (k.clone(), v.len() as u64))
            .collect();
        let scan = match kv.scan_prefix(bucket, b"") {
            Ok(scan) => scan,
            Err(e) => {
                note(&mut read_error, e)?;
                continue;
            }
        };
        let mut got = Vec::new();
        for entry in scan {
            match entry {
                Ok(e) => got.push((e.key, e.size)),
                Err(e) => {
                    note(&mut read_error, e)?;
                    break;
                }
            }
        }
        if read_error.is_none() && got != want {
            return Err(format!("scan of {bucket} returned other keys or sizes: {got:?}"));
        }
    }
    let report = match larder_fsck::check(kv.store(), &mut |_| {}) {
        Ok(r) => r,
        Err(e) if names(&e.to_string()) => return Ok((Outcome::FsckReported, e.to_string())),
        Err(e) => return Err(format!("fsck stopped without naming {name}: {e}")),
    };
    if let Some(e) = read_error {
        if report.is_clean() {
            return Err(format!("reads fail ({e}) but fsck finds nothing"));
        }
        return Ok((Outcome::ReadRefused, e));
    }
    if sentinel_lost {
        if file.extension().is_none_or(|e| e != "seg") {
            return Err(format!("the newest record vanished after damage to {name}"));
        }
        return Ok((Outcome::TailDropped, String::new()));
    }
    if report.is_clean() {
        return Ok((Outcome::Unused, String::new()));
    }
    if !names(&report.to_string()) {
        return Err(format!("fsck reports problems not naming {name}: {report}"));
    }
    if report.problems.iter().all(|p| matches!(p, Problem::SuperblockCopy { .. })) {
        return Ok((Outcome::CopyUsed, report.to_string()));
    }
    Ok((Outcome::FsckReported, report.to_string()))
}

/// A small deterministic generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// `count` distinct offsets of `bytes` in `range`: half at bytes holding
/// something (not zero), half anywhere, so containers and segments, mostly
/// zeros, are hit where their data is as well as where it is not.
fn offsets(bytes: &[u8], range: std::ops::Range<usize>, count: usize, rng: &mut Rng) -> BTreeSet<u64> {
    let nonzero: Vec<usize> = range.clone().filter(|&i| bytes[i] != 0).collect();
    let mut out = BTreeSet::new();
    for n in 0..count * 4 {
        if out.len() >= count.min(range.len()) {
            break;
        }
        let at = if n % 2 == 0 && !nonzero.is_empty() {
            nonzero[rng.below(nonzero.len())]
        } else {
            range.start + rng.below(range.len())
        };
        out.insert(at as u64);
    }
    out
}

#[test]
fn one_flipped_byte_in_any_file_is_recovered_or_reported_by_name() {
    let samples: usize =
        std::env::var("LARDER_SWEEP_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(DEFAULT_SAMPLES);
    // Set to print every trial's outcome and the error or report seen.
    let verbose = std::env::var_os("LARDER_SWEEP_VERBOSE").is_some();
    // Fixtures built one after another (their timestamps, uuid and log
    // nonces differ, and with them sizes and run layouts).
    let fixtures: usize = std::env::var("LARDER_SWEEP_FIXTURES").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    // Only the file kinds whose names contain this.
    let only = std::env::var("LARDER_SWEEP_KINDS").unwrap_or_default();
    let mut tally: BTreeMap<(String, Outcome), u64> = BTreeMap::new();
    let mut broken = Vec::new();
    for fixture in 0..fixtures {
        let tmp = tempfile::tempdir().unwrap();
        let (pristine_dir, work) = (tmp.path().join("pristine"), tmp.path().join("work"));
        let expected = build(&pristine_dir);
        let (pristine, dirs) = read_tree(&pristine_dir);
        // The fixture is what the sweep needs: every kind, several runs, log
        // records to replay.
        let mut per_kind: BTreeMap<String, Vec<(&PathBuf, std::ops::Range<usize>)>> = BTreeMap::new();
        for (rel, bytes) in &pristine {
            if bytes.is_empty() {
                continue;
            }
            if kind_of(rel, 0).starts_with("SUPERBLOCK") {
                per_kind.entry(kind_of(rel, 0)).or_default().push((rel, 0..4096));
                per_kind.entry(kind_of(rel, 4096)).or_default().push((rel, 4096..bytes.len()));
            } else {
                per_kind.entry(kind_of(rel, 0)).or_default().push((rel, 0..bytes.len()));
            }
        }
        let kinds: Vec<&String> = per_kind.keys().collect();
        for k in
            ["SUPERBLOCK copy A", "SUPERBLOCK copy B", "MANIFEST", "CURRENT", "index run", "log segment", "container"]
        {
            assert!(per_kind.contains_key(k), "no {k} in the fixture: {kinds:?}");
        }
        assert!(per_kind["index run"].len() >= 2, "{:?}", per_kind["index run"]);

        let mut rng = Rng(0x5eed_1234_abcd_ef01 ^ fixture as u64);
        for (kind, files) in per_kind.iter().filter(|(k, _)| k.contains(&only)) {
            let each = samples.div_ceil(files.len());
            for (rel, range) in files {
                let bytes = &pristine[*rel];
                for offset in offsets(bytes, range.clone(), each, &mut rng) {
                    restore(&work, &pristine, &dirs);
                    let mask = 1u8 << rng.below(8);
                    let path = work.join(rel);
                    let mut damaged = bytes.clone();
                    damaged[offset as usize] ^= mask;
                    std::fs::write(&path, &damaged).unwrap();
                    let at = format!("fixture {fixture}: {} offset {offset} (mask {mask:#04x})", rel.display());
                    match catch_unwind(AssertUnwindSafe(|| trial(&work, rel, &expected))) {
                        Ok(Ok((outcome, detail))) => {
                            if verbose {
                                println!("{at}: {outcome}: {detail}");
                            }
                            *tally.entry((kind.clone(), outcome)).or_default() += 1
                        }
                        Ok(Err(why)) => broken.push(format!("{at}: {why}")),
                        Err(panic) => {
                            let what = panic
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_default();
                            broken.push(format!("{at}: panicked: {what}"));
                        }
                    }
                }
            }
        }
    }
    print_table(&tally);
    assert!(broken.is_empty(), "{} trials broke a promise:\n{}", broken.len(), broken.join("\n"));
    // One flipped byte in a superblock copy never stops the store.
    for (kind, outcome) in tally.keys() {
        if kind.starts_with("SUPERBLOCK") {
            assert_eq!(*outcome, Outcome::CopyUsed, "{kind}: {tally:?}");
        }
    }
}

/// The table for docs/design.md: file kind × outcome counts.
fn print_table(tally: &BTreeMap<(String, Outcome), u64>) {
    let outcomes: BTreeSet<Outcome> = tally.keys().map(|(_, o)| *o).collect();
    let kinds: BTreeSet<&String> = tally.keys().map(|(k, _)| k).collect();
    let mut header = "| File kind |".to_string();
    for o in &outcomes {
        header.push_str(&format!(" {o} |"));
    }
    println!("{header}");
    println!("|---|{}", "---|".repeat(outcomes.len()));
    for k in kinds {
        let mut row = format!("| {k} |");
        for o in &outcomes {
            row.push_str(&format!(" {} |", tally.get(&(k.clone(), *o)).copied().unwrap_or(0)));
        }
        println!("{row}");
    }
}
