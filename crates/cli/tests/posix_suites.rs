//! POSIX conformance suites on a Larder mount: pjdfstest (the Rust suite)
//! with the features and expected failures in `posix/pjdfstest.toml`,
//! each with its reason, and a bounded fsx run. `scripts/setup.sh`
//! installs both (and pjdfstest's `tests` user). pjdfstest switches users,
//! so it needs root; without root or /dev/fuse the tests fail unless
//! `LARDER_SKIP_FUSE=1` says to skip them.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{fresh_store, fsck_clean, fuse_available, root_available, Mount};

fn tool(name: &str) -> bool {
    let found = Command::new("sh").arg("-c").arg(format!("command -v {name}")).output().unwrap().status.success();
    assert!(found, "{name} is not installed: run scripts/setup.sh");
    found
}

/// pjdfstest sizes its longest path from the base directory's length and
/// breaks (an unsigned underflow) when PATH_MAX - 1 - len leaves less
/// than 2 after whole 127-byte components: pad the base name past that.
fn base_dir(mnt: &Path) -> std::path::PathBuf {
    let mut name = String::from("p");
    loop {
        let base = mnt.join(&name);
        let left = 4095 - base.as_os_str().len();
        if left % 127 >= 2 {
            return base;
        }
        name.push('p');
    }
}

#[test]
fn pjdfstest_passes_on_the_mount() {
    if !fuse_available() || !root_available("pjdfstest switches users") || !tool("pjdfstest") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (store, mnt) = fresh_store(tmp.path());
    let m = Mount::start(&store, &mnt, &["--allow-other"]);
    let base = base_dir(&mnt);
    std::fs::create_dir(&base).unwrap();
    std::fs::set_permissions(&base, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/posix/pjdfstest.toml");
    let out =
        Command::new("pjdfstest").arg("-c").arg(&config).arg("-p").arg(&base).current_dir(&base).output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let failed: Vec<&str> = report.lines().filter(|l| l.trim_end().ends_with("FAILED")).collect();
    let summary = report.lines().find(|l| l.starts_with("Summary:")).unwrap_or("no summary");
    eprintln!("pjdfstest: {summary}");
    assert!(
        out.status.success(),
        "pjdfstest failed: {summary}\n{}\n{}",
        failed.join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    m.stop();
    fsck_clean(&store);
}

#[test]
fn fsx_runs_clean_on_the_mount() {
    if !fuse_available() || !tool("fsx") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (store, mnt) = fresh_store(tmp.path());
    let m = Mount::start(&store, &mnt, &[]);
    let artifacts = tmp.path().join("fsx");
    std::fs::create_dir(&artifacts).unwrap();
    let out = Command::new("fsx")
        .args(["-N", "2000", "-S", "20261124", "-P"])
        .arg(&artifacts)
        .arg(mnt.join("fsx.dat"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fsx failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    m.stop();
    fsck_clean(&store);
}
