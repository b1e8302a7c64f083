//! `larder-bench`: Larder's index against RocksDB, fjall and LMDB (the
//! default `index` suite), and Larder's object store against ext4, RocksDB,
//! fjall and LMDB (`larder-bench objects`, see [`objects`]).
//!
//! Method: every engine runs each workload in its own process (this binary
//! re-executed with a hidden `child` subcommand that prints one JSON line),
//! so peak memory (VmHWM) and I/O counters belong to one engine. All engines
//! get the same memtable size, block-cache budget, bloom bits and background
//! threads; each round starts from a fresh directory, and the engine order
//! rotates every round. The report gives the median of the rounds, next to a
//! physical ceiling (sequential overwrite + fdatasync) measured in the same
//! rounds. See `--help` for the knobs.

mod chart;
mod engines;
#[cfg(feature = "larder-fs")]
mod fs_mix;
#[cfg(feature = "larder-fs")]
mod fs_suite;
mod heap_suite;
#[cfg(feature = "larder-fs")]
mod null_fuse;
mod objects;
mod raw_results;
mod report;
#[cfg(feature = "larder-server")]
mod server_suite;
mod sync_probe;
mod sys;
mod workload;
mod ycsb;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::raw_results::RawResults;
use crate::workload::{ChildResult, ChildSpec, Kind, ENTRY_BYTES};

#[derive(Parser, Debug)]
#[command(
    name = "larder-bench",
    about = "Benchmark Larder against peer engines: its index (default, or `index`) or its object store (`objects`)",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Sub>,
    #[command(flatten)]
    index: IndexArgs,
}

/// The knobs of the index suite (the default mode).
#[derive(Args, Debug, Clone)]
struct IndexArgs {
    /// Entries per run [default: 8 memtables' worth, ceil(8 * memtable bytes / 116)].
    #[arg(long)]
    n: Option<u64>,
    /// Memtable size for every engine, MiB.
    #[arg(long, default_value_t = 64)]
    memtable_mb: u64,
    /// Block-cache budget for every engine, MiB (LMDB has none: it uses the OS page cache).
    #[arg(long, default_value_t = 64)]
    cache_mb: u64,
    /// Rounds; the report gives the median. Engine order rotates each round.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Engines, comma-separated: larder,rocksdb,fjall,lmdb.
    #[arg(long, default_value = "larder,rocksdb,fjall,lmdb")]
    engines: String,
    /// Workloads, comma-separated: random,sequential,gets,scans.
    #[arg(long, default_value = "random,sequential,gets,scans")]
    workloads: String,
    /// Seed of the keys and values.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Parent directory of the per-run directories (each deleted after its run).
    #[arg(long, default_value = "/tmp/larder-bench")]
    dir: PathBuf,
    /// Puts per write batch, for every engine.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Point gets of each kind (hits, misses) [default: min(n, 1000000)].
    #[arg(long)]
    gets: Option<u64>,
    /// Prefix scans.
    #[arg(long, default_value_t = 10_000)]
    scans: u64,
    /// Prefix length of the scans, bytes [default: the one giving closest to 50 entries per scan].
    #[arg(long)]
    prefix_len: Option<usize>,
    /// Frozen memtables allowed besides the active one (RocksDB: max_write_buffer_number - 1).
    #[arg(long, default_value_t = 2)]
    max_immutable_memtables: usize,
    /// Background threads per engine (Larder: 1 flusher + the rest merging; RocksDB: max_background_jobs; fjall: worker_threads).
    #[arg(long, default_value_t = 3)]
    background_threads: usize,
    /// Also write every child's JSON result to this file, one line each.
    #[arg(long)]
    raw: Option<PathBuf>,
    /// Bloom filter bits per key for the peers (the setting).
    #[arg(long, default_value_t = 10)]
    peer_bloom_bits: u32,
    /// Bloom filter bits per key for Larder [default: Larder's own default, 14].
    #[arg(long)]
    larder_bloom_bits: Option<u32>,
    /// Also write the report, the results and their chart into this
    /// directory: index.md, index.json, index.svg.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Sub {
    /// The index suite (the default when no subcommand is given).
    Index(IndexArgs),
    /// The object suite: durable puts, deletes, gets and space against ext4, RocksDB, fjall and LMDB.
    Objects(objects::ObjectsArgs),
    /// Runs one engine on one object workload and prints a JSON line (used by the parent).
    #[command(hide = true)]
    ObjectsChild {
        #[arg(long)]
        spec: String,
    },
    /// The file system suite: native creates and stats against ext4.
    #[cfg(feature = "larder-fs")]
    Fs(fs_suite::FsArgs),
    /// Runs one engine on one fs workload and prints a JSON line (used by the parent).
    #[cfg(feature = "larder-fs")]
    #[command(hide = true)]
    FsChild {
        #[arg(long)]
        spec: String,
    },
    /// The server suite: single operations through ext4, the FUSE mount,
    /// Larder embedded, `larder serve` and a do-nothing server.
    #[cfg(feature = "larder-server")]
    Server(server_suite::ServerArgs),
    /// Runs one peer of the server suite and prints a JSON line (used by the parent).
    #[cfg(feature = "larder-server")]
    #[command(hide = true)]
    ServerChild {
        #[arg(long)]
        spec: String,
    },
    /// Runs one peer of the server suite's workloads: its server and its
    /// client processes (used by the parent).
    #[cfg(feature = "larder-server")]
    #[command(hide = true)]
    ServerWorkload {
        #[arg(long)]
        spec: String,
    },
    /// One client process of a server suite workload (used by `server-workload`).
    #[cfg(feature = "larder-server")]
    #[command(hide = true)]
    ServerClient {
        #[arg(long)]
        spec: String,
    },
    /// Runs one load mix under one placement: its server, its client
    /// processes and the sampling of the server (used by the parent).
    #[cfg(feature = "larder-server")]
    #[command(hide = true)]
    ServerMix {
        #[arg(long)]
        spec: String,
    },
    /// One client process of a load mix (used by `server-mix`).
    #[cfg(feature = "larder-server")]
    #[command(hide = true)]
    ServerMixClient {
        #[arg(long)]
        spec: String,
    },
    /// The do-nothing server of the server suite (runs until killed).
    #[cfg(feature = "larder-server")]
    #[command(hide = true)]
    ServerNull {
        #[arg(long)]
        socket: PathBuf,
    },
    /// The heap suite: Larder's persistent shared heap against the paper's
    /// locate baseline, locate, plocate, ext4 system calls, Boost.Interprocess,
    /// SPHDE and libpmemobj.
    Heap(heap_suite::HeapArgs),
    /// Runs one engine on one heap case and prints a JSON line (used by the parent).
    #[command(hide = true)]
    HeapChild {
        #[arg(long)]
        spec: String,
    },
    /// What the device does with concurrent `fdatasync`s: 1-8 threads
    /// syncing one file or a file each (the durable puts' limit).
    SyncProbe(sync_probe::SyncProbeArgs),
    /// YCSB's core workloads A-F: Larder's KV API and index against RocksDB, fjall and LMDB.
    Ycsb(ycsb::YcsbArgs),
    /// Runs one engine's load and workloads of the YCSB suite and prints a JSON line (used by the parent).
    #[command(hide = true)]
    YcsbChild {
        #[arg(long)]
        spec: String,
    },
    /// Draws the chart (`<suite>.svg`) of each results file (`<suite>.json`,
    /// as the suites write with `--out`) into a directory.
    Chart {
        /// Results files.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Directory of the charts.
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
    /// Runs one engine on one workload and prints a JSON line (used by the parent).
    #[command(hide = true)]
    Child {
        #[arg(long)]
        spec: String,
    },
}

/// The settings shared by every child of one benchmark.
pub struct Plan {
    pub n: u64,
    pub memtable_bytes: u64,
    pub cache_bytes: u64,
    pub runs: usize,
    pub batch: usize,
    pub gets: u64,
    pub scans: u64,
    pub prefix_len: usize,
    pub seed: u64,
    pub engines: Vec<String>,
    pub skipped: Vec<(String, String)>,
    pub workloads: Vec<String>,
    pub kinds: Vec<Kind>,
    pub max_immutable_memtables: usize,
    pub background_threads: usize,
    pub peer_bloom_bits: u32,
    pub larder_bloom_bits: u32,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Sub::Child { spec }) => workload::run_child(&spec),
        Some(Sub::ObjectsChild { spec }) => objects::child::run_child(&spec),
        Some(Sub::Objects(args)) => objects::run(&args),
        #[cfg(feature = "larder-fs")]
        Some(Sub::Fs(args)) => fs_suite::run(&args),
        #[cfg(feature = "larder-fs")]
        Some(Sub::FsChild { spec }) => fs_suite::run_child(&spec),
        #[cfg(feature = "larder-server")]
        Some(Sub::Server(args)) => server_suite::run(&args),
        #[cfg(feature = "larder-server")]
        Some(Sub::ServerChild { spec }) => server_suite::run_child(&spec),
        #[cfg(feature = "larder-server")]
        Some(Sub::ServerNull { socket }) => server_suite::run_null_server(&socket),
        #[cfg(feature = "larder-server")]
        Some(Sub::ServerWorkload { spec }) => server_suite::run_workload_coordinator(&spec),
        #[cfg(feature = "larder-server")]
        Some(Sub::ServerClient { spec }) => server_suite::run_workload_client(&spec),
        #[cfg(feature = "larder-server")]
        Some(Sub::ServerMix { spec }) => server_suite::run_mix_coordinator(&spec),
        #[cfg(feature = "larder-server")]
        Some(Sub::ServerMixClient { spec }) => server_suite::run_mix_client(&spec),
        Some(Sub::Heap(args)) => heap_suite::run(&args),
        Some(Sub::HeapChild { spec }) => heap_suite::child::run_child(&spec),
        Some(Sub::SyncProbe(args)) => sync_probe::run(&args),
        Some(Sub::Ycsb(args)) => ycsb::run(&args),
        Some(Sub::YcsbChild { spec }) => ycsb::workload::run_child(&spec),
        Some(Sub::Chart { inputs, out }) => chart::run(&inputs, &out),
        Some(Sub::Index(args)) => run_index(&args),
        None => run_index(&cli.index),
    }
}

/// The index suite: every round, each engine on each workload in its own child.
fn run_index(cli: &IndexArgs) -> Result<()> {
    let plan = plan(cli)?;
    std::fs::create_dir_all(&cli.dir).with_context(|| format!("creating {}", cli.dir.display()))?;
    let mut raw = RawResults::create(cli.raw.as_deref())?;
    let info = report::RunInfo::collect(&cli.dir);
    let mut results: BTreeMap<(Kind, String), Vec<Result<ChildResult, String>>> = BTreeMap::new();
    for round in 0..plan.runs {
        // Rotate the order every round: larder,rocksdb,fjall,lmdb then rocksdb,fjall,lmdb,larder ...
        let mut order = plan.engines.clone();
        if !order.is_empty() {
            let by = round % order.len();
            order.rotate_left(by);
        }
        eprintln!("round {}/{}: {}", round + 1, plan.runs, order.join(", "));
        if plan.kinds.iter().any(|k| matches!(k, Kind::Random | Kind::Sequential)) {
            let r = run_one(&cli.dir, &plan, round, "disk", Kind::Disk, &mut raw);
            results.entry((Kind::Disk, "disk".to_string())).or_default().push(r);
        }
        for kind in &plan.kinds {
            for engine in &order {
                let r = run_one(&cli.dir, &plan, round, engine, *kind, &mut raw);
                results.entry((*kind, engine.clone())).or_default().push(r);
            }
        }
    }
    // Leave --dir as found if we made it and it is empty now.
    let _ = std::fs::remove_dir(&cli.dir);
    let text = report::render(&plan, &info, &results);
    print!("{text}");
    if let Some(out) = &cli.out {
        for path in chart::write_outputs(out, &text, &report::chart_results(&plan, &info, &results))? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

fn plan(cli: &IndexArgs) -> Result<Plan> {
    if cli.runs == 0 || cli.batch == 0 || cli.memtable_mb == 0 {
        bail!("--runs, --batch and --memtable-mb must be positive");
    }
    let memtable_bytes = cli.memtable_mb << 20;
    let n = cli.n.unwrap_or_else(|| (8 * memtable_bytes).div_ceil(ENTRY_BYTES));
    if n == 0 {
        bail!("--n must be positive");
    }
    let mut engines = Vec::new();
    let mut skipped = Vec::new();
    for e in cli.engines.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        if !engines::ALL.contains(&e) {
            bail!("unknown engine {e:?}; known: {}", engines::ALL.join(","));
        }
        if engines::available(e) {
            if !engines.iter().any(|x| x == e) {
                engines.push(e.to_string());
            }
        } else {
            skipped.push((e.to_string(), format!("not built in: rebuild with --features {e} (or --features peers)")));
        }
    }
    let known = ["random", "sequential", "gets", "scans"];
    let mut workloads = Vec::new();
    for w in cli.workloads.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if !known.contains(&w) {
            bail!("unknown workload {w:?}; known: {}", known.join(","));
        }
        if !workloads.iter().any(|x| x == w) {
            workloads.push(w.to_string());
        }
    }
    let has = |w: &str| workloads.iter().any(|x| x == w);
    let mut kinds = Vec::new();
    if has("random") || has("gets") || has("scans") {
        kinds.push(Kind::Random);
    }
    if has("sequential") {
        kinds.push(Kind::Sequential);
    }
    Ok(Plan {
        n,
        memtable_bytes,
        cache_bytes: cli.cache_mb << 20,
        runs: cli.runs,
        batch: cli.batch,
        gets: if has("gets") { cli.gets.unwrap_or(n.min(1_000_000)) } else { 0 },
        scans: if has("scans") { cli.scans } else { 0 },
        prefix_len: cli.prefix_len.unwrap_or_else(|| workload::default_prefix_len(n)).clamp(1, 8),
        seed: cli.seed,
        engines,
        skipped,
        workloads,
        kinds,
        max_immutable_memtables: cli.max_immutable_memtables.max(1),
        background_threads: cli.background_threads.max(1),
        peer_bloom_bits: cli.peer_bloom_bits,
        larder_bloom_bits: cli.larder_bloom_bits.unwrap_or(larder_index::Options::default().bloom_bits_per_key),
    })
}

/// Runs one child in a fresh directory, deleted afterwards.
fn run_one(
    base: &Path,
    plan: &Plan,
    round: usize,
    engine: &str,
    kind: Kind,
    raw: &mut RawResults,
) -> Result<ChildResult, String> {
    let kind_name = format!("{kind:?}").to_lowercase();
    let dir = base.join(format!("run{}-{kind_name}-{engine}", round + 1));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = ChildSpec {
        engine: engine.to_string(),
        kind,
        dir: dir.clone(),
        n: plan.n,
        batch: plan.batch,
        memtable_bytes: plan.memtable_bytes,
        cache_bytes: plan.cache_bytes,
        max_immutable_memtables: plan.max_immutable_memtables,
        background_threads: plan.background_threads,
        bloom_bits_per_key: if engine == "larder" { plan.larder_bloom_bits } else { plan.peer_bloom_bits },
        seed: plan.seed,
        gets: plan.gets,
        scans: plan.scans,
        prefix_len: plan.prefix_len,
    };
    // Start every run with no dirty pages left by the previous one.
    let _ = Command::new("sync").status();
    let result: Result<ChildResult, String> = spawn_child("child", &spec, None);
    let _ = std::fs::remove_dir_all(&dir);
    match &result {
        Ok(r) => {
            let summary: Vec<String> = r
                .phases
                .iter()
                .map(|p| {
                    let per_cpu_second = report::thousands(p.ops as f64 / p.cpu_secs.max(1e-9));
                    let wall = report::thousands(p.ops as f64 / p.secs);
                    format!("{} {wall} ops/s in {:.2} s ({per_cpu_second} per CPU-second)", p.name, p.secs)
                })
                .collect();
            eprintln!("  {kind_name:<10} {engine:<8} {}", summary.join("; "));
            raw.append(r);
        }
        Err(e) => eprintln!("  {kind_name:<10} {engine:<8} FAILED: {e}"),
    }
    result
}

/// Re-executes this binary as `larder-bench <sub> --spec <JSON of spec>` and
/// parses the last JSON line it prints; the error says why the child failed.
/// A child still running after `timeout` is killed and counts as failed.
pub fn spawn_child<S: Serialize, R: DeserializeOwned>(
    sub: &str,
    spec: &S,
    timeout: Option<Duration>,
) -> Result<R, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .arg(sub)
        .arg("--spec")
        .arg(json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the child: {e}"))?;
    // Drain both pipes while waiting, so a chatty child never blocks on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let deadline = timeout.map(|t| Instant::now() + t);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Err(format!("waiting for the child: {e}")),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            // Only this child, by its own handle.
            let _ = child.kill();
            let _ = child.wait();
            let secs = timeout.map_or(0, |t| t.as_secs());
            return Err(format!("timed out after {secs} s (killed)"));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if !status.success() {
        return Err(format!("child exited with {status}: {}", failure_summary(&stderr)));
    }
    if !stderr.trim().is_empty() {
        eprintln!("  (child stderr) {}", stderr.trim());
    }
    let line = stdout.lines().rev().find(|l| l.starts_with('{')).ok_or("child printed no JSON line")?;
    serde_json::from_str(line).map_err(|e| format!("parsing the child's JSON: {e}"))
}

/// The lines of a failed child's stderr that say why: the error `main`
/// returned or the panic message (without the backtrace), else the last lines.
fn failure_summary(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().collect();
    let start = lines.iter().position(|l| l.starts_with("Error:") || l.contains("panicked at"));
    let picked: Vec<&str> = match start {
        Some(start) => lines[start..]
            .iter()
            .take_while(|l| !l.to_lowercase().starts_with("stack backtrace:"))
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .take(6)
            .collect(),
        None => lines[lines.len().saturating_sub(5)..].to_vec(),
    };
    picked.join(" | ")
}
