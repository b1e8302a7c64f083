use std::collections::BTreeMap;

use super::*;

fn small() -> Sizes {
    Sizes {
        varmail_files: 20,
        varmail_iterations: 300,
        webserver_files: 50,
        webserver_reads: 95,
        smallfile_files: 40,
        webproxy_files: 30,
        webproxy_iterations: 200,
    }
}

/// Replays set-up then timed steps on an empty model.
fn replayed(plan: &Plan) -> Result<(Vec<u64>, BTreeMap<u32, u64>)> {
    let mut model = BTreeMap::new();
    replay(&mut model, &plan.setup)?;
    let reads = replay(&mut model, &plan.timed)?;
    Ok((reads, model))
}

#[test]
fn every_plan_only_touches_files_that_exist() {
    for (_, workload) in WORKLOADS {
        for seed in [1, 2, 42, 9_999] {
            let plan = plan(workload, small(), seed);
            if let Err(e) = replayed(&plan) {
                panic!("{} seed {seed}: {e}", workload.name());
            }
        }
    }
}

#[test]
fn varmail_deletes_creates_appends_and_reads_with_two_fsyncs_per_iteration() {
    let sizes = small();
    let plan = plan(Workload::Varmail, sizes, 7);
    assert_eq!(plan.setup.len(), sizes.varmail_files as usize);
    assert_eq!(plan.timed.len(), sizes.varmail_iterations as usize * 5);
    let fsyncs = plan
        .timed
        .iter()
        .filter(|s| matches!(s, Step::Create { fsync: true, .. } | Step::Append { fsync: true, .. }))
        .count();
    assert_eq!(fsyncs, sizes.varmail_iterations as usize * 2);
    for iteration in plan.timed.chunks(5) {
        match (iteration[0], iteration[1]) {
            (Step::Delete { file: d }, Step::Create { file: c, bytes: FILE_BYTES, fsync: true }) => assert_eq!(d, c),
            other => panic!("an iteration starts with {other:?}"),
        }
    }
    // Appends grow files: some read finds a file longer than 16 KiB.
    let (reads, model) = replayed(&plan).expect("a valid plan");
    assert!(reads.iter().any(|&r| r > u64::from(FILE_BYTES)));
    assert_eq!(model.len(), sizes.varmail_files as usize);
}

#[test]
fn webserver_appends_to_its_log_once_every_ten_reads() {
    let sizes = small();
    let plan = plan(Workload::Webserver, sizes, 3);
    let reads = plan.timed.iter().filter(|s| matches!(s, Step::ReadWhole { .. })).count();
    let appends = plan.timed.iter().filter(|s| matches!(s, Step::LogAppend { .. })).count();
    assert_eq!(reads, 95);
    assert_eq!(appends, 9);
    // The tenth read (index 9), then the first append.
    assert_eq!(plan.timed[10], Step::LogAppend { bytes: FILE_BYTES });
    assert!(matches!(plan.timed[9], Step::ReadWhole { .. }));
    let (read_sizes, _) = replayed(&plan).expect("a valid plan");
    assert!(read_sizes.iter().all(|&r| r == u64::from(FILE_BYTES)));
}

#[test]
fn smallfile_creates_syncs_reads_and_unlinks_every_file_once() {
    let sizes = small();
    let plan = plan(Workload::Smallfile, sizes, 5);
    assert!(plan.setup.is_empty());
    let n = sizes.smallfile_files as usize;
    assert_eq!(plan.timed.len(), 3 * n + 1);
    assert_eq!(plan.timed[n], Step::SyncAll);
    let (reads, model) = replayed(&plan).expect("a valid plan");
    assert_eq!(reads, vec![u64::from(SMALL_BYTES); n]);
    assert!(model.is_empty(), "smallfile leaves {} files", model.len());
}

#[test]
fn webproxy_recreates_a_file_reads_five_and_appends_to_the_log_per_iteration() {
    let sizes = small();
    let plan = plan(Workload::Webproxy, sizes, 13);
    assert_eq!(plan.setup.len(), 30);
    assert_eq!(plan.timed.len(), 200 * 8);
    for iteration in plan.timed.chunks(8) {
        assert!(
            matches!((iteration[0], iteration[1]), (Step::Delete { file: d }, Step::Create { file: c, fsync: false, .. }) if d == c)
        );
        assert!(iteration[2..7].iter().all(|s| matches!(s, Step::ReadWhole { .. })));
        assert_eq!(iteration[7], Step::LogAppend { bytes: FILE_BYTES });
    }
    let (reads, _) = replayed(&plan).expect("a valid plan");
    assert!(reads.iter().all(|&r| r == u64::from(FILE_BYTES)));
}

#[test]
fn a_seed_gives_the_same_plan_and_another_seed_another() {
    for workload in [Workload::Varmail, Workload::Webserver, Workload::Webproxy] {
        assert_eq!(plan(workload, small(), 11), plan(workload, small(), 11));
        assert_ne!(plan(workload, small(), 11).timed, plan(workload, small(), 12).timed);
    }
}

#[test]
fn replay_refuses_steps_on_files_in_the_wrong_state() {
    let mut model = BTreeMap::new();
    let create = Step::Create { file: 1, bytes: 10, fsync: false };
    assert!(replay(&mut model, &[create, create]).is_err());
    assert!(replay(&mut BTreeMap::new(), &[Step::ReadWhole { file: 3 }]).is_err());
    assert!(replay(&mut BTreeMap::new(), &[Step::Delete { file: 3 }]).is_err());
    assert!(replay(&mut BTreeMap::new(), &[Step::Append { file: 3, bytes: 1, fsync: false }]).is_err());
    let mut model = BTreeMap::new();
    let steps = [create, Step::Append { file: 1, bytes: 5, fsync: true }, Step::ReadWhole { file: 1 }];
    assert_eq!(replay(&mut model, &steps).expect("valid"), vec![15]);
}

#[test]
fn names_parse_back_to_their_workload() {
    for (name, workload) in WORKLOADS {
        assert_eq!(Workload::parse(name).expect("known"), workload);
        assert_eq!(workload.name(), name);
    }
    assert!(Workload::parse("fileserver").is_err());
}

#[test]
fn scaled_sizes_keep_the_file_sets_and_scale_the_work() {
    let half = Sizes::scaled(0.5);
    assert_eq!(half.webserver_files, 10_000);
    assert_eq!(half.webserver_reads, 10_000);
    assert_eq!(half.varmail_iterations, 250);
    assert_eq!(Sizes::scaled(1e-9).smallfile_files, 1);
}
