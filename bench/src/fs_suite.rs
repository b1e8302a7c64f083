//! `larder-bench fs`: the file system's native API against ext4 through
//! std::fs, each engine and workload in its own child process, median of
//! alternating rounds.
//!
//! - `create`: N empty files in one directory, durable at the end. Larder:
//!   `Fs::create_batch` with durable commit of the last chunk. ext4: one
//!   `File::create` per name, then `syncfs` of the file system (its
//!   journal-less or journaled metadata all on disk).
//! - `stat`: after creating N files (not timed), M lookups of random names
//!   with their attributes. Larder: `Fs::lookup` (a directory and a name).
//!   ext4: `statat(2)` of the name relative to the open directory, the
//!   syscall that matches a lookup in one directory (the kernel's dentry
//!   and inode caches warm). The `fuse-*` workloads stat whole paths, for
//!   every engine, as a program reaching a mount does.
//!
//! Every run gets a fresh file system: an image file on --dir's disk,
//! made with mkfs (ext4 for `larder` and `ext4`, XFS for `xfs`) and
//! loop-mounted with direct I/O (see [`FreshFs`]), removed after the run.
//! Why: ext4 without a journal (this machine's root) avoids reusing
//! recently deleted inodes, so creating 1M files after deleting a previous
//! run's 1M scanned inode bitmaps at 100% CPU (`recently_deleted`,
//! `find_inode_bit` in perf) and ran 7x slower than the same run on a
//! fresh file system. Needs root (mount, losetup).
//!
//! - `stat-warm`, `stat-cold`: issue 24's lookups, warm (the names looked
//!   up once untimed, Larder's metadata cache sized by `--meta-cache-mb`,
//!   the kernel's slab caches reported) and cold (page cache dropped and
//!   the image remounted between a prepare child and a measure child); see
//!   [`lookups`].
//! - `mix-file`, `mix-web`, `mix-mail`: FileBench-like personalities
//!   (see `fs_mix`), natively; `fuse-mix-*` the same through a mount
//!   (Larder's, bindfs over ext4) with ext4 without FUSE beside them.
//! - `fuse-create`, `fuse-stat0`, `fuse-stat`: creates and stats through
//!   a mount of Larder, a do-nothing fuser file system (`null`, mounted
//!   with `default_permissions`, so that the kernel asks for a directory's
//!   attributes before each create in it; `null-unchecked` without;
//!   `null-stateless` without, and with no CREATE, OPEN, FLUSH or
//!   RELEASE: creates by MKNOD, opens served by the kernel), bindfs, and
//!   ext4 without FUSE.
//!
//! Peak memory is each child's VmHWM. `fuse-create` also reports the CPU
//! a file costs the creating thread, the mount's serving threads (fuser's,
//! where the mount is served in the child) and the whole child, each in
//! µs (see `through_mount`): a busy machine moves them less than the rate.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::report::{stat, thousands, RunInfo};

mod lookups;
// The server suite drops the caches as the cold lookups do.
#[cfg(feature = "larder-server")]
pub(crate) use lookups::drop_caches;

/// Knobs of the fs suite.
#[derive(Args, Debug, Clone)]
pub struct FsArgs {
    /// Files created in one directory.
    #[arg(long, default_value_t = 1_000_000)]
    files: u64,
    /// Random lookups of the stat workload (over `--files` files).
    #[arg(long, default_value_t = 100_000)]
    stats: u64,
    /// Rounds; the report gives the median. Engine order rotates each round.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Engines, comma-separated: larder,ext4,xfs (native workloads) and
    /// larder,null,null-unchecked,null-stateless,bindfs,ext4 (fuse-*
    /// workloads: Larder's mount, a do-nothing fuser file system with and
    /// without the kernel's permission checks, and without opens, bindfs
    /// over ext4, ext4 without FUSE).
    #[arg(long, default_value = "larder,ext4,xfs,null,bindfs")]
    engines: String,
    /// Workloads, comma-separated: create,stat,stat-warm,stat-cold (native API),
    /// fuse-create,fuse-stat0,fuse-stat (through a mount; stat0 with
    /// cache timeouts 0, stat with each file system's defaults).
    #[arg(long, default_value = "create,stat,fuse-create,fuse-stat0,fuse-stat")]
    workloads: String,
    /// Parent directory of the per-run directories (each deleted after its run).
    #[arg(long, default_value = "/tmp/larder-bench-fs")]
    dir: PathBuf,
    /// Seed of the random lookups.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// A child still running after this many seconds is killed.
    #[arg(long, default_value_t = 1800)]
    child_timeout_secs: u64,
    /// Files created through a FUSE mount (workloads fuse-create, fuse-stat0, fuse-stat).
    #[arg(long, default_value_t = 100_000)]
    fuse_files: u64,
    /// Larder's metadata-cache budget, MiB, in the stat-warm and stat-cold
    /// workloads (the store's default when not given).
    #[arg(long)]
    meta_cache_mb: Option<usize>,
    /// Size of each run's file system image, GiB (sparse).
    #[arg(long, default_value_t = 16)]
    image_gib: u64,
    /// Threads of the mix workloads.
    #[arg(long, default_value_t = 8)]
    mix_threads: usize,
    /// Scales the mix workloads' loops per thread.
    #[arg(long, default_value_t = 1.0)]
    mix_scale: f64,
    /// Prints each mix's rate every 200 ms (to the child's stderr).
    #[arg(long)]
    mix_progress: bool,
    /// Also write the report, the results and their chart into this
    /// directory: fs.md, fs.json, fs.svg.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// A freshly made, loop-mounted file system, unmounted and removed when
/// dropped.
pub(crate) struct FreshFs {
    image: PathBuf,
    pub(crate) mnt: PathBuf,
    /// The loop device it is mounted from.
    device: String,
}

impl FreshFs {
    /// Makes and mounts an image of `gib` GiB in `dir` with mkfs's defaults.
    #[cfg_attr(not(feature = "larder-server"), allow(dead_code))]
    pub(crate) fn make(dir: &Path, fstype: &str, gib: u64) -> Result<FreshFs> {
        Self::make_with_inodes(dir, fstype, gib, None)
    }

    /// As [`FreshFs::make`]; an ext4 image gets `inodes` inodes when given
    /// (mkfs -N).
    pub(crate) fn make_with_inodes(dir: &Path, fstype: &str, gib: u64, inodes: Option<u64>) -> Result<FreshFs> {
        std::fs::create_dir_all(dir)?;
        let image = dir.join("fs.img");
        let mnt = dir.join("mnt");
        std::fs::create_dir_all(&mnt)?;
        std::fs::File::create(&image)?.set_len(gib << 30)?;
        let mkfs = format!("mkfs.{fstype}");
        // ext4 without lazy init: no kernel thread zeroing inode tables
        // and journal under the measured runs (Larder likewise waits for
        // its spare container before a mix's timed part).
        let quiet_force: &[&str] =
            if fstype == "xfs" { &["-q", "-f"] } else { &["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"] };
        let inodes = inodes.filter(|_| fstype == "ext4").map(|n| n.to_string());
        let inode_args: Vec<&str> = inodes.iter().flat_map(|n| ["-N", n.as_str()]).collect();
        run_cmd(&mkfs, &[quiet_force, &inode_args, &[image.to_str().unwrap_or_default()]].concat())?;
        // Direct I/O from the loop device to its image: one page cache
        // (the mounted file system's), and a flush costs what the disk's
        // does. A buffered loop device caches every block twice and turns
        // each flush into writeback of the image's dirty pages by the
        // loop worker (10% of the machine in a profile of the file-server
        // mix), a cost no real disk has.
        let args = ["--find", "--show", "--direct-io=on", image.to_str().unwrap_or_default()];
        let out = std::process::Command::new("losetup").args(args).output()?;
        if !out.status.success() {
            bail!("losetup {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
        }
        let device = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let fresh = FreshFs { image, mnt, device };
        run_cmd("mount", &[&fresh.device, fresh.mnt.to_str().unwrap_or_default()])?;
        Ok(fresh)
    }
}

impl FreshFs {
    /// Unmounts the file system, drops the machine's page cache, dentries
    /// and inodes, and mounts it again: nothing of it is cached.
    pub(crate) fn remount_cold(&self) -> Result<()> {
        let mnt = self.mnt.to_str().unwrap_or_default();
        rustix::fs::sync();
        run_cmd("umount", &[mnt])?;
        lookups::drop_caches()?;
        run_cmd("mount", &[&self.device, mnt])
    }
}

impl Drop for FreshFs {
    fn drop(&mut self) {
        let _ = run_cmd("umount", &[self.mnt.to_str().unwrap_or_default()]);
        let _ = run_cmd("losetup", &["-d", &self.device]);
        let _ = std::fs::remove_file(&self.image);
    }
}

fn run_cmd(program: &str, args: &[&str]) -> Result<()> {
    let out = std::process::Command::new(program).args(args).output()?;
    if !out.status.success() {
        bail!("{program} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// What one child does.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct FsSpec {
    engine: String,
    workload: String,
    dir: PathBuf,
    files: u64,
    stats: u64,
    seed: u64,
    #[serde(default)]
    mix_threads: usize,
    #[serde(default)]
    mix_scale: f64,
    #[serde(default)]
    mix_progress: bool,
    #[serde(default)]
    meta_cache_mb: Option<usize>,
}

/// What one child measured.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct FsResult {
    ops: u64,
    secs: f64,
    vmhwm_kib: u64,
    /// Named figures the report lists beside the rates (cache sizes,
    /// open time): see [`lookups`].
    #[serde(default)]
    details: std::collections::BTreeMap<String, f64>,
}

fn name(i: u64) -> String {
    format!("f{i:07}")
}

/// Runs the suite and prints the report.
pub fn run(args: &FsArgs) -> Result<()> {
    let engines: Vec<String> = args.engines.split(',').map(str::to_string).collect();
    let workloads: Vec<String> = args.workloads.split(',').map(str::to_string).collect();
    for e in &engines {
        if !["larder", "ext4", "xfs", "null", "null-unchecked", "null-stateless", "bindfs"].contains(&e.as_str()) {
            bail!("unknown engine {e:?}: larder, ext4, xfs, null, null-unchecked, null-stateless, bindfs");
        }
    }
    std::fs::create_dir_all(&args.dir)?;
    let info = RunInfo::collect(&args.dir);
    let mut results: std::collections::BTreeMap<(String, String), Vec<Result<FsResult, String>>> = Default::default();
    for round in 0..args.runs {
        let mut order = engines.clone();
        order.rotate_left(round % engines.len().max(1));
        eprintln!("round {}/{}: {}", round + 1, args.runs, order.join(", "));
        for w in &workloads {
            for e in order.iter().filter(|e| applies(e, w)) {
                let dir = args.dir.join(format!("{e}-{w}-{round}"));
                let _ = std::fs::remove_dir_all(&dir);
                let inodes = ext4_inodes(args, w);
                let fresh =
                    FreshFs::make_with_inodes(&dir, if e == "xfs" { "xfs" } else { "ext4" }, args.image_gib, inodes)?;
                let mut spec = FsSpec {
                    engine: e.clone(),
                    workload: w.clone(),
                    dir: fresh.mnt.clone(),
                    files: if w.starts_with("fuse-") { args.fuse_files } else { args.files },
                    stats: args.stats,
                    seed: args.seed,
                    mix_threads: args.mix_threads,
                    mix_scale: args.mix_scale,
                    mix_progress: args.mix_progress,
                    meta_cache_mb: args.meta_cache_mb,
                };
                let timeout = Some(Duration::from_secs(args.child_timeout_secs));
                let r: Result<FsResult, String> = if w == "stat-cold" {
                    // Prepared by one child, measured by another after the
                    // image was remounted with every cache dropped.
                    spec.workload = "stat-cold-prepare".to_string();
                    crate::spawn_child::<_, FsResult>("fs-child", &spec, timeout).and_then(|prepared| {
                        fresh.remount_cold().map_err(|e| format!("remounting cold: {e:#}"))?;
                        spec.workload = w.clone();
                        let mut r: FsResult = crate::spawn_child("fs-child", &spec, timeout)?;
                        r.details.insert("create_secs".to_string(), prepared.secs);
                        Ok(r)
                    })
                } else {
                    crate::spawn_child("fs-child", &spec, timeout)
                };
                match &r {
                    Ok(r) => eprintln!("  {w:7} {e:8} {} ops/s in {:.2} s", thousands(r.ops as f64 / r.secs), r.secs),
                    Err(why) => eprintln!("  {w:7} {e:8} failed: {why}"),
                }
                drop(fresh);
                let _ = std::fs::remove_dir_all(&dir);
                results.entry((w.clone(), e.clone())).or_default().push(r);
            }
        }
    }
    let text = render(args, &info, &engines, &workloads, &results);
    print!("{text}");
    if let Some(out) = &args.out {
        let chart = chart_results(&info, &engines, &workloads, &results);
        for path in crate::chart::write_outputs(out, &text, &chart)? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// The run's medians as a results file (`fs.json`, the chart's input): ops/s
/// of each engine in each workload.
fn chart_results(
    info: &RunInfo,
    engines: &[String],
    workloads: &[String],
    results: &Results,
) -> crate::chart::ChartResults {
    let operations = workloads
        .iter()
        .filter_map(|w| {
            let values: Vec<(String, f64)> = engines
                .iter()
                .filter(|e| applies(e, w))
                .filter_map(|e| {
                    let runs = results.get(&(w.clone(), e.clone()))?;
                    let rates = runs.iter().filter_map(|r| r.as_ref().ok()).map(|r| r.ops as f64 / r.secs).collect();
                    stat(rates).map(|s| (e.clone(), s.median))
                })
                .collect();
            (!values.is_empty()).then(|| crate::chart::Operation::rates(w, "ops/s", "larder", values))
        })
        .collect();
    crate::chart::ChartResults {
        format: crate::chart::FORMAT,
        suite: "fs".to_string(),
        title: "Larder fs vs ext4, XFS and FUSE peers".to_string(),
        date: info.date().to_string(),
        commit: info.commit().to_string(),
        command: info.command().to_string(),
        source: String::new(),
        operations,
    }
}

type Results = std::collections::BTreeMap<(String, String), Vec<Result<FsResult, String>>>;

fn render(args: &FsArgs, info: &RunInfo, engines: &[String], workloads: &[String], results: &Results) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n## Larder fs (native API) vs ext4 and XFS — {}\n", info.date());
    info.write_header(&mut o);
    let _ = writeln!(o, "- Files: {} in one directory; stats: {} random lookups", args.files, args.stats);
    let _ = writeln!(o, "- Method: each engine and workload in its own process, on a fresh {} GiB file system image made for the run (ext4 for larder and ext4, XFS for xfs; mkfs defaults but ext4's lazy inode-table and journal init off, loop-mounted with direct I/O on --dir's disk); {} alternating rounds, median with min–max; peak memory = the child's VmHWM\n", args.image_gib, args.runs);
    for w in workloads {
        let what = match w.as_str() {
            "create" => "empty files created with the native API, durable at the end",
            "stat" => "lookups with attributes, native API (ext4, XFS: statat(2) of the name relative to the open directory)",
            "stat-warm" => "lookups with attributes, native API, every name looked up once before (untimed); Larder's metadata cache budget --meta-cache-mb (ext4, XFS: statat(2) relative to the open directory)",
            "stat-cold" => "lookups with attributes, native API, after the image was unmounted, the page cache dropped and the image mounted again (Larder: the store reopened, its open timed apart)",
            "fuse-create" => "empty files created through a mount, durable at the end",
            "fuse-stat0" => "stat(2) of random files through a mount, cache timeouts 0",
            "mix-file" | "fuse-mix-file" => "FileBench-like file server (create+write 128 KiB, append, read, delete, stat), durable at the end",
            "mix-web" | "fuse-mix-web" => "FileBench-like web server (10 whole-file reads of 16 KiB, one log append), durable at the end",
            "mix-mail" | "fuse-mix-mail" => "FileBench-like mail server (delete, create+write+fsync, append+fsync, read), durable at the end",
            _ => "stat(2) of random files through a mount, each file system's default cache timeouts (Larder and the do-nothing one: 60 s; bindfs: its own)",
        };
        let _ = writeln!(o, "### {w}: {what}\n");
        let _ = writeln!(o, "| Engine | ops/s | min–max | Larder ÷ | s (median) | peak RSS MiB | failed runs |");
        let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|");
        let rate = |e: &str| {
            stat(results.get(&(w.clone(), e.to_string())).map_or(Vec::new(), |v| {
                v.iter().filter_map(|r| r.as_ref().ok()).map(|r| r.ops as f64 / r.secs).collect()
            }))
        };
        let larder = rate("larder");
        for e in engines.iter().filter(|e| applies(e, w)) {
            let runs = results.get(&(w.clone(), e.clone()));
            let ok: Vec<&FsResult> = runs.map_or(Vec::new(), |v| v.iter().filter_map(|r| r.as_ref().ok()).collect());
            let failed = runs.map_or(0, |v| v.iter().filter(|r| r.is_err()).count());
            let secs = stat(ok.iter().map(|r| r.secs).collect());
            let rss = stat(ok.iter().map(|r| r.vmhwm_kib as f64 / 1024.0).collect());
            match (rate(e), secs, rss) {
                (Some(r), Some(s), Some(m)) => {
                    let ratio = larder.map_or("n/a".to_string(), |l| format!("{:.2}", l.median / r.median));
                    let _ = writeln!(
                        o,
                        "| {e} | {} | {}–{} | {ratio} | {:.2} | {:.0} | {failed} |",
                        thousands(r.median),
                        thousands(r.min),
                        thousands(r.max),
                        s.median,
                        m.median
                    );
                }
                _ => {
                    let _ = writeln!(o, "| {e} | failed | | | | | {failed} |");
                }
            }
        }
        let _ = writeln!(o);
        write_details(&mut o, engines, w, results);
    }
    o
}

/// The medians of the named figures the children reported for workload
/// `w` (cache sizes, open time), one line per engine; nothing if none.
fn write_details(o: &mut String, engines: &[String], w: &str, results: &Results) {
    for e in engines {
        let Some(runs) = results.get(&(w.to_string(), e.clone())) else { continue };
        let ok: Vec<&FsResult> = runs.iter().filter_map(|r| r.as_ref().ok()).collect();
        let mut keys: Vec<&String> = ok.iter().flat_map(|r| r.details.keys()).collect();
        keys.sort();
        keys.dedup();
        if keys.is_empty() {
            continue;
        }
        let figures: Vec<String> = keys
            .iter()
            .filter_map(|k| {
                let s = stat(ok.iter().filter_map(|r| r.details.get(*k).copied()).collect())?;
                Some(format!(
                    "{k} {}",
                    if s.median.abs() >= 100.0 { format!("{:.0}", s.median) } else { format!("{:.3}", s.median) }
                ))
            })
            .collect();
        let _ = writeln!(o, "- {e} (medians): {}", figures.join(", "));
    }
    if results.keys().any(|(rw, _)| rw == w) {
        let _ = writeln!(o);
    }
}

/// Whether engine `e` runs workload `w`: native workloads on larder, ext4
/// and xfs; mount workloads on larder, ext4 (without FUSE, for reference),
/// null and bindfs, except that the do-nothing file system holds no data
/// for a mix.
fn applies(e: &str, w: &str) -> bool {
    let fuse = w.starts_with("fuse-");
    match e {
        "larder" | "ext4" => true,
        "xfs" => !fuse,
        "null" | "null-unchecked" | "null-stateless" => fuse && !w.starts_with("fuse-mix-"),
        _ => fuse,
    }
}

/// Bytes per inode of mkfs.ext4's defaults for images this size
/// (mke2fs.conf's `inode_ratio`): an image holds this many files.
const EXT4_BYTES_PER_INODE: u64 = 16 << 10;

/// The inode count an ext4 image needs for workload `w` (mkfs -N) when
/// mkfs's default for `--image-gib` would be too few for the files made
/// on it (directly or through bindfs), with a margin for directories and
/// the file system's own inodes; `None` when the default holds them.
fn ext4_inodes(args: &FsArgs, w: &str) -> Option<u64> {
    let files = match w {
        "create" | "stat" | "stat-warm" | "stat-cold" => args.files,
        "fuse-create" | "fuse-stat0" | "fuse-stat" => args.fuse_files,
        _ => return None,
    };
    let default = (args.image_gib << 30) / EXT4_BYTES_PER_INODE;
    let wanted = files + files / 64 + 1024;
    (wanted > default).then_some(wanted)
}

/// The child: runs one engine on one workload and prints a JSON line.
pub fn run_child(spec: &str) -> Result<()> {
    let spec: FsSpec = serde_json::from_str(spec)?;
    if spec.workload.starts_with("stat-") {
        let m = lookups::child(&spec, &spec.workload)?;
        let r = FsResult { ops: m.ops, secs: m.secs, vmhwm_kib: crate::sys::status_kib("VmHWM"), details: m.details };
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    let mut details = Default::default();
    let (ops, secs) = match (spec.engine.as_str(), spec.workload.as_str()) {
        (e, w) if w.starts_with("fuse-mix-") && e != "ext4" => mix_through_mount(&spec, &w["fuse-mix-".len()..])?,
        (e, w) if w.starts_with("mix-") || w.starts_with("fuse-mix-") => {
            mix_native(&spec, e, w.rsplit('-').next().unwrap_or_default(), &mut details)?
        }
        (e, w) if w.starts_with("fuse-") && e != "ext4" => through_mount(&spec, w, &mut details)?,
        ("ext4", w) if w.starts_with("fuse-") => {
            native_fs(&spec, if w == "fuse-create" { "create" } else { "stat-paths" })?
        }
        ("larder", w) => larder(&spec, w, &mut details)?,
        ("ext4" | "xfs", w) => native_fs(&spec, w)?,
        (e, _) => bail!("unknown engine {e}"),
    };
    let r = FsResult { ops, secs, vmhwm_kib: crate::sys::status_kib("VmHWM"), details };
    println!("{}", serde_json::to_string(&r)?);
    Ok(())
}

/// Random indexes for the stat workload (xorshift, seeded).
fn picks(seed: u64, n: u64, count: u64) -> Vec<u64> {
    let mut x = seed | 1;
    (0..count)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        })
        .collect()
}

/// Larder's native workloads; `create` adds to `details` what its index did
/// while the files were created (runs ingested, bytes merged, time writes
/// waited for merging).
fn larder(spec: &FsSpec, workload: &str, details: &mut std::collections::BTreeMap<String, f64>) -> Result<(u64, f64)> {
    use larder_fs::{Cred, Fs, FsOptions};
    let fs = Fs::create(&spec.dir.join("store"), FsOptions::default())?;
    let r = Cred::root();
    let d = fs.mkdir(&r, fs.root(), b"d", 0o755)?.ino;
    fs.sync()?;
    let names: Vec<String> = (0..spec.files).map(name).collect();
    let before = fs.store().index().stats();
    let create_secs = create_timed(&fs, &r, d, &names)?;
    if workload == "create" {
        let after = fs.store().index().stats();
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        details.insert("ingests".into(), (after.ingests - before.ingests) as f64);
        details.insert("ingested_mib".into(), mib(after.bytes_ingested - before.bytes_ingested));
        details.insert("merges".into(), (after.compactions - before.compactions) as f64);
        details.insert("merged_mib".into(), mib(after.bytes_compacted - before.bytes_compacted));
        details.insert("stall_secs".into(), (after.stall_micros - before.stall_micros) as f64 / 1e6);
        return Ok((spec.files, create_secs));
    }
    let picks = picks(spec.seed, spec.files, spec.stats);
    let start = Instant::now();
    for &i in &picks {
        let a = fs.lookup(&r, d, names[i as usize].as_bytes())?;
        std::hint::black_box(a.size);
    }
    Ok((spec.stats, start.elapsed().as_secs_f64()))
}

/// Seconds taken to create `names` in directory `d` with one durable
/// `create_batch`; fails unless every name was created.
fn create_timed(fs: &larder_fs::Fs, cred: &larder_fs::Cred, d: u64, names: &[String]) -> Result<f64> {
    let refs: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
    let start = Instant::now();
    let done = fs.create_batch(cred, d, &refs, 0o644, larder_fs::Durability::Durable)?;
    let secs = start.elapsed().as_secs_f64();
    if done.created.len() != names.len() {
        bail!("created {} of {} files", done.created.len(), names.len());
    }
    Ok(secs)
}

fn native_fs(spec: &FsSpec, workload: &str) -> Result<(u64, f64)> {
    let d = spec.dir.join("d");
    std::fs::create_dir(&d)?;
    let names: Vec<PathBuf> = (0..spec.files).map(|i| d.join(name(i))).collect();
    let start = Instant::now();
    for p in &names {
        std::fs::File::create_new(p)?;
    }
    syncfs(&d)?;
    let create_secs = start.elapsed().as_secs_f64();
    match workload {
        "create" => Ok((spec.files, create_secs)),
        "stat-paths" => Ok((spec.stats, stat_randomly(spec, &names)?)),
        _ => Ok((spec.stats, stat_in_dir(spec, &d)?)),
    }
}

/// Seconds taken by `spec.stats` statat(2) calls of random names relative
/// to directory `d` (no path walk above it, as a native lookup has none).
fn stat_in_dir(spec: &FsSpec, d: &Path) -> Result<f64> {
    let dir = std::fs::File::open(d)?;
    let names: Vec<std::ffi::CString> =
        (0..spec.files).map(|i| std::ffi::CString::new(name(i))).collect::<Result<_, _>>()?;
    let picks = picks(spec.seed, spec.files, spec.stats);
    let start = Instant::now();
    for &i in &picks {
        let st = rustix::fs::statat(&dir, names[i as usize].as_c_str(), rustix::fs::AtFlags::empty())?;
        std::hint::black_box(st.st_size);
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Seconds taken by `spec.stats` stat(2) calls of random paths of `names`.
fn stat_randomly(spec: &FsSpec, names: &[PathBuf]) -> Result<f64> {
    let picks = picks(spec.seed, spec.files, spec.stats);
    let start = Instant::now();
    for &i in &picks {
        let m = std::fs::metadata(&names[i as usize])?;
        std::hint::black_box(m.len());
    }
    Ok(start.elapsed().as_secs_f64())
}

/// syncfs(2) of the file system holding `path`: every file's data and
/// metadata on it durable.
fn syncfs(path: &Path) -> Result<()> {
    let f = std::fs::File::open(path)?;
    rustix::fs::syncfs(&f)?;
    Ok(())
}

/// A mount of one engine's FUSE file system, unmounted when dropped.
enum Mounted {
    Larder(Option<larder_fuse::Mounted>),
    Null(Option<fuser::BackgroundSession>),
    Bindfs(PathBuf),
}

impl Drop for Mounted {
    fn drop(&mut self) {
        match self {
            Mounted::Larder(m) => {
                if let Some(m) = m.take() {
                    let _ = m.unmount();
                }
            }
            Mounted::Null(s) => {
                if let Some(s) = s.take() {
                    let _ = s.umount_and_join();
                }
            }
            Mounted::Bindfs(mnt) => {
                let _ = run_cmd("fusermount3", &["-u", mnt.to_str().unwrap_or_default()]);
            }
        }
    }
}

/// Mounts `spec.engine` on `spec.dir`/mnt, its data (Larder's store made
/// with `store`, or bindfs's directory) in `spec.dir`/under. Cache
/// timeouts are each file system's defaults (Larder's mount and the
/// do-nothing one: 60 s; bindfs: its own), or 0 with `zero_timeouts`.
/// Returns the mount and the two directories.
fn mount(spec: &FsSpec, zero_timeouts: bool, store: larder_fs::FsOptions) -> Result<(Mounted, PathBuf, PathBuf)> {
    let ttl = if zero_timeouts { Duration::ZERO } else { larder_fuse::MountOptions::default().entry_timeout };
    let mnt = spec.dir.join("mnt");
    std::fs::create_dir_all(&mnt)?;
    // Where the data lands, for a final sync of bindfs's underlying ext4.
    let under = spec.dir.join("under");
    std::fs::create_dir_all(&under)?;
    let mounted = match spec.engine.as_str() {
        "larder" => {
            let fs = std::sync::Arc::new(larder_fs::Fs::create(&under.join("store"), store)?);
            let o = larder_fuse::MountOptions { entry_timeout: ttl, attr_timeout: ttl, ..Default::default() };
            Mounted::Larder(Some(larder_fuse::spawn(fs, &mnt, &o)?))
        }
        "null" | "null-unchecked" | "null-stateless" => {
            let mut c = fuser::Config::default();
            c.mount_options = vec![fuser::MountOption::FSName("null".into())];
            if spec.engine == "null" {
                c.mount_options.push(fuser::MountOption::DefaultPermissions);
            }
            c.n_threads = Some(larder_fuse::MountOptions::default().threads);
            c.clone_fd = true;
            let fs = if spec.engine == "null-stateless" {
                crate::null_fuse::NullFs::stateless(ttl)
            } else {
                crate::null_fuse::NullFs::new(ttl)
            };
            Mounted::Null(Some(fuser::spawn_mount(fs, &mnt, &c)?))
        }
        "bindfs" => {
            let (u, m) = (under.to_str().unwrap_or_default(), mnt.to_str().unwrap_or_default());
            if zero_timeouts {
                run_cmd("bindfs", &["-o", "entry_timeout=0,attr_timeout=0,negative_timeout=0", u, m])?;
            } else {
                run_cmd("bindfs", &[u, m])?;
            }
            Mounted::Bindfs(mnt.clone())
        }
        e => bail!("no mount for engine {e}"),
    };
    Ok((mounted, mnt, under))
}

/// The names of the threads that serve a mount in this process (fuser's,
/// for Larder's mount and the do-nothing ones), less their number.
const SERVING_THREADS: &str = "fuser-";

/// Creates (and, for the stat workloads, stats) files through a mount of
/// `spec.engine` on a directory of `spec.dir`. For `fuse-create`, adds to
/// `details` the CPU of the timed part in µs a file: the creating
/// thread's (`creating_cpu_us`: the kernel's side of each open and close),
/// the serving threads' for a mount served in this process
/// (`serving_cpu_us`: fuser's threads, each request's read, handler and
/// reply; not bindfs, a process of its own; `serving_user_cpu_us` the
/// user-mode part, nearly all of it the handlers' own work, which the
/// kernel's side of each request does not blur), and the whole process's
/// (`process_cpu_us`: with Larder's own threads, flushing and merging).
fn through_mount(spec: &FsSpec, workload: &str, details: &mut Details) -> Result<(u64, f64)> {
    let store = larder_fs::FsOptions::default();
    let (mounted, mnt, under) = mount(spec, workload == "fuse-stat0", store)?;
    let d = mnt.join("d");
    std::fs::create_dir(&d)?;
    let names: Vec<PathBuf> = (0..spec.files).map(|i| d.join(name(i))).collect();
    let cpu = (crate::sys::thread_cpu_secs(), crate::sys::threads_cpu(SERVING_THREADS), crate::sys::process_cpu_secs());
    let start = Instant::now();
    for p in &names {
        std::fs::File::create_new(p)?;
    }
    // Durable at the end: fsync of the directory (Larder: the whole log),
    // and for bindfs a syncfs of the ext4 below.
    std::fs::File::open(&d)?.sync_all()?;
    if spec.engine == "bindfs" {
        syncfs(&under)?;
    }
    let create_secs = start.elapsed().as_secs_f64();
    if workload == "fuse-create" {
        let per_file = |secs: f64| secs * 1e6 / spec.files.max(1) as f64;
        details.insert("creating_cpu_us".into(), per_file(crate::sys::thread_cpu_secs() - cpu.0));
        let serving = crate::sys::threads_cpu(SERVING_THREADS);
        if serving.threads > 0 {
            details.insert("serving_cpu_us".into(), per_file(serving.secs - cpu.1.secs));
            details.insert("serving_user_cpu_us".into(), per_file(serving.user_secs - cpu.1.user_secs));
        }
        details.insert("process_cpu_us".into(), per_file(crate::sys::process_cpu_secs() - cpu.2));
        drop(mounted);
        return Ok((spec.files, create_secs));
    }
    let secs = stat_randomly(spec, &names)?;
    drop(mounted);
    Ok((spec.stats, secs))
}

/// The store a mix runs on: sized ahead of its data (three 1 GiB containers
/// made, zero-filled, when it is created, as a careful user sizes a
/// database file), so the timed part writes into space that exists, as it
/// does on the fresh ext4 (made without lazy init).
fn mix_store_options() -> larder_fs::FsOptions {
    let mut o = larder_fs::FsOptions::default();
    o.store.space.min_containers = 3;
    o
}

/// A mix natively: Larder's API, or paths on the fresh ext4/XFS. Adds to
/// `details` the CPU seconds the process used in the timed part
/// (`cpu_secs`; for ext4 without the kernel's own threads, its journal
/// and writeback), a measure a busy machine disturbs less than the rate.
fn mix_native(spec: &FsSpec, engine: &str, personality: &str, details: &mut Details) -> Result<(u64, f64)> {
    use crate::fs_mix::{dir_count, preallocate, run, LarderFs, MixFs, PathFs, Personality};
    let p = Personality::parse(personality)?;
    let timed = |m: &dyn MixFs, details: &mut Details| -> Result<(u64, f64)> {
        let cpu = crate::sys::process_cpu_secs();
        let r = run(m, p, spec.mix_threads, spec.mix_scale, spec.seed, spec.mix_progress)?;
        details.insert("cpu_secs".into(), crate::sys::process_cpu_secs() - cpu);
        Ok(r)
    };
    if engine == "larder" {
        let fs = larder_fs::Fs::create(&spec.dir.join("store"), mix_store_options())?;
        let m = LarderFs::new(fs, dir_count(p))?;
        preallocate(&m, p)?;
        m.quiesce()?;
        let r = timed(&m, details)?;
        m.close()?;
        return Ok(r);
    }
    let base = spec.dir.join("mix");
    let sync_dir = spec.dir.clone();
    let m = PathFs::new(&base, dir_count(p), Box::new(move || syncfs(&sync_dir)))?;
    preallocate(&m, p)?;
    timed(&m, details)
}

/// Named figures a child reports beside its rate.
type Details = std::collections::BTreeMap<String, f64>;

/// A mix through a mount of Larder or bindfs (over the fresh ext4).
fn mix_through_mount(spec: &FsSpec, personality: &str) -> Result<(u64, f64)> {
    use crate::fs_mix::{dir_count, preallocate, run, PathFs, Personality};
    let p = Personality::parse(personality)?;
    let (mounted, mnt, under) = mount(spec, false, mix_store_options())?;
    // Durable at the end: Larder's fsyncdir makes everything durable; for
    // bindfs, syncfs of the ext4 below.
    let (root, below, larder) = (mnt.clone(), under.clone(), spec.engine == "larder");
    let sync: Box<dyn Fn() -> Result<()> + Sync> = Box::new(move || {
        if larder {
            std::fs::File::open(&root)?.sync_all()?;
            Ok(())
        } else {
            syncfs(&below)
        }
    });
    let m = PathFs::new(&mnt.join("mix"), dir_count(p), sync)?;
    preallocate(&m, p)?;
    let r = run(&m, p, spec.mix_threads, spec.mix_scale, spec.seed, spec.mix_progress)?;
    drop(m);
    drop(mounted);
    Ok(r)
}

#[cfg(test)]
#[path = "fs_suite_tests.rs"]
mod tests;
