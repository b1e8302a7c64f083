//! Helpers shared by the mount tests: running `larder`, mounting a store
//! through the binary (unmounted, lazily if need be, when dropped), shell
//! steps that must succeed, and fsck.
#![allow(dead_code, clippy::unwrap_used)]

pub mod steps;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn larder(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larder")).args(args).output().unwrap()
}

/// The variable that lets tests needing FUSE or root skip on a machine
/// without them (README, "Tests"): `LARDER_SKIP_FUSE=1`.
pub const SKIP_VARIABLE: &str = "LARDER_SKIP_FUSE";

/// Whether the machine can mount: true with /dev/fuse. Without it the
/// test fails, so a CI machine lacking FUSE cannot pass by testing
/// nothing, unless `LARDER_SKIP_FUSE=1` asks to skip (then false).
pub fn fuse_available() -> bool {
    Path::new("/dev/fuse").exists() || skip_or_fail("no /dev/fuse on this machine, so nothing can be mounted")
}

/// Whether this process is root, which tests that switch users need;
/// otherwise as [`fuse_available`].
pub fn root_available(why: &str) -> bool {
    rustix::process::geteuid().is_root() || skip_or_fail(&format!("not root: {why}"))
}

/// False (skip) if `LARDER_SKIP_FUSE=1`; else fails the test with `what`.
fn skip_or_fail(what: &str) -> bool {
    let skip = std::env::var(SKIP_VARIABLE).is_ok_and(|v| v == "1");
    assert!(skip, "{what}; set {SKIP_VARIABLE}=1 to skip the tests that need FUSE or root");
    eprintln!("SKIPPED ({SKIP_VARIABLE}=1): {what}");
    false
}

pub fn is_mounted(mnt: &Path) -> bool {
    let want = mnt.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(want.as_str()) && l.contains(" - fuse"))
}

/// A `larder mount` child, unmounted (lazily, if need be) when dropped.
pub struct Mount {
    pub child: Child,
    pub mnt: PathBuf,
}

impl Mount {
    /// Mounts `store` on `mnt` with zero cache timeouts and `extra` args.
    pub fn start(store: &Path, mnt: &Path, extra: &[&str]) -> Mount {
        let child = Command::new(env!("CARGO_BIN_EXE_larder"))
            .args([
                "mount",
                store.to_str().unwrap(),
                mnt.to_str().unwrap(),
                "--entry-timeout",
                "0",
                "--attr-timeout",
                "0",
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut m = Mount { child, mnt: mnt.to_path_buf() };
        let start = Instant::now();
        while !is_mounted(mnt) {
            if let Some(status) = m.child.try_wait().unwrap() {
                panic!("larder mount exited before mounting: {status}");
            }
            assert!(start.elapsed() < Duration::from_secs(30), "not mounted after 30 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        m
    }

    /// Unmounts with SIGTERM and waits for a clean exit.
    pub fn stop(mut self) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "larder mount exited with {status}");
        assert!(!is_mounted(&self.mnt));
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if is_mounted(&self.mnt) {
            let _ = Command::new("fusermount3").arg("-u").arg("-z").arg(&self.mnt).status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn sh(dir: &Path, script: &str) -> String {
    let out = Command::new("sh").arg("-c").arg(script).current_dir(dir).output().unwrap();
    assert!(
        out.status.success(),
        "`{script}` failed in {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn fresh_store(tmp: &Path) -> (PathBuf, PathBuf) {
    let store = tmp.join("store");
    let mnt = tmp.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = larder(&["init", store.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (store, mnt)
}

pub fn fsck_clean(store: &Path) {
    let out = larder(&["fsck", store.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "fsck: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
