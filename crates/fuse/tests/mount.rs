//! The FUSE mount, end to end: a store mounted by this process, used
//! through ordinary system calls (std::fs), unmounted, and reopened to
//! check that what was fsynced is there. Without /dev/fuse the tests fail,
//! unless `LARDER_SKIP_FUSE=1` says to skip them.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use larder_fs::{Cred, Fs, FsOptions};
use larder_fuse::{spawn, MountOptions};
use larder_object::CreationOptions;

fn options() -> FsOptions {
    let creation =
        CreationOptions { container_bytes: 8 << 20, log_segment_bytes: 1 << 20, ..CreationOptions::default() };
    FsOptions { creation, ..FsOptions::default() }
}

/// Whether the machine can mount: true with /dev/fuse. Without it the
/// test fails, unless `LARDER_SKIP_FUSE=1` asks to skip (README, "Tests").
fn fuse_available() -> bool {
    if Path::new("/dev/fuse").exists() {
        return true;
    }
    let skip = std::env::var("LARDER_SKIP_FUSE").is_ok_and(|v| v == "1");
    assert!(skip, "no /dev/fuse on this machine, so nothing can be mounted; set LARDER_SKIP_FUSE=1 to skip");
    eprintln!("SKIPPED (LARDER_SKIP_FUSE=1): no /dev/fuse on this machine, so nothing can be mounted");
    false
}

/// A temporary directory with a store path and an empty mount point.
fn dirs() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    (tmp, store, mnt)
}

#[test]
fn files_written_through_the_mount_are_in_the_store() {
    if !fuse_available() {
        return;
    }
    let (_tmp, store, mnt) = dirs();
    let fs = Arc::new(Fs::create(&store, options()).unwrap());
    let zero =
        MountOptions { entry_timeout: Default::default(), attr_timeout: Default::default(), ..Default::default() };
    let mounted = spawn(fs.clone(), &mnt, &zero).unwrap();

    // Files: create, write 3 MiB in 1 MiB requests, read back, append.
    let data: Vec<u8> = (0..3u32 << 20).map(|i| (i * 7 % 251) as u8).collect();
    let mut f = std::fs::File::create(mnt.join("a")).unwrap();
    f.write_all(&data).unwrap();
    f.sync_all().unwrap();
    drop(f);
    assert_eq!(std::fs::read(mnt.join("a")).unwrap(), data);
    let mut f = std::fs::OpenOptions::new().append(true).open(mnt.join("a")).unwrap();
    f.write_all(b"end").unwrap();
    drop(f);
    let mut f = std::fs::File::open(mnt.join("a")).unwrap();
    f.seek(SeekFrom::End(-3)).unwrap();
    let mut tail = String::new();
    f.read_to_string(&mut tail).unwrap();
    assert_eq!(tail, "end");
    drop(f);
    assert_eq!(std::fs::metadata(mnt.join("a")).unwrap().len(), data.len() as u64 + 3);

    // Names: directories, rename over a file, links, symlinks, listing.
    std::fs::create_dir_all(mnt.join("d/e")).unwrap();
    std::fs::write(mnt.join("d/e/f"), b"f").unwrap();
    std::fs::write(mnt.join("g"), b"g").unwrap();
    std::fs::rename(mnt.join("g"), mnt.join("d/e/f")).unwrap();
    assert_eq!(std::fs::read(mnt.join("d/e/f")).unwrap(), b"g");
    std::fs::hard_link(mnt.join("d/e/f"), mnt.join("h")).unwrap();
    assert_eq!(std::fs::metadata(mnt.join("h")).unwrap().nlink(), 2);
    std::os::unix::fs::symlink("d/e/f", mnt.join("s")).unwrap();
    assert_eq!(std::fs::read(mnt.join("s")).unwrap(), b"g");
    assert_eq!(std::fs::read_link(mnt.join("s")).unwrap(), Path::new("d/e/f"));
    let mut names: Vec<String> =
        std::fs::read_dir(&mnt).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["a", "d", "h", "s"]);
    assert_eq!(std::fs::create_dir(mnt.join("d")).unwrap_err().raw_os_error(), Some(libc::EEXIST));
    assert_eq!(std::fs::remove_dir(mnt.join("d")).unwrap_err().raw_os_error(), Some(libc::ENOTEMPTY));
    std::fs::set_permissions(mnt.join("h"), std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(std::fs::metadata(mnt.join("d/e/f")).unwrap().mode() & 0o7777, 0o600);
    std::fs::remove_file(mnt.join("h")).unwrap();

    // An unlinked open file keeps its data until closed.
    let mut open = std::fs::File::open(mnt.join("a")).unwrap();
    std::fs::remove_file(mnt.join("a")).unwrap();
    let mut back = Vec::new();
    open.read_to_end(&mut back).unwrap();
    assert_eq!(back.len(), data.len() + 3);
    drop(open);

    let vfs = nix_statvfs(&mnt);
    assert!(vfs > 0);
    let dir = std::fs::File::open(mnt.join("d")).unwrap();
    dir.sync_all().unwrap();
    drop(dir);
    mounted.unmount().unwrap();

    // The store, reopened, has what the mount wrote.
    let fs = Arc::try_unwrap(fs)
        .unwrap_or_else(|fs| panic!("{} users of the store left after unmount", Arc::strong_count(&fs)));
    fs.close().unwrap();
    let fs = Fs::open(&store, options()).unwrap();
    let r = Cred::root();
    let f = fs.resolve(&r, b"d/e/f", true).unwrap().attr.unwrap();
    assert_eq!(f.size, 1);
    assert!(fs.resolve(&r, b"a", true).unwrap().attr.is_none());
    assert!(fs.store().used_extents().unwrap().is_empty(), "the unlinked file's extents were freed");
}

/// Free blocks on the mount, through statvfs(2).
fn nix_statvfs(path: &Path) -> u64 {
    rustix::fs::statvfs(path).unwrap().f_bfree
}

/// Polls `check` until it holds or 10 s pass (the invalidation is sent by
/// a thread of its own, after the commit returns).
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !check() {
        assert!(std::time::Instant::now() < deadline, "never happened: {what}");
        std::thread::yield_now();
    }
}

#[test]
fn kv_changes_in_the_same_process_invalidate_the_kernels_copies() {
    if !fuse_available() {
        return;
    }
    let (_tmp, store, mnt) = dirs();
    let fs = Arc::new(Fs::create(&store, options()).unwrap());
    // Long timeouts: without invalidation the kernel would keep its copies
    // for a minute.
    let long = std::time::Duration::from_secs(60);
    let mounted =
        spawn(fs.clone(), &mnt, &MountOptions { entry_timeout: long, attr_timeout: long, ..Default::default() })
            .unwrap();
    std::fs::create_dir(mnt.join("b")).unwrap();
    std::fs::write(mnt.join("b/k"), b"old").unwrap();
    assert_eq!(std::fs::read(mnt.join("b/k")).unwrap(), b"old");
    assert_eq!(std::fs::metadata(mnt.join("b/k")).unwrap().len(), 3);

    let kv = larder_kv::Kv::with_store(fs.store().clone(), (0, 0));
    kv.put("b", "k", b"a new value", larder_kv::Durability::Durable).unwrap();
    eventually("the new size through the mount", || std::fs::metadata(mnt.join("b/k")).unwrap().len() == 11);
    assert_eq!(std::fs::read(mnt.join("b/k")).unwrap(), b"a new value");

    let k_ino = std::fs::metadata(mnt.join("b/k")).unwrap().ino();
    kv.delete("b", "k", larder_kv::Durability::Durable).unwrap();
    eventually("the deleted name gone from the mount", || !mnt.join("b/k").exists());
    kv.put("b", "k", b"again", larder_kv::Durability::Durable).unwrap();
    eventually("the new object under the old name", || {
        std::fs::metadata(mnt.join("b/k")).is_ok_and(|m| m.ino() != k_ino && m.len() == 5)
    });
    drop(kv);
    mounted.unmount().unwrap();
}
