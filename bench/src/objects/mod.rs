//! `larder-bench objects`: Larder's object store (`larder-kv`) against the
//! ways an application stores objects today, every peer in the same run.
//!
//! Peers: **ext4** (a file per object through `std::fs`: create + write +
//! `fdatasync`, plus an `fsync` of the directory on create), **RocksDB** (WAL
//! on, `sync = true`), **fjall** (insert, then `persist(SyncData)`), **LMDB**
//! (one write transaction per put, default sync flags), and the **ceiling**:
//! overwriting an already written file at sequential offsets, op by op, with
//! an `fdatasync` per op — what the disk gives when nothing but the data and
//! the cache flush is written.
//!
//! Workloads (each engine runs each one in its own child process, in a fresh
//! directory; peak memory is that child's VmHWM):
//!
//! - **a. `put1`** — durable 4 KiB puts from one writer (puts/s). The cost of
//!   one durable object write: what a metadata-heavy application pays per
//!   object; the ceiling is one 4 KiB overwrite + `fdatasync`.
//! - **b. `put8`** — the same from 8 writer threads (total puts/s). Shows
//!   group commit: an engine that batches concurrent syncs can exceed the
//!   single-writer rate; the ceiling is 8 threads overwriting + syncing.
//! - **c. `big`** — durable 1 MiB puts (MB/s). Bandwidth for large objects,
//!   where journaling or LSM compaction writes every byte more than once; the
//!   ceiling is a 1 MiB overwrite + `fdatasync`.
//! - **d. `delete`** — durable 4 KiB puts (one writer) while another thread
//!   deletes one large object (1 GiB by default) written before the
//!   measurement. Freeing space must not stall foreground writes: the bar is
//!   the same engine's rate without the delete, measured just before in the
//!   same process. Larder (streaming writer) and ext4 (a file, `unlink`) only.
//! - **e. `gets`** — 4 KiB gets of objects written just before (so from the
//!   engine's cache or the page cache), random order, after one warm-up pass
//!   (gets/s). The per-object read path's CPU cost against ext4's
//!   open/read/close (openat relative to the store's open directory, so
//!   only the key's own levels are walked, as in Larder); the ceiling is a
//!   4 KiB `pread` of a cached file.
//! - **f. `space`** — 1 KiB objects (1M; 100K with `--quick`), clean close,
//!   then the allocated size of the whole directory (sum of `st_blocks * 512`)
//!   per byte of object data. Small-object overhead: ext4 spends a 4 KiB
//!   block and an inode per object.
//!
//! Objects are named `obj/0000123` (a counter, written in increasing order),
//! all under one directory level unless `--per-dir N` spreads them over
//! levels of N (`obj/0000/0000123`) — for the engines whose cost grows with
//! a directory's size. Bulk loads (e, f) use each engine's non-durable path
//! (batches where the engine has them); only the measurements above are
//! timed. Rounds alternate the engine order; the report gives medians with
//! min–max. A child running longer than `--child-timeout-secs` is killed and
//! reported as failed, so one slow engine cannot stall the suite.

pub mod child;
mod report;
mod stores;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::raw_results::RawResults;

/// The name of the physical ceiling among the engines.
pub const CEILING: &str = "ceiling";
/// Small objects (a, b, d, e).
pub const SMALL_BYTES: usize = 4096;
/// Large objects (c).
pub const LARGE_BYTES: usize = 1 << 20;
/// Objects of the space workload (f).
pub const TINY_BYTES: usize = 1024;

/// Command line of `larder-bench objects`.
#[derive(Args, Debug, Clone)]
pub struct ObjectsArgs {
    /// Rounds; the report gives the median. Engine order rotates each round.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Parent directory of the per-run directories (each deleted after its run). Must be on a real disk.
    #[arg(long, default_value = "/var/tmp/larder-bench-objects")]
    pub dir: PathBuf,
    /// Smaller counts everywhere (a smoke run, not for publishing).
    #[arg(long)]
    pub quick: bool,
    /// Engines, comma-separated: larder,larder-pre,larder-trees,ext4,rocksdb,fjall,lmdb,redb
    /// (larder-pre: containers and log segments created with the store;
    /// durable puts only (a, b, c);
    /// larder-trees: Larder's transactional trees, built with its feature).
    #[arg(long, default_value = "larder,larder-pre,ext4,rocksdb,fjall,lmdb")]
    pub engines: String,
    /// Workloads, comma-separated: put1,put8,big,delete,gets,space.
    #[arg(long, default_value = "put1,put8,big,delete,gets,space")]
    pub workloads: String,
    /// Durable puts of workloads a and d (d: per phase) [default: 2000, quick 300].
    #[arg(long)]
    pub puts: Option<u64>,
    /// Durable puts per writer thread of workload b [default: 1000, quick 100].
    #[arg(long)]
    pub puts_per_writer: Option<u64>,
    /// Writer threads of workload b.
    #[arg(long, default_value_t = 8)]
    pub writers: usize,
    /// Bytes of each small object (durable puts, gets): 4096 by default;
    /// the trees bar of issue 22 uses 100.
    #[arg(long, default_value_t = SMALL_BYTES)]
    pub small_bytes: usize,
    /// 1 MiB objects of workload c [default: 1000, quick 100].
    #[arg(long)]
    pub big_objects: Option<u64>,
    /// Size of the object deleted in workload d, MiB [default: 1024, quick 256].
    #[arg(long)]
    pub delete_mb: Option<u64>,
    /// Objects written then read in workload e [default: 10000, quick 2000].
    #[arg(long)]
    pub get_objects: Option<u64>,
    /// Timed passes of random gets over them, after one warm-up pass [default: 5, quick 2].
    #[arg(long)]
    pub get_passes: Option<u64>,
    /// 1 KiB objects of workload f [default: 1000000, quick 100000].
    #[arg(long)]
    pub space_objects: Option<u64>,
    /// Memtable size for every engine that has one, MiB.
    #[arg(long, default_value_t = 64)]
    pub memtable_mb: u64,
    /// Cache budget for every engine that has one, MiB.
    #[arg(long, default_value_t = 64)]
    pub cache_mb: u64,
    /// Background threads of RocksDB and fjall.
    #[arg(long, default_value_t = 3)]
    pub background_threads: usize,
    /// Bloom filter bits per key of RocksDB and fjall.
    #[arg(long, default_value_t = 10)]
    pub bloom_bits: u32,
    /// Objects per directory level of the keys: 0 names them `obj/0000123` (one level, as an
    /// application naming objects by id would), N > 0 `obj/0000/0000123` with N per level.
    #[arg(long, default_value_t = 0)]
    pub per_dir: u64,
    /// A child still running after this many seconds is killed and its run counts as failed.
    #[arg(long, default_value_t = 1800)]
    pub child_timeout_secs: u64,
    /// Seed of the values and of the order of the gets.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Also write every child's JSON result to this file, one line each.
    #[arg(long)]
    pub raw: Option<PathBuf>,
    /// Also write the report, the results and their chart into this
    /// directory: objects.md, objects.json, objects.svg.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One measurement of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// a. Durable 4 KiB puts, one writer.
    Put1,
    /// b. Durable 4 KiB puts, several writers.
    Put8,
    /// c. Durable 1 MiB puts.
    Big,
    /// d. Durable 4 KiB puts while a large object is deleted.
    Delete,
    /// e. 4 KiB gets from cache.
    Gets,
    /// f. Allocated bytes per data byte of 1 KiB objects.
    Space,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 6] =
        [Workload::Put1, Workload::Put8, Workload::Big, Workload::Delete, Workload::Gets, Workload::Space];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Put1 => "put1",
            Workload::Put8 => "put8",
            Workload::Big => "big",
            Workload::Delete => "delete",
            Workload::Gets => "gets",
            Workload::Space => "space",
        }
    }

    /// Whether the physical ceiling is measured for this workload.
    pub fn has_ceiling(self) -> bool {
        matches!(self, Workload::Put1 | Workload::Put8 | Workload::Big | Workload::Gets)
    }

    /// Whether `engine` takes part (the delete workload is Larder and ext4
    /// only; larder-pre runs the durable puts only (a, b, c); larder-trees, whose values
    /// are at most 1 MiB and written whole, not the 1 MiB puts).
    pub fn runs_on(self, engine: &str) -> bool {
        match (self, engine) {
            (_, CEILING) => self.has_ceiling(),
            (Workload::Delete, e) => e == "larder" || e == "ext4",
            (Workload::Big, e) => e != "larder-trees",
            (Workload::Put1 | Workload::Put8, _) => true,
            (_, e) => e != "larder-pre",
        }
    }
}

/// What the parent asks one child to do (passed as JSON).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ObjSpec {
    /// An engine of [`stores::ALL`] or [`CEILING`].
    pub store: String,
    /// What to run.
    pub workload: Workload,
    /// A fresh directory for this run only.
    pub dir: PathBuf,
    /// Puts per writer (a, b, c; d per phase) or objects (e, f).
    pub ops: u64,
    /// Writer threads.
    pub threads: usize,
    /// Bytes per object.
    pub value_bytes: usize,
    /// Size of the object deleted in workload d.
    pub big_bytes: u64,
    /// Timed passes of gets (e).
    pub passes: u64,
    /// Memtable budget of the engines that have one.
    pub memtable_bytes: u64,
    /// Cache budget of the engines that have one.
    pub cache_bytes: u64,
    /// Background threads of RocksDB and fjall.
    pub background_threads: usize,
    /// Bloom bits per key of RocksDB and fjall.
    pub bloom_bits: u32,
    /// Seed of the values and of the order of the gets.
    pub seed: u64,
    /// Objects per directory level of the keys (0: all in `obj/`).
    pub per_dir: u64,
}

/// One timed phase of a child.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ObjPhase {
    /// "puts", "gets", "puts-alone", "puts-during-delete", "write-large", "load" or "space".
    pub name: String,
    /// Puts or gets done.
    pub ops: u64,
    /// Wall time of the phase.
    pub secs: f64,
    /// Object bytes written or read.
    pub bytes: u64,
    /// Wrong answers of gets (missing objects or wrong bytes).
    pub errors: u64,
    /// Latency of one operation, microseconds (0 if not timed per op).
    pub p50_us: f64,
    /// 99th percentile latency, microseconds.
    pub p99_us: f64,
    /// Largest latency, microseconds.
    pub max_us: f64,
    /// The child's peak resident memory so far.
    pub vmhwm_kib: u64,
    /// Bytes the child caused to be written to storage during the phase.
    pub io_write_bytes: u64,
    /// Workload-specific figures (delete timing, allocated bytes, ...).
    pub extra: BTreeMap<String, f64>,
}

/// The JSON line a child prints.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ObjResult {
    /// The engine, or [`CEILING`].
    pub store: String,
    /// The workload run.
    pub workload: Option<Workload>,
    /// Version and settings of the engine.
    pub info: String,
    /// The timed phases, in order.
    pub phases: Vec<ObjPhase>,
}

impl ObjResult {
    /// The phase called `name`, if the child ran it.
    pub fn phase(&self, name: &str) -> Option<&ObjPhase> {
        self.phases.iter().find(|p| p.name == name)
    }
}

/// Every child's result (or why it failed), by workload and engine.
pub type Results = BTreeMap<(Workload, String), Vec<Result<ObjResult, String>>>;

/// The settings of one invocation (see [`ObjectsArgs`] for each count).
pub struct Plan {
    /// Rounds.
    pub runs: usize,
    /// Whether the counts are `--quick`'s.
    pub quick: bool,
    /// Engines built in and asked for, in the first round's order.
    pub engines: Vec<String>,
    /// Engines asked for but not built in, and why.
    pub skipped: Vec<(String, String)>,
    /// Workloads asked for, in report order.
    pub workloads: Vec<Workload>,
    /// Puts of workload a (and of each phase of d).
    pub puts: u64,
    /// Writer threads of workload b.
    pub writers: usize,
    /// Bytes of each small object (workloads a, b, d, e).
    pub small_bytes: usize,
    /// Puts per writer of workload b.
    pub puts_per_writer: u64,
    /// 1 MiB puts of workload c.
    pub big_objects: u64,
    /// Size of the object deleted in workload d.
    pub delete_bytes: u64,
    /// Objects of workload e.
    pub get_objects: u64,
    /// Timed passes of workload e.
    pub get_passes: u64,
    /// Objects of workload f.
    pub space_objects: u64,
    /// Memtable budget.
    pub memtable_bytes: u64,
    /// Cache budget.
    pub cache_bytes: u64,
    /// Background threads of RocksDB and fjall.
    pub background_threads: usize,
    /// Bloom bits per key of RocksDB and fjall.
    pub bloom_bits: u32,
    /// Seed of the values and gets.
    pub seed: u64,
    /// Objects per directory level of the keys (0: one level).
    pub per_dir: u64,
    /// How long a child may run before it is killed.
    pub child_timeout: std::time::Duration,
}

impl Plan {
    fn from_args(a: &ObjectsArgs) -> Result<Plan> {
        if a.runs == 0 || a.writers == 0 || a.memtable_mb == 0 {
            bail!("--runs, --writers and --memtable-mb must be positive");
        }
        let mut engines = Vec::new();
        let mut skipped = Vec::new();
        for e in a.engines.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if !stores::ALL.contains(&e) {
                bail!("unknown engine {e:?}; known: {}", stores::ALL.join(","));
            }
            if engines.iter().any(|x| x == e) {
                continue;
            }
            match stores::missing_feature(e) {
                None => engines.push(e.to_string()),
                Some(f) => skipped.push((e.to_string(), format!("not built in: rebuild with --features {f}"))),
            }
        }
        let mut workloads = Vec::new();
        for w in a.workloads.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let Some(w) = Workload::ALL.iter().find(|x| x.name() == w) else {
                let known: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
                bail!("unknown workload {w:?}; known: {}", known.join(","));
            };
            if !workloads.contains(w) {
                workloads.push(*w);
            }
        }
        workloads.sort();
        let q = |quick: u64, full: u64| if a.quick { quick } else { full };
        let plan = Plan {
            runs: a.runs,
            quick: a.quick,
            engines,
            skipped,
            workloads,
            puts: a.puts.unwrap_or(q(300, 2000)),
            writers: a.writers,
            small_bytes: a.small_bytes,
            puts_per_writer: a.puts_per_writer.unwrap_or(q(100, 1000)),
            big_objects: a.big_objects.unwrap_or(q(100, 1000)),
            delete_bytes: a.delete_mb.unwrap_or(q(256, 1024)) << 20,
            get_objects: a.get_objects.unwrap_or(q(2000, 10_000)),
            get_passes: a.get_passes.unwrap_or(q(2, 5)),
            space_objects: a.space_objects.unwrap_or(q(100_000, 1_000_000)),
            memtable_bytes: a.memtable_mb << 20,
            cache_bytes: a.cache_mb << 20,
            background_threads: a.background_threads.max(1),
            bloom_bits: a.bloom_bits,
            seed: a.seed,
            per_dir: a.per_dir,
            child_timeout: std::time::Duration::from_secs(a.child_timeout_secs.max(1)),
        };
        if plan.small_bytes < 16 {
            bail!("--small-bytes must be at least 16 (the gets check a value's first and last 16 bytes)");
        }
        if [plan.puts, plan.puts_per_writer, plan.big_objects, plan.get_objects, plan.get_passes, plan.space_objects]
            .contains(&0)
            || plan.delete_bytes == 0
        {
            bail!("every count must be positive");
        }
        Ok(plan)
    }

    /// The spec of one child: `store` on `workload` in `dir`.
    fn spec(&self, store: &str, workload: Workload, dir: PathBuf) -> ObjSpec {
        let (ops, threads, value_bytes) = match workload {
            Workload::Put1 | Workload::Delete => (self.puts, 1, self.small_bytes),
            Workload::Put8 => (self.puts_per_writer, self.writers, self.small_bytes),
            Workload::Big => (self.big_objects, 1, LARGE_BYTES),
            Workload::Gets => (self.get_objects, 1, self.small_bytes),
            Workload::Space => (self.space_objects, 1, TINY_BYTES),
        };
        ObjSpec {
            store: store.to_string(),
            workload,
            dir,
            ops,
            threads,
            value_bytes,
            big_bytes: self.delete_bytes,
            passes: self.get_passes,
            memtable_bytes: self.memtable_bytes,
            cache_bytes: self.cache_bytes,
            background_threads: self.background_threads,
            bloom_bits: self.bloom_bits,
            seed: self.seed,
            per_dir: self.per_dir,
        }
    }
}

/// Runs the object suite and prints the markdown report on stdout.
pub fn run(args: &ObjectsArgs) -> Result<()> {
    let plan = Plan::from_args(args)?;
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let fs = crate::sys::filesystem_of(&args.dir);
    if fs.starts_with("tmpfs") || fs.starts_with("ramfs") {
        bail!(
            "--dir {} is on {fs}: durable writes there measure nothing; pick a directory on a disk",
            args.dir.display()
        );
    }
    let mut raw = RawResults::create(args.raw.as_deref())?;
    let info = crate::report::RunInfo::collect(&args.dir);
    let mut results = Results::new();
    for round in 0..plan.runs {
        // The ceiling takes its turn in the rotation like any engine.
        let mut order = plan.engines.clone();
        order.push(CEILING.to_string());
        let by = round % order.len();
        order.rotate_left(by);
        eprintln!("round {}/{}: {}", round + 1, plan.runs, order.join(", "));
        for &workload in &plan.workloads {
            for store in order.iter().filter(|e| workload.runs_on(e)) {
                let r = run_one(&args.dir, &plan, round, store, workload, &mut raw);
                results.entry((workload, store.clone())).or_default().push(r);
            }
        }
    }
    // Leave --dir as found if we made it and it is empty now.
    let _ = std::fs::remove_dir(&args.dir);
    let text = report::render(&plan, &info, &results);
    print!("{text}");
    if let Some(out) = &args.out {
        for path in crate::chart::write_outputs(out, &text, &report::chart_results(&plan, &info, &results))? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// Runs one child in a fresh directory, deleted afterwards.
fn run_one(
    base: &Path,
    plan: &Plan,
    round: usize,
    store: &str,
    workload: Workload,
    raw: &mut RawResults,
) -> Result<ObjResult, String> {
    let dir = base.join(format!("run{}-{}-{store}", round + 1, workload.name()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = plan.spec(store, workload, dir.clone());
    // Start every run with no dirty pages left by the previous one.
    let _ = Command::new("sync").status();
    let result: Result<ObjResult, String> = crate::spawn_child("objects-child", &spec, Some(plan.child_timeout));
    let _ = std::fs::remove_dir_all(&dir);
    let name = workload.name();
    match &result {
        Ok(r) => {
            let summary: Vec<String> = r
                .phases
                .iter()
                .map(|p| {
                    let rate = crate::report::thousands(p.ops as f64 / p.secs);
                    format!("{} {} ops/s ({:.1} MB/s) in {:.2} s", p.name, rate, p.bytes as f64 / p.secs / 1e6, p.secs)
                })
                .collect();
            eprintln!("  {name:<7} {store:<8} {}", summary.join("; "));
            raw.append(r);
        }
        Err(e) => eprintln!("  {name:<7} {store:<8} FAILED: {e}"),
    }
    result
}
