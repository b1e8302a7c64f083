//! The mount as users other than its owner see it (`allow_other`), with
//! the kernel's default cache timeouts, as `larder mount --allow-other`
//! serves it: commands run as uid 65534 through `setpriv` (util-linux,
//! installed by `scripts/setup.sh`), their results compared with what
//! ext4 does. Needs /dev/fuse and root (to switch users); without them the
//! tests fail unless `LARDER_SKIP_FUSE=1` says to skip them.
#![allow(clippy::unwrap_used)]

mod root;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use larder_fs::{Fs, FsOptions};
use larder_fuse::{spawn, MountOptions, Mounted};
use larder_object::CreationOptions;

/// The unprivileged user the commands run as.
const NOBODY: &str = "65534";

/// A store mounted with `allow_other` and the default timeouts, in a
/// temporary directory others may enter.
struct Setup {
    _tmp: tempfile::TempDir,
    mnt: PathBuf,
    mounted: Option<Mounted>,
}

impl Setup {
    fn new() -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let store = tmp.path().join("store");
        let mnt = tmp.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let creation =
            CreationOptions { container_bytes: 8 << 20, log_segment_bytes: 1 << 20, ..CreationOptions::default() };
        let fs = Arc::new(Fs::create(&store, FsOptions { creation, ..FsOptions::default() }).unwrap());
        let options = MountOptions { allow_other: true, ..MountOptions::default() };
        let mounted = spawn(fs, &mnt, &options).unwrap();
        Setup { _tmp: tmp, mnt, mounted: Some(mounted) }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(m) = self.mounted.take() {
            m.unmount().unwrap();
        }
    }
}

/// Runs `script` with `sh` as uid and gid 65534, no supplementary groups,
/// in `dir`; returns whether it succeeded and its stderr.
fn as_nobody(dir: &Path, script: &str) -> (bool, String) {
    let out = Command::new("setpriv")
        .args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", "sh", "-c", script])
        .current_dir(dir)
        .output()
        .expect("setpriv (util-linux) is not installed: run scripts/setup.sh");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_non_owner_writes_setuid_and_setgid_files_and_drops_the_bits_as_ext4_does() {
    if !root::can_run("to run commands as another user") {
        return;
    }
    let s = Setup::new();
    let dir = s.mnt.join("shared");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    // (mode set by root, mode after uid 65534 appends), as ext4 on Linux
    // 6.x: setuid drops; setgid drops with group execute, or when the
    // writer is outside the file's group (root's group here).
    for (mode, after) in [(0o4777, 0o777), (0o2777, 0o777), (0o6777, 0o777), (0o2767, 0o767), (0o6767, 0o767)] {
        let name = format!("f{mode:o}");
        let path = dir.join(&name);
        std::fs::write(&path, b"a\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let (ok, stderr) = as_nobody(&dir, &format!("echo x >> {name}"));
        assert!(ok, "appending to a {mode:o} file as uid 65534: {stderr}");
        assert_eq!(std::fs::read(&path).unwrap(), b"a\nx\n", "{mode:o}");
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o7777, after, "{mode:o} after the write");
        // Truncating through open(O_TRUNC) drops them too.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let (ok, stderr) = as_nobody(&dir, &format!(": > {name}"));
        assert!(ok, "truncating a {mode:o} file as uid 65534: {stderr}");
        let m = std::fs::metadata(&path).unwrap();
        assert_eq!((m.len(), m.mode() & 0o7777), (0, after), "{mode:o} after the truncate");
    }
    // An empty file truncated by open(O_TRUNC): the bits drop all the same.
    let empty = dir.join("empty");
    std::fs::write(&empty, b"").unwrap();
    std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o4777)).unwrap();
    let (ok, stderr) = as_nobody(&dir, ": > empty");
    assert!(ok, "truncating an empty 4777 file as uid 65534: {stderr}");
    assert_eq!(std::fs::metadata(&empty).unwrap().mode() & 0o7777, 0o777);
    // A chmod by the same user is still refused.
    let (ok, _) = as_nobody(&dir, "chmod 0777 f4777");
    assert!(!ok, "uid 65534 must not chmod root's file");
}

/// Renames by uid 65534 between two long-lived 0777 directories while
/// root works in the same directories (creates, chmods, renames, stats and
/// unlinks of its own files): every one succeeds, as on ext4.
#[test]
fn renames_between_open_directories_by_another_user_all_succeed_under_concurrent_work() {
    if !root::can_run("to run commands as another user") {
        return;
    }
    let s = Setup::new();
    for d in ["a", "b"] {
        let dir = s.mnt.join(d);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let busy = scope.spawn(|| {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (a, b) = (s.mnt.join(format!("a/root{i}")), s.mnt.join(format!("b/root{i}")));
                std::fs::write(&a, b"r").unwrap();
                std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o4755)).unwrap();
                std::fs::rename(&a, &b).unwrap();
                for d in ["a", "b"] {
                    std::fs::metadata(s.mnt.join(d)).unwrap();
                }
                std::fs::remove_file(&b).unwrap();
                i += 1;
            }
            i
        });
        let script = "i=0; while [ $i -lt 400 ]; do i=$((i+1)); \
                      echo x > a/f$i || exit 1; mv a/f$i b/f$i || exit 2; \
                      mkdir a/d$i && mv a/d$i b/d$i && rmdir b/d$i || exit 3; \
                      [ $((i % 2)) = 0 ] && { rm b/f$i || exit 4; }; done";
        let (ok, stderr) = as_nobody(&s.mnt, script);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let rounds = busy.join().unwrap();
        assert!(ok, "a rename by uid 65534 failed ({rounds} rounds of root's work alongside): {stderr}");
    });
    let left = std::fs::read_dir(s.mnt.join("b")).unwrap().count();
    assert_eq!(left, 200, "the odd files moved by uid 65534 are in b");
}
