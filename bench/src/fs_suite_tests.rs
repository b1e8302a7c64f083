use super::{chart_results, FsResult, Results};
use crate::report::RunInfo;

fn ok(ops: u64, secs: f64) -> Result<FsResult, String> {
    Ok(FsResult { ops, secs, vmhwm_kib: 1024 })
}

#[test]
fn chart_results_hold_the_median_rate_of_the_engines_each_workload_runs_on() {
    let mut results = Results::new();
    let key = |w: &str, e: &str| (w.to_string(), e.to_string());
    // Rounds of 1000, 500 and 250 ops/s: median 500.
    results.insert(key("create", "larder"), vec![ok(1000, 1.0), ok(1000, 2.0), ok(1000, 4.0)]);
    results.insert(key("create", "ext4"), vec![ok(30, 1.0), Err("timed out".to_string()), ok(50, 1.0)]);
    results.insert(key("fuse-create", "larder"), vec![ok(70, 1.0)]);
    results.insert(key("fuse-create", "null"), vec![ok(100, 1.0)]);
    // Every round of xfs failed: no figure, no bar.
    results.insert(key("create", "xfs"), vec![Err("mkfs.xfs missing".to_string())]);
    let engines: Vec<String> = ["larder", "ext4", "xfs", "null"].iter().map(|e| e.to_string()).collect();
    let workloads: Vec<String> = ["create", "fuse-create", "stat"].iter().map(|w| w.to_string()).collect();
    let info = RunInfo::collect(&std::env::temp_dir());
    let chart = chart_results(&info, &engines, &workloads, &results);
    assert!(chart.validate().is_ok());
    let figures: Vec<(String, Vec<(String, f64)>)> = chart
        .operations
        .iter()
        .map(|o| (o.name.clone(), o.values.iter().map(|v| (v.engine.clone(), v.value)).collect()))
        .collect();
    let s = |x: &str| x.to_string();
    assert_eq!(
        figures,
        vec![
            (s("create"), vec![(s("larder"), 500.0), (s("ext4"), 40.0)]),
            (s("fuse-create"), vec![(s("larder"), 70.0), (s("null"), 100.0)]),
        ],
        "the stat workload had no runs and is left out"
    );
    assert_eq!(chart.operations[0].ratio_against(40.0), Some(12.5));
}
