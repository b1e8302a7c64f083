use std::collections::BTreeMap;

use clap::Parser;

use super::super::{ObjPhase, ObjResult, ObjectsArgs, Plan, Results, Workload, CEILING};
use super::chart_results;
use crate::report::RunInfo;

/// An operation's unit, direction and (engine, figure) pairs.
type Figures = (String, bool, Vec<(String, f64)>);

#[derive(Parser)]
struct Command {
    #[command(flatten)]
    args: ObjectsArgs,
}

fn plan(line: &[&str]) -> Option<Plan> {
    let command = Command::try_parse_from(line).ok()?;
    Plan::from_args(&command.args).ok()
}

/// A child's result with one phase of `ops` in `secs` (and extras).
fn run(phase: &str, ops: u64, secs: f64, bytes: u64, extra: &[(&str, f64)]) -> Result<ObjResult, String> {
    let extra: BTreeMap<String, f64> = extra.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let phase = ObjPhase { name: phase.to_string(), ops, secs, bytes, extra, ..ObjPhase::default() };
    Ok(ObjResult { phases: vec![phase], ..ObjResult::default() })
}

#[test]
fn chart_results_hold_each_engines_median_and_invert_space() {
    let line = ["objects", "--engines", "larder,ext4", "--workloads", "put1,delete,space"];
    let Some(plan) = plan(&line) else { panic!("the command line parses") };
    let mut results = Results::new();
    let put1 = |e: &str| (Workload::Put1, e.to_string());
    // Larder's rounds: 100, 50 and 25 puts/s, median 50; a failed ext4 round is left out.
    results.insert(
        put1("larder"),
        vec![run("puts", 100, 1.0, 0, &[]), run("puts", 100, 2.0, 0, &[]), run("puts", 100, 4.0, 0, &[])],
    );
    results.insert(put1("ext4"), vec![run("puts", 10, 1.0, 0, &[]), Err("killed".to_string())]);
    results.insert(put1(CEILING), vec![run("puts", 200, 1.0, 0, &[])]);
    let delete = |e: &str| (Workload::Delete, e.to_string());
    let larder_delete = ObjResult {
        phases: vec![
            ObjPhase { name: "puts-alone".to_string(), ops: 50, secs: 1.0, ..ObjPhase::default() },
            ObjPhase { name: "puts-during-delete".to_string(), ops: 40, secs: 1.0, ..ObjPhase::default() },
        ],
        ..ObjResult::default()
    };
    results.insert(delete("larder"), vec![Ok(larder_delete)]);
    results.insert(delete("ext4"), vec![run("puts-during-delete", 5, 1.0, 0, &[])]);
    let space = |e: &str| (Workload::Space, e.to_string());
    results.insert(space("larder"), vec![run("space", 10, 1.0, 1000, &[("allocated_bytes", 1200.0)])]);
    results.insert(space("ext4"), vec![run("space", 10, 1.0, 1000, &[("allocated_bytes", 4000.0)])]);

    let info = RunInfo::collect(&std::env::temp_dir());
    let chart = chart_results(&plan, &info, &results);
    assert!(chart.validate().is_ok());
    assert_eq!(chart.suite, "objects");
    let figures: Vec<Figures> = chart
        .operations
        .iter()
        .map(|o| (o.unit.clone(), o.higher_is_better, o.values.iter().map(|v| (v.engine.clone(), v.value)).collect()))
        .collect();
    let s = |x: &str| x.to_string();
    assert_eq!(
        figures,
        vec![
            (s("puts/s"), true, vec![(s("larder"), 50.0), (s("ext4"), 10.0), (s(CEILING), 200.0)]),
            (s("puts/s"), true, vec![(s("larder"), 40.0), (s("ext4"), 5.0), (s("larder, no delete"), 50.0)]),
            (s("allocated ÷ data"), false, vec![(s("larder"), 1.2), (s("ext4"), 4.0)]),
        ]
    );
    // Less is better for space: Larder's ratio to ext4 is 4.0 / 1.2.
    let ratio = chart.operations[2].ratio_against(4.0).unwrap_or(0.0);
    assert!((ratio - 4.0 / 1.2).abs() < 1e-9);
}
