//! The heap suite's report and results file, from made-up results: the bar
//! lines' ratios, figures and verdicts, and the operations of heap.json.

use clap::Parser;

use super::super::{chart, HeapArgs, HeapPhase, HeapResult, Plan, Results, Workload};
use super::render;
use crate::report::RunInfo;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    heap: HeapArgs,
}

fn plan(args: &[&str]) -> Plan {
    let cli = Cli::parse_from(std::iter::once("heap").chain(args.iter().copied()));
    let mut plan = Plan::from_args(&cli.heap).expect("plan");
    // Every engine takes part whatever is installed where the test runs.
    plan.engines = super::super::ENGINES.iter().map(|e| e.to_string()).collect();
    plan.skipped.clear();
    plan
}

fn phase(name: &str, ops: u64, secs: f64, extra: &[(&str, f64)]) -> HeapPhase {
    HeapPhase {
        name: name.to_string(),
        ops,
        secs,
        bytes: 0,
        vmhwm_kib: 1024,
        extra: extra.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

fn put(r: &mut Results, w: Workload, case: &str, engine: &str, phases: Vec<HeapPhase>) {
    let result = HeapResult { engine: engine.to_string(), info: format!("{engine} info"), phases };
    r.entry((w, case.to_string(), engine.to_string())).or_default().push(Ok(result));
}

fn info() -> RunInfo {
    RunInfo::collect(&std::env::temp_dir())
}

/// The bar line that starts with `what`.
fn bar_line<'a>(report: &'a str, what: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.starts_with(&format!("| {what}")))
        .unwrap_or_else(|| panic!("no bar {what:?} in\n{report}"))
}

#[test]
fn locate_bars_give_the_ratio_its_figures_and_the_verdict() {
    let plan = plan(&["--workloads", "locate", "--trees", "100,4000"]);
    let mut r = Results::new();
    // 100 searches: the scan 1 ms each, Larder 50 µs (20x); at 4,000 the scan
    // 10 ms, Larder 0.2 ms (50x, short of 100x).
    put(
        &mut r,
        Workload::Locate,
        "100",
        "baseline",
        vec![phase("build", 100, 0.010, &[]), phase("search", 100, 0.1, &[])],
    );
    put(
        &mut r,
        Workload::Locate,
        "100",
        "larder",
        vec![phase("build", 100, 0.011, &[]), phase("search", 100, 0.005, &[])],
    );
    put(
        &mut r,
        Workload::Locate,
        "4000",
        "baseline",
        vec![phase("build", 4000, 0.1, &[]), phase("search", 100, 1.0, &[])],
    );
    put(
        &mut r,
        Workload::Locate,
        "4000",
        "larder",
        vec![
            phase("build", 4000, 0.15, &[]),
            phase("search", 100, 0.02, &[]),
            phase("fresh-search", 10, 0.01, &[("attach_search_secs", 0.005)]),
        ],
    );
    put(&mut r, Workload::Locate, "4000", "plocate", vec![phase("fresh-search", 100, 0.2, &[])]);
    let report = render(&plan, &info(), &r);
    let line = bar_line(&report, "exact-name search ≥ 10x the scan at 100 entries");
    assert!(line.contains("20.00x") && line.ends_with("| yes |"), "{line}");
    let line = bar_line(&report, "exact-name search ≥ 100x the scan at 4,000 entries");
    assert!(line.contains("50.00x") && line.ends_with("| no |"), "{line}");
    // The worst build is 1.5x at 4,000 entries.
    let line = bar_line(&report, "locate build ≤ 1.2x the baseline");
    assert!(line.contains("1.50x at 4000 entries") && line.ends_with("| no |"), "{line}");
    // Fresh: 1 ms per search against the scan's 10 ms (10x, met) and plocate's 2 ms (2x, met).
    let line = bar_line(&report, "fresh process ≥ 10x the scan at 4,000");
    assert!(line.contains("10.00x") && line.ends_with("| yes |"), "{line}");
    let line = bar_line(&report, "fresh process ≥ 1x plocate at 4,000");
    assert!(line.contains("2.00x") && line.ends_with("| yes |"), "{line}");
    assert!(report.contains("| 1.00 ms (inside: 500.00 µs) |"), "{report}");
    let line = bar_line(&report, "exact-name search ≥ 1000x the scan at 1,000,000 entries");
    assert!(line.ends_with("| not measured |"), "{line}");
}

#[test]
fn allocator_bars_and_space_use_the_worst_case() {
    let plan = plan(&["--workloads", "alloc"]);
    let mut r = Results::new();
    let alloc = |secs: f64, file: f64| {
        vec![phase("alloc", 1000, secs, &[("file_apparent_bytes", file), ("live_bytes", 100.0)])]
    };
    put(&mut r, Workload::Alloc, "threads=1", "boost", alloc(0.004, 1000.0));
    put(&mut r, Workload::Alloc, "threads=1", "larder", alloc(0.001, 110.0));
    put(&mut r, Workload::Alloc, "threads=2", "larder", alloc(0.001, 130.0));
    let report = render(&plan, &info(), &r);
    let line = bar_line(&report, "alloc_in/free_in ≥ 2x Boost.Interprocess, threads=1");
    assert!(line.contains("4.00x") && line.ends_with("| yes |"), "{line}");
    let line = bar_line(&report, "file bytes ≤ 1.25x live bytes");
    assert!(line.contains("1.30x (threads=2)") && line.ends_with("| no |"), "{line}");
    let line = bar_line(&report, "alloc_in/free_in ≥ 1x SPHDE, threads=2");
    assert!(line.ends_with("| not measured |"), "{line}");
}

#[test]
fn the_durable_bar_is_judged_against_the_ceiling_of_the_same_run() {
    let plan = plan(&["--workloads", "alloc"]);
    // Per op: pmemobj, larder, the fdatasync ceiling (seconds over 1,000 ops).
    let verdict = |pmemobj: f64, larder: f64, ceiling: f64| {
        let mut r = Results::new();
        for (engine, secs) in [("pmemobj", pmemobj), ("larder", larder), ("fdatasync", ceiling)] {
            put(&mut r, Workload::Alloc, "durable", engine, vec![phase("alloc", 1000, secs, &[])]);
        }
        let report = render(&plan, &info(), &r);
        bar_line(&report, "durable allocs ≥ 2x libpmemobj (pmemobj)").to_string()
    };
    // 2.5x pmemobj: met outright.
    let line = verdict(0.5, 0.2, 0.19);
    assert!(line.contains("2.50x") && line.ends_with("| yes |"), "{line}");
    // 1.9x, but 2x would need 200 µs per op where the disk's one write and
    // flush take 210: above the ceiling, and Larder is 0.95x the ceiling.
    let line = verdict(0.4, 0.4 / 1.9, 0.21);
    assert!(line.contains("above the ceiling") && line.ends_with("| yes |"), "{line}");
    // The same, with Larder at 0.8x the ceiling: not met.
    let line = verdict(0.4, 0.21 / 0.8, 0.21);
    assert!(line.contains("above the ceiling") && line.ends_with("| no |"), "{line}");
    // 1.9x where the ceiling leaves room for 2x: not met.
    let line = verdict(0.5, 0.5 / 1.9, 0.2);
    assert!(line.contains("not above the ceiling") && line.ends_with("| no |"), "{line}");
}

#[test]
fn a_failed_engine_is_reported_with_its_reason() {
    let plan = plan(&["--workloads", "locate", "--trees", "100"]);
    let mut r = Results::new();
    r.entry((Workload::Locate, "100".to_string(), "plocate".to_string()))
        .or_default()
        .push(Err("plocate found 3 paths where the list has 4".to_string()));
    let report = render(&plan, &info(), &r);
    assert!(report.contains("| 100 | plocate | FAILED: plocate found 3 paths where the list has 4 |"), "{report}");
}

#[test]
fn the_results_file_has_searches_builds_and_rates() {
    let plan = plan(&["--workloads", "locate,alloc", "--trees", "100"]);
    let mut r = Results::new();
    put(
        &mut r,
        Workload::Locate,
        "100",
        "baseline",
        vec![phase("build", 100, 0.01, &[]), phase("search", 100, 0.1, &[])],
    );
    put(
        &mut r,
        Workload::Locate,
        "100",
        "larder",
        vec![phase("build", 100, 0.02, &[]), phase("search", 100, 0.001, &[]), phase("fresh-search", 10, 0.01, &[])],
    );
    put(&mut r, Workload::Alloc, "durable", "pmemobj", vec![phase("alloc", 10, 0.1, &[])]);
    let results = chart::chart_results(&plan, &info(), &r);
    results.validate().expect("a valid results file");
    let search = &results.operations[0];
    assert_eq!(search.name, "locate: exact-name searches, 100 entries");
    let value = |engine: &str| search.values.iter().find(|v| v.engine == engine).map(|v| v.value);
    assert_eq!(value("larder"), Some(100_000.0));
    assert_eq!(value("larder, fresh process"), Some(1000.0));
    assert_eq!(value("baseline scan"), Some(1000.0));
    let build = &results.operations[1];
    assert!(!build.higher_is_better, "build times are less-is-better");
    assert_eq!(build.ratio_against(0.01), Some(0.5));
    let durable = results.operations.iter().find(|o| o.name.ends_with("durable")).expect("durable op");
    assert_eq!(durable.values.len(), 1);
    assert_eq!(durable.values[0].value, 100.0);
}
