use clap::Parser;

use super::{chart_results, Results};
use crate::workload::{ChildResult, Kind, Phase};
use crate::{plan, IndexArgs};

#[derive(Parser)]
struct Command {
    #[command(flatten)]
    args: IndexArgs,
}

fn phases(list: &[(&str, u64, f64)]) -> Result<ChildResult, String> {
    let phases = list
        .iter()
        .map(|(name, ops, secs)| Phase { name: name.to_string(), ops: *ops, secs: *secs, ..Phase::default() })
        .collect();
    Ok(ChildResult { phases, ..ChildResult::default() })
}

/// An operation's name and (engine, figure) pairs.
type Figures = (String, Vec<(String, f64)>);

#[test]
fn chart_results_hold_ingest_gets_and_scans_but_not_the_disk_ceiling() {
    let line = ["larder-bench", "--engines", "larder", "--workloads", "random,gets,scans", "--n", "1000"];
    let Some(plan) = Command::try_parse_from(line).ok().and_then(|c| plan(&c.args).ok()) else {
        panic!("the command line parses")
    };
    let mut results = Results::new();
    let run = phases(&[("ingest", 1000, 0.5), ("gets", 1000, 0.25), ("misses", 1000, 0.1), ("scans", 10, 0.5)]);
    let slower = phases(&[("ingest", 1000, 1.0), ("gets", 1000, 0.5), ("misses", 1000, 0.2), ("scans", 10, 1.0)]);
    results.insert((Kind::Random, "larder".to_string()), vec![run.clone(), slower, run]);
    results.insert((Kind::Disk, "disk".to_string()), vec![phases(&[("ingest", 1000, 0.001)])]);
    let chart = chart_results(&plan, &super::RunInfo::collect(&std::env::temp_dir()), &results);
    assert!(chart.validate().is_ok());
    let figures: Vec<Figures> = chart
        .operations
        .iter()
        .map(|o| (o.name.clone(), o.values.iter().map(|v| (v.engine.clone(), v.value)).collect()))
        .collect();
    let s = |x: &str| x.to_string();
    assert_eq!(
        figures,
        vec![
            (s("Random ingest, to the final flush"), vec![(s("larder"), 2000.0)]),
            (s("Random point gets, hits"), vec![(s("larder"), 4000.0)]),
            (s("Random point gets, misses"), vec![(s("larder"), 10000.0)]),
            (s("Prefix scans"), vec![(s("larder"), 20.0)]),
        ]
    );
}
