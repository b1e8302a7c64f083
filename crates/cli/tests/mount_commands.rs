//! `larder mount`, end to end through the binary: real programs on the
//! mount (tar, git, make with gcc, sqlite3), and a mount killed with
//! SIGKILL in the middle of a write workload, whose every fsynced file
//! and name is there after a remount, with fsck clean; a working
//! directory removed by another process lasts until the kernel forgets it. Needs /dev/fuse
//! and the programs `scripts/setup.sh` installs; without /dev/fuse the
//! tests fail unless `LARDER_SKIP_FUSE=1` says to skip them.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use common::{fresh_store, fsck_clean, fuse_available, sh, Mount};

#[test]
fn real_programs_work_on_the_mount() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (store, mnt) = fresh_store(tmp.path());
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let m = Mount::start(&store, &mnt, &[]);

    // tar: extract an archive and compare byte for byte.
    let archive = tmp.path().join("src.tar");
    sh(tmp.path(), &format!("tar cf {} -C {} .", archive.display(), src.display()));
    sh(&mnt, &format!("mkdir x && tar xf {} -C x && diff -r {} x", archive.display(), src.display()));

    // git: clone a local repository and check it.
    let origin = tmp.path().join("origin");
    std::fs::create_dir(&origin).unwrap();
    sh(
        &origin,
        "git init -q . && git config user.email t@t && git config user.name t \
         && for i in 1 2 3 4 5; do echo $i > f$i; git add f$i; git commit -qm c$i; done",
    );
    sh(
        &mnt,
        &format!("git clone -q {} clone && cd clone && git fsck --full && test \"$(cat f5)\" = 5", origin.display()),
    );

    // make: build and run a small C program.
    sh(
        &mnt,
        "mkdir c && cd c && printf '#include <stdio.h>\\nint main(void){puts(\"built\");return 0;}\\n' > m.c \
         && printf 'm: m.c\\n\\tgcc -O1 -o m m.c\\n' > Makefile && make -s && ./m > out && test \"$(cat out)\" = built",
    );

    // sqlite3: a database that passes its integrity check.
    let check = sh(
        &mnt,
        "sqlite3 t.db 'create table t(a integer primary key, b text); \
         with recursive n(i) as (select 1 union all select i+1 from n where i < 5000) \
         insert into t(b) select hex(randomblob(64)) from n; pragma integrity_check; select count(*) from t;'",
    );
    assert_eq!(check.split_whitespace().collect::<Vec<_>>(), ["ok", "5000"]);

    m.stop();
    fsck_clean(&store);
}

#[test]
fn a_killed_mount_keeps_every_fsynced_file() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (store, mnt) = fresh_store(tmp.path());
    let mut m = Mount::start(&store, &mnt, &[]);
    std::fs::create_dir(mnt.join("w")).unwrap();
    let content = |i: usize| format!("file {i} ").repeat(i % 97 + 1).into_bytes();
    let mut synced = 0;
    // Write and fsync files; after 60, kill the mount while a write of a
    // file that is not fsynced is in flight.
    for i in 0.. {
        let path = mnt.join(format!("w/f{i:04}"));
        let mut f = match std::fs::File::create(&path) {
            Ok(f) => f,
            Err(_) => break,
        };
        if f.write_all(&content(i)).is_err() {
            break;
        }
        if i == 60 {
            let pid = m.child.id().to_string();
            assert!(Command::new("kill").args(["-KILL", &pid]).status().unwrap().success());
            m.child.wait().unwrap();
            continue;
        }
        if f.sync_all().is_err() {
            break;
        }
        synced = i + 1;
    }
    assert_eq!(synced, 60, "every file before the kill was fsynced");
    // Detach the dead mount, mount again.
    assert!(Command::new("fusermount3").arg("-u").arg("-z").arg(&mnt).status().unwrap().success());
    drop(m);
    let m = Mount::start(&store, &mnt, &[]);
    for i in 0..synced {
        let got = std::fs::read(mnt.join(format!("w/f{i:04}"))).unwrap();
        assert_eq!(got, content(i), "file {i}");
    }
    m.stop();
    fsck_clean(&store);
}

#[test]
fn mount_refuses_bad_arguments_clearly_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, mnt) = fresh_store(tmp.path());
    let missing = tmp.path().join("no-such-dir");
    let out = common::larder(&["mount", store.to_str().unwrap(), missing.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is not a directory; create it first"), "{err}");
    let not_a_store = tmp.path().join("plain");
    std::fs::create_dir(&not_a_store).unwrap();
    let out = common::larder(&["mount", not_a_store.to_str().unwrap(), mnt.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no store at") && err.contains("larder init"), "{err}");
    let out = common::larder(&["mount", store.to_str().unwrap(), mnt.to_str().unwrap(), "--attr-timeout=-1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--attr-timeout must be"));
    assert!(!common::is_mounted(&mnt));
    fsck_clean(&store);
}

#[test]
fn a_removed_working_directory_lasts_until_the_kernel_forgets_it() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (store, mnt) = fresh_store(tmp.path());
    let m = Mount::start(&store, &mnt, &[]);
    std::fs::create_dir(mnt.join("d")).unwrap();
    // A process whose working directory is d, holding no handle of it.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("cd d || exit 1; echo in; read go; stat -c %h .; touch new 2>&1 || echo refused")
        .current_dir(&mnt)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "in\n");
    // Another process removes it; the first still stats it (0 links), as
    // on ext4, and cannot make anything in it.
    std::fs::remove_dir(mnt.join("d")).unwrap();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    let lines: Vec<&str> = rest.lines().collect();
    assert_eq!(lines.len(), 3, "{rest}");
    assert_eq!(lines[0], "0", "stat(\".\") of the removed working directory: {rest}");
    assert!(lines[1].ends_with("No such file or directory"), "{rest}");
    assert_eq!(lines[2], "refused");
    // Gone once the kernel forgets it (or, if the unmount came first, at
    // the next open): only the root is left.
    m.stop();
    let out = common::larder(&["fsck", store.to_str().unwrap()]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "fsck: {report}{}", String::from_utf8_lossy(&out.stderr));
    assert!(report.contains(" 1 objects (1 directories,") && report.contains(" 0 orphans"), "{report}");
}
