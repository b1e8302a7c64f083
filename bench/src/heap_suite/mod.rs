//! `larder-bench heap`: Larder's persistent shared heap (crates/heap) against
//! the peers of issue 21's bar, every peer in the same run.
//!
//! Workloads (each engine runs each case in its own process, in a fresh
//! directory; peak memory is that process's VmHWM, or for a peer that is a
//! program of its own, the largest of its processes' maximum RSS):
//!
//! - **`locate`** (paper 003, section 4.2): a database of the paths of a
//!   generated tree (100 to 4,000 entries, as the paper's, and 1M paths),
//!   built from the sorted path list and searched by exact file name.
//!   Engines: `baseline` (bench/peers/locate_baseline: the paper's slocate-style
//!   front-coded database, LOCATE02 as GNU frcode writes it, searched by a
//!   sequential scan per search), `locate` (GNU findutils: frcode builds the
//!   database, `locate.findutils -b '\NAME'` searches, a process per search),
//!   `plocate` (`plocate-build -p` from the list, `plocate -b '\NAME'`), and
//!   `larder` (a hash index over front-coded paths in one heap object,
//!   sized up front and laid out in one pass; built by a fresh process
//!   and synced, searched warm in the building process and by fresh
//!   processes that attach by name and search).
//! - **`micro`** (paper Figs 4-1 to 4-4): sequential read, sequential write,
//!   random read with a seek before each 512 B read, and copy, of objects of
//!   1 KiB to 2 MiB (doubling) with buffers of 1, 64, 512 and 1024 B; plus
//!   attach by name + read 1 KiB + close. Engines: `ext4` (read/write/lseek
//!   system calls on a file; copy: read/write into a new file), `fscopy`
//!   (`std::fs::copy`, copy only), `larder` (the heap object's mapping) and
//!   the ceiling `mmap` (a plain file mapped MAP_SHARED, accessed the same way).
//! - **`alloc`**: `alloc_in`/`free_in` of random 16 B..4 KiB blocks over a
//!   steady live set (10M operations by default), 1 and 2 threads. Engines:
//!   `boost` (Boost.Interprocess managed_mapped_file), `sphde` (SPHDE's SAS
//!   simple heap), `larder`; and the durable case, an allocation durable
//!   when it returns: `pmemobj` (libpmemobj's atomic API) and `pmemobj-tx`
//!   (one transaction per operation) on a plain file against `larder`
//!   (`alloc_in` + `sync` per operation), with the ceiling `fdatasync`: the
//!   least any durable operation does, a 4 KiB overwrite of an
//!   already-written file and an fdatasync (one write, one device flush).
//!   Space: the heap's file bytes over the live bytes at the end.
//!
//! Rounds alternate the engine order; the report gives medians with min–max
//! and the bar of issue 21 with its absolute figures.

mod alloc;
mod chart;
pub mod child;
#[cfg(feature = "larder-heap")]
mod larder;
mod locate;
#[cfg(all(test, feature = "larder-heap"))]
mod locate_table_tests;
mod micro;
mod paths;
mod report;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::raw_results::RawResults;

/// The trees of the paper (entries), then the large case.
pub const PAPER_TREES: [u64; 7] = [100, 200, 300, 500, 1000, 2000, 4000];
/// The large locate case, paths.
pub const LARGE_TREE: u64 = 1_000_000;

/// Command line of `larder-bench heap`.
#[derive(Args, Debug, Clone)]
pub struct HeapArgs {
    /// Rounds; the report gives the median. Engine order rotates each round.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Parent directory of the per-run directories (each deleted after its run). Must be on a real disk.
    #[arg(long, default_value = "/var/tmp/larder-bench-heap")]
    pub dir: PathBuf,
    /// Smaller counts everywhere (a smoke run, not for publishing).
    #[arg(long)]
    pub quick: bool,
    /// Workloads, comma-separated: locate,micro,alloc.
    #[arg(long, default_value = "locate,micro,alloc")]
    pub workloads: String,
    /// Engines, comma-separated, of: baseline,locate,plocate,ext4,fscopy,mmap,boost,sphde,pmemobj,pmemobj-tx,larder.
    #[arg(long, default_value = "baseline,locate,plocate,ext4,fscopy,mmap,boost,sphde,pmemobj,pmemobj-tx,larder")]
    pub engines: String,
    /// Directory of the peer programs (scripts/install-heap-peers.sh builds them).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/peers/build"))]
    pub peers: PathBuf,
    /// Tree sizes of the locate workload, entries [default: the paper's 100..4000 and 1M; quick: 100,4000,20000].
    #[arg(long, value_delimiter = ',')]
    pub trees: Vec<u64>,
    /// Exact-name searches per tree, half of present names, half of absent ones [default: 100, quick 10].
    #[arg(long)]
    pub searches: Option<u64>,
    /// Searches done by fresh processes per tree (each one process per search) [default: 20, quick 3].
    #[arg(long)]
    pub fresh_searches: Option<u64>,
    /// Largest object of the micro workload, bytes (objects double from 1 KiB) [default: 2 MiB, quick 64 KiB].
    #[arg(long)]
    pub max_object: Option<u64>,
    /// Operations per micro case: each case repeats its pass until it did this many reads or writes
    /// [default: 1000000, quick 2000].
    #[arg(long)]
    pub micro_ops: Option<u64>,
    /// Attach + read + close repetitions of the 1 KiB object [default: 100000, quick 200].
    #[arg(long)]
    pub attaches: Option<u64>,
    /// Allocator operations (a free and an allocation each), over all threads [default: 10000000, quick 20000].
    #[arg(long)]
    pub alloc_ops: Option<u64>,
    /// Blocks live at once in the allocator workload (about 2 KiB each on average) [default: 65536, quick 1024].
    #[arg(long)]
    pub live: Option<u64>,
    /// Operations of the durable allocator case [default: 2000, quick 50].
    #[arg(long)]
    pub durable_ops: Option<u64>,
    /// Blocks live at once in the durable case [default: 1024, quick 64].
    #[arg(long)]
    pub durable_live: Option<u64>,
    /// A child still running after this many seconds is killed and its run counts as failed.
    #[arg(long, default_value_t = 3600)]
    pub child_timeout_secs: u64,
    /// Seed of the trees, queries, offsets and block sizes.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Also write every child's JSON result to this file, one line each.
    #[arg(long)]
    pub raw: Option<PathBuf>,
    /// Also write the report, the results and their chart into this
    /// directory: heap.md, heap.json, heap.svg.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One workload of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Build and exact-name search of a path database.
    Locate,
    /// The paper's micro benchmarks.
    Micro,
    /// Allocation and free of small blocks.
    Alloc,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 3] = [Workload::Locate, Workload::Micro, Workload::Alloc];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Locate => "locate",
            Workload::Micro => "micro",
            Workload::Alloc => "alloc",
        }
    }

    /// The engines that take part, of [`ENGINES`].
    pub fn engines(self) -> &'static [&'static str] {
        match self {
            Workload::Locate => &["baseline", "locate", "plocate", "larder"],
            Workload::Micro => &["ext4", "fscopy", "mmap", "larder"],
            Workload::Alloc => &["boost", "sphde", "pmemobj", "pmemobj-tx", "fdatasync", "larder"],
        }
    }
}

/// Every engine the suite knows.
pub const ENGINES: [&str; 12] = [
    "baseline",
    "locate",
    "plocate",
    "ext4",
    "fscopy",
    "mmap",
    "boost",
    "sphde",
    "pmemobj",
    "pmemobj-tx",
    "fdatasync",
    "larder",
];

/// What the parent asks one child to do (passed as JSON).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HeapSpec {
    /// The engine, of [`ENGINES`].
    pub engine: String,
    /// What to run.
    pub workload: Workload,
    /// The case's label (tree size, thread count, ...), as the report keys it.
    pub case: String,
    /// A fresh directory for this run only.
    pub dir: PathBuf,
    /// Directory of the peer programs.
    pub peers: PathBuf,
    /// Locate: the directory of the inputs the parent prepared for the tree.
    pub inputs: PathBuf,
    /// Seed of everything drawn.
    pub seed: u64,
    /// Locate: entries of the tree.
    pub tree: u64,
    /// Locate: warm searches.
    pub searches: u64,
    /// Locate: searches by fresh processes.
    pub fresh_searches: u64,
    /// Micro: largest object.
    pub max_object: u64,
    /// Micro: operations per case.
    pub micro_ops: u64,
    /// Micro: attach + read + close repetitions.
    pub attaches: u64,
    /// Alloc: operations over all threads.
    pub ops: u64,
    /// Alloc: blocks live at once.
    pub live: u64,
    /// Alloc: threads.
    pub threads: u64,
    /// Alloc: whether every operation is durable when it returns.
    pub durable: bool,
}

/// One timed phase of a child.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HeapPhase {
    /// "build", "search", "fresh-search", "read/1024/64", "alloc", ...
    pub name: String,
    /// Operations done (searches, reads, allocations, ...).
    pub ops: u64,
    /// Wall time of the phase.
    pub secs: f64,
    /// Bytes moved (micro) or stored (space), 0 when not meaningful.
    pub bytes: u64,
    /// Peak resident memory of the engine's process(es) so far.
    pub vmhwm_kib: u64,
    /// Phase-specific figures (matches, checksum, file bytes, live bytes, ...).
    pub extra: BTreeMap<String, f64>,
}

/// The JSON line a child prints.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HeapResult {
    /// The engine.
    pub engine: String,
    /// Version and settings of the engine.
    pub info: String,
    /// The timed phases, in order.
    pub phases: Vec<HeapPhase>,
}

impl HeapResult {
    /// The phase called `name`, if the child ran it.
    pub fn phase(&self, name: &str) -> Option<&HeapPhase> {
        self.phases.iter().find(|p| p.name == name)
    }
}

/// Every child's result (or why it failed), by workload, case and engine.
pub type Results = BTreeMap<(Workload, String, String), Vec<Result<HeapResult, String>>>;

/// The settings of one invocation.
pub struct Plan {
    /// Rounds.
    pub runs: usize,
    /// Whether the counts are `--quick`'s.
    pub quick: bool,
    /// Engines asked for, in the first round's order.
    pub engines: Vec<String>,
    /// Engines asked for that cannot run here, and why.
    pub skipped: Vec<(String, String)>,
    /// Workloads asked for, in report order.
    pub workloads: Vec<Workload>,
    /// Locate trees, entries.
    pub trees: Vec<u64>,
    /// The spec every child starts from (engine, case, dir filled per run).
    pub base: HeapSpec,
    /// Alloc: operations and live blocks of the durable case.
    pub durable_ops: u64,
    /// Alloc: live blocks of the durable case.
    pub durable_live: u64,
    /// How long a child may run before it is killed.
    pub child_timeout: std::time::Duration,
}

impl Plan {
    fn from_args(a: &HeapArgs) -> Result<Plan> {
        if a.runs == 0 {
            bail!("--runs must be positive");
        }
        let mut workloads = Vec::new();
        for w in a.workloads.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let Some(w) = Workload::ALL.iter().find(|x| x.name() == w) else {
                bail!("unknown workload {w:?}; known: locate,micro,alloc");
            };
            if !workloads.contains(w) {
                workloads.push(*w);
            }
        }
        workloads.sort();
        let mut engines = Vec::new();
        let mut skipped = Vec::new();
        for e in a.engines.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if !ENGINES.contains(&e) {
                bail!("unknown engine {e:?}; known: {}", ENGINES.join(","));
            }
            if engines.iter().any(|x| x == e) || skipped.iter().any(|(x, _)| x == e) {
                continue;
            }
            match child::missing(e, &a.peers) {
                None => engines.push(e.to_string()),
                Some(why) => skipped.push((e.to_string(), why)),
            }
        }
        let q = |quick: u64, full: u64| if a.quick { quick } else { full };
        let trees = if !a.trees.is_empty() {
            a.trees.clone()
        } else if a.quick {
            vec![100, 4000, 20_000]
        } else {
            PAPER_TREES.iter().copied().chain(std::iter::once(LARGE_TREE)).collect()
        };
        let base = HeapSpec {
            engine: String::new(),
            workload: Workload::Locate,
            case: String::new(),
            dir: PathBuf::new(),
            peers: a.peers.clone(),
            inputs: PathBuf::new(),
            seed: a.seed,
            tree: 0,
            searches: a.searches.unwrap_or(q(10, 100)),
            fresh_searches: a.fresh_searches.unwrap_or(q(3, 20)),
            max_object: a.max_object.unwrap_or(q(64 << 10, 2 << 20)),
            micro_ops: a.micro_ops.unwrap_or(q(2000, 1_000_000)),
            attaches: a.attaches.unwrap_or(q(200, 100_000)),
            ops: a.alloc_ops.unwrap_or(q(20_000, 10_000_000)),
            live: a.live.unwrap_or(q(1024, 65_536)),
            threads: 1,
            durable: false,
        };
        let plan = Plan {
            runs: a.runs,
            quick: a.quick,
            engines,
            skipped,
            workloads,
            trees,
            durable_ops: a.durable_ops.unwrap_or(q(50, 2000)),
            durable_live: a.durable_live.unwrap_or(q(64, 1024)),
            base,
            child_timeout: std::time::Duration::from_secs(a.child_timeout_secs.max(1)),
        };
        let b = &plan.base;
        if plan.trees.contains(&0)
            || [b.searches, b.micro_ops, b.attaches, b.ops, b.live, plan.durable_ops, plan.durable_live].contains(&0)
            || b.max_object < micro::MIN_OBJECT
        {
            bail!("every count must be positive and --max-object at least 1024");
        }
        Ok(plan)
    }

    /// The cases of a workload: (label, spec without engine and dir).
    fn cases(&self, w: Workload, base_dir: &Path) -> Vec<(String, HeapSpec)> {
        let with = |case: String, f: &dyn Fn(&mut HeapSpec)| {
            let mut s = self.base.clone();
            s.workload = w;
            s.case = case.clone();
            f(&mut s);
            (case, s)
        };
        match w {
            Workload::Locate => self
                .trees
                .iter()
                .map(|&n| {
                    with(format!("{n}"), &|s| {
                        s.tree = n;
                        s.inputs = inputs_dir(base_dir, n);
                    })
                })
                .collect(),
            Workload::Micro => vec![with("micro".to_string(), &|_| {})],
            Workload::Alloc => vec![
                with("threads=1".to_string(), &|s| s.threads = 1),
                with("threads=2".to_string(), &|s| s.threads = 2),
                with("durable".to_string(), &|s| {
                    s.threads = 1;
                    s.durable = true;
                    s.ops = self.durable_ops;
                    s.live = self.durable_live;
                }),
            ],
        }
    }
}

/// Where the inputs of the locate tree of `tree` entries are kept for the run.
fn inputs_dir(base: &Path, tree: u64) -> PathBuf {
    base.join(format!("locate-inputs-{tree}"))
}

/// Whether `engine` runs `case` of `w` (the durable allocator case has its
/// own peers).
fn runs_case(w: Workload, case: &str, engine: &str) -> bool {
    if !w.engines().contains(&engine) {
        return false;
    }
    match (w, engine) {
        (Workload::Alloc, "pmemobj" | "pmemobj-tx" | "fdatasync") => case == "durable",
        (Workload::Alloc, "boost" | "sphde") => case != "durable",
        _ => true,
    }
}

/// Runs the heap suite and prints the markdown report on stdout.
pub fn run(args: &HeapArgs) -> Result<()> {
    let plan = Plan::from_args(args)?;
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let fs = crate::sys::filesystem_of(&args.dir);
    if fs.starts_with("tmpfs") || fs.starts_with("ramfs") {
        bail!("--dir {} is on {fs}: durable builds and syncs there measure nothing; pick a disk", args.dir.display());
    }
    let mut raw = RawResults::create(args.raw.as_deref())?;
    let info = crate::report::RunInfo::collect(&args.dir);
    if plan.workloads.contains(&Workload::Locate) {
        for &tree in &plan.trees {
            let b = &plan.base;
            locate::Inputs::prepare(&inputs_dir(&args.dir, tree), tree, b.searches, b.fresh_searches, b.seed)?;
        }
    }
    let mut results = Results::new();
    for round in 0..plan.runs {
        let mut order = plan.engines.clone();
        if !order.is_empty() {
            let by = round % order.len();
            order.rotate_left(by);
        }
        eprintln!("round {}/{}: {}", round + 1, plan.runs, order.join(", "));
        for &w in &plan.workloads {
            for (case, spec) in plan.cases(w, &args.dir) {
                for engine in order.iter().filter(|e| runs_case(w, &case, e)) {
                    let r = run_one(&args.dir, &plan, round, engine, &spec, &mut raw);
                    results.entry((w, case.clone(), engine.clone())).or_default().push(r);
                }
            }
        }
    }
    for &tree in &plan.trees {
        let _ = std::fs::remove_dir_all(inputs_dir(&args.dir, tree));
    }
    // Leave --dir as found if we made it and it is empty now.
    let _ = std::fs::remove_dir(&args.dir);
    let text = report::render(&plan, &info, &results);
    print!("{text}");
    if let Some(out) = &args.out {
        for path in crate::chart::write_outputs(out, &text, &chart::chart_results(&plan, &info, &results))? {
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
    engine: &str,
    spec: &HeapSpec,
    raw: &mut RawResults,
) -> Result<HeapResult, String> {
    let dir = base.join(format!("run{}-{}-{}-{engine}", round + 1, spec.workload.name(), spec.case));
    let _ = std::fs::remove_dir_all(&dir);
    let mut spec = spec.clone();
    spec.engine = engine.to_string();
    spec.dir = dir.clone();
    // Start every run with no dirty pages left by the previous one.
    let _ = Command::new("sync").status();
    let result: Result<HeapResult, String> = crate::spawn_child("heap-child", &spec, Some(plan.child_timeout));
    let _ = std::fs::remove_dir_all(&dir);
    let label = format!("{} {}", spec.workload.name(), spec.case);
    match &result {
        Ok(r) => {
            let summary: Vec<String> = r
                .phases
                .iter()
                .take(4)
                .map(|p| format!("{} {} ops in {:.4} s", p.name, crate::report::thousands(p.ops as f64), p.secs))
                .collect();
            let more = if r.phases.len() > 4 { format!(" (+{} phases)", r.phases.len() - 4) } else { String::new() };
            eprintln!("  {label:<18} {engine:<10} {}{more}", summary.join("; "));
            raw.append(r);
        }
        Err(e) => eprintln!("  {label:<18} {engine:<10} FAILED: {e}"),
    }
    result
}
