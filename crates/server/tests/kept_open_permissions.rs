//! A later open that the leased client serves from an open it kept after
//! close (its own class, or a read-write one for a read-only open) must be
//! refused where ext4 refuses it: a file created by its owner with a mode
//! that does not grant the access (creating with O_RDWR succeeds whatever
//! the mode, a later open is checked), a chmod or a change of owner since.
//! Each case runs as an unprivileged user, on the host's file system
//! (the temporary directory's, ext4) and through a leased client, and
//! compares the errnos. Needs root (to become that user); without it the
//! test fails unless LARDER_SKIP_ROOT=1.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use larder_client::{Client, OpenOptions};
use larder_server::Limits;

/// The unprivileged user each case runs as.
const USER: u32 = 41_011;
/// Another user, who is given a file.
const OTHER: u32 = 41_012;

/// Runs `f` in a thread that has dropped to `USER`'s ids (rustix's calls
/// change the calling thread's credentials only, not the process's).
fn as_user<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            use rustix::process::{Gid, Uid};
            use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};
            let (uid, gid) = (Uid::from_raw(USER), Gid::from_raw(USER));
            set_thread_groups(&[]).unwrap();
            set_thread_res_gid(gid, gid, gid).unwrap();
            set_thread_res_uid(uid, uid, uid).unwrap();
            f()
        })
        .join()
        .unwrap()
    })
}

fn needs_root() -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    if std::env::var("LARDER_SKIP_ROOT").as_deref() == Ok("1") {
        eprintln!("SKIPPED (LARDER_SKIP_ROOT=1): running as another user needs root");
        return false;
    }
    panic!("running as another user needs root (run as root, or set LARDER_SKIP_ROOT=1)");
}

/// The errno of a result (0 for success).
fn errno<T>(result: &Result<T, larder_client::ClientError>) -> i32 {
    result.as_ref().map_or_else(|e| e.errno(), |_| 0)
}

fn host_errno<T>(result: &std::io::Result<T>) -> i32 {
    result.as_ref().map_or_else(|e| e.raw_os_error().unwrap_or(-1), |_| 0)
}

/// A served store whose directory `/d` any user may create in, the
/// user's leased client, a root client, and a host directory of the
/// same kind.
struct Setup {
    _server: larder_server::Server,
    _dir: tempfile::TempDir,
    host: tempfile::TempDir,
    root: Client,
    user: Client,
}

impl Setup {
    fn new() -> Setup {
        let limits = Limits { lease_term: Duration::from_secs(30), ..Limits::default() };
        let (server, dir, store) = common::served(limits);
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = Client::connect(&store).unwrap();
        root.create_dir("/d", 0o777).unwrap();
        let user = as_user(|| Client::connect(&store).unwrap());
        let host = tempfile::tempdir().unwrap();
        std::fs::set_permissions(host.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        Setup { _server: server, _dir: dir, host, root, user }
    }

    fn host_path(&self, name: &str) -> PathBuf {
        self.host.path().join(name)
    }
}

/// Creates `name` read-write with `mode`, as the user, on the host and
/// through the client, and closes both (the client keeps its open).
fn create_rdwr(setup: &Setup, name: &str, mode: u32) {
    let host = setup.host_path(name);
    let user = setup.user.clone();
    as_user(|| {
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).mode(mode).open(&host);
        assert_eq!(host_errno(&file), 0, "creating {name} {mode:o} on the host");
        let file = OpenOptions::new().read(true).write(true).create(true).mode(mode).open(&user, format!("/d/{name}"));
        assert_eq!(errno(&file), 0, "creating {name} {mode:o} through the client");
    });
}

/// The errnos of a later open of `name` for reading (`write` false) or
/// reading and writing, as the user: on the host, through the client.
fn reopen(setup: &Setup, name: &str, write: bool) -> (i32, i32) {
    let host: &Path = &setup.host_path(name);
    let user = setup.user.clone();
    as_user(|| {
        let on_host = host_errno(&std::fs::OpenOptions::new().read(true).write(write).open(host));
        let through = errno(&OpenOptions::new().read(true).write(write).open(&user, format!("/d/{name}")));
        (on_host, through)
    })
}

#[test]
fn a_kept_open_serves_no_open_the_mode_refuses() {
    if !needs_root() {
        return;
    }
    let setup = Setup::new();
    let mut wrong = Vec::new();
    for (mode, write) in [(0o000, false), (0o200, false), (0o000, true), (0o400, true), (0o200, true), (0o600, false)] {
        let name = format!("f{mode:o}{}", if write { "rw" } else { "r" });
        create_rdwr(&setup, &name, mode);
        let (host, through) = reopen(&setup, &name, write);
        if host != through {
            wrong.push(format!(
                "mode {mode:o}, reopen {}: ext4 {host}, client {through}",
                if write { "rw" } else { "r" }
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn a_kept_open_serves_no_open_after_a_chmod_or_chown() {
    if !needs_root() {
        return;
    }
    let setup = Setup::new();
    let mut wrong = Vec::new();
    // The user's own chmod.
    create_rdwr(&setup, "chmod", 0o600);
    std::fs::set_permissions(setup.host_path("chmod"), std::fs::Permissions::from_mode(0o200)).unwrap();
    let user = setup.user.clone();
    as_user(|| user.set_permissions("/d/chmod", 0o200).unwrap());
    let (host, through) = reopen(&setup, "chmod", false);
    if host != through {
        wrong.push(format!("after the user's chmod: ext4 {host}, client {through}"));
    }
    // Root's chmod and chown (another client).
    for (name, chown) in [("rootchmod", false), ("chown", true)] {
        create_rdwr(&setup, name, 0o600);
        if chown {
            std::os::unix::fs::chown(setup.host_path(name), Some(OTHER), Some(OTHER)).unwrap();
            setup.root.set_owner(format!("/d/{name}"), Some(OTHER), Some(OTHER)).unwrap();
        } else {
            std::fs::set_permissions(setup.host_path(name), std::fs::Permissions::from_mode(0o200)).unwrap();
            setup.root.set_permissions(format!("/d/{name}"), 0o200).unwrap();
        }
        let (host, through) = reopen(&setup, name, false);
        if host != through {
            wrong.push(format!("{name}: ext4 {host}, client {through}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
