//! A heap through the mount: `cat` of a heap object shows its bytes, a
//! write lands in place in its file, and `rm` of a heap name is EPERM
//! (the file system's refusal, passed on). Without /dev/fuse the test
//! fails, unless `LARDER_SKIP_FUSE=1` says to skip it.
#![allow(clippy::unwrap_used)]

#[path = "../../object/tests/heap_fixture/mod.rs"]
mod heap_fixture;

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use larder_fs::{Fs, FsOptions};
use larder_fuse::{spawn, MountOptions};
use larder_object::CreationOptions;

/// Whether the machine can mount (see mount.rs): without /dev/fuse the
/// test fails unless `LARDER_SKIP_FUSE=1`.
fn fuse_available() -> bool {
    if Path::new("/dev/fuse").exists() {
        return true;
    }
    let skip = std::env::var("LARDER_SKIP_FUSE").is_ok_and(|v| v == "1");
    assert!(skip, "no /dev/fuse on this machine, so nothing can be mounted; set LARDER_SKIP_FUSE=1 to skip");
    eprintln!("SKIPPED (LARDER_SKIP_FUSE=1): no /dev/fuse on this machine, so nothing can be mounted");
    false
}

#[test]
fn cat_shows_a_heap_object_and_rm_is_eperm() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (store, mnt) = (tmp.path().join("store"), tmp.path().join("mnt"));
    std::fs::create_dir(&mnt).unwrap();
    let creation =
        CreationOptions { container_bytes: 8 << 20, log_segment_bytes: 1 << 20, ..CreationOptions::default() };
    let fs = Arc::new(Fs::create(&store, FsOptions { creation, ..FsOptions::default() }).unwrap());
    let heap = heap_fixture::create_heap(fs.store(), fs.root(), "heap");
    let id = heap_fixture::add_object(fs.store(), &heap, b"mapped bytes\n", &["doc"]);
    let mounted = spawn(fs.clone(), &mnt, &MountOptions::default()).unwrap();

    let cat = Command::new("cat").arg(mnt.join("heap/names/doc")).output().unwrap();
    assert!(cat.status.success(), "{}", String::from_utf8_lossy(&cat.stderr));
    assert_eq!(cat.stdout, b"mapped bytes\n");
    assert_eq!(std::fs::read(mnt.join(format!("heap/objects/{id}"))).unwrap(), b"mapped bytes\n");

    let rm = Command::new("rm").arg("-f").arg(mnt.join("heap/names/doc")).output().unwrap();
    assert!(!rm.status.success(), "rm of a heap name must fail");
    assert!(String::from_utf8_lossy(&rm.stderr).contains("not permitted"), "{}", String::from_utf8_lossy(&rm.stderr));
    let err = std::fs::remove_file(mnt.join("heap/names/doc")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EPERM));
    let err = std::fs::write(mnt.join("heap/names/new"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EPERM));
    let err = std::fs::hard_link(mnt.join("heap/names/doc"), mnt.join("alias")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EPERM));

    // A write through the mount goes in place into the heap's file.
    let mut f = std::fs::OpenOptions::new().write(true).open(mnt.join("heap/names/doc")).unwrap();
    f.write_all(b"MAPPED").unwrap();
    f.sync_all().unwrap();
    drop(f);
    assert_eq!(std::fs::read(fs.store().heap_file_path(id)).unwrap(), b"MAPPED bytes\n");
    assert_eq!(std::fs::read(mnt.join("heap/names/doc")).unwrap(), b"MAPPED bytes\n");
    mounted.unmount().unwrap();
}
