//! `larder-bench ycsb`: the YCSB core workloads A-F (Cooper et al., SoCC
//! 2010; YCSB 0.17's CoreWorkload) against Larder through its KV API and
//! through its index directly, RocksDB, fjall and LMDB.
//!
//! Records are `user<FNV hash of the record number>` keys with one value
//! of `--value-bytes` (default 1 KiB: YCSB's 10 fields of 100 B stored as
//! one value, so an update writes the whole record). Reads, updates and
//! scan starts follow YCSB's scrambled zipfian (theta 0.99, FNV-scattered);
//! D reads the latest inserts; E scans 1-100 records (uniform). Each round,
//! every engine runs two children (its own processes, fresh directories):
//! load + A, B, C, F, D in that order on one load, then a fresh load + E
//! (YCSB's recommended sequence: D's inserts would change E's data). All
//! writes are buffered, not synced per operation (YCSB's default is not
//! durable per op); each engine's setting is in the report. Rounds rotate
//! the engine order; the report gives medians of the rounds.

mod generators;
mod report;
mod stores;
pub mod workload;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::raw_results::RawResults;

use workload::ChildResult;

/// Command line of `larder-bench ycsb`.
#[derive(Args, Debug, Clone)]
pub struct YcsbArgs {
    /// Records loaded (YCSB's recordcount).
    #[arg(long, default_value_t = 1_000_000)]
    pub records: u64,
    /// Operations per workload (YCSB's operationcount).
    #[arg(long, default_value_t = 200_000)]
    pub operations: u64,
    /// Operations of workload E (its scans read up to 100 records each).
    #[arg(long, default_value_t = 20_000)]
    pub scan_operations: u64,
    /// Bytes of each record's value (YCSB: 10 fields of 100 B).
    #[arg(long, default_value_t = 1024)]
    pub value_bytes: usize,
    /// Longest scan of workload E (YCSB's maxscanlength).
    #[arg(long, default_value_t = 100)]
    pub max_scan_length: u64,
    /// Workloads, in the order run: letters of a,b,c,f,d (one load) and e (its own load).
    #[arg(long, default_value = "a,b,c,f,d,e")]
    pub workloads: String,
    /// Engines, comma-separated: larder-kv,larder-index,rocksdb,fjall,lmdb.
    #[arg(long, default_value = "larder-kv,larder-index,rocksdb,fjall,lmdb")]
    pub engines: String,
    /// Rounds; the report gives the median. Engine order rotates each round.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Memtable size for every engine that has one, MiB.
    #[arg(long, default_value_t = 64)]
    pub memtable_mb: u64,
    /// Cache budget for every engine that has one, MiB (LMDB has none: the OS page cache).
    #[arg(long, default_value_t = 64)]
    pub cache_mb: u64,
    /// Larder's metadata cache, MiB (the KV API's store: keys' paths with
    /// their values up to the inline limit; the index: its own), besides
    /// `--cache-mb`; default: their default (64 MiB). To give Larder the
    /// memory another engine uses (LMDB's resident map), say so here.
    #[arg(long)]
    pub meta_cache_mb: Option<u64>,
    /// Background threads per engine (Larder's index: 1 flusher + the rest merging).
    #[arg(long, default_value_t = 2)]
    pub background_threads: usize,
    /// Bloom filter bits per key of RocksDB and fjall (Larder: its default).
    #[arg(long, default_value_t = 10)]
    pub bloom_bits: u32,
    /// Seed of the values and of the requests.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Parent directory of the per-run directories (each deleted after its run).
    #[arg(long, default_value = "/var/tmp/larder-bench-ycsb")]
    pub dir: PathBuf,
    /// A child still running after this many seconds is killed and its run counts as failed.
    #[arg(long, default_value_t = 1800)]
    pub child_timeout_secs: u64,
    /// Also write every child's JSON result to this file, one line each.
    #[arg(long)]
    pub raw: Option<PathBuf>,
    /// Also write the report, the results and their chart into this
    /// directory: ycsb.md, ycsb.json, ycsb.svg.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// What the parent asks one child to do (passed as JSON).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct YcsbSpec {
    pub engine: String,
    pub dir: PathBuf,
    pub records: u64,
    pub operations: u64,
    pub scan_operations: u64,
    pub value_bytes: usize,
    pub max_scan_length: u64,
    /// Workload letters, run in this order after one load.
    pub workloads: String,
    pub memtable_bytes: u64,
    pub cache_bytes: u64,
    /// Larder's metadata cache (`None`: its default).
    #[serde(default)]
    pub meta_cache_bytes: Option<u64>,
    pub max_immutable_memtables: usize,
    pub background_threads: usize,
    pub bloom_bits_per_key: u32,
    pub seed: u64,
}

/// Memtables each LSM engine may hold frozen besides the active one.
const MAX_IMMUTABLE_MEMTABLES: usize = 2;

/// The settings of one run, checked.
pub struct Plan {
    pub args: YcsbArgs,
    pub engines: Vec<String>,
    pub skipped: Vec<(String, String)>,
    /// The children's workload letters: the first load's, then E's.
    pub groups: Vec<String>,
}

/// Every (engine, group) child's results over the rounds.
pub type Results = BTreeMap<(String, String), Vec<Result<ChildResult, String>>>;

fn plan(args: &YcsbArgs) -> Result<Plan> {
    if args.runs == 0 || args.records < 2 || args.operations == 0 || args.scan_operations == 0 || args.value_bytes == 0
    {
        bail!("--runs, --operations and --value-bytes must be positive and --records at least 2");
    }
    let mut engines = Vec::new();
    let mut skipped = Vec::new();
    for e in args.engines.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        if !stores::ALL.contains(&e) {
            bail!("unknown engine {e:?}; known: {}", stores::ALL.join(","));
        }
        match stores::missing_feature(e) {
            Some(feature) => skipped.push((e.to_string(), format!("not built in: rebuild with --features {feature}"))),
            None if !engines.iter().any(|x| x == e) => engines.push(e.to_string()),
            None => {}
        }
    }
    let (mut first, mut e) = (String::new(), String::new());
    for w in args.workloads.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let letter = match w.to_ascii_lowercase().as_str() {
            l @ ("a" | "b" | "c" | "d" | "f" | "e") => l.chars().next().unwrap_or('a'),
            _ => bail!("unknown workload {w:?}; known: a,b,c,d,e,f"),
        };
        let group = if letter == 'e' { &mut e } else { &mut first };
        if !group.contains(letter) {
            group.push(letter);
        }
    }
    let groups: Vec<String> = [first, e].into_iter().filter(|g| !g.is_empty()).collect();
    if groups.is_empty() {
        bail!("no workload to run");
    }
    Ok(Plan { args: args.clone(), engines, skipped, groups })
}

/// The suite: every round, each engine's children in turn.
pub fn run(args: &YcsbArgs) -> Result<()> {
    let plan = plan(args)?;
    if crate::sys::filesystem_of(&args.dir) == "tmpfs" {
        bail!("{} is on tmpfs: pick a directory on a disk (--dir)", args.dir.display());
    }
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let mut raw = RawResults::create(args.raw.as_deref())?;
    let info = crate::report::RunInfo::collect(&args.dir);
    let mut results: Results = BTreeMap::new();
    for round in 0..args.runs {
        let mut order = plan.engines.clone();
        if !order.is_empty() {
            let by = round % order.len();
            order.rotate_left(by);
        }
        eprintln!("round {}/{}: {}", round + 1, args.runs, order.join(", "));
        for group in &plan.groups {
            for engine in &order {
                let r = run_one(&plan, round, engine, group);
                if let Ok(r) = &r {
                    raw.append(r);
                }
                results.entry((engine.clone(), group.clone())).or_default().push(r);
            }
        }
    }
    let _ = std::fs::remove_dir(&args.dir);
    let text = report::render(&plan, &info, &results);
    print!("{text}");
    if let Some(out) = &args.out {
        let chart = report::chart_results(&plan, &info, &results);
        for path in crate::chart::write_outputs(out, &text, &chart)? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// One child in a fresh directory, deleted afterwards.
fn run_one(plan: &Plan, round: usize, engine: &str, group: &str) -> Result<ChildResult, String> {
    let args = &plan.args;
    let dir = args.dir.join(format!("run{}-{group}-{engine}", round + 1));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = YcsbSpec {
        engine: engine.to_string(),
        dir: dir.clone(),
        records: args.records,
        operations: args.operations,
        scan_operations: args.scan_operations,
        value_bytes: args.value_bytes,
        max_scan_length: args.max_scan_length,
        workloads: group.to_string(),
        memtable_bytes: args.memtable_mb << 20,
        cache_bytes: args.cache_mb << 20,
        meta_cache_bytes: args.meta_cache_mb.map(|m| m << 20),
        max_immutable_memtables: MAX_IMMUTABLE_MEMTABLES,
        background_threads: args.background_threads.max(1),
        bloom_bits_per_key: args.bloom_bits,
        seed: args.seed.wrapping_add(round as u64),
    };
    // Start every run with no dirty pages left by the previous one.
    let _ = Command::new("sync").status();
    eprintln!("  {engine} {group}");
    let result: Result<ChildResult, String> =
        crate::spawn_child("ycsb-child", &spec, Some(Duration::from_secs(args.child_timeout_secs)));
    let _ = std::fs::remove_dir_all(&dir);
    match &result {
        Ok(r) => {
            let line: Vec<String> =
                r.phases.iter().map(|p| format!("{} {:.0} ops/s", p.name, p.ops_per_sec())).collect();
            eprintln!("  {engine} {group}: {}", line.join(", "));
        }
        Err(e) => eprintln!("  {engine} {group}: FAILED: {e}"),
    }
    result
}
