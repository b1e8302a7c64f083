//! The YCSB report: method and engines, then per workload every engine's
//! median throughput and latencies, then the bar of issue 24 (Larder at
//! least 1.5x RocksDB and at least 1x the best peer on every workload).

use std::fmt::Write;

use super::stores::LARDER;
use super::workload::{by_letter, PhaseResult};
use super::{Plan, Results};
use crate::report::{stat, thousands, RunInfo, Stat};

/// The peers of the bar (everything that is not Larder).
const PEERS: [&str; 3] = ["rocksdb", "fjall", "lmdb"];
/// Larder's bar against RocksDB and against the best peer.
pub const BAR_ROCKSDB: f64 = 1.5;
pub const BAR_BEST_PEER: f64 = 1.0;

/// The successful phases named `phase` of `engine` over the rounds.
fn phases<'a>(plan: &Plan, results: &'a Results, engine: &str, phase: &str) -> Vec<&'a PhaseResult> {
    let mut found = Vec::new();
    for group in &plan.groups {
        let wanted = if phase == "load" { group == &plan.groups[0] } else { group.contains(phase) };
        if !wanted {
            continue;
        }
        if let Some(runs) = results.get(&(engine.to_string(), group.clone())) {
            found.extend(
                runs.iter().filter_map(|r| r.as_ref().ok()).flat_map(|r| r.phases.iter()).filter(|p| p.name == phase),
            );
        }
    }
    found
}

fn median_of(
    plan: &Plan,
    results: &Results,
    engine: &str,
    phase: &str,
    f: impl Fn(&PhaseResult) -> f64,
) -> Option<Stat> {
    stat(phases(plan, results, engine, phase).into_iter().map(f).collect())
}

fn ops_per_sec(plan: &Plan, results: &Results, engine: &str, phase: &str) -> Option<f64> {
    median_of(plan, results, engine, phase, PhaseResult::ops_per_sec).map(|s| s.median)
}

/// The best peer's name and median ops/s on `phase`.
pub fn best_peer(plan: &Plan, results: &Results, phase: &str) -> Option<(String, f64)> {
    PEERS
        .iter()
        .filter_map(|p| ops_per_sec(plan, results, p, phase).map(|v| (p.to_string(), v)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// Whether `subject`'s figure meets the bar against RocksDB's and the best peer's.
pub fn bar_met(subject: f64, rocksdb: Option<f64>, best: Option<f64>) -> Option<bool> {
    Some(subject >= BAR_ROCKSDB * rocksdb? && subject >= BAR_BEST_PEER * best?)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "n/a".to_string(),
    }
}

fn us(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The workload letters of the run, in the order run.
fn letters(plan: &Plan) -> Vec<char> {
    plan.groups.iter().flat_map(|g| g.chars()).collect()
}

pub fn render(plan: &Plan, info: &RunInfo, results: &Results) -> String {
    let a = &plan.args;
    let mut out = String::new();
    let o = &mut out;
    let _ = writeln!(o, "\n## YCSB core workloads — {}\n", info.date());
    info.write_header(o);
    let _ = writeln!(
        o,
        "- Data: {} records, key `user<FNV-64 hash of the record number>` (YCSB's hashed insert order), one \
         value of {} B per record (YCSB's 10 fields of 100 B kept as one value: an update rewrites the whole \
         record); {} operations per workload ({} for E), one client thread; the load in batches of {} \
         records (each engine's batch API; YCSB loads one insert at a time), records in record-number order",
        thousands(a.records as f64),
        a.value_bytes,
        thousands(a.operations as f64),
        thousands(a.scan_operations as f64),
        super::workload::LOAD_BATCH
    );
    let _ = writeln!(
        o,
        "- Requests: YCSB 0.17 CoreWorkload: scrambled zipfian (theta 0.99, zeta(10^10) = 26.469, FNV-scattered) \
         sized for the records plus twice the expected inserts, retried until the record exists; D: skewed \
         latest; E: scans of uniform length 1..{}, from a zipfian key; inserts take the next record number",
        a.max_scan_length
    );
    let _ = writeln!(
        o,
        "- Sequence: one load, then {} in that order; E on a fresh load of its own (YCSB's recommended \
         sequence); each in its own process (VmHWM is its peak memory), fresh directory, deleted after",
        plan.groups
            .first()
            .map(|g| g.to_uppercase().chars().map(String::from).collect::<Vec<_>>().join(", "))
            .unwrap_or_default()
    );
    let _ = writeln!(
        o,
        "- Same budgets for all: memtable {} MiB (+ up to 2 frozen), cache {} MiB (LMDB: none of its own, it \
         reads through the OS page cache, as every engine's files do), {} background threads, no compression; \
         writes buffered, none synced per operation (YCSB's default is not durable per op); a clean close syncs; \
         Larder's metadata cache besides: {}",
        a.memtable_mb,
        a.cache_mb,
        a.background_threads,
        a.meta_cache_mb.map_or("its default, 64 MiB".to_string(), |m| format!("{m} MiB (--meta-cache-mb)"))
    );
    let _ = writeln!(
        o,
        "- Method: {} alternating rounds (engine order rotates), median shown with min–max; latencies are the \
         exact p50/p99 of every operation of the workload in a round (sorted, not sampled), median over the \
         rounds; a read-modify-write is timed as one operation",
        a.runs
    );
    let _ = writeln!(o, "\nEngines:\n");
    for engine in &plan.engines {
        let desc = results
            .iter()
            .filter(|((e, _), _)| e == engine)
            .flat_map(|(_, runs)| runs.iter())
            .find_map(|r| r.as_ref().ok().map(|r| r.engine_info.clone()))
            .unwrap_or_else(|| "(no successful run)".to_string());
        let _ = writeln!(o, "- **{engine}**: {desc}");
    }
    for (e, why) in &plan.skipped {
        let _ = writeln!(o, "- **{e}**: skipped, {why}");
    }

    let _ = writeln!(o, "\n### Throughput and latency (ops/s; µs)\n");
    let _ = writeln!(o, "| workload | engine | ops/s (min–max) | p50 µs | p99 µs | vs RocksDB | errors |");
    let _ = writeln!(o, "|---|---|---|---|---|---|---|");
    let mut rows = vec![("load".to_string(), "load (records/s; batches of 1,000, latency per batch)".to_string())];
    rows.extend(
        letters(plan).into_iter().map(|l| (l.to_string(), by_letter(l).map_or(String::new(), |w| w.title.to_string()))),
    );
    for (phase, title) in &rows {
        let rocksdb = ops_per_sec(plan, results, "rocksdb", phase);
        for engine in &plan.engines {
            let Some(s) = median_of(plan, results, engine, phase, PhaseResult::ops_per_sec) else {
                let _ = writeln!(o, "| {title} | {engine} | failed | | | | |");
                continue;
            };
            let p50 = median_of(plan, results, engine, phase, |p| p.latency.p50_us).map_or(f64::NAN, |s| s.median);
            let p99 = median_of(plan, results, engine, phase, |p| p.latency.p99_us).map_or(f64::NAN, |s| s.median);
            let errors: u64 = phases(plan, results, engine, phase).iter().map(|p| p.errors).sum();
            let _ = writeln!(
                o,
                "| {title} | {engine} | {} ({}–{}) | {} | {} | {} | {errors} |",
                thousands(s.median),
                thousands(s.min),
                thousands(s.max),
                us(p50),
                us(p99),
                ratio(Some(s.median), rocksdb)
            );
        }
    }

    let _ = writeln!(o, "\n### Per operation type (median p50 / p99, µs)\n");
    let _ = writeln!(o, "| workload | engine | per operation |");
    let _ = writeln!(o, "|---|---|---|");
    for letter in letters(plan) {
        let phase = letter.to_string();
        for engine in &plan.engines {
            let runs = phases(plan, results, engine, &phase);
            let Some(first) = runs.first() else { continue };
            let parts: Vec<String> = first
                .by_op
                .keys()
                .map(|op| {
                    let m = |f: &dyn Fn(&PhaseResult) -> Option<f64>| {
                        stat(runs.iter().filter_map(|p| f(p)).collect()).map_or(f64::NAN, |s| s.median)
                    };
                    let p50 = m(&|p| p.by_op.get(op).map(|l| l.p50_us));
                    let p99 = m(&|p| p.by_op.get(op).map(|l| l.p99_us));
                    format!("{op} {} / {}", us(p50), us(p99))
                })
                .collect();
            let _ = writeln!(o, "| {} | {engine} | {} |", letter.to_ascii_uppercase(), parts.join("; "));
        }
    }

    let _ = writeln!(o, "\n### CPU time (medians over the rounds)\n");
    let _ = writeln!(
        o,
        "The client thread's CPU time per operation (the engine's work on the caller's thread and the \
         suite's own), and the whole process's CPU seconds per wall-clock second of the workload: above 1, \
         the engine's background threads competed with the client for the cores; wall time per operation \
         well above the client's CPU time is the client waiting (for a core, or blocked).\n"
    );
    let _ = writeln!(o, "| workload | engine | client CPU µs/op | wall µs/op | process CPU ÷ wall |");
    let _ = writeln!(o, "|---|---|---|---|---|");
    for letter in letters(plan) {
        let phase = letter.to_string();
        for engine in &plan.engines {
            let measured = |p: &PhaseResult| p.client_cpu_secs > 0.0;
            if !phases(plan, results, engine, &phase).into_iter().any(measured) {
                continue;
            }
            let m = |f: &dyn Fn(&PhaseResult) -> f64| {
                stat(phases(plan, results, engine, &phase).into_iter().filter(|p| measured(p)).map(f).collect())
                    .map_or(f64::NAN, |s| s.median)
            };
            let client = m(&|p| p.client_cpu_secs * 1e6 / p.ops.max(1) as f64);
            let wall = m(&|p| p.secs * 1e6 / p.ops.max(1) as f64);
            let share = m(&|p| p.process_cpu_secs / p.secs.max(1e-9));
            let _ = writeln!(
                o,
                "| {} | {engine} | {:.2} | {:.2} | {:.2} |",
                letter.to_ascii_uppercase(),
                client,
                wall,
                share
            );
        }
    }

    let _ = writeln!(
        o,
        "\n### The bar: Larder at least {BAR_ROCKSDB}x RocksDB and at least {BAR_BEST_PEER}x the best peer\n"
    );
    let _ = writeln!(o, "| workload | Larder engine | ops/s | RocksDB | best peer | vs RocksDB | vs best peer | bar |");
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|");
    for letter in letters(plan) {
        let phase = letter.to_string();
        let rocksdb = ops_per_sec(plan, results, "rocksdb", &phase);
        let best = best_peer(plan, results, &phase);
        for engine in LARDER.iter().filter(|e| plan.engines.iter().any(|x| x == *e)) {
            let subject = ops_per_sec(plan, results, engine, &phase);
            let verdict = match subject.and_then(|s| bar_met(s, rocksdb, best.as_ref().map(|b| b.1))) {
                Some(true) => "met",
                Some(false) => "not met",
                None => "not measured",
            };
            let _ = writeln!(
                o,
                "| {} | {engine} | {} | {} | {} {} | {} | {} | {verdict} |",
                letter.to_ascii_uppercase(),
                subject.map_or("n/a".to_string(), thousands),
                rocksdb.map_or("n/a".to_string(), thousands),
                best.as_ref().map_or("n/a", |b| b.0.as_str()),
                best.as_ref().map_or(String::new(), |b| thousands(b.1)),
                ratio(subject, rocksdb),
                ratio(subject, best.as_ref().map(|b| b.1))
            );
        }
    }

    let _ = writeln!(o, "\n### Memory and writes (median per child)\n");
    let _ = writeln!(o, "| engine | workloads | peak RSS (VmHWM) MiB | bytes written to storage |");
    let _ = writeln!(o, "|---|---|---|---|");
    for engine in &plan.engines {
        for group in &plan.groups {
            let runs: Vec<_> = results
                .get(&(engine.clone(), group.clone()))
                .map(|r| r.iter().filter_map(|r| r.as_ref().ok()).collect())
                .unwrap_or_default();
            let hwm = stat(runs.iter().map(|r| r.vmhwm_kib as f64 / 1024.0).collect());
            let io = stat(runs.iter().map(|r| r.io_write_bytes as f64).collect());
            let _ = writeln!(
                o,
                "| {engine} | load + {} | {} | {} |",
                group.to_uppercase(),
                hwm.map_or("n/a".to_string(), |s| format!("{:.0}", s.median)),
                io.map_or("n/a".to_string(), |s| format!("{:.2} GB", s.median / 1e9))
            );
        }
    }
    let failures: Vec<String> = results
        .iter()
        .flat_map(|((e, g), runs)| {
            runs.iter().filter_map(move |r| r.as_ref().err().map(|why| format!("{e} ({g}): {why}")))
        })
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(o, "\nFailed runs:\n");
        for f in failures {
            let _ = writeln!(o, "- {f}");
        }
    }
    out
}

/// The results file (`ycsb.json`) and chart: one operation per workload.
pub fn chart_results(plan: &Plan, info: &RunInfo, results: &Results) -> crate::chart::ChartResults {
    let subject = LARDER.iter().find(|e| plan.engines.iter().any(|x| x == *e)).map_or("larder-kv", |e| e);
    let operations = letters(plan)
        .into_iter()
        .filter_map(|letter| {
            let phase = letter.to_string();
            let values: Vec<(String, f64)> = plan
                .engines
                .iter()
                .filter_map(|e| ops_per_sec(plan, results, e, &phase).map(|v| (e.clone(), v)))
                .collect();
            let title = by_letter(letter).map_or(String::new(), |w| format!("YCSB {}", w.title));
            (!values.is_empty()).then(|| crate::chart::Operation::rates(&title, "ops/s", subject, values))
        })
        .collect();
    crate::chart::ChartResults {
        format: crate::chart::FORMAT,
        suite: "ycsb".to_string(),
        title: format!(
            "YCSB A-F, {} records of {} B, {} ops per workload",
            thousands(plan.args.records as f64),
            plan.args.value_bytes,
            thousands(plan.args.operations as f64)
        ),
        date: info.date().to_string(),
        commit: info.commit().to_string(),
        command: info.command().to_string(),
        source: String::new(),
        operations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_needs_both_ratios() {
        assert_eq!(bar_met(150.0, Some(100.0), Some(150.0)), Some(true));
        assert_eq!(bar_met(149.0, Some(100.0), Some(100.0)), Some(false));
        assert_eq!(bar_met(200.0, Some(100.0), Some(201.0)), Some(false));
        assert_eq!(bar_met(200.0, None, Some(1.0)), None);
    }
}
