//! `larder serve STORE --mount DIR`: one process serves the store's
//! clients and its FUSE mount, so a change through either is seen at once
//! through the other (the kernel's cached copies are invalidated when a
//! client changes the store, even with the mount's default 60 s timeouts).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{fresh_store, fsck_clean, fuse_available, is_mounted, larder};

fn run_ok(args: &[&str]) -> String {
    let out = larder(args);
    assert!(out.status.success(), "larder {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn put(store: &str, key: &str, value: &[u8]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_larder"))
        .args(["put", store, key, "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), value).unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "larder put {key}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn served_clients_and_the_mount_share_one_live_store() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (store, mnt) = fresh_store(tmp.path());
    let s = store.to_str().unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_larder"))
        .args(["serve", s, "--mount", mnt.to_str().unwrap()])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let socket = store.join("larder.sock");
    let start = Instant::now();
    while !(is_mounted(&mnt) && socket.exists()) {
        if let Some(status) = server.try_wait().unwrap() {
            panic!("larder serve --mount exited before serving: {status}");
        }
        assert!(start.elapsed() < Duration::from_secs(30), "not serving and mounted after 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }

    // A put through the server (the CLI follows the store to it: the
    // server holds the store's LOCK) is a file in the mount.
    put(s, "b/k", b"first");
    assert_eq!(std::fs::read(mnt.join("b/k")).unwrap(), b"first");
    // A file written through the mount is a key for the clients.
    std::fs::write(mnt.join("b/from-mount"), b"written through FUSE").unwrap();
    assert_eq!(run_ok(&["cat", s, "b/from-mount"]), "written through FUSE");
    // A client's overwrite is seen through the mount, whose kernel had the
    // old bytes and attributes cached (default timeouts: 60 s).
    assert_eq!(std::fs::metadata(mnt.join("b/k")).unwrap().len(), 5);
    put(s, "b/k", b"second, longer");
    assert_eq!(std::fs::read(mnt.join("b/k")).unwrap(), b"second, longer");
    // And a client's delete.
    run_ok(&["rm", s, "b/k"]);
    assert!(!mnt.join("b/k").exists(), "a key deleted through the server is still in the mount");
    assert_eq!(run_ok(&["ls", s, "b"]).lines().count(), 1);

    // SIGTERM: unmounted, socket gone, everything durable and consistent.
    assert!(Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap().success());
    let status = server.wait().unwrap();
    assert!(status.success(), "larder serve exited with {status}");
    assert!(!is_mounted(&mnt));
    assert!(!Path::new(&socket).exists(), "the socket file was left behind");
    assert_eq!(run_ok(&["cat", s, "b/from-mount"]), "written through FUSE");
    fsck_clean(&store);
}
