//! What a heap-suite child does: run one engine on one case of one workload
//! in a fresh directory and print one JSON line. Peers that are programs of
//! their own (bench/peers, locate, plocate) are run from here, one process
//! per step, and their memory is the largest of those processes' maximum RSS.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::{alloc, locate, micro, HeapResult, HeapSpec, Workload};

/// The system programs of the locate peers.
pub const FRCODE: &str = "/usr/libexec/frcode";
/// GNU findutils' locate (Debian installs it under this name).
pub const GNU_LOCATE: &str = "/usr/bin/locate.findutils";
/// plocate's search program.
pub const PLOCATE: &str = "/usr/bin/plocate";
/// plocate's database builder.
pub const PLOCATE_BUILD: &str = "/usr/sbin/plocate-build";

/// Why `engine` cannot run here (a program or a feature missing), or None.
pub fn missing(engine: &str, peers: &Path) -> Option<String> {
    let install = "run scripts/install-heap-peers.sh";
    let need =
        |paths: &[PathBuf]| paths.iter().find(|p| !p.exists()).map(|p| format!("{} not found: {install}", p.display()));
    match engine {
        "baseline" => need(&[peers.join("locate_baseline")]),
        "locate" => need(&[PathBuf::from(FRCODE), PathBuf::from(GNU_LOCATE)]),
        "plocate" => need(&[PathBuf::from(PLOCATE), PathBuf::from(PLOCATE_BUILD)]),
        "boost" => need(&[peers.join("alloc_boost")]),
        "sphde" => need(&[peers.join("alloc_sphde")]),
        "pmemobj" | "pmemobj-tx" => need(&[peers.join("alloc_pmemobj")]),
        "larder" if !cfg!(feature = "larder-heap") => {
            Some("not built in: rebuild with --features larder-heap (needs crates/heap)".to_string())
        }
        _ => None,
    }
}

/// Runs one child's work and prints its result as one JSON line.
pub fn run_child(spec_json: &str) -> Result<()> {
    let spec: HeapSpec = serde_json::from_str(spec_json).context("parsing the child spec")?;
    std::fs::create_dir_all(&spec.dir).with_context(|| format!("creating {}", spec.dir.display()))?;
    let result = match spec.workload {
        Workload::Locate => locate::run(&spec)?,
        Workload::Micro => micro::run(&spec)?,
        Workload::Alloc => alloc::run(&spec)?,
    };
    println!("{}", serde_json::to_string(&result)?);
    Ok(())
}

/// A run of an outside program: its wall time and standard output.
pub struct Ran {
    /// Wall time from spawn to exit.
    pub secs: f64,
    /// What it printed.
    pub stdout: String,
    /// What it printed on standard error (read by the Larder engine's
    /// fresh-process rows, which exist with feature `larder-heap`).
    #[cfg_attr(not(feature = "larder-heap"), allow(dead_code))]
    pub stderr: String,
}

/// Runs `program` with `args`, stdin from `input` and stdout into `output`
/// if given; fails with the program's stderr if it exits with a status not
/// in `ok` (locate and plocate exit 1 when nothing matched).
pub fn run_program_to(
    program: &Path,
    args: &[&str],
    input: Option<&Path>,
    output: Option<&Path>,
    ok: &[i32],
) -> Result<Ran> {
    let stdin = match input {
        Some(p) => Stdio::from(std::fs::File::open(p).with_context(|| format!("opening {}", p.display()))?),
        None => Stdio::null(),
    };
    let mut command = Command::new(program);
    command.args(args).stdin(stdin);
    if let Some(p) = output {
        command.stdout(Stdio::from(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?));
    }
    let start = Instant::now();
    let out = command.output().with_context(|| format!("starting {}", program.display()))?;
    let secs = start.elapsed().as_secs_f64();
    if !out.status.code().is_some_and(|c| ok.contains(&c)) {
        bail!(
            "{} {} exited with {}: {}",
            program.display(),
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(Ran {
        secs,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Runs `program` with `args`; fails with its stderr unless it exits 0.
pub fn run_program(program: &Path, args: &[&str]) -> Result<Ran> {
    run_program_to(program, args, None, None, &[0])
}

/// The largest maximum RSS of this process's waited-for children, KiB.
pub fn children_max_rss_kib() -> u64 {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    #[allow(unsafe_code)]
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    u64::try_from(usage.ru_maxrss).unwrap_or(0)
}

/// The last line of a program's output that is a JSON object, parsed.
pub fn json_line(stdout: &str) -> Result<serde_json::Value> {
    let line = stdout.lines().rev().find(|l| l.starts_with('{')).context("the peer printed no JSON line")?;
    serde_json::from_str(line).context("parsing the peer's JSON line")
}

/// Field `name` of a peer's JSON line as a number.
pub fn field(v: &serde_json::Value, name: &str) -> Result<f64> {
    v.get(name).and_then(serde_json::Value::as_f64).with_context(|| format!("the peer's line has no {name}"))
}

/// A result with the engine's name and description filled in.
pub fn result(spec: &HeapSpec, info: String, phases: Vec<super::HeapPhase>) -> HeapResult {
    HeapResult { engine: spec.engine.clone(), info, phases }
}

/// The installed version of a Debian package, or "unknown".
pub fn package_version(package: &str) -> String {
    crate::sys::command_output("dpkg-query", &["-W", "-f=${Version}", package]).unwrap_or_else(|| "unknown".to_string())
}
