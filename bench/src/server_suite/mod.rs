//! `larder-bench server`: uFS's single operations (paper 002) with one
//! client and one worker, through every way a process can reach a store:
//!
//! - `ext4`: syscalls relative to an open directory on a fresh ext4;
//! - `fuse0`, `fuse`: the same syscalls through Larder's FUSE mount (the
//!   store on the same fresh ext4, mounted in the child as the fs suite
//!   does), with cache timeouts 0 and with the mount's defaults (60 s);
//! - `embedded`: `larder_fs::Fs` calls in the child;
//! - `served`: larder-client in the child against `larder serve STORE
//!   --workers 1`, a process of its own, without leases (every call a
//!   round trip);
//! - `leased`: the same with leases (the client caches lookups,
//!   attributes, pages read and opens kept after close);
//! - `null`: larder-client against the do-nothing server
//!   ([`null_server`]), a process of its own: the ceiling of a round trip.
//!
//! Each peer runs in a child process of its own on a fresh file system
//! image (as the fs suite's), its server (if any) in another; the peer
//! order rotates every round and the report gives medians.

mod clients;
mod cold_shared;
mod load_mix;
mod load_suite;
mod null_server;
mod ops;
mod peers;
mod targets;
mod workload_suite;
mod workloads;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::fs_suite::FreshFs;
use crate::report::{stat, thousands, RunInfo};
use ops::{Counts, Timed, OPS};
use targets::{Embedded, Served, Syscalls};

pub use clients::{run_client as run_workload_client, run_coordinator as run_workload_coordinator};
pub use load_mix::{run_client as run_mix_client, run_coordinator as run_mix_coordinator};
pub use null_server::run as run_null_server;

/// Every peer.
const PEERS: [&str; 7] = ["ext4", "fuse0", "fuse", "embedded", "served", "leased", "null"];

/// Knobs of the server suite.
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// Rounds; the report gives the median. Peer order rotates each round.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Peers, comma-separated: ext4,fuse0,fuse,embedded,served,leased,null.
    #[arg(long, default_value = "ext4,fuse0,fuse,embedded,served,leased,null")]
    peers: String,
    /// Multiplies the operations of every kind (1: 20,000 reads, writes,
    /// stats and opens each, 4,000 appends, 200 listings, 5,000 creates,
    /// renames and unlinks).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Parent directory of the per-run file system images (each removed
    /// after its run).
    #[arg(long, default_value = "/tmp/larder-bench-server")]
    dir: PathBuf,
    /// The `larder` binary that serves the store [default: `larder` next
    /// to this binary].
    #[arg(long)]
    larder: Option<PathBuf>,
    /// Size of each run's file system image, GiB (sparse).
    #[arg(long, default_value_t = 4)]
    image_gib: u64,
    /// Operations to time, comma-separated [default: all]: read4k-seq,
    /// read4k-rand, read16k-seq, read16k-rand, read4k-small, write4k-seq, write4k-rand,
    /// write16k-seq, write16k-rand, append16k, append16k-posted (posted
    /// by a client, the last waiting; read its mean), stat, open-close, listdir,
    /// create, rename, unlink, append16k-zc; uncached (each block once,
    /// the peer reopened and the machine's caches dropped before each):
    /// read4k-cold-seq, read4k-cold-rand, write4k-cold-rand; two clients
    /// at once on one file or a file each: read4k-shared, write4k-shared,
    /// read4k-private2, write4k-private2.
    #[arg(long, default_value = "")]
    ops: String,
    /// Seed of the random offsets and names.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// A child still running after this many seconds is killed.
    #[arg(long, default_value_t = 600)]
    child_timeout_secs: u64,
    /// Pins the client to one CPU and the serving side to another, as
    /// CLIENT,SERVER (uFS gives workers cores of their own): the calling
    /// thread on CLIENT; the server process, the FUSE mount's threads and
    /// the embedded store's background threads on SERVER.
    #[arg(long, value_parser = parse_pin)]
    pin: Option<(usize, usize)>,
    /// Also write the report, the results and their chart into this
    /// directory: server.md, server.json, server.svg (with
    /// `--workloads`: server-workloads.md, .json, .svg).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Runs these workloads instead of the single operations,
    /// comma-separated: varmail, webserver, smallfile, webproxy.
    #[arg(long, default_value = "")]
    workloads: String,
    /// Client processes of each workload run, comma-separated.
    #[arg(long, default_value = "1,2,4")]
    clients: String,
    /// Peers of the workloads, comma-separated: ext4,served,leased,kv (kv: the same steps by KV calls).
    #[arg(long, default_value = "ext4,served,leased")]
    workload_peers: String,
    /// Multiplies the workloads' timed work (1: 500 varmail iterations,
    /// 20,000 webserver reads, 10,000 smallfile files, 2,000 webproxy
    /// iterations per client).
    #[arg(long, default_value_t = 1.0)]
    workload_scale: f64,
    /// Runs these mixes of clients under three placements (one worker
    /// per client, the load manager, round-robin over the manager's
    /// count) instead of the single operations, comma-separated:
    /// uneven, dynamic, skewed.
    #[arg(long, default_value = "")]
    load_mixes: String,
    /// Seconds of each load mix run's timeline.
    #[arg(long, default_value_t = 8.0)]
    mix_secs: f64,
    /// The most workers the load manager may run in a load mix (0: one
    /// per client, as uFS allows). One worker per client (`max`) always
    /// runs one per client.
    #[arg(long, default_value_t = 0)]
    mix_max_workers: u32,
}

fn parse_pin(text: &str) -> Result<(usize, usize), String> {
    let (client, server) = text.split_once(',').ok_or("--pin CLIENT,SERVER (two CPU numbers)")?;
    let cpu = |t: &str| t.trim().parse::<usize>().map_err(|e| format!("--pin {text:?}: {e}"));
    Ok((cpu(client)?, cpu(server)?))
}

/// Runs this thread (and the threads and processes it starts from now on)
/// on `cpu` only.
fn pin_to(cpu: usize) -> Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).with_context(|| format!("pinning to CPU {cpu}"))
}

/// What one child does.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ServerSpec {
    peer: String,
    dir: PathBuf,
    counts: Counts,
    seed: u64,
    larder: PathBuf,
    /// The operations to time (all when empty).
    ops: Vec<String>,
    /// CPUs of the client and of the serving side.
    pin: Option<(usize, usize)>,
}

/// What one child measured.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ServerResult {
    timings: Vec<Timed>,
    vmhwm_kib: u64,
}

/// Runs the suite and prints the report.
pub fn run(args: &ServerArgs) -> Result<()> {
    if !args.workloads.trim().is_empty() {
        return workload_suite::run(args);
    }
    if !args.load_mixes.trim().is_empty() {
        return load_suite::run(args);
    }
    let peers: Vec<String> = args.peers.split(',').map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect();
    for p in &peers {
        if !PEERS.contains(&p.as_str()) {
            bail!("unknown peer {p:?}: {}", PEERS.join(", "));
        }
    }
    if args.runs == 0 || args.scale.is_nan() || args.scale <= 0.0 {
        bail!("--runs and --scale must be positive");
    }
    let larder = match &args.larder {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("larder"),
    };
    if peers.iter().any(|p| p == "served" || p == "leased") && !larder.is_file() {
        bail!("no larder binary at {} (cargo build --release -p larder-cli, or --larder PATH)", larder.display());
    }
    let wanted: Vec<String> = args.ops.split(',').map(|o| o.trim().to_string()).filter(|o| !o.is_empty()).collect();
    for o in &wanted {
        if !OPS.contains(&o.as_str()) {
            bail!("unknown operation {o:?}: {}", OPS.join(", "));
        }
    }
    std::fs::create_dir_all(&args.dir)?;
    let info = RunInfo::collect(&args.dir);
    let load_before = load_average();
    let counts = Counts::scaled(args.scale);
    let mut results: BTreeMap<String, Vec<Result<ServerResult, String>>> = BTreeMap::new();
    for round in 0..args.runs {
        let mut order = peers.clone();
        order.rotate_left(round % peers.len().max(1));
        eprintln!("round {}/{}: {}", round + 1, args.runs, order.join(", "));
        for peer in &order {
            let dir = args.dir.join(format!("{peer}-{round}"));
            let _ = std::fs::remove_dir_all(&dir);
            let fresh = FreshFs::make(&dir, "ext4", args.image_gib)?;
            let spec = ServerSpec {
                peer: peer.clone(),
                dir: fresh.mnt.clone(),
                counts,
                seed: args.seed,
                larder: larder.clone(),
                ops: wanted.clone(),
                pin: args.pin,
            };
            let r: Result<ServerResult, String> =
                crate::spawn_child("server-child", &spec, Some(Duration::from_secs(args.child_timeout_secs)));
            match &r {
                Ok(r) => {
                    let line: Vec<String> = r
                        .timings
                        .iter()
                        .map(|t| format!("{} {:.1}/{:.1}", t.op, t.secs * 1e6 / t.ops as f64, t.p50_ns as f64 / 1e3))
                        .collect();
                    eprintln!("  {peer:8} µs/op mean/p50: {}", line.join(", "));
                }
                Err(why) => eprintln!("  {peer:8} failed: {why}"),
            }
            drop(fresh);
            let _ = std::fs::remove_dir_all(&dir);
            results.entry(peer.clone()).or_default().push(r);
        }
    }
    let load_after = load_average();
    let text = render(args, &info, counts, &peers, &results, (&load_before, &load_after));
    print!("{text}");
    if let Some(out) = &args.out {
        for path in crate::chart::write_outputs(out, &text, &chart_results(&info, &peers, &results))? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// The run's medians as a results file (`server.json`, the chart's input):
/// ops/s of each peer in each operation, from the timed loops' mean time
/// per operation (the report's "Median ops/s"); `served` is Larder.
fn chart_results(info: &RunInfo, peers: &[String], results: &Results) -> crate::chart::ChartResults {
    let operations = OPS
        .iter()
        .filter_map(|op| {
            let values: Vec<(String, f64)> = peers
                .iter()
                .filter_map(|p| {
                    metric(results, p, op, mean).filter(|s| s.median > 0.0).map(|s| (p.clone(), 1.0 / s.median))
                })
                .collect();
            (!values.is_empty()).then(|| crate::chart::Operation::rates(op, "ops/s", "served", values))
        })
        .collect();
    crate::chart::ChartResults {
        format: crate::chart::FORMAT,
        suite: "server".to_string(),
        title: "Larder served (larder serve) vs ext4, the FUSE mount, embedded and a do-nothing server".to_string(),
        date: info.date().to_string(),
        commit: info.commit().to_string(),
        command: info.command().to_string(),
        source: String::new(),
        operations,
    }
}

/// /proc/loadavg's first three fields.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// The child: runs one peer's operations and prints a JSON line.
pub fn run_child(spec: &str) -> Result<()> {
    let spec: ServerSpec = serde_json::from_str(spec)?;
    if let Some((_, server)) = spec.pin {
        // Threads and processes the set-up starts serve: they stay there.
        pin_to(server)?;
    }
    let wanted = |op: &str| spec.ops.is_empty() || spec.ops.iter().any(|w| w == op);
    let timings = match spec.peer.as_str() {
        "ext4" => {
            let base = spec.dir.join("bench");
            std::fs::create_dir(&base)?;
            client_side(&spec)?;
            let first = Syscalls::new(&base)?;
            let mut timings = ops::run(&first, spec.counts, spec.seed, &spec.ops)?;
            timings.extend(cold_shared::shared_ops(&first, &Syscalls::new(&base)?, spec.counts, spec.seed, &wanted)?);
            let root = spec.dir.join("cold");
            std::fs::create_dir(&root)?;
            timings.extend(cold_shared::cold_ops(&mut peers::Ext4Peer { root }, spec.counts, spec.seed, &wanted)?);
            timings
        }
        "fuse0" | "fuse" => {
            let mut timings = through_mount(&spec)?;
            let mut peer = peers::MountPeer {
                spec: &spec,
                store: spec.dir.join("cold-store"),
                mnt: spec.dir.join("cold-mnt"),
                options: mount_options(&spec),
                mounted: None,
            };
            timings.extend(cold_shared::cold_ops(&mut peer, spec.counts, spec.seed, &wanted)?);
            timings
        }
        "embedded" => {
            let fs = larder_fs::Fs::create(&spec.dir.join("store"), larder_fs::FsOptions::default())?;
            let target = Embedded::new(fs, "bench")?;
            client_side(&spec)?;
            let mut timings = ops::run(&target, spec.counts, spec.seed, &spec.ops)?;
            timings.extend(cold_shared::shared_ops(&target, &target, spec.counts, spec.seed, &wanted)?);
            target.fs.close()?;
            let mut peer = peers::EmbeddedPeer { spec: &spec, store: spec.dir.join("cold-store") };
            timings.extend(cold_shared::cold_ops(&mut peer, spec.counts, spec.seed, &wanted)?);
            timings
        }
        "served" | "leased" | "null" => {
            let mut timings = served(&spec, &wanted)?;
            let mut peer = peers::ServedPeer {
                spec: &spec,
                store: spec.dir.join("cold-store"),
                socket: spec.dir.join("cold.sock"),
                process: None,
                made: false,
            };
            timings.extend(cold_shared::cold_ops(&mut peer, spec.counts, spec.seed, &wanted)?);
            timings
        }
        p => bail!("unknown peer {p}"),
    };
    let r = ServerResult { timings, vmhwm_kib: crate::sys::status_kib("VmHWM") };
    println!("{}", serde_json::to_string(&r)?);
    Ok(())
}

/// With `--pin`, moves this thread (the one that runs the operations) to
/// the client's CPU.
fn client_side(spec: &ServerSpec) -> Result<()> {
    match spec.pin {
        Some((client, _)) => pin_to(client),
        None => Ok(()),
    }
}

/// The mount's options for peer `fuse0` (timeouts 0) or `fuse` (the defaults).
fn mount_options(spec: &ServerSpec) -> larder_fuse::MountOptions {
    let ttl = if spec.peer == "fuse0" { Duration::ZERO } else { larder_fuse::MountOptions::default().entry_timeout };
    larder_fuse::MountOptions { entry_timeout: ttl, attr_timeout: ttl, ..Default::default() }
}

fn through_mount(spec: &ServerSpec) -> Result<Vec<Timed>> {
    let mnt = spec.dir.join("mnt");
    std::fs::create_dir_all(&mnt)?;
    let fs = std::sync::Arc::new(larder_fs::Fs::create(&spec.dir.join("store"), larder_fs::FsOptions::default())?);
    let mounted = larder_fuse::spawn(fs, &mnt, &mount_options(spec))?;
    let wanted = |op: &str| spec.ops.is_empty() || spec.ops.iter().any(|w| w == op);
    let run = || -> Result<Vec<Timed>> {
        let base = mnt.join("bench");
        std::fs::create_dir(&base)?;
        client_side(spec)?;
        let first = Syscalls::new(&base)?;
        let mut timings = ops::run(&first, spec.counts, spec.seed, &spec.ops)?;
        timings.extend(cold_shared::shared_ops(&first, &Syscalls::new(&base)?, spec.counts, spec.seed, &wanted)?);
        Ok(timings)
    };
    let timings = run();
    mounted.unmount()?;
    timings
}

/// A server process, stopped (SIGTERM, then waited for) when dropped.
struct ServerProcess(Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let pid = rustix::process::Pid::from_child(&self.0);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let _ = self.0.wait();
    }
}

/// Starts `larder serve` (peers `served` and `leased`) or the do-nothing
/// server (peer `null`) in a process of its own, connects (with leases
/// for `leased` only), and runs the operations.
fn served(spec: &ServerSpec, wanted: &dyn Fn(&str) -> bool) -> Result<Vec<Timed>> {
    let socket = spec.dir.join("server.sock");
    let mut command = if spec.peer != "null" {
        let store = spec.dir.join("store");
        larder_fs::Fs::create(&store, larder_fs::FsOptions::default())?.close()?;
        let mut c = Command::new(&spec.larder);
        c.arg("serve").arg(&store).arg("--socket").arg(&socket).arg("--workers").arg("1");
        c
    } else {
        let mut c = Command::new(std::env::current_exe()?);
        c.arg("server-null").arg("--socket").arg(&socket);
        c
    };
    let process = ServerProcess(
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the server")?,
    );
    let client = connect(&socket, spec.peer == "leased", Duration::from_secs(30))?;
    let target = Served::new(client, "bench")?;
    client_side(spec)?;
    let mut timings = ops::run(&target, spec.counts, spec.seed, &spec.ops)?;
    if spec.ops.is_empty() || spec.ops.iter().any(|o| o == "append16k-zc") {
        timings.push(ops::zero_copy_append(&target, spec.counts)?);
    }
    if cold_shared::SHARED_OPS.iter().any(|op| wanted(op)) {
        let second = Served::attach(connect(&socket, spec.peer == "leased", Duration::from_secs(30))?, "bench");
        timings.extend(cold_shared::shared_ops(&target, &second, spec.counts, spec.seed, wanted)?);
    }
    drop(target);
    drop(process);
    Ok(timings)
}

/// Connects to the server at `socket` (with or without leases), waiting
/// up to `timeout` for it to listen.
fn connect(socket: &Path, leases: bool, timeout: Duration) -> Result<larder_client::Client> {
    connect_with(socket, &larder_client::ClientOptions { leases, ..Default::default() }, timeout)
}

/// [`connect`] with the client's options.
fn connect_with(
    socket: &Path,
    options: &larder_client::ClientOptions,
    timeout: Duration,
) -> Result<larder_client::Client> {
    let deadline = Instant::now() + timeout;
    loop {
        match larder_client::Client::connect_socket_with_options(socket, options) {
            Ok(client) => return Ok(client),
            Err(e) if Instant::now() >= deadline => bail!("no server answered on {}: {e}", socket.display()),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

type Results = BTreeMap<String, Vec<Result<ServerResult, String>>>;

/// Median over `peer`'s runs of `f` of its timing of `op`, with min and max.
fn metric(results: &Results, peer: &str, op: &str, f: impl Fn(&Timed) -> f64) -> Option<crate::report::Stat> {
    let runs = results.get(peer)?;
    stat(
        runs.iter()
            .filter_map(|r| r.as_ref().ok())
            .filter_map(|r| r.timings.iter().find(|t| t.op == op))
            .map(f)
            .collect(),
    )
}

/// Mean seconds per operation (the loop's time over its operations).
fn mean(t: &Timed) -> f64 {
    t.secs / t.ops as f64
}

/// Median latency of one operation, seconds.
fn p50(t: &Timed) -> f64 {
    t.p50_ns as f64 / 1e9
}

/// 99th percentile latency, seconds.
fn p99(t: &Timed) -> f64 {
    t.p99_ns as f64 / 1e9
}

/// The ratios the bar names (and three more for context), as
/// (peer, against): throughput of `peer` over that of `against`.
/// `embedded+null` is the time of the engine's own call plus the
/// do-nothing server's round trip(s): what serving would cost if the
/// server added nothing of its own.
const RATIOS: [(&str, &str); 9] = [
    ("leased", "ext4"),
    ("leased", "served"),
    ("leased", "fuse"),
    ("served", "fuse0"),
    ("served", "fuse"),
    ("served", "null"),
    ("served", "ext4"),
    ("served", "embedded"),
    ("served", "embedded+null"),
];

/// `metric` of a peer, or the sum of the medians of peers joined by `+`.
fn combined(results: &Results, peer: &str, op: &str, f: &dyn Fn(&Timed) -> f64) -> Option<f64> {
    peer.split('+').map(|p| metric(results, p, op, f).map(|s| s.median)).sum()
}

/// Whether every part of `peer` (peers joined by `+`) ran.
fn ran(peers: &[String], peer: &str) -> bool {
    peer.split('+').all(|part| peers.iter().any(|p| p == part))
}

/// One table: a cell per peer (`cell`), then the ratios of `f`.
fn table(
    o: &mut String,
    peers: &[String],
    results: &Results,
    f: &dyn Fn(&Timed) -> f64,
    cell: &dyn Fn(&str, &str) -> Option<String>,
) {
    let ratios: Vec<(&str, &str)> = RATIOS.into_iter().filter(|(a, b)| ran(peers, a) && ran(peers, b)).collect();
    let _ = write!(o, "| op |");
    for p in peers {
        let _ = write!(o, " {p} |");
    }
    for (a, b) in &ratios {
        let _ = write!(o, " {a} ÷ {b} |");
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "|---|{}{}", "---:|".repeat(peers.len()), "---:|".repeat(ratios.len()));
    for op in OPS {
        if !peers.iter().any(|p| metric(results, p, op, mean).is_some()) {
            continue;
        }
        let _ = write!(o, "| {op} |");
        for p in peers {
            let _ = write!(o, " {} |", cell(p, op).unwrap_or_default());
        }
        // Throughput ratios: above 1, the first peer is faster.
        for (a, b) in &ratios {
            match (combined(results, a, op, f), combined(results, b, op, f)) {
                (Some(x), Some(y)) => {
                    let _ = write!(o, " {:.2} |", y / x);
                }
                _ => {
                    let _ = write!(o, " |");
                }
            }
        }
        let _ = writeln!(o);
    }
}

fn render(
    args: &ServerArgs,
    info: &RunInfo,
    counts: Counts,
    peers: &[String],
    results: &Results,
    load: (&str, &str),
) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n## Server: single operations — {}\n", info.date());
    info.write_header(&mut o);
    let _ = writeln!(o, "- Load average (1, 5, 15 min): {} before the rounds, {} after", load.0, load.1);
    let _ = writeln!(
        o,
        "- CPUs: {}",
        match args.pin {
            Some((client, server)) => format!(
                "pinned: the client's thread on CPU {client}; the server process, the FUSE mount's threads and the embedded store's background threads on CPU {server}"
            ),
            None => "not pinned (the scheduler places client and server)".to_string(),
        }
    );
    let _ = writeln!(
        o,
        "- Operations per run: {} reads and {} writes of each kind (a {} MiB file, written whole and read once first: cached; read4k-small: a 512 KiB file opened read-only and read whole first, \
         which fits a leased client's cache), \
         {} appends, {} stats and opens of random names in a directory of {} files, {} listings of it, {} creates, renames and unlinks",
        counts.io,
        counts.io,
        ops::FILE_BYTES >> 20,
        counts.appends,
        counts.meta,
        ops::DIRECTORY_FILES,
        counts.listings,
        counts.creates
    );
    let _ = writeln!(
        o,
        "- Uncached (`*-cold-*`): {} 4 KiB blocks of a {} MiB file each touched once, in order or in a random permutation, \
         after the peer was shut (its server stopped, its mount unmounted, its store closed), `sync; echo 3 > \
         /proc/sys/vm/drop_caches` and the peer opened again (the do-nothing server runs on: it caches nothing). Two \
         clients (`*-shared`, `*-private2`): two connections (two descriptors on ext4 and the mount, two threads on one \
         embedded store) doing {} random 4 KiB reads or writes each at once, of one cached file or of a file each; \
         the time is the wall time of both over the operations of both",
        counts.io.min(ops::FILE_BYTES / 4096),
        ops::FILE_BYTES >> 20,
        counts.io
    );
    let _ = writeln!(
        o,
        "- Method: each peer in its own process on a fresh {} GiB ext4 image, its server in another; {} alternating rounds \
         (peer order rotates), median µs/op with min–max; nothing is made durable (no fsync)\n",
        args.image_gib, args.runs
    );
    let _ = writeln!(
        o,
        "Mean µs per operation (the timed loop over its operations; median of the rounds, min–max), and throughput ratios (above 1: the first peer is faster):\n"
    );
    let us = |s: crate::report::Stat| format!("{:.2} ({:.2}–{:.2})", s.median * 1e6, s.min * 1e6, s.max * 1e6);
    table(&mut o, peers, results, &mean, &|p, op| metric(results, p, op, mean).map(us));
    let _ = writeln!(
        o,
        "\nMedian and 99th-percentile latency of one operation, µs (medians of the rounds), and the ratios of the medians:\n"
    );
    table(&mut o, peers, results, &p50, &|p, op| {
        let (m, t) = (metric(results, p, op, p50)?, metric(results, p, op, p99)?);
        Some(format!("{:.2} / {:.1}", m.median * 1e6, t.median * 1e6))
    });
    let _ = writeln!(o, "\nMedian ops/s:\n");
    let _ = writeln!(o, "| op | {} |", peers.join(" | "));
    let _ = writeln!(o, "|---|{}", "---:|".repeat(peers.len()));
    for op in OPS {
        let cells: Vec<String> = peers
            .iter()
            .map(|p| metric(results, p, op, mean).map_or(String::new(), |s| thousands(1.0 / s.median)))
            .collect();
        if cells.iter().all(String::is_empty) {
            continue;
        }
        let _ = writeln!(o, "| {op} | {} |", cells.join(" | "));
    }
    let _ = writeln!(o);
    for p in peers {
        let runs = results.get(p).map_or(&[][..], |v| &v[..]);
        let failed: Vec<&String> = runs.iter().filter_map(|r| r.as_ref().err()).collect();
        let rss = stat(runs.iter().filter_map(|r| r.as_ref().ok()).map(|r| r.vmhwm_kib as f64 / 1024.0).collect());
        let _ = writeln!(
            o,
            "- {p}: peak RSS of the child {} MiB, {} failed runs{}",
            rss.map_or("n/a".to_string(), |s| format!("{:.0}", s.median)),
            failed.len(),
            failed.first().map_or(String::new(), |f| format!(" (first: {})", f.replace('|', "/")))
        );
    }
    o
}

#[cfg(test)]
#[path = "chart_tests.rs"]
mod tests;
