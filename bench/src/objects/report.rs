//! The markdown report of the object suite: machine and method, then one
//! table per workload (medians of the rounds, min–max), then notes.

use std::fmt::Write;

use super::{ObjPhase, Plan, Results, Workload, CEILING, TINY_BYTES};
use crate::report::{stat, thousands, RunInfo, Stat};

/// `f` of the phase `phase` of every successful run of `engine` on `w`.
fn metric(results: &Results, w: Workload, engine: &str, phase: &str, f: impl Fn(&ObjPhase) -> f64) -> Option<Stat> {
    let runs = results.get(&(w, engine.to_string()))?;
    stat(runs.iter().filter_map(|r| r.as_ref().ok()).filter_map(|r| r.phase(phase)).map(f).collect())
}

fn failures(results: &Results, w: Workload, engine: &str) -> Vec<String> {
    results
        .get(&(w, engine.to_string()))
        .map(|runs| runs.iter().filter_map(|r| r.as_ref().err().map(|e| e.replace('|', "/"))).collect())
        .unwrap_or_default()
}

fn rate(p: &ObjPhase) -> f64 {
    p.ops as f64 / p.secs
}

fn mbs(p: &ObjPhase) -> f64 {
    p.bytes as f64 / p.secs / 1e6
}

fn extra(p: &ObjPhase, name: &str) -> f64 {
    p.extra.get(name).copied().unwrap_or(f64::NAN)
}

/// "1.23" for a / b, or "n/a".
fn ratio(a: Option<Stat>, b: Option<Stat>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b.median > 0.0 => format!("{:.2}", a.median / b.median),
        _ => "n/a".to_string(),
    }
}

fn med(s: Option<Stat>, f: impl Fn(f64) -> String) -> String {
    s.map_or_else(|| "n/a".to_string(), |s| f(s.median))
}

fn range(s: Option<Stat>, f: impl Fn(f64) -> String) -> String {
    s.map_or_else(|| "n/a".to_string(), |s| format!("{}–{}", f(s.min), f(s.max)))
}

fn mib(kib: f64) -> String {
    format!("{:.0}", kib / 1024.0)
}

fn f1(v: f64) -> String {
    format!("{v:.1}")
}

fn f2(v: f64) -> String {
    format!("{v:.2}")
}

/// The engines of a workload's table, the ceiling last.
fn rows(plan: &Plan, w: Workload) -> Vec<String> {
    let mut rows: Vec<String> = plan.engines.iter().filter(|e| w.runs_on(e)).cloned().collect();
    if w.has_ceiling() {
        rows.push(CEILING.to_string());
    }
    rows
}

/// The markdown report.
pub fn render(plan: &Plan, info: &RunInfo, results: &Results) -> String {
    let mut out = String::new();
    let o = &mut out;
    let _ = writeln!(o, "\n## Larder objects vs peers — {}\n", info.date());
    info.write_header(o);
    let _ = writeln!(
        o,
        "- Data: keys {} written in increasing order, pseudo-random (incompressible) values, seed {}{}",
        match plan.per_dir {
            0 => "`obj/0000000`, `obj/0000001`, … (all in one directory level)".to_string(),
            n => format!("`obj/0000/0000000`, … ({n} objects per directory level)"),
        },
        plan.seed,
        if plan.quick { "; **--quick counts: a smoke run, not for publishing**" } else { "" }
    );
    let _ = writeln!(
        o,
        "- Same budgets for all: memtable {} MiB, cache {} MiB (LMDB and ext4 have neither: the OS page cache); \
         RocksDB and fjall: bloom {} bits/key, {} background threads",
        plan.memtable_bytes >> 20,
        plan.cache_bytes >> 20,
        plan.bloom_bits,
        plan.background_threads
    );
    let _ = writeln!(
        o,
        "- Method: each engine and workload in its own process and fresh directory (deleted after); {} \
         alternating rounds (the order, ceiling included, rotates each round), median shown with min–max; \
         peak memory = the child's VmHWM (each child holds an 8 MiB pool the values are cut from)",
        plan.runs
    );
    let _ = writeln!(o, "\nEngines:\n");
    for engine in plan.engines.iter().chain(std::iter::once(&CEILING.to_string())) {
        let infos: Vec<String> = plan
            .workloads
            .iter()
            .filter_map(|w| results.get(&(*w, engine.clone())))
            .flatten()
            .filter_map(|r| r.as_ref().ok().map(|r| r.info.clone()))
            .collect();
        let mut distinct = infos;
        distinct.sort();
        distinct.dedup();
        let text = if distinct.is_empty() { "(no successful run)".to_string() } else { distinct.join("; ") };
        let _ = writeln!(o, "- **{engine}**: {text}");
    }
    for (e, why) in &plan.skipped {
        let _ = writeln!(o, "- **{e}**: skipped, {why}");
    }
    for &w in &plan.workloads {
        match w {
            Workload::Put1 | Workload::Put8 | Workload::Big => puts_table(o, plan, results, w),
            Workload::Delete => delete_table(o, plan, results),
            Workload::Gets => gets_table(o, plan, results),
            Workload::Space => space_table(o, plan, results),
        }
    }
    notes(o);
    out
}

fn puts_table(o: &mut String, plan: &Plan, results: &Results, w: Workload) {
    let (title, what) = match w {
        Workload::Put1 => {
            (format!("a. Durable {} puts, 1 writer", small(plan)), format!("{} puts", thousands(plan.puts as f64)))
        }
        Workload::Put8 => (
            format!("b. Durable {} puts, concurrent writers", small(plan)),
            format!("{} writer threads x {} puts", plan.writers, thousands(plan.puts_per_writer as f64)),
        ),
        _ => (
            "c. Durable 1 MiB puts".to_string(),
            format!("{} puts of 1 MiB, 1 writer", thousands(plan.big_objects as f64)),
        ),
    };
    let _ = writeln!(
        o,
        "\n### {title}\n\n{what}, each on disk when it returns. \"Larder ÷\" is Larder's median rate over the row's \
         (the ceiling row: Larder's share of the ceiling). \"WA I/O\" is the child's /proc/self/io write_bytes \
         per object byte. Latencies are per put.\n"
    );
    let _ = writeln!(
        o,
        "| Engine | puts/s | MB/s | Larder ÷ | puts/s min–max | p50 µs | p99 µs | max µs | WA I/O | peak RSS MiB |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let larder = metric(results, w, "larder", "puts", rate);
    for engine in rows(plan, w) {
        let m = |f: fn(&ObjPhase) -> f64| metric(results, w, &engine, "puts", f);
        let ops = m(rate);
        let label = if engine == CEILING { "*ceiling: overwrite + fdatasync*".to_string() } else { engine.clone() };
        if ops.is_none() {
            let _ = writeln!(o, "| {label} | FAILED: {} | | | | | | | | |", failures(results, w, &engine).join("; "));
            continue;
        }
        let wa = metric(results, w, &engine, "puts", |p| p.io_write_bytes as f64 / p.bytes as f64);
        let _ = writeln!(
            o,
            "| {label} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            med(ops, thousands),
            med(m(mbs), f1),
            ratio(larder, ops),
            range(ops, thousands),
            med(m(|p| p.p50_us), thousands),
            med(m(|p| p.p99_us), thousands),
            med(m(|p| p.max_us), thousands),
            med(wa, f2),
            med(m(|p| p.vmhwm_kib as f64), mib),
        );
    }
    let pre = metric(results, w, "larder-pre", "puts", rate);
    if pre.is_some() {
        let vs = |engine: &str| ratio(pre, metric(results, w, engine, "puts", rate));
        let _ = writeln!(
            o,
            "\nlarder-pre (containers and log segments created with the store, as the ceiling's file is written before timing) \
             ÷ ceiling: {}; ÷ rocksdb: {}; ÷ ext4: {}.",
            vs(CEILING),
            vs("rocksdb"),
            vs("ext4")
        );
    }
}

fn delete_table(o: &mut String, plan: &Plan, results: &Results) {
    let w = Workload::Delete;
    let size = small(plan);
    let _ = writeln!(
        o,
        "\n### d. Durable {size} puts while a {} MiB object is deleted\n\nThe object is written durably first \
         (Larder: one streaming writer; ext4: one file). Then {n} durable puts alone, then {n} more while another \
         thread deletes the object durably, starting after a tenth of them. The bar is 1.00: the same engine's \
         rate without the delete. \"in window\" counts only the puts that completed while the delete ran. \
         RocksDB, fjall and LMDB are not measured here.\n",
        plan.delete_bytes >> 20,
        n = thousands(plan.puts as f64),
    );
    let _ = writeln!(
        o,
        "| Engine | puts/s alone | puts/s during | during ÷ alone | in window ÷ alone | delete s | \
         p99 µs alone / during | max µs alone / during | Larder ÷ (during) | write of the object MB/s | peak RSS MiB |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let larder = metric(results, w, "larder", "puts-during-delete", rate);
    for engine in rows(plan, w) {
        let m = |phase: &str, f: &dyn Fn(&ObjPhase) -> f64| metric(results, w, &engine, phase, f);
        let (alone, during) = (m("puts-alone", &rate), m("puts-during-delete", &rate));
        if during.is_none() {
            let fails = failures(results, w, &engine).join("; ");
            let _ = writeln!(o, "| {engine} | FAILED: {fails} | | | | | | | | | |");
            continue;
        }
        let window = m("puts-during-delete", &|p| extra(p, "puts_in_delete_window") / extra(p, "delete_window_secs"));
        let _ = writeln!(
            o,
            "| {engine} | {} | {} | {} | {} | {} | {} / {} | {} / {} | {} | {} | {} |",
            med(alone, thousands),
            med(during, thousands),
            ratio(during, alone),
            ratio(window, alone),
            med(m("puts-during-delete", &|p| extra(p, "delete_secs")), |v| format!("{v:.3}")),
            med(m("puts-alone", &|p| p.p99_us), thousands),
            med(m("puts-during-delete", &|p| p.p99_us), thousands),
            med(m("puts-alone", &|p| p.max_us), thousands),
            med(m("puts-during-delete", &|p| p.max_us), thousands),
            ratio(larder, during),
            med(m("write-large", &mbs), f1),
            med(m("puts-during-delete", &|p| p.vmhwm_kib as f64), mib),
        );
    }
}

fn gets_table(o: &mut String, plan: &Plan, results: &Results) {
    let w = Workload::Gets;
    let size = small(plan);
    let _ = writeln!(
        o,
        "\n### e. {size} gets from cache\n\n{} objects of {size} loaded (non-durable path, then `sync`), one warm-up \
         pass over all of them, each checked in full against the value written, then {} random gets ({} passes' \
         worth) timed, each checked by its length and its first and last 16 bytes, every 64th in full (a full \
         {size} compare per get, which no engine makes, was about a quarter of Larder's time per get). \"wrong\" \
         counts missing or wrong objects over warm-up and timed gets (must be 0). The ceiling is a {size} pread \
         of a cached file, checked the same way.\n",
        thousands(plan.get_objects as f64),
        thousands((plan.get_objects * plan.get_passes) as f64),
        plan.get_passes
    );
    let _ = writeln!(o, "| Engine | gets/s | MB/s | Larder ÷ | gets/s min–max | µs per get | wrong | peak RSS MiB |");
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|---:|");
    let larder = metric(results, w, "larder", "gets", rate);
    for engine in rows(plan, w) {
        let m = |f: fn(&ObjPhase) -> f64| metric(results, w, &engine, "gets", f);
        let ops = m(rate);
        let label = if engine == CEILING { "*ceiling: pread of a cached file*".to_string() } else { engine.clone() };
        if ops.is_none() {
            let _ = writeln!(o, "| {label} | FAILED: {} | | | | | | |", failures(results, w, &engine).join("; "));
            continue;
        }
        let _ = writeln!(
            o,
            "| {label} | {} | {} | {} | {} | {} | {} | {} |",
            med(ops, thousands),
            med(m(mbs), f1),
            ratio(larder, ops),
            range(ops, thousands),
            med(ops, |v| format!("{:.2}", 1e6 / v)),
            med(m(|p| p.errors as f64), |v| format!("{v:.0}")),
            med(m(|p| p.vmhwm_kib as f64), mib),
        );
    }
}

fn space_table(o: &mut String, plan: &Plan, results: &Results) {
    let w = Workload::Space;
    let n = plan.space_objects;
    let _ = writeln!(
        o,
        "\n### f. Space of {} objects of 1 KiB\n\nLoaded through each engine's non-durable path, clean close, `sync`, \
         then the sum of `st_blocks * 512` over the whole store directory, per byte of object data ({:.1} MiB; \
         keys not counted). Lower is better; the floor is 1.00. \"Larder ÷\" is Larder's ratio over the row's \
         (below 1: Larder smaller).\n",
        thousands(n as f64),
        (n * TINY_BYTES as u64) as f64 / (1 << 20) as f64
    );
    let _ = writeln!(
        o,
        "| Engine | allocated MiB | allocated ÷ data | Larder ÷ | files | load puts/s (not durable) | close s | \
         peak RSS MiB |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|---:|");
    let amp = |p: &ObjPhase| extra(p, "allocated_bytes") / p.bytes as f64;
    let larder = metric(results, w, "larder", "space", amp);
    for engine in rows(plan, w) {
        let m = |f: &dyn Fn(&ObjPhase) -> f64| metric(results, w, &engine, "space", f);
        let ratio_stat = m(&amp);
        if ratio_stat.is_none() {
            let _ = writeln!(o, "| {engine} | FAILED: {} | | | | | | |", failures(results, w, &engine).join("; "));
            continue;
        }
        let _ = writeln!(
            o,
            "| {engine} | {} | {} | {} | {} | {} | {} | {} |",
            med(m(&|p| extra(p, "allocated_bytes") / (1 << 20) as f64), f1),
            med(ratio_stat, |v| format!("{v:.3}")),
            ratio(larder, ratio_stat),
            med(m(&|p| extra(p, "files")), thousands),
            med(m(&rate), thousands),
            med(m(&|p| extra(p, "close_secs")), f2),
            med(m(&|p| p.vmhwm_kib as f64), mib),
        );
    }
}

fn notes(o: &mut String) {
    let _ = writeln!(o, "\nNotes:\n");
    let _ = writeln!(
        o,
        "- Durable means on disk when the call returns: ext4 fdatasync + directory fsync on create, RocksDB \
         sync = true, fjall persist(SyncData), LMDB's synced commit, Larder Durability::Durable. The ceiling does \
         the least a durable write can do: overwrite data in place (no allocation, no metadata) and fdatasync."
    );
    let _ = writeln!(
        o,
        "- LMDB maps its file, so its VmHWM counts the mapped pages it touched (page cache, not heap); ext4's \
         data lives in the page cache, outside its VmHWM."
    );
    let _ = writeln!(
        o,
        "- ext4 puts create new files (no temporary file + rename, as the keys are new); an overwrite-safe \
         file store would pay a rename and a second directory fsync."
    );
}

/// The run's medians as a results file (`objects.json`, the chart's input):
/// each workload's rates (the ceiling among them), and the space workload's
/// allocated bytes per data byte (less is better).
pub fn chart_results(plan: &Plan, info: &RunInfo, results: &Results) -> crate::chart::ChartResults {
    use crate::chart::{Operation, Value};
    let mut operations = Vec::new();
    for &w in &plan.workloads {
        let (name, unit, phase): (String, &str, &str) = match w {
            Workload::Put1 => (format!("Durable {} puts, 1 writer", small(plan)), "puts/s", "puts"),
            Workload::Put8 => (format!("Durable {} puts, concurrent writers", small(plan)), "puts/s", "puts"),
            Workload::Big => ("Durable 1 MiB puts".to_string(), "puts/s", "puts"),
            Workload::Delete => (
                format!("Durable {} puts while a large object is deleted", small(plan)),
                "puts/s",
                "puts-during-delete",
            ),
            Workload::Gets => (format!("{} gets from cache", small(plan)), "gets/s", "gets"),
            Workload::Space => ("Space of 1 KiB objects".to_string(), "allocated ÷ data", "space"),
        };
        let figure = |p: &ObjPhase| {
            if w == Workload::Space {
                extra(p, "allocated_bytes") / p.bytes as f64
            } else {
                rate(p)
            }
        };
        let mut values: Vec<Value> = rows(plan, w)
            .into_iter()
            .filter_map(|e| metric(results, w, &e, phase, figure).map(|s| Value { engine: e, value: s.median }))
            .collect();
        if w == Workload::Delete {
            // The bar of this workload is the same engine's rate alone.
            if let Some(alone) = metric(results, w, "larder", "puts-alone", rate) {
                values.push(Value { engine: "larder, no delete".to_string(), value: alone.median });
            }
        }
        if values.is_empty() {
            continue;
        }
        operations.push(Operation {
            name: name.to_string(),
            unit: unit.to_string(),
            higher_is_better: w != Workload::Space,
            subject: "larder".to_string(),
            values,
        });
    }
    crate::chart::ChartResults {
        format: crate::chart::FORMAT,
        suite: "objects".to_string(),
        title: "Larder objects vs peers".to_string(),
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

/// The small objects' size as the report names it ("4 KiB", "100 B").
fn small(plan: &Plan) -> String {
    match plan.small_bytes {
        n if n % 1024 == 0 => format!("{} KiB", n / 1024),
        n => format!("{n} B"),
    }
}
