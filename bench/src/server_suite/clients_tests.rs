use std::collections::BTreeMap;

use super::*;
use crate::server_suite::workloads::{Sizes, WORKLOADS};

/// A fresh directory under the system's temporary directory.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("larder-bench-clients-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

fn tiny() -> Sizes {
    Sizes {
        varmail_files: 8,
        varmail_iterations: 20,
        webserver_files: 10,
        webserver_reads: 30,
        smallfile_files: 12,
        webproxy_files: 6,
        webproxy_iterations: 10,
    }
}

#[test]
fn every_workload_runs_on_a_directory_and_reads_what_the_model_says() {
    for (name, workload) in WORKLOADS {
        let dir = scratch(name);
        let target = Syscalls::new(&dir).expect("the directory opens");
        let plan = plan(workload, tiny(), 5);
        let mut model = BTreeMap::new();
        let setup_reads = replay(&mut model, &plan.setup).expect("a valid set-up");
        let timed_reads = replay(&mut model, &plan.timed).expect("valid timed steps");
        let files = target.mkdir("files").expect("mkdir");
        let log = target.open_file(&files, &CString::new("log").expect("a name"), true).expect("the log");
        let mut run =
            Runner { target: &target, dir: &files, log: &log, data: vec![1; 64 << 10], buf: vec![0; 64 << 10] };
        run.steps(&plan.setup, &setup_reads).expect("set-up runs");
        run.steps(&plan.timed, &timed_reads).expect("timed steps run");
        // What is left on disk is what the model says: names and sizes.
        let mut on_disk = BTreeMap::new();
        for entry in std::fs::read_dir(dir.join("files")).expect("a listing") {
            let entry = entry.expect("an entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(number) = name.strip_prefix('m') {
                on_disk.insert(number.parse::<u32>().expect("a number"), entry.metadata().expect("stat").len());
            }
        }
        assert_eq!(on_disk, model, "{name}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_read_of_another_size_than_the_model_says_is_an_error() {
    let dir = scratch("wrong-size");
    let target = Syscalls::new(&dir).expect("the directory opens");
    let files = target.mkdir("files").expect("mkdir");
    let log = target.open_file(&files, &CString::new("log").expect("a name"), true).expect("the log");
    let mut run = Runner { target: &target, dir: &files, log: &log, data: vec![1; 64 << 10], buf: vec![0; 64 << 10] };
    let steps = [Step::Create { file: 1, bytes: 100, fsync: false }, Step::ReadWhole { file: 1 }];
    assert!(run.steps(&steps[..1], &[]).is_ok());
    assert!(run.steps(&steps[1..], &[99]).is_err());
    assert!(run.steps(&steps[1..], &[100]).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}
