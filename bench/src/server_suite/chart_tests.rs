use super::ops::Timed;
use super::{chart_results, Results, ServerResult};
use crate::report::RunInfo;

/// An operation's name, subject and (peer, ops/s) pairs.
type Figures = (String, String, Vec<(String, f64)>);

fn timed(op: &str, ops: u64, secs: f64) -> Timed {
    Timed { op: op.to_string(), ops, secs, p50_ns: 1000, p99_ns: 2000 }
}

#[test]
fn chart_results_give_ops_per_second_from_the_median_mean_time() {
    let mut results = Results::new();
    // served: 1,000 stats in 0.01, 0.02 and 0.04 s: median mean 20 µs, 50,000/s.
    let served = [0.01, 0.02, 0.04]
        .iter()
        .map(|secs| Ok(ServerResult { timings: vec![timed("stat", 1000, *secs)], vmhwm_kib: 1 }))
        .collect();
    results.insert("served".to_string(), served);
    results.insert(
        "ext4".to_string(),
        vec![
            Ok(ServerResult {
                timings: vec![timed("stat", 1000, 0.001), timed("read4k-seq", 100, 0.001)],
                vmhwm_kib: 1,
            }),
            Err("child failed".to_string()),
        ],
    );
    let peers = vec!["ext4".to_string(), "served".to_string()];
    let chart = chart_results(&RunInfo::collect(&std::env::temp_dir()), &peers, &results);
    assert!(chart.validate().is_ok());
    let figures: Vec<Figures> = chart
        .operations
        .iter()
        .map(|o| {
            let values = o.values.iter().map(|v| (v.engine.clone(), v.value.round())).collect();
            (o.name.clone(), o.subject.clone(), values)
        })
        .collect();
    let s = |x: &str| x.to_string();
    // In the suite's order of operations (reads first); served is Larder.
    assert_eq!(
        figures,
        vec![
            (s("read4k-seq"), s("served"), vec![(s("ext4"), 100_000.0)]),
            (s("stat"), s("served"), vec![(s("ext4"), 1_000_000.0), (s("served"), 50_000.0)]),
        ]
    );
}
