//! `larder-locate [--heap PATH] [--table NAME] [--timings] STORE NAME...`:
//! prints the paths of the locate database in STORE's heap whose last
//! component is exactly NAME, one a line, as `locate -b '\NAME'` does.
//! Exits 0 if something matched, 1 if nothing did, 2 on an error.
//! `--timings` adds one JSON line on standard error: seconds to open the
//! store, heap and table (`open_secs`), to the end of the search (`secs`),
//! and the process's peak memory (`vmhwm_kib`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use larder_locate::{Database, ReadOptions};

/// The heap a database is in unless `--heap` says otherwise.
const DEFAULT_HEAP: &str = "/locate";
/// The table object's name unless `--table` says otherwise.
const DEFAULT_TABLE: &str = "locate-db";

struct Arguments {
    store: PathBuf,
    names: Vec<String>,
    options: ReadOptions,
    timings: bool,
}

fn usage() -> String {
    "usage: larder-locate [--heap PATH] [--table NAME] [--timings] STORE NAME...".to_string()
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Arguments, String> {
    let mut options = ReadOptions { heap: DEFAULT_HEAP.to_string(), table: DEFAULT_TABLE.to_string() };
    let (mut timings, mut positional) = (false, Vec::new());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--heap" => options.heap = args.next().ok_or_else(|| format!("--heap needs a path\n{}", usage()))?,
            "--table" => options.table = args.next().ok_or_else(|| format!("--table needs a name\n{}", usage()))?,
            "--timings" => timings = true,
            "--" => positional.extend(args.by_ref()),
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}\n{}", usage())),
            _ => positional.push(arg),
        }
    }
    if positional.len() < 2 {
        return Err(usage());
    }
    let names = positional.split_off(1);
    let store = PathBuf::from(positional.remove(0));
    Ok(Arguments { store, names, options, timings })
}

/// This process's peak resident memory, KiB (0 if /proc does not say).
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn run(args: &Arguments) -> Result<u64, String> {
    let start = Instant::now();
    let database = Database::open(&args.store, &args.options)
        .map_err(|e| format!("larder-locate: {}: {e}", args.store.display()))?;
    let open_secs = start.elapsed().as_secs_f64();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 << 10, stdout.lock());
    let mut written = Ok(());
    let mut matches = 0;
    for name in &args.names {
        matches += database
            .search(name.as_bytes(), |path| {
                if written.is_ok() {
                    written = out.write_all(path).and_then(|()| out.write_all(b"\n"));
                }
            })
            .map_err(|e| format!("larder-locate: searching {name:?}: {e}"))?;
    }
    written.and_then(|()| out.flush()).map_err(|e| format!("larder-locate: writing the paths: {e}"))?;
    if args.timings {
        let secs = start.elapsed().as_secs_f64();
        eprintln!(
            "{{\"open_secs\":{open_secs:.9},\"secs\":{secs:.9},\"matches\":{matches},\"vmhwm_kib\":{}}}",
            peak_kib()
        );
    }
    Ok(matches)
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(0) => ExitCode::from(1),
        Ok(_) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(2)
        }
    }
}
