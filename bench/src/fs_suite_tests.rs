use super::{chart_results, FsResult, Results};
use crate::report::RunInfo;

fn ok(ops: u64, secs: f64) -> Result<FsResult, String> {
    Ok(FsResult { ops, secs, vmhwm_kib: 1024, details: Default::default() })
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

#[test]
fn slab_bytes_are_active_objects_times_object_size() {
    let slabinfo = "slabinfo - version: 2.1\n\
        # name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables\n\
        ext4_inode_cache  206889 207186   1128   14    4 : tunables    0    0    0 : slabdata  14799  14799      0\n\
        dentry            388571 392511    192   21    1 : tunables    0    0    0 : slabdata  18691  18691      0\n";
    assert_eq!(super::lookups::slab_bytes(slabinfo, "dentry"), Some(388_571 * 192));
    assert_eq!(super::lookups::slab_bytes(slabinfo, "ext4_inode_cache"), Some(206_889 * 1128));
    assert_eq!(super::lookups::slab_bytes(slabinfo, "ext4"), None, "a prefix of a name is not the name");
    assert_eq!(super::lookups::slab_bytes("dentry x 192", "dentry"), None, "unparsable counts give nothing");
}

#[test]
fn ext4_images_get_inodes_only_when_the_default_is_too_few() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        fs: super::FsArgs,
    }
    let args = |files: &str| Cli::parse_from(["x", "--files", files, "--image-gib", "16"]).fs;
    // 16 GiB at 16 KiB per inode: 1,048,576 inodes.
    assert_eq!(super::ext4_inodes(&args("1000000"), "create"), None);
    let wanted = 4_000_000 + 4_000_000 / 64 + 1024;
    assert_eq!(super::ext4_inodes(&args("4000000"), "create"), Some(wanted));
    assert_eq!(super::ext4_inodes(&args("4000000"), "stat-cold"), Some(wanted));
    assert_eq!(super::ext4_inodes(&args("4000000"), "mix-file"), None, "mixes make their own few files");
}

#[test]
fn details_are_reported_as_medians_per_engine() {
    let mut results = Results::new();
    let with = |secs: f64, open: f64| {
        let mut r = FsResult { ops: 10, secs, vmhwm_kib: 1024, details: Default::default() };
        r.details.insert("open_secs".to_string(), open);
        Ok(r)
    };
    results.insert(
        ("stat-cold".to_string(), "larder".to_string()),
        vec![with(1.0, 0.5), with(1.0, 0.25), Err("x".to_string()), with(1.0, 2.0)],
    );
    results.insert(("stat-cold".to_string(), "ext4".to_string()), vec![ok(10, 1.0)]);
    let mut o = String::new();
    super::write_details(&mut o, &["larder".to_string(), "ext4".to_string()], "stat-cold", &results);
    assert_eq!(o, "- larder (medians): open_secs 0.500\n\n");
}
