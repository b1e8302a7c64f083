//! `larder mount`, end to end through the binary: real programs on the
//! mount (tar, git, make with gcc, sqlite3), and a mount killed with
//! SIGKILL in the middle of a write workload, whose every fsynced file
//! and name is there after a remount, with fsck clean. Needs /dev/fuse
//! and the programs `scripts/setup.sh` installs; without /dev/fuse the
//! tests say so and pass.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn larder(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larder")).args(args).output().unwrap()
}

fn fuse_available() -> bool {
    if Path::new("/dev/fuse").exists() {
        return true;
    }
    eprintln!("SKIPPED: no /dev/fuse on this machine, so nothing can be mounted");
    false
}

fn is_mounted(mnt: &Path) -> bool {
    let want = mnt.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(want.as_str()) && l.contains(" - fuse"))
}

/// A `larder mount` child, unmounted (lazily, if need be) when dropped.
struct Mount {
    child: Child,
    mnt: PathBuf,
}

impl Mount {
    fn start(store: &Path, mnt: &Path) -> Mount {
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
    fn stop(mut self) {
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

fn sh(dir: &Path, script: &str) -> String {
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

fn fresh_store(tmp: &Path) -> (PathBuf, PathBuf) {
    let store = tmp.join("store");
    let mnt = tmp.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = larder(&["init", store.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (store, mnt)
}

fn fsck_clean(store: &Path) {
    let out = larder(&["fsck", store.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "fsck: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn real_programs_work_on_the_mount() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (store, mnt) = fresh_store(tmp.path());
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let m = Mount::start(&store, &mnt);

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
    let mut m = Mount::start(&store, &mnt);
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
    let m = Mount::start(&store, &mnt);
    for i in 0..synced {
        let got = std::fs::read(mnt.join(format!("w/f{i:04}"))).unwrap();
        assert_eq!(got, content(i), "file {i}");
    }
    m.stop();
    fsck_clean(&store);
}
