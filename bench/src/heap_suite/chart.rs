//! The heap suite's results file (`heap.json`, drawn as `heap.svg` by
//! crate::chart): the medians the bar is judged on, one operation each.

use super::micro::{sizes, ATTACH_BYTES, SEEK_READ};
use super::{HeapPhase, Plan, Results, Workload};
use crate::chart::{ChartResults, Operation, Value, FORMAT};
use crate::report::{stat, RunInfo};

/// The median of `f` over the successful runs' phase `phase`.
fn median(
    r: &Results,
    w: Workload,
    case: &str,
    engine: &str,
    phase: &str,
    f: impl Fn(&HeapPhase) -> f64,
) -> Option<f64> {
    let runs = r.get(&(w, case.to_string(), engine.to_string()))?;
    stat(runs.iter().filter_map(|x| x.as_ref().ok()).filter_map(|x| x.phase(phase)).map(f).collect()).map(|s| s.median)
}

fn per_sec(p: &HeapPhase) -> f64 {
    p.ops as f64 / p.secs
}

fn mbs(p: &HeapPhase) -> f64 {
    p.bytes as f64 / p.secs / 1e6
}

/// An operation of the figures found (none: no operation).
fn operation(
    name: String,
    unit: &str,
    higher_is_better: bool,
    values: Vec<(String, Option<f64>)>,
) -> Option<Operation> {
    let values: Vec<Value> = values
        .into_iter()
        .filter_map(|(engine, v)| v.filter(|v| v.is_finite()).map(|value| Value { engine, value }))
        .collect();
    (!values.is_empty()).then(|| Operation {
        name,
        unit: unit.to_string(),
        higher_is_better,
        subject: "larder".to_string(),
        values,
    })
}

/// The results file of one run.
pub fn chart_results(plan: &Plan, info: &RunInfo, r: &Results) -> ChartResults {
    let mut operations = Vec::new();
    for &w in &plan.workloads {
        match w {
            Workload::Locate => {
                for tree in &plan.trees {
                    let case = tree.to_string();
                    let m = |e: &str, phase: &str, f: fn(&HeapPhase) -> f64| median(r, w, &case, e, phase, f);
                    operations.extend(operation(
                        format!("locate: exact-name searches, {tree} entries"),
                        "searches/s",
                        true,
                        vec![
                            ("larder".to_string(), m("larder", "search", per_sec)),
                            ("larder, fresh process".to_string(), m("larder", "fresh-search", per_sec)),
                            ("baseline scan".to_string(), m("baseline", "search", per_sec)),
                            ("locate".to_string(), m("locate", "fresh-search", per_sec)),
                            ("plocate".to_string(), m("plocate", "fresh-search", per_sec)),
                        ],
                    ));
                    operations.extend(operation(
                        format!("locate: build, {tree} entries"),
                        "s",
                        false,
                        ["larder", "baseline", "locate", "plocate"]
                            .iter()
                            .map(|e| (e.to_string(), m(e, "build", |p| p.secs)))
                            .collect(),
                    ));
                }
            }
            Workload::Micro => {
                let largest = sizes(plan.base.max_object).last().copied().unwrap_or(super::micro::MIN_OBJECT);
                let m = |e: &str, phase: &str, f: fn(&HeapPhase) -> f64| median(r, w, "micro", e, phase, f);
                for (op, b) in [("read", 1), ("read", 1024), ("write", 1), ("write", 1024), ("copy", 1024)] {
                    let phase = format!("{op}/{largest}/{b}");
                    let mut values: Vec<(String, Option<f64>)> =
                        ["larder", "mmap", "ext4"].iter().map(|e| (e.to_string(), m(e, &phase, mbs))).collect();
                    if op == "copy" {
                        values.push(("std::fs::copy".to_string(), m("fscopy", &format!("copy/{largest}/0"), mbs)));
                    }
                    operations.extend(operation(
                        format!("micro: {op} of {largest} B, {b} B buffer"),
                        "MB/s",
                        true,
                        values,
                    ));
                }
                let seek = format!("seek/{largest}/{SEEK_READ}");
                operations.extend(operation(
                    format!("micro: random {SEEK_READ} B reads after a seek, {largest} B object"),
                    "reads/s",
                    true,
                    ["larder", "mmap", "ext4"].iter().map(|e| (e.to_string(), m(e, &seek, per_sec))).collect(),
                ));
                let attach = format!("attach/{ATTACH_BYTES}");
                operations.extend(operation(
                    format!("micro: attach by name + read {ATTACH_BYTES} B + close"),
                    "ops/s",
                    true,
                    ["larder", "mmap", "ext4"].iter().map(|e| (e.to_string(), m(e, &attach, per_sec))).collect(),
                ));
            }
            Workload::Alloc => {
                for case in ["threads=1", "threads=2", "durable"] {
                    let engines: Vec<&str> =
                        w.engines().iter().copied().filter(|e| super::runs_case(w, case, e)).collect();
                    operations.extend(operation(
                        format!("alloc: free + alloc of 16 B-4 KiB blocks, {case}"),
                        "ops/s",
                        true,
                        engines.iter().map(|e| (e.to_string(), median(r, w, case, e, "alloc", per_sec))).collect(),
                    ));
                }
            }
        }
    }
    ChartResults {
        format: FORMAT,
        suite: "heap".to_string(),
        title: "Larder heap vs peers".to_string(),
        date: info.date().to_string(),
        commit: info.commit().to_string(),
        command: info.command().to_string(),
        source: String::new(),
        operations,
    }
}
