//! A mount of root's that only root reaches (no `allow_other`), which by
//! default the kernel does not check before larder-fs does
//! (`KernelChecks::WhenTheyCanRefuse`): what root may and may not do on
//! it matches a directory of the machine's own file system (the model)
//! and a mount checked by the kernel too (`KernelChecks::Always`), and
//! other users are kept out. Needs /dev/fuse and root (to mount as root
//! and to switch users); without them the tests fail unless
//! `LARDER_SKIP_FUSE=1` says to skip them.
#![allow(clippy::unwrap_used)]

mod root;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use larder_fs::{Fs, FsOptions};
use larder_fuse::{spawn, KernelChecks, MountOptions};
use larder_object::CreationOptions;

/// Runs `script` with `sh` in `dir`, as root or (with `nobody`) as uid
/// and gid 65534; returns whether it succeeded.
fn run(dir: &Path, script: &str, nobody: bool) -> bool {
    let mut c = if nobody {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", "65534", "--regid", "65534", "--clear-groups", "sh", "-c", script]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    };
    c.current_dir(dir).output().expect("sh, or setpriv (util-linux, scripts/setup.sh), is missing").status.success()
}

/// Steps run as root, each after the ones before it, with whether it must
/// succeed on ext4: root reads, writes and searches whatever the modes
/// say, changes anyone's modes, owners and times, and executes only files
/// with an execute bit.
const STEPS: &[(&str, bool)] = &[
    ("printf '#!/bin/sh\\nexit 0\\n' > run && chmod 0644 run", true),
    ("./run", false),
    ("test -x run", false),
    ("chmod 0100 run && ./run", true),
    ("echo secret > closed && chmod 0000 closed && cat closed", true),
    ("echo more >> closed", true),
    ("test -r closed && test -w closed", true),
    ("mkdir shut && echo in > shut/f && chmod 0000 shut && cat shut/f && ls shut", true),
    ("echo new > shut/g && rm shut/f && mv shut/g shut/h && ls shut/h", true),
    ("cd shut && test -f h", true),
    ("chmod 1777 . && chown 65534:65534 shut/h && mv shut/h sticky && rm sticky", true),
    ("chown 65534:65534 closed && chmod 4755 closed && touch -d '2001-01-01' closed", true),
    ("echo x >> closed && test -u closed", true),
    ("chmod 0755 .", true),
];

/// Runs every step in `dir`; returns which succeeded.
fn outcomes(dir: &Path) -> Vec<bool> {
    STEPS.iter().map(|(script, _)| run(dir, script, false)).collect()
}

fn mounted(checks: KernelChecks) -> (tempfile::TempDir, PathBuf, larder_fuse::Mounted) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let creation =
        CreationOptions { container_bytes: 8 << 20, log_segment_bytes: 1 << 20, ..CreationOptions::default() };
    let fs = Arc::new(Fs::create(&tmp.path().join("store"), FsOptions { creation, ..FsOptions::default() }).unwrap());
    let mounted = spawn(fs, &mnt, &MountOptions { kernel_checks: checks, ..MountOptions::default() }).unwrap();
    (tmp, mnt, mounted)
}

#[test]
fn root_alone_gets_from_an_unchecked_mount_what_it_gets_from_ext4_and_a_checked_mount() {
    if !root::can_run("to mount as root") {
        return;
    }
    let model = tempfile::tempdir().unwrap();
    let expected = outcomes(model.path());
    let wanted: Vec<bool> = STEPS.iter().map(|(_, ok)| *ok).collect();
    assert_eq!(expected, wanted, "the model (the machine's file system) disagrees with the steps' expectations");
    for checks in [KernelChecks::WhenTheyCanRefuse, KernelChecks::Always] {
        let (_tmp, mnt, mounted) = mounted(checks);
        let got = outcomes(&mnt);
        for ((script, _), (got, want)) in STEPS.iter().zip(got.iter().zip(&expected)) {
            assert_eq!(got, want, "{checks:?}: `{script}`");
        }
        mounted.unmount().unwrap();
    }
}

#[test]
fn other_users_cannot_reach_an_unchecked_mount_of_roots() {
    if !root::can_run("to mount as root") {
        return;
    }
    let (_tmp, mnt, mounted) = mounted(KernelChecks::WhenTheyCanRefuse);
    std::fs::write(mnt.join("open"), b"for anyone").unwrap();
    std::fs::set_permissions(mnt.join("open"), std::fs::Permissions::from_mode(0o666)).unwrap();
    std::fs::set_permissions(&mnt, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(run(&mnt, "cat open", false), "root reads its mount");
    let parent = mnt.parent().unwrap();
    for script in ["cat mnt/open", "ls mnt", "echo x > mnt/new", "stat mnt/open"] {
        assert!(!run(parent, script, true), "uid 65534 reached a mount without allow_other: `{script}`");
    }
    assert!(!mnt.join("new").exists());
    mounted.unmount().unwrap();
}

#[test]
fn only_a_root_owned_mount_without_allow_other_goes_unchecked_by_the_kernel() {
    let unchecked = KernelChecks::WhenTheyCanRefuse;
    assert!(!unchecked.applies(false, 0));
    assert!(unchecked.applies(true, 0));
    assert!(unchecked.applies(false, 1000));
    assert!(unchecked.applies(true, 1000));
    for (allow_other, uid) in [(false, 0), (true, 0), (false, 1000)] {
        assert!(KernelChecks::Always.applies(allow_other, uid));
    }
    assert_eq!(MountOptions::default().kernel_checks, unchecked);
}
