//! `larder-bench server --load-mixes ...`: each mix of
//! [`super::load_mix`] under three placements in the same run, each on a
//! fresh ext4 image of its own: `max` (one worker per client), `managed`
//! (the load manager over 1 to one per client) and `round-robin` (a
//! fixed round-robin placement over the worker count the load manager
//! settled on in the same round, so it always runs after `managed`).
//! The order of `max` and `managed` alternates every round; the report
//! gives medians of the rounds and the manager's decisions over time.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{bail, Result};

use super::load_mix::{mix, Mix, MixResult, MixSpec, Sample, CONFIGS};
use super::ServerArgs;
use crate::fs_suite::FreshFs;
use crate::report::{stat, thousands, RunInfo};

/// Results by mix name, then configuration: one entry per round.
type Results = BTreeMap<String, BTreeMap<String, Vec<Result<MixResult, String>>>>;

/// The configurations of round `round`, in the order they run:
/// `round-robin` right after `managed` (it takes the manager's count).
pub fn round_order(round: usize) -> Vec<&'static str> {
    if round.is_multiple_of(2) {
        vec!["max", "managed", "round-robin"]
    } else {
        vec!["managed", "round-robin", "max"]
    }
}

/// Runs the mixes and prints the report.
pub fn run(args: &ServerArgs) -> Result<()> {
    let mixes: Vec<Mix> =
        args.load_mixes.split(',').map(str::trim).filter(|m| !m.is_empty()).map(mix).collect::<Result<_>>()?;
    if args.runs == 0 || args.mix_secs.is_nan() || args.mix_secs <= 0.0 {
        bail!("--runs and --mix-secs must be positive");
    }
    let larder = match &args.larder {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("larder"),
    };
    if !larder.is_file() {
        bail!("no larder binary at {} (cargo build --release -p larder-cli, or --larder PATH)", larder.display());
    }
    std::fs::create_dir_all(&args.dir)?;
    let info = RunInfo::collect(&args.dir);
    let load_before = super::load_average();
    let mut results = Results::new();
    for m in &mixes {
        let clients = m.clients.len() as u32;
        for round in 0..args.runs {
            let mut settled = None;
            for config in round_order(round) {
                eprintln!("{} round {}/{}: {config}", m.name, round + 1, args.runs);
                let workers = match config {
                    "round-robin" => match settled {
                        Some(w) => w,
                        None => {
                            let why = "the load manager's run of this round failed: no count to follow".to_string();
                            results.entry(m.name.clone()).or_default().entry(config.into()).or_default().push(Err(why));
                            continue;
                        }
                    },
                    "managed" if args.mix_max_workers > 0 => args.mix_max_workers.min(clients),
                    _ => clients,
                };
                let dir = args.dir.join(format!("{}-{config}-{round}", m.name));
                let _ = std::fs::remove_dir_all(&dir);
                let fresh = FreshFs::make(&dir, "ext4", args.image_gib)?;
                let spec = MixSpec {
                    dir: fresh.mnt.clone(),
                    larder: larder.clone(),
                    mix: m.clone(),
                    config: config.to_string(),
                    workers,
                    secs: args.mix_secs,
                    seed: args.seed,
                    sample_ms: 50,
                };
                let r: Result<MixResult, String> =
                    crate::spawn_child("server-mix", &spec, Some(Duration::from_secs(args.child_timeout_secs)));
                match &r {
                    Ok(r) => {
                        eprintln!(
                            "  {config:12} {} calls/s, {:.2} workers on average ({workers} at most), manager {:?}",
                            thousands(r.throughput()),
                            r.mean_workers(),
                            r.manager()
                        );
                        if config == "managed" {
                            settled = Some(r.settled_workers());
                        }
                    }
                    Err(why) => eprintln!("  {config:12} failed: {why}"),
                }
                drop(fresh);
                let _ = std::fs::remove_dir_all(&dir);
                results.entry(m.name.clone()).or_default().entry(config.to_string()).or_default().push(r);
            }
        }
    }
    let load_after = super::load_average();
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let text = render(args, &info, cpus, &mixes, &results, (&load_before, &load_after));
    print!("{text}");
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)?;
        let path = out.join("server-load.md");
        std::fs::write(&path, &text)?;
        let json = out.join("server-load.json");
        std::fs::write(&json, serde_json::to_string_pretty(&json_results(&results))? + "\n")?;
        eprintln!("wrote {} and {}", path.display(), json.display());
    }
    Ok(())
}

/// The successful runs of `config` in `mix`.
fn runs<'a>(results: &'a Results, mix: &str, config: &str) -> Vec<&'a MixResult> {
    results
        .get(mix)
        .and_then(|c| c.get(config))
        .map(|rs| rs.iter().filter_map(|r| r.as_ref().ok()).collect())
        .unwrap_or_default()
}

/// Every run's result (errors as strings), for the JSON file.
fn json_results(results: &Results) -> BTreeMap<String, BTreeMap<String, Vec<serde_json::Value>>> {
    results
        .iter()
        .map(|(m, configs)| {
            let configs = configs
                .iter()
                .map(|(c, rs)| {
                    let values = rs
                        .iter()
                        .map(|r| match r {
                            Ok(r) => serde_json::to_value(r).unwrap_or(serde_json::Value::Null),
                            Err(e) => serde_json::json!({ "error": e }),
                        })
                        .collect();
                    (c.clone(), values)
                })
                .collect();
            (m.clone(), configs)
        })
        .collect()
}

/// The samples at which the worker count or a manager counter changed
/// (and the first), as lines of a table.
pub fn timeline(samples: &[Sample]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut last: Option<&Sample> = None;
    for s in samples {
        let changed = last.is_none_or(|l| l.workers != s.workers || l.manager[1..] != s.manager[1..]);
        if changed {
            let before = last.map_or([0; 6], |l| l.manager);
            let delta: Vec<u64> = s.manager.iter().zip(before).map(|(now, then)| now - then.min(*now)).collect();
            lines.push(format!(
                "| {:.2} | {} | {} | {} | {} | {} | {} |",
                s.at, s.workers, delta[1], delta[2], delta[3], delta[4], delta[5]
            ));
        }
        last = Some(s);
    }
    lines
}

fn render(
    args: &ServerArgs,
    info: &RunInfo,
    cpus: usize,
    mixes: &[Mix],
    results: &Results,
    load: (&str, &str),
) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n## Server: the load manager on mixes of clients — {}\n", info.date());
    info.write_header(&mut o);
    let _ = writeln!(o, "- Load average (1, 5, 15 min): {} before the rounds, {} after", load.0, load.1);
    let _ = writeln!(o, "- CPUs: {cpus}, not pinned (clients, workers and the load manager share them)");
    let _ = writeln!(
        o,
        "- Method: each configuration in its own process tree on a fresh {} GiB ext4 image: `larder serve` and one \
         process per client (larder-client without leases: every call a request); {} s timeline; {} rounds, `max` and \
         `managed` alternating, `round-robin` right after `managed` over the worker count it ran most often; \
         throughput = calls of all clients over the timeline; workers sampled every 50 ms through `stats` (a \
         client of its own); medians of the rounds (min–max)",
        args.image_gib, args.mix_secs, args.runs
    );
    let _ = writeln!(
        o,
        "- Configurations: `max` = `--workers N --placement round-robin` with N = clients (one worker per client); \
         `managed` = `--workers 1..M --placement managed` with M = {}; `round-robin` = `--workers K --placement \
         round-robin` with K = the count the manager ran most often in the same round\n",
        if args.mix_max_workers > 0 { format!("{} (or N if fewer)", args.mix_max_workers) } else { "N".to_string() }
    );
    for m in mixes {
        let _ = writeln!(o, "### Mix `{}` ({} clients)\n", m.name, m.clients.len());
        for (i, phases) in m.clients.iter().enumerate() {
            let text: Vec<String> = phases
                .iter()
                .map(|p| {
                    format!(
                        "{} from {:.1} to {:.1} s, think {} µs",
                        p.call.name(),
                        args.mix_secs * f64::from(p.from) / 1000.0,
                        args.mix_secs * f64::from(p.to) / 1000.0,
                        p.think_us
                    )
                })
                .collect();
            let _ = writeln!(o, "- client {i}: {}", text.join("; "));
        }
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "| configuration | calls/s | workers (mean of samples) | workers (most often) | ÷ max | failed |"
        );
        let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|");
        let max = stat(runs(results, &m.name, "max").iter().map(|r| r.throughput()).collect());
        for config in CONFIGS {
            let rs = runs(results, &m.name, config);
            let failed = results.get(&m.name).and_then(|c| c.get(config)).map_or(0, |v| v.len() - rs.len());
            let throughput = stat(rs.iter().map(|r| r.throughput()).collect());
            let mean = stat(rs.iter().map(|r| r.mean_workers()).collect());
            let settled = stat(rs.iter().map(|r| f64::from(r.settled_workers())).collect());
            let cell = |s: Option<crate::report::Stat>, f: &dyn Fn(f64) -> String| {
                s.map_or("n/a".to_string(), |s| format!("{} ({}–{})", f(s.median), f(s.min), f(s.max)))
            };
            let ratio = match (throughput, max) {
                (Some(t), Some(m)) if m.median > 0.0 => format!("{:.2}", t.median / m.median),
                _ => String::new(),
            };
            let _ = writeln!(
                o,
                "| {config} | {} | {} | {} | {ratio} | {failed} |",
                cell(throughput, &|v| thousands(v)),
                cell(mean, &|v| format!("{v:.2}")),
                cell(settled, &|v| format!("{v:.0}")),
            );
        }
        let managed = stat(runs(results, &m.name, "managed").iter().map(|r| r.throughput()).collect());
        let rr = stat(runs(results, &m.name, "round-robin").iter().map(|r| r.throughput()).collect());
        if let (Some(a), Some(b)) = (managed, rr) {
            let _ = writeln!(o, "\nmanaged ÷ round-robin: {:.2} (medians)", a.median / b.median.max(f64::MIN_POSITIVE));
        }
        let per_round: Vec<String> = (0..args.runs)
            .map(|round| {
                let one = |c: &str| results.get(&m.name)?.get(c)?.get(round)?.as_ref().ok().map(|r| r.throughput());
                format!(
                    "round {}: max {}, managed {}, round-robin {}",
                    round + 1,
                    one("max").map_or("n/a".into(), thousands),
                    one("managed").map_or("n/a".into(), thousands),
                    one("round-robin").map_or("n/a".into(), thousands)
                )
            })
            .collect();
        let _ = writeln!(o, "\nPer round (calls/s): {}", per_round.join("; "));
        let paired = |a: &str, b: &str| -> Vec<f64> {
            (0..args.runs)
                .filter_map(|round| {
                    let one = |c: &str| results.get(&m.name)?.get(c)?.get(round)?.as_ref().ok().map(|r| r.throughput());
                    Some(one(a)? / one(b)?.max(f64::MIN_POSITIVE))
                })
                .collect()
        };
        for (a, b) in [("managed", "max"), ("managed", "round-robin")] {
            let ratios = paired(a, b);
            let text: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
            let median = stat(ratios).map_or("n/a".to_string(), |s| format!("{:.2}", s.median));
            let _ = writeln!(o, "\n{a} ÷ {b} in each round: {} (median {median})", text.join(", "));
        }
        let _ = writeln!(o);
        // The manager's decisions in its median run.
        let mut managed_runs = runs(results, &m.name, "managed");
        managed_runs.sort_by(|a, b| a.throughput().total_cmp(&b.throughput()));
        if let Some(r) = managed_runs.get(managed_runs.len() / 2) {
            let c = r.manager();
            let _ = writeln!(
                o,
                "The load manager in its median run: {} windows; {} workers added, {} parked, {} balances; {} client \
                 homes and {} files moved. Samples where something changed (counts since the previous sample):\n",
                c[0], c[1], c[2], c[3], c[4], c[5]
            );
            let _ = writeln!(o, "| s | workers | added | parked | balanced | clients moved | files moved |");
            let _ = writeln!(o, "|---:|---:|---:|---:|---:|---:|---:|");
            for line in timeline(&r.samples) {
                let _ = writeln!(o, "{line}");
            }
            let _ = writeln!(o);
        }
        for config in CONFIGS {
            if let Some(Err(why)) =
                results.get(&m.name).and_then(|c| c.get(config)).and_then(|v| v.iter().find(|r| r.is_err()))
            {
                let _ = writeln!(o, "- {config}: first failure: {}", why.replace('|', "/"));
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_always_follows_the_manager_and_the_others_alternate() {
        for round in 0..4 {
            let order = round_order(round);
            let managed = order.iter().position(|c| *c == "managed").unwrap_or(usize::MAX);
            assert_eq!(order.get(managed + 1), Some(&"round-robin"), "round {round}: {order:?}");
            assert_eq!(order.len(), 3);
        }
        assert_ne!(round_order(0)[0], round_order(1)[0], "max and managed take turns going first");
    }

    #[test]
    fn the_timeline_lists_changes_only() {
        let s = |at: f64, workers: u32, manager: [u64; 6]| Sample { at, workers, manager };
        let samples = [
            s(0.05, 1, [10, 0, 0, 0, 0, 0]),
            s(0.10, 1, [20, 0, 0, 0, 0, 0]),
            s(0.15, 2, [30, 1, 0, 0, 1, 2]),
            s(0.20, 2, [40, 1, 0, 0, 1, 2]),
            s(0.25, 1, [50, 1, 1, 0, 2, 3]),
        ];
        let lines = timeline(&samples);
        assert_eq!(
            lines,
            [
                "| 0.05 | 1 | 0 | 0 | 0 | 0 | 0 |",
                "| 0.15 | 2 | 1 | 0 | 0 | 1 | 2 |",
                "| 0.25 | 1 | 0 | 1 | 0 | 1 | 1 |"
            ]
        );
    }
}
