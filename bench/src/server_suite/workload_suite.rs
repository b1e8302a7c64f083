//! `larder-bench server --workloads ...`: varmail, webserver, smallfile
//! and webproxy (see [`super::workloads`]) at 1 to N client processes, each
//! peer on a fresh ext4 image of its own per run, peer order rotating
//! every round; the report gives medians of the rounds.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{bail, Result};

use super::clients::{WorkloadResult, WorkloadSpec, WORKLOAD_PEERS};
use super::workloads::{Sizes, Workload};
use super::ServerArgs;
use crate::fs_suite::FreshFs;
use crate::report::{stat, thousands, RunInfo};

/// Results by (workload, clients) then peer: one entry per round.
type Results = BTreeMap<(String, usize), BTreeMap<String, Vec<Result<WorkloadResult, String>>>>;

/// Parses a comma-separated list of client counts (each at least 1).
pub fn parse_clients(text: &str) -> Result<Vec<usize>> {
    let mut counts = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let n: usize = part.parse().map_err(|e| anyhow::anyhow!("--clients {part:?}: {e}"))?;
        if n == 0 {
            bail!("--clients: a run needs at least one client");
        }
        counts.push(n);
    }
    if counts.is_empty() {
        bail!("--clients: no client counts");
    }
    Ok(counts)
}

/// `larder serve --workers` for `clients` clients on `cpus` CPUs: from 1
/// up to one per client, at most one per CPU.
pub fn workers_for(clients: usize, cpus: usize) -> String {
    format!("1..{}", clients.min(cpus).max(1))
}

/// Runs the workloads and prints the report.
pub fn run(args: &ServerArgs) -> Result<()> {
    let workloads: Vec<Workload> = args
        .workloads
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(Workload::parse)
        .collect::<Result<_>>()?;
    let clients = parse_clients(&args.clients)?;
    let peers: Vec<String> =
        args.workload_peers.split(',').map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect();
    for p in &peers {
        if !WORKLOAD_PEERS.contains(&p.as_str()) {
            bail!("unknown workload peer {p:?}: {}", WORKLOAD_PEERS.join(", "));
        }
    }
    if args.runs == 0 || args.workload_scale.is_nan() || args.workload_scale <= 0.0 {
        bail!("--runs and --workload-scale must be positive");
    }
    let larder = match &args.larder {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("larder"),
    };
    if peers.iter().any(|p| p != "ext4") && !larder.is_file() {
        bail!("no larder binary at {} (cargo build --release -p larder-cli, or --larder PATH)", larder.display());
    }
    std::fs::create_dir_all(&args.dir)?;
    let info = RunInfo::collect(&args.dir);
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let load_before = super::load_average();
    let sizes = Sizes::scaled(args.workload_scale);
    let mut results = Results::new();
    for workload in &workloads {
        for &n in &clients {
            for round in 0..args.runs {
                let mut order = peers.clone();
                order.rotate_left(round % peers.len().max(1));
                eprintln!("{} x{n}, round {}/{}: {}", workload.name(), round + 1, args.runs, order.join(", "));
                for peer in &order {
                    let dir = args.dir.join(format!("{}-{n}-{peer}-{round}", workload.name()));
                    let _ = std::fs::remove_dir_all(&dir);
                    let fresh = FreshFs::make(&dir, "ext4", args.image_gib)?;
                    let spec = WorkloadSpec {
                        peer: peer.clone(),
                        dir: fresh.mnt.clone(),
                        workload: *workload,
                        clients: n,
                        sizes,
                        seed: args.seed,
                        larder: larder.clone(),
                        workers: workers_for(n, cpus),
                    };
                    let r: Result<WorkloadResult, String> = crate::spawn_child(
                        "server-workload",
                        &spec,
                        Some(Duration::from_secs(args.child_timeout_secs)),
                    );
                    match &r {
                        Ok(r) => eprintln!("  {peer:8} {} steps/s", thousands(r.steps_per_second())),
                        Err(why) => eprintln!("  {peer:8} failed: {why}"),
                    }
                    drop(fresh);
                    let _ = std::fs::remove_dir_all(&dir);
                    results
                        .entry((workload.name().to_string(), n))
                        .or_default()
                        .entry(peer.clone())
                        .or_default()
                        .push(r);
                }
            }
        }
    }
    let load_after = super::load_average();
    let text = render(args, &info, sizes, cpus, &peers, &results, (&load_before, &load_after));
    print!("{text}");
    if let Some(out) = &args.out {
        for path in crate::chart::write_outputs(out, &text, &chart_results(&info, &peers, &results))? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// The throughput ratios the report gives, (peer, against), of the peers
/// that ran: every Larder peer against ext4, and KV against the files.
pub fn ratio_pairs(peers: &[String]) -> Vec<(String, String)> {
    let ran = |p: &str| peers.iter().any(|q| q == p);
    let mut pairs = Vec::new();
    for p in peers.iter().filter(|p| *p != "ext4") {
        if ran("ext4") {
            pairs.push((p.clone(), "ext4".to_string()));
        }
    }
    for files in ["served", "leased"] {
        if ran("kv") && ran(files) {
            pairs.push(("kv".to_string(), files.to_string()));
        }
    }
    pairs
}

/// Median steps/s of `peer` in one (workload, clients) cell, with min and max.
fn median(results: &Results, key: &(String, usize), peer: &str) -> Option<crate::report::Stat> {
    let runs = results.get(key)?.get(peer)?;
    stat(runs.iter().filter_map(|r| r.as_ref().ok()).map(WorkloadResult::steps_per_second).collect())
}

/// The results file: steps/s of each peer in each (workload, clients).
fn chart_results(info: &RunInfo, peers: &[String], results: &Results) -> crate::chart::ChartResults {
    let operations = results
        .keys()
        .filter_map(|key| {
            let values: Vec<(String, f64)> = peers
                .iter()
                .filter_map(|p| median(results, key, p).filter(|s| s.median > 0.0).map(|s| (p.clone(), s.median)))
                .collect();
            let name = format!("{} x{}", key.0, key.1);
            (!values.is_empty()).then(|| crate::chart::Operation::rates(&name, "steps/s", "served", values))
        })
        .collect();
    crate::chart::ChartResults {
        format: crate::chart::FORMAT,
        suite: "server-workloads".to_string(),
        title: "Larder served (larder serve, without and with leases) vs ext4: varmail, webserver, smallfile"
            .to_string(),
        date: info.date().to_string(),
        commit: info.commit().to_string(),
        command: info.command().to_string(),
        source: String::new(),
        operations,
    }
}

fn render(
    args: &ServerArgs,
    info: &RunInfo,
    sizes: Sizes,
    cpus: usize,
    peers: &[String],
    results: &Results,
    load: (&str, &str),
) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n## Server: workloads — {}\n", info.date());
    info.write_header(&mut o);
    let _ = writeln!(o, "- Load average (1, 5, 15 min): {} before the rounds, {} after", load.0, load.1);
    let _ = writeln!(
        o,
        "- CPUs: {cpus}; not pinned. Clients are processes of their own (and the server another): more clients than CPUs oversubscribe them"
    );
    let _ = writeln!(
        o,
        "- varmail: per client {} files of 16 KiB set up, then {} iterations of delete, create (16 KiB, fsync), append (16 KiB, fsync), \
         two whole-file reads (5 steps each); webserver: per client {} files of 16 KiB set up, then {} open/read whole/close with a \
         16 KiB log append every 10 reads; smallfile: per client {} files of 1 KiB created, one sync, each read whole, each unlinked \
         (all timed); webproxy: per client {} files of 16 KiB set up, then {} iterations of delete, create (16 KiB), five whole-file \
         reads, a 16 KiB log append (8 steps each). Each client in a directory of its own; `larder serve --workers 1..min(clients, CPUs)`",
        sizes.varmail_files, sizes.varmail_iterations, sizes.webserver_files, sizes.webserver_reads, sizes.smallfile_files,
        sizes.webproxy_files, sizes.webproxy_iterations
    );
    let _ = writeln!(
        o,
        "- Method: each peer on a fresh {} GiB ext4 image per run; {} alternating rounds (peer order rotates); steps/s of all \
         clients together (their steps over the slowest client's time), median of the rounds (min–max)\n",
        args.image_gib, args.runs
    );
    let ratios = ratio_pairs(peers);
    let _ = write!(o, "| workload | clients |");
    for p in peers {
        let _ = write!(o, " {p} |");
    }
    for (a, b) in &ratios {
        let _ = write!(o, " {a} ÷ {b} |");
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "|---|---:|{}{}", "---:|".repeat(peers.len()), "---:|".repeat(ratios.len()));
    for key in results.keys() {
        let _ = write!(o, "| {} | {} |", key.0, key.1);
        for p in peers {
            let cell = median(results, key, p).map_or(String::new(), |s| {
                format!("{} ({}–{})", thousands(s.median), thousands(s.min), thousands(s.max))
            });
            let _ = write!(o, " {cell} |");
        }
        for (a, b) in &ratios {
            match (median(results, key, a), median(results, key, b)) {
                (Some(x), Some(y)) if y.median > 0.0 => {
                    let _ = write!(o, " {:.2} |", x.median / y.median);
                }
                _ => {
                    let _ = write!(o, " |");
                }
            }
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(o);
    for (key, by_peer) in results {
        for (peer, runs) in by_peer {
            let failed: Vec<&String> = runs.iter().filter_map(|r| r.as_ref().err()).collect();
            if let Some(first) = failed.first() {
                let _ = writeln!(
                    o,
                    "- {} x{} {peer}: {} failed runs (first: {})",
                    key.0,
                    key.1,
                    failed.len(),
                    first.replace('|', "/")
                );
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_counts_parse_and_zero_or_garbage_is_refused() {
        assert_eq!(parse_clients("1, 2,4").expect("valid"), vec![1, 2, 4]);
        assert!(parse_clients("0").is_err());
        assert!(parse_clients("two").is_err());
        assert!(parse_clients(" , ").is_err());
    }

    #[test]
    fn ratios_put_larder_against_ext4_and_kv_against_the_files() {
        let peers: Vec<String> = ["ext4", "served", "kv"].iter().map(|p| p.to_string()).collect();
        let pairs = ratio_pairs(&peers);
        let names: Vec<(&str, &str)> = pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(names, vec![("served", "ext4"), ("kv", "ext4"), ("kv", "served")]);
        assert!(ratio_pairs(&["leased".to_string()]).is_empty());
    }

    #[test]
    fn workers_grow_with_clients_up_to_the_cpus() {
        assert_eq!(workers_for(1, 2), "1..1");
        assert_eq!(workers_for(2, 2), "1..2");
        assert_eq!(workers_for(4, 2), "1..2");
        assert_eq!(workers_for(4, 8), "1..4");
    }

    #[test]
    fn throughput_is_every_step_over_the_slowest_client() {
        use super::super::clients::ClientResult;
        let r = WorkloadResult {
            clients: vec![ClientResult { steps: 100, secs: 1.0 }, ClientResult { steps: 100, secs: 4.0 }],
        };
        assert!((r.steps_per_second() - 50.0).abs() < 1e-9);
        assert_eq!(WorkloadResult { clients: vec![] }.steps_per_second(), 0.0);
    }
}
