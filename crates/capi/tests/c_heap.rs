//! The heap's C API from C: paper 003's programs (section 3.3's and
//! Figure 3-8's tree), ported by renaming (examples/c/pshfs_basic.c and
//! pshfs_tree.c), and the API's failures (tests/c/heap_errors.c), each
//! compiled with the system's C compiler against include/larder_heap.h
//! and liblarder, and run. The programs check every result themselves
//! and exit non-zero at a wrong one; here their exit status and output
//! are checked, the tree is found again by three processes in turn
//! (persistence across exit), and the store must pass fsck.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{compile, fsck_clean, library_dir, Linking, Served};

/// Compiles `source` (relative to the repository) into `dir`.
fn build(dir: &Path, source: &str, linking: Linking) -> PathBuf {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let name = Path::new(source).file_stem().unwrap().to_string_lossy().into_owned();
    let program = dir.join(format!("{name}-{linking:?}"));
    compile(&repository.join(source), &program, linking);
    program
}

/// Runs `program` with `args`; fails with its output unless it exits 0.
fn run(program: &Path, args: &[&str]) -> String {
    let output: Output = Command::new(program).args(args).env("LD_LIBRARY_PATH", library_dir()).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{} {args:?} exited with {}:\n{stdout}\n{}",
        program.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn the_papers_basic_program_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // Static too: the heap's calls need nothing beyond libc either way.
    for linking in [Linking::Shared, Linking::Static] {
        let program = build(dir.path(), "examples/c/pshfs_basic.c", linking);
        let stdout = run(&program, &[store.to_str().unwrap()]);
        assert_eq!(stdout, "Current Value: 00000\nCurrent Value: 11111\npshfs_basic: done\n", "{linking:?}");
    }
    fsck_clean(&store);
}

#[test]
fn the_papers_tree_program_runs_and_its_tree_persists_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let program = build(dir.path(), "examples/c/pshfs_tree.c", Linking::Shared);
    // A heap of its own inside the store, to exercise STORE:HEAP_PATH.
    let target = format!("{}:/trees", dir.path().join("store").display());

    let created = run(&program, &[&target, "create"]);
    assert!(created.starts_with("created: tree "), "{created}");
    // The ids printed are distinct (the program checks the clone's too).
    let ids: Vec<u64> = created
        .lines()
        .next()
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{created}");
    assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2], "{created}");

    let reattached = run(&program, &[&target, "reattach"]);
    assert!(reattached.contains("reattached: tree checked, copy and clones freed"), "{reattached}");
    let verified = run(&program, &[&target, "verify"]);
    assert!(verified.contains("verified: the frees persisted"), "{verified}");
    fsck_clean(&dir.path().join("store"));
}

#[test]
fn the_heap_calls_fail_as_documented_from_c_and_blocks_persist() {
    let dir = tempfile::tempdir().unwrap();
    let program = build(dir.path(), "crates/capi/tests/c/heap_errors.c", Linking::Shared);
    let store = dir.path().join("store");
    let stdout = run(&program, &[store.to_str().unwrap()]);
    assert!(stdout.contains("heap_errors: done"), "{stdout}");
    // The blocks it left, in a new process.
    let listed = run(&program, &["--list", store.to_str().unwrap()]);
    assert!(listed.contains("list: 50 blocks"), "{listed}");
    // Held by this process (embedded, no server): EBUSY for the program.
    let held = larder_object::Store::open(
        std::sync::Arc::new(larder_io::RealStorage::new()),
        &store,
        larder_object::StoreOptions::default(),
    )
    .unwrap();
    let busy = run(&program, &["--busy", store.to_str().unwrap()]);
    assert!(busy.contains("busy: refused with EBUSY"), "{busy}");
    held.close().unwrap();
    fsck_clean(&store);
}

/// Runs `program` with `args` in a process of its own; does not wait.
fn spawn(program: &Path, args: &[&str]) -> std::process::Child {
    Command::new(program)
        .args(args)
        .env("LD_LIBRARY_PATH", library_dir())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn processes_racing_for_a_name_on_a_served_store_agree_on_one_winner() {
    let mut served = Served::start(false);
    let program = build(served.dir.path(), "crates/capi/tests/c/heap_errors.c", Linking::Shared);
    for round in 0..3 {
        let name = format!("raced-{round}");
        let racers: Vec<_> = (0..6).map(|_| spawn(&program, &["--race", served.store_str(), &name])).collect();
        let mut winners = Vec::new();
        let mut named = std::collections::BTreeSet::new();
        for racer in racers {
            let output = racer.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
            assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
            let line = stdout.lines().find(|l| l.starts_with("race: ")).unwrap_or_else(|| panic!("{stdout}"));
            let object: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
            named.insert(object);
            if line.starts_with("race: won ") {
                winners.push(object);
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: one process wins the name");
        assert_eq!(named.into_iter().collect::<Vec<_>>(), winners, "round {round}: all saw the winner's object");
    }
    served.stop();
    fsck_clean(&served.store);
}

#[test]
fn the_papers_programs_run_on_a_served_store_and_its_tree_outlives_the_server() {
    let mut served = Served::start(false);
    let basic = build(served.dir.path(), "examples/c/pshfs_basic.c", Linking::Shared);
    let stdout = run(&basic, &[served.store_str()]);
    assert_eq!(stdout, "Current Value: 00000\nCurrent Value: 11111\npshfs_basic: done\n");
    let tree = build(served.dir.path(), "examples/c/pshfs_tree.c", Linking::Shared);
    let target = format!("{}:/trees", served.store_str());
    let created = run(&tree, &[&target, "create"]);
    assert!(created.starts_with("created: tree "), "{created}");
    let reattached = run(&tree, &[&target, "reattach"]);
    assert!(reattached.contains("reattached: tree checked, copy and clones freed"), "{reattached}");
    // The server made it durable when it stopped; a process that opens
    // the store itself finds what the served processes left.
    served.stop();
    let verified = run(&tree, &[&target, "verify"]);
    assert!(verified.contains("verified: the frees persisted"), "{verified}");
    fsck_clean(&served.store);
}
