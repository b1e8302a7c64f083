//! The markdown report: machine and method first, then one table per
//! workload (medians of the rounds), then the engines' own counters.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use crate::sys;
use crate::workload::{ChildResult, Kind, Phase};
use crate::Plan;

type Results = BTreeMap<(Kind, String), Vec<Result<ChildResult, String>>>;

/// Facts about this invocation, gathered before the runs.
pub struct RunInfo {
    date: String,
    commit: String,
    command: String,
    machine: Vec<(String, String)>,
}

impl RunInfo {
    pub fn collect(dir: &Path) -> RunInfo {
        let date = sys::command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_else(|| "unknown".to_string());
        // The binary's own (bench/build.rs), not the working directory's.
        let commit = env!("LARDER_BENCH_COMMIT").to_string();
        let command = std::env::args().map(|a| shell_quote(&a)).collect::<Vec<_>>().join(" ");
        RunInfo { date, commit, command, machine: sys::machine_info(dir) }
    }

    /// When the run started (UTC), for a report's title.
    pub fn date(&self) -> &str {
        &self.date
    }

    /// The commit the bench binary was built from.
    pub fn commit(&self) -> &str {
        &self.commit
    }

    /// The command line of this run, shell-quoted.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The command, commit and machine as markdown list items.
    pub fn write_header(&self, o: &mut String) {
        let _ = writeln!(o, "- Command: `{}`", self.command);
        let _ = writeln!(o, "- Commit: `{}`", self.commit);
        for (k, v) in &self.machine {
            let _ = writeln!(o, "- {k}: {v}");
        }
    }
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=,:@%+".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// 1234567.8 -> "1,234,568".
pub fn thousands(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".to_string();
    }
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

/// Median, min and max of the values.
#[derive(Clone, Copy)]
pub(crate) struct Stat {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
}

/// The finite values' median, min and max; `None` when there are none.
pub(crate) fn stat(mut values: Vec<f64>) -> Option<Stat> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 };
    Some(Stat { median, min: values[0], max: values[n - 1] })
}

/// The successful phases named `phase` of one engine's runs of `kind`.
fn phases<'a>(results: &'a Results, kind: Kind, engine: &str, phase: &str) -> Vec<&'a Phase> {
    results
        .get(&(kind, engine.to_string()))
        .map(|runs| runs.iter().filter_map(|r| r.as_ref().ok()).filter_map(|r| r.phase(phase)).collect())
        .unwrap_or_default()
}

fn metric(results: &Results, kind: Kind, engine: &str, phase: &str, f: impl Fn(&Phase) -> f64) -> Option<Stat> {
    stat(phases(results, kind, engine, phase).into_iter().map(f).collect())
}

fn failures(results: &Results, kind: Kind, engine: &str) -> Vec<String> {
    results
        .get(&(kind, engine.to_string()))
        .map(|runs| runs.iter().filter_map(|r| r.as_ref().err().cloned()).collect())
        .unwrap_or_default()
}

fn ops_per_sec(p: &Phase) -> f64 {
    p.ops as f64 / p.secs
}

fn mib(kib: f64) -> String {
    format!("{:.0}", kib / 1024.0)
}

fn ratio(larder: Option<Stat>, other: Option<Stat>) -> String {
    match (larder, other) {
        (Some(l), Some(o)) if o.median > 0.0 => format!("{:.2}", l.median / o.median),
        _ => "n/a".to_string(),
    }
}

fn range(s: Stat, f: impl Fn(f64) -> String) -> String {
    format!("{}–{}", f(s.min), f(s.max))
}

pub fn render(plan: &Plan, info: &RunInfo, results: &Results) -> String {
    let mut out = String::new();
    let o = &mut out;
    let user_mb = plan.n as f64 * crate::workload::ENTRY_BYTES as f64 / 1e6;
    let _ = writeln!(o, "\n## Larder index vs peers — {}\n", info.date);
    info.write_header(o);
    let _ = writeln!(
        o,
        "- Data: n = {} entries, 16-byte keys and 100-byte pseudo-random values ({user_mb:.1} MB of user data), \
         batches of {} puts, seed {}",
        thousands(plan.n as f64),
        plan.batch,
        plan.seed
    );
    let _ = writeln!(
        o,
        "- Same budgets for all: memtable {} MiB (+ up to {} frozen), block cache {} MiB, \
         {} background threads, no compression, no synced log per write; bloom {} bits/key for the peers, \
         {} for Larder (its default; the filter memory is in its peak)",
        plan.memtable_bytes >> 20,
        plan.max_immutable_memtables,
        plan.cache_bytes >> 20,
        plan.background_threads,
        plan.peer_bloom_bits,
        plan.larder_bloom_bits
    );
    let _ = writeln!(
        o,
        "- Method: each engine and workload in its own process, fresh directory per run (deleted after); \
         {} alternating rounds (engine order rotates each round), median shown with min–max; \
         peak memory = the child's VmHWM at the end of the phase",
        plan.runs
    );
    let _ = writeln!(o, "- Workloads: {}", plan.workloads.join(", "));
    let mut described = Vec::new();
    for engine in &plan.engines {
        let desc = plan
            .kinds
            .iter()
            .filter_map(|k| results.get(&(*k, engine.clone())))
            .flatten()
            .find_map(|r| r.as_ref().ok().map(|r| r.engine_info.clone()));
        described.push((engine.clone(), desc.unwrap_or_else(|| "(no successful run)".to_string())));
    }
    let _ = writeln!(o, "\nEngines:\n");
    for (e, d) in &described {
        let _ = writeln!(o, "- **{e}**: {d}");
    }
    for (e, why) in &plan.skipped {
        let _ = writeln!(o, "- **{e}**: skipped, {why}");
    }

    let disk = metric(results, Kind::Disk, "disk", "ingest", |p| p.bytes as f64 / p.secs / 1e6);
    for (kind, title) in [(Kind::Random, "Random ingest"), (Kind::Sequential, "Sequential ingest")] {
        let wanted = match kind {
            Kind::Random => plan.workloads.iter().any(|w| w == "random"),
            _ => plan.workloads.iter().any(|w| w == "sequential"),
        };
        if !wanted {
            continue;
        }
        ingest_table(o, plan, results, kind, title, disk);
    }
    if plan.gets > 0 {
        read_table(o, plan, results, "gets", "Random point gets, hits");
        read_table(o, plan, results, "misses", "Random point gets, misses");
    }
    if plan.scans > 0 {
        scan_table(o, plan, results);
    }
    counters(o, plan, results);
    notes(o, plan);
    out
}

fn ingest_table(o: &mut String, plan: &Plan, results: &Results, kind: Kind, title: &str, disk: Option<Stat>) {
    let order = if kind == Kind::Random { "random keys" } else { "keys in increasing order (big-endian counter)" };
    let _ = writeln!(
        o,
        "\n### {title}\n\n{} puts of {order}, timed up to and including the final flush to disk. \
         MB/s counts user bytes (116 per entry). \"WA engine\" is the engine's own count of bytes written to its \
         files per user byte; \"WA I/O\" is the child's /proc/self/io write_bytes during the phase per user byte.\n",
        thousands(plan.n as f64)
    );
    let _ = writeln!(
        o,
        "| Engine | puts/s | MB/s | Larder ÷ engine | % of disk ceiling | puts/s min–max | final flush s | \
         peak RSS MiB | WA engine | WA I/O |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let larder = metric(results, kind, "larder", "ingest", ops_per_sec);
    for engine in &plan.engines {
        let ops = metric(results, kind, engine, "ingest", ops_per_sec);
        let fails = failures(results, kind, engine);
        let Some(ops) = ops else {
            let _ = writeln!(o, "| {engine} | FAILED: {} | | | | | | | | |", fails.join("; ").replace('|', "/"));
            continue;
        };
        let mbs = metric(results, kind, engine, "ingest", |p| p.bytes as f64 / p.secs / 1e6);
        let flush = metric(results, kind, engine, "ingest", |p| p.flush_secs);
        let hwm = metric(results, kind, engine, "ingest", |p| p.vmhwm_kib as f64);
        let wa = metric(results, kind, engine, "ingest", |p| p.engine_wa.unwrap_or(f64::NAN));
        let wa_io = metric(results, kind, engine, "ingest", |p| p.io_write_bytes as f64 / p.bytes as f64);
        let pct = match (mbs, disk) {
            (Some(m), Some(d)) if d.median > 0.0 => format!("{:.0}%", 100.0 * m.median / d.median),
            _ => "n/a".to_string(),
        };
        let failed = if fails.is_empty() { String::new() } else { format!(" ({} failed)", fails.len()) };
        let _ = writeln!(
            o,
            "| {engine}{failed} | {} | {:.1} | {} | {pct} | {} | {:.2} | {} | {} | {} |",
            thousands(ops.median),
            mbs.map_or(f64::NAN, |m| m.median),
            ratio(larder, Some(ops)),
            range(ops, thousands),
            flush.map_or(f64::NAN, |f| f.median),
            hwm.map_or("n/a".to_string(), |h| mib(h.median)),
            wa.map_or("n/a".to_string(), |w| format!("{:.2}", w.median)),
            wa_io.map_or("n/a".to_string(), |w| format!("{:.2}", w.median)),
        );
    }
    if let Some(d) = disk {
        let puts = d.median * 1e6 / crate::workload::ENTRY_BYTES as f64;
        let hwm = metric(results, Kind::Disk, "disk", "ingest", |p| p.vmhwm_kib as f64);
        let wa_io = metric(results, Kind::Disk, "disk", "ingest", |p| p.io_write_bytes as f64 / p.bytes as f64);
        let larder_mbs = metric(results, kind, "larder", "ingest", |p| p.bytes as f64 / p.secs / 1e6);
        let _ = writeln!(
            o,
            "| *disk ceiling: overwrite {:.0} MB + fdatasync* | {} (equiv.) | {:.1} | {} | 100% | {} MB/s | {:.2} | {} | 1.00 | {} |",
            plan.n as f64 * crate::workload::ENTRY_BYTES as f64 / 1e6,
            thousands(puts),
            d.median,
            ratio(larder_mbs, Some(d)),
            range(d, |v| format!("{v:.0}")),
            metric(results, Kind::Disk, "disk", "ingest", |p| p.secs).map_or(f64::NAN, |s| s.median),
            hwm.map_or("n/a".to_string(), |h| mib(h.median)),
            wa_io.map_or("n/a".to_string(), |w| format!("{:.2}", w.median)),
        );
    } else if let Some(f) = failures(results, Kind::Disk, "disk").first() {
        let _ = writeln!(o, "| *disk ceiling* | FAILED: {} | | | | | | | | |", f.replace('|', "/"));
    }
}

fn read_table(o: &mut String, plan: &Plan, results: &Results, phase: &str, title: &str) {
    let what = if phase == "gets" { "keys drawn at random from the ingested ones" } else { "keys never written" };
    let _ = writeln!(
        o,
        "\n### {title}\n\n{} gets of {what}, right after the random ingest and its flush, in the same process. \
         \"wrong\" counts missing hits, wrong values or found misses (must be 0).\n",
        thousands(plan.gets as f64)
    );
    let _ = writeln!(o, "| Engine | gets/s | Larder ÷ engine | gets/s min–max | wrong | peak RSS MiB |");
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|");
    let larder = metric(results, Kind::Random, "larder", phase, ops_per_sec);
    for engine in &plan.engines {
        let Some(ops) = metric(results, Kind::Random, engine, phase, ops_per_sec) else {
            let fails = failures(results, Kind::Random, engine);
            let _ = writeln!(o, "| {engine} | FAILED: {} | | | | |", fails.join("; ").replace('|', "/"));
            continue;
        };
        let wrong = metric(results, Kind::Random, engine, phase, |p| p.errors as f64).map_or(f64::NAN, |w| w.max);
        let hwm = metric(results, Kind::Random, engine, phase, |p| p.vmhwm_kib as f64);
        let _ = writeln!(
            o,
            "| {engine} | {} | {} | {} | {wrong:.0} | {} |",
            thousands(ops.median),
            ratio(larder, Some(ops)),
            range(ops, thousands),
            hwm.map_or("n/a".to_string(), |h| mib(h.median)),
        );
    }
}

fn scan_table(o: &mut String, plan: &Plan, results: &Results) {
    let expected = plan.n as f64 / 256f64.powi(plan.prefix_len as i32);
    let _ = writeln!(
        o,
        "\n### Prefix scans\n\n{} forward scans of a random {}-byte prefix (about {expected:.0} entries each), \
         reading every entry of the prefix; after the gets, same process.\n",
        thousands(plan.scans as f64),
        plan.prefix_len
    );
    let _ = writeln!(
        o,
        "| Engine | scans/s | entries/s | entries/scan | Larder ÷ engine | scans/s min–max | peak RSS MiB |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|");
    let larder = metric(results, Kind::Random, "larder", "scans", ops_per_sec);
    for engine in &plan.engines {
        let Some(ops) = metric(results, Kind::Random, engine, "scans", ops_per_sec) else {
            let fails = failures(results, Kind::Random, engine);
            let _ = writeln!(o, "| {engine} | FAILED: {} | | | | | |", fails.join("; ").replace('|', "/"));
            continue;
        };
        let eps = metric(results, Kind::Random, engine, "scans", |p| p.entries as f64 / p.secs);
        let per = metric(results, Kind::Random, engine, "scans", |p| p.entries as f64 / p.ops as f64);
        let hwm = metric(results, Kind::Random, engine, "scans", |p| p.vmhwm_kib as f64);
        let _ = writeln!(
            o,
            "| {engine} | {} | {} | {:.1} | {} | {} | {} |",
            thousands(ops.median),
            eps.map_or("n/a".to_string(), |e| thousands(e.median)),
            per.map_or(f64::NAN, |p| p.median),
            ratio(larder, Some(ops)),
            range(ops, thousands),
            hwm.map_or("n/a".to_string(), |h| mib(h.median)),
        );
    }
}

/// Median per phase of each engine's own counters, and Larder's derived ratios.
fn counters(o: &mut String, plan: &Plan, results: &Results) {
    for kind in &plan.kinds {
        for engine in &plan.engines {
            let runs: Vec<&ChildResult> = results
                .get(&(*kind, engine.clone()))
                .map(|r| r.iter().filter_map(|x| x.as_ref().ok()).collect())
                .unwrap_or_default();
            let Some(first) = runs.first() else { continue };
            // Counters that stayed at zero in every phase of every run say nothing.
            let mut names: Vec<String> = runs
                .iter()
                .flat_map(|r| r.phases.iter())
                .flat_map(|p| p.counters.iter().filter(|(_, v)| **v != 0.0).map(|(k, _)| k.clone()))
                .collect();
            names.sort();
            names.dedup();
            let has_gauges = first.phases.iter().any(|p| !p.gauges.is_empty());
            if names.is_empty() && !has_gauges {
                continue;
            }
            let phase_names: Vec<String> = first.phases.iter().map(|p| p.name.clone()).collect();
            let kind_name = format!("{kind:?}").to_lowercase();
            let _ = writeln!(o, "\n### {engine}, {kind_name} child: counters and state\n");
            let cell = |phase: &str, name: &str| -> Option<f64> {
                stat(runs.iter().filter_map(|r| r.phase(phase)).filter_map(|p| p.counters.get(name).copied()).collect())
                    .map(|s| s.median)
            };
            if !names.is_empty() {
                let _ = writeln!(o, "Median over runs of the change during each phase.\n");
                let _ = writeln!(o, "| counter | {} |", phase_names.join(" | "));
                let _ = writeln!(o, "|---|{}", "---:|".repeat(phase_names.len()));
                for name in &names {
                    let cells: Vec<String> =
                        phase_names.iter().map(|p| cell(p, name).map_or(String::new(), thousands)).collect();
                    let _ = writeln!(o, "| {name} | {} |", cells.join(" | "));
                }
            }
            if engine == "larder" && *kind == Kind::Random && !names.is_empty() {
                let derived = |phase: &str, num: &str, den: &[&str]| -> String {
                    let n = cell(phase, num);
                    let d: Option<f64> = den.iter().map(|x| cell(phase, x)).sum();
                    match (n, d) {
                        (Some(n), Some(d)) if d > 0.0 => format!("{:.4}", n / d),
                        _ => String::new(),
                    }
                };
                let rows: [(&str, &str, &[&str]); 3] = [
                    ("missed-get block-read ratio", "missed_gets_reading_data_block", &["get_misses"]),
                    (
                        "bloom false-positive rate",
                        "bloom_false_positives",
                        &["bloom_false_positives", "bloom_negatives"],
                    ),
                    ("block-cache hit ratio", "block_cache_hits", &["block_cache_hits", "block_cache_misses"]),
                ];
                for (label, num, den) in rows {
                    let cells: Vec<String> = phase_names.iter().map(|p| derived(p, num, den)).collect();
                    let _ = writeln!(o, "| *{label}* | {} |", cells.join(" | "));
                }
            }
            let Some(last) = runs.last() else { continue };
            if let Some(p) = last.phases.first() {
                let gauges: Vec<String> =
                    p.gauges.iter().filter(|(k, _)| *k != "stats").map(|(k, v)| format!("{k} {v}")).collect();
                if !gauges.is_empty() {
                    let _ = writeln!(o, "\nAt the end of the ingest (last run): {}", gauges.join(", "));
                }
            }
            let stats = last.phases.last().and_then(|p| p.gauges.get("stats")).filter(|_| *kind == Kind::Random);
            if let Some(stats) = stats {
                let _ = writeln!(o, "\n`index.stats()` at the end of the last run:\n\n```text\n{stats}\n```");
            }
        }
    }
}

fn notes(o: &mut String, plan: &Plan) {
    let _ = writeln!(o, "\nNotes:\n");
    let _ = writeln!(
        o,
        "- Ratios are Larder's median throughput divided by the engine's (above 1: Larder faster). \
         No engine can beat the disk ceiling in MB/s for long: every byte ingested is written at least once."
    );
    let _ = writeln!(
        o,
        "- Larder keeps no WAL; RocksDB runs with its WAL disabled. fjall cannot turn its journal off: it is \
         written through a buffer and synced only at the end, and counts in its WA I/O."
    );
    let _ = writeln!(
        o,
        "- LMDB maps its file with MDB_WRITEMAP, so its VmHWM includes the mapped file pages it touched \
         (page cache, not heap); it has no memtable or block cache of its own."
    );
    let _ = writeln!(
        o,
        "- Reads start right after the ingest's flush: background compactions may still run during them. \
         With {} MiB of user data and this machine's RAM, the files stay in the OS page cache; \
         the block-cache budget decides decode/copy work, not disk reads.",
        (plan.n * crate::workload::ENTRY_BYTES) >> 20
    );
}

/// The run's medians as a results file (`index.json`, the chart's input):
/// ingest, gets and scans. The disk ceiling stays in the report: in puts/s
/// it is tens of times any engine's rate and would flatten every bar.
pub fn chart_results(plan: &Plan, info: &RunInfo, results: &Results) -> crate::chart::ChartResults {
    let mut operations = Vec::new();
    let wanted = |w: &str| plan.workloads.iter().any(|x| x == w);
    let mut add = |name: &str, unit: &str, kind: Kind, phase: &str| {
        let values: Vec<(String, f64)> = plan
            .engines
            .iter()
            .filter_map(|e| metric(results, kind, e, phase, ops_per_sec).map(|s| (e.clone(), s.median)))
            .collect();
        if !values.is_empty() {
            operations.push(crate::chart::Operation::rates(name, unit, "larder", values));
        }
    };
    if wanted("random") {
        add("Random ingest, to the final flush", "puts/s", Kind::Random, "ingest");
    }
    if wanted("sequential") {
        add("Sequential ingest, to the final flush", "puts/s", Kind::Sequential, "ingest");
    }
    if plan.gets > 0 {
        add("Random point gets, hits", "gets/s", Kind::Random, "gets");
        add("Random point gets, misses", "gets/s", Kind::Random, "misses");
    }
    if plan.scans > 0 {
        add("Prefix scans", "scans/s", Kind::Random, "scans");
    }
    crate::chart::ChartResults {
        format: crate::chart::FORMAT,
        suite: "index".to_string(),
        title: format!("Larder index vs peers, n = {}", thousands(plan.n as f64)),
        date: info.date().to_string(),
        commit: info.commit().to_string(),
        command: info.command().to_string(),
        source: String::new(),
        operations,
    }
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
