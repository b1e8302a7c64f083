//! Two users, each operation of one on the other's files and directories:
//! the errno through the server must be the errno ext4 gives.
//!
//! Each case builds the same tree twice, on the host's file system (the
//! temporary directory's, ext4) and in a fresh store, owned by user A;
//! then does one operation as user B on both: on the host in a child
//! process that has dropped to B's ids, through `execute` in a session
//! with B's credentials. Needs root (to own files as A and become B);
//! without it the test fails unless LARDER_SKIP_ROOT=1.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

use larder_fs::{Cred, Fs, SetAttr};
use larder_protocol::message::{
    Durability, Payload, RenameFlags, Request as R, Response, SetAttributes, TimeChange, Timestamp, XattrFlags,
};

/// The owner of the tree.
const A: u32 = 41_001;
/// The other user, who does each operation.
const B: u32 = 41_002;

/// One node of the tree: path, directory or not, mode, owner.
const TREE: &[(&str, bool, u32, u32)] = &[
    ("private", true, 0o700, A),
    ("private/f", false, 0o644, A),
    ("f600", false, 0o600, A),
    ("f644", false, 0o644, A),
    ("f666", false, 0o666, A),
    ("plain", true, 0o755, A),
    ("plain/victim", false, 0o644, A),
    ("open", true, 0o777, A),
    ("open/victim", false, 0o644, A),
    ("open/sub", true, 0o755, A),
    ("open/subw", true, 0o777, A),
    ("sticky", true, 0o1777, A),
    ("sticky/victim", false, 0o644, A),
    ("sticky/mine", false, 0o644, B),
    ("sticky/adir", true, 0o755, A),
    ("ro", true, 0o555, A),
    ("bucket", true, 0o755, A),
    ("bucket/k", false, 0o644, A),
    ("bucket/secret", false, 0o600, A),
    ("openb", true, 0o777, A),
    ("openb/k", false, 0o644, A),
    ("privb", true, 0o700, A),
    ("privb/k", false, 0o644, A),
];

/// Bytes of every file of the tree.
const CONTENT: &[u8] = b"value";

/// One operation, as B does it on the host and through the server.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// `stat` (a lookup of the last name).
    Stat(&'static str),
    /// `open` with flags (O_CREAT makes it a create).
    Open(&'static str, i32),
    Unlink(&'static str),
    Rmdir(&'static str),
    Rename(&'static str, &'static str),
    Chmod(&'static str, u32),
    Chown(&'static str, u32, u32),
    /// `utimensat`: to now (`true`) or to a given time.
    Utimes(&'static str, bool),
    Mkdir(&'static str),
    /// `symlink` with target "t".
    Symlink(&'static str),
    /// `link(from, to)`.
    Link(&'static str, &'static str),
    /// `opendir`.
    OpenDir(&'static str),
    /// `removexattr` of user.x.
    RemoveXattr(&'static str),
    /// `access` with a mask.
    Access(&'static str, i32),
    /// `getxattr` of user.x (absent everywhere: ENODATA once allowed).
    GetXattr(&'static str),
    SetXattr(&'static str),
    Truncate(&'static str),
    /// KV get of bucket/key; on the host, `open(O_RDONLY)`.
    KvGet(&'static str, &'static str),
    /// KV put; on the host, `open(O_WRONLY | O_CREAT | O_TRUNC)`.
    KvPut(&'static str, &'static str),
    /// KV delete; on the host, `unlink`.
    KvDelete(&'static str, &'static str),
    /// KV scan of a bucket; on the host, `opendir`.
    KvScan(&'static str),
    /// Bucket creation; on the host, `mkdir` in the root.
    CreateBucket(&'static str),
    /// Bucket removal; on the host, `rmdir` in the root.
    DeleteBucket(&'static str),
}

/// Every case, with the errno both must give (0: success).
const CASES: &[(Op, i32)] = &[
    (Op::Stat("private/f"), libc::EACCES),
    (Op::Open("private/f", libc::O_RDONLY), libc::EACCES),
    (Op::Open("f600", libc::O_RDONLY), libc::EACCES),
    (Op::Open("f600", libc::O_WRONLY), libc::EACCES),
    (Op::Open("f644", libc::O_RDONLY), 0),
    (Op::Open("f644", libc::O_WRONLY), libc::EACCES),
    (Op::Open("f644", libc::O_RDWR | libc::O_TRUNC), libc::EACCES),
    (Op::Open("f666", libc::O_RDWR), 0),
    (Op::Open("ro/new", libc::O_RDWR | libc::O_CREAT), libc::EACCES),
    (Op::Open("open/new", libc::O_RDWR | libc::O_CREAT), 0),
    (Op::Open("open/victim", libc::O_RDWR | libc::O_CREAT | libc::O_EXCL), libc::EEXIST),
    (Op::Open("f644", libc::O_RDWR | libc::O_CREAT), libc::EACCES),
    (Op::Open("f666", libc::O_RDWR | libc::O_CREAT), 0),
    (Op::Open("sticky/victim", libc::O_RDONLY | libc::O_CREAT), 0),
    (Op::Access("f644", libc::W_OK), libc::EACCES),
    (Op::Access("f644", libc::R_OK), 0),
    (Op::Access("private", libc::X_OK), libc::EACCES),
    (Op::RemoveXattr("f644"), libc::EACCES),
    (Op::RemoveXattr("f666"), libc::ENODATA),
    (Op::Rename("open/sub", "sticky/sub"), libc::EACCES),
    (Op::Rename("open/subw", "sticky/subw"), 0),
    (Op::Rename("open/sub", "open/sub2"), 0),
    (Op::Unlink("plain/victim"), libc::EACCES),
    (Op::Unlink("open/victim"), 0),
    (Op::Unlink("sticky/victim"), libc::EPERM),
    (Op::Unlink("sticky/mine"), 0),
    (Op::Unlink("f644"), libc::EACCES),
    (Op::Rmdir("ro"), libc::EACCES),
    (Op::Rename("plain/victim", "plain/moved"), libc::EACCES),
    (Op::Rename("open/victim", "open/moved"), 0),
    (Op::Rename("sticky/victim", "sticky/moved"), libc::EPERM),
    (Op::Rename("sticky/mine", "sticky/victim"), libc::EPERM),
    (Op::Rename("sticky/mine", "sticky/moved"), 0),
    (Op::Rename("open/victim", "ro/moved"), libc::EACCES),
    (Op::Chmod("f644", 0o777), libc::EPERM),
    (Op::Chmod("plain", 0o777), libc::EPERM),
    (Op::Chown("f644", B, B), libc::EPERM),
    (Op::Chown("f666", A, B), libc::EPERM),
    (Op::Utimes("f644", false), libc::EPERM),
    (Op::Utimes("f644", true), libc::EACCES),
    (Op::Utimes("f666", true), 0),
    (Op::Utimes("f666", false), libc::EPERM),
    (Op::Mkdir("ro/d"), libc::EACCES),
    (Op::Mkdir("plain/victim"), libc::EEXIST),
    (Op::Mkdir("private/f"), libc::EACCES),
    (Op::Symlink("plain/victim"), libc::EEXIST),
    (Op::Link("f666", "plain/victim"), libc::EEXIST),
    (Op::Mkdir("plain/d"), libc::EACCES),
    (Op::Mkdir("private/d"), libc::EACCES),
    (Op::Mkdir("open/d"), 0),
    (Op::Symlink("ro/s"), libc::EACCES),
    (Op::Symlink("open/s"), 0),
    (Op::OpenDir("private"), libc::EACCES),
    (Op::OpenDir("plain"), 0),
    (Op::GetXattr("f600"), libc::EACCES),
    (Op::GetXattr("f644"), libc::ENODATA),
    (Op::Rmdir("sticky/adir"), libc::EPERM),
    (Op::Link("f644", "open/l"), libc::EPERM),
    (Op::Link("f644", "plain/l"), libc::EPERM),
    (Op::Link("f666", "open/l"), 0),
    (Op::Link("f666", "plain/l"), libc::EACCES),
    (Op::SetXattr("f644"), libc::EACCES),
    (Op::SetXattr("f666"), 0),
    (Op::SetXattr("plain"), libc::EACCES),
    (Op::Truncate("f644"), libc::EACCES),
    (Op::Truncate("f600"), libc::EACCES),
    (Op::Truncate("f666"), 0),
    (Op::KvGet("bucket", "k"), 0),
    (Op::KvGet("bucket", "secret"), libc::EACCES),
    (Op::KvGet("privb", "k"), libc::EACCES),
    (Op::KvPut("bucket", "new"), libc::EACCES),
    (Op::KvPut("bucket", "k"), libc::EACCES),
    (Op::KvPut("openb", "new"), 0),
    (Op::KvPut("openb", "k"), libc::EACCES),
    (Op::KvPut("privb", "k"), libc::EACCES),
    (Op::KvDelete("bucket", "k"), libc::EACCES),
    (Op::KvDelete("openb", "k"), 0),
    (Op::KvDelete("privb", "k"), libc::EACCES),
    (Op::KvScan("bucket"), 0),
    (Op::KvScan("privb"), libc::EACCES),
    (Op::CreateBucket("newb"), libc::EACCES),
    (Op::DeleteBucket("ro"), libc::EACCES),
];

#[test]
fn every_operation_on_the_other_users_files_gives_the_errno_ext4_gives() {
    if !rustix::process::geteuid().is_root() {
        if std::env::var("LARDER_SKIP_ROOT").as_deref() == Ok("1") {
            eprintln!("SKIPPED (LARDER_SKIP_ROOT=1): comparing with ext4 as two users needs root");
            return;
        }
        panic!("comparing with ext4 as two users needs root (run as root, or set LARDER_SKIP_ROOT=1)");
    }
    let mut wrong = Vec::new();
    for &(op, expected) in CASES {
        let host = on_host(op);
        let server = through_server(op);
        if host != expected || server != expected {
            wrong.push(format!("{op:?}: ext4 {}, server {}, expected {}", name(host), name(server), name(expected)));
        }
    }
    assert!(wrong.is_empty(), "{} of {} cases differ:\n{}", wrong.len(), CASES.len(), wrong.join("\n"));
}

fn name(errno: i32) -> String {
    if errno == 0 {
        "success".into()
    } else {
        format!("{} ({errno})", std::io::Error::from_raw_os_error(errno))
    }
}

/// The tree on the host, in a fresh directory B can reach.
fn host_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for &(path, is_dir, _, _) in TREE {
        let p = dir.path().join(path);
        if is_dir {
            std::fs::create_dir(&p).unwrap();
        } else {
            std::fs::write(&p, CONTENT).unwrap();
        }
    }
    for &(path, _, mode, owner) in TREE {
        let p = dir.path().join(path);
        std::os::unix::fs::chown(&p, Some(owner), Some(owner)).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    }
    dir
}

/// The errno of `op` done by B on a fresh host tree.
fn on_host(op: Op) -> i32 {
    let tree = host_tree();
    let c = |p: &str| CString::new(tree.path().join(p).as_os_str().as_bytes()).unwrap();
    let prepared = match op {
        Op::Stat(p) | Op::Open(p, _) | Op::Unlink(p) | Op::Rmdir(p) => (c(p), None),
        Op::Chmod(p, _) | Op::Chown(p, _, _) | Op::Utimes(p, _) | Op::Mkdir(p) => (c(p), None),
        Op::Symlink(p) | Op::OpenDir(p) | Op::GetXattr(p) | Op::RemoveXattr(p) | Op::Access(p, _) => (c(p), None),
        Op::Link(from, to) => (c(from), Some(c(to))),
        Op::SetXattr(p) | Op::Truncate(p) => (c(p), None),
        Op::Rename(from, to) => (c(from), Some(c(to))),
        Op::KvGet(b, k) | Op::KvPut(b, k) | Op::KvDelete(b, k) => (c(&format!("{b}/{k}")), None),
        Op::KvScan(b) | Op::CreateBucket(b) | Op::DeleteBucket(b) => (c(b), None),
    };
    as_user(B, || host_call(op, &prepared.0, prepared.1.as_deref()))
}

/// Does `op` on `path` (and `to`): 0 or the errno. Runs in the child
/// after the fork: system calls only, on memory prepared before it.
#[allow(unsafe_code)]
fn host_call(op: Op, path: &std::ffi::CStr, to: Option<&std::ffi::CStr>) -> i32 {
    let p = path.as_ptr();
    // SAFETY: every pointer is a NUL-terminated string or a buffer that
    // lives across the call; the calls only read them.
    let result = unsafe {
        let open = |flags: i32| {
            let fd = libc::open(p, flags, 0o644);
            if fd >= 0 {
                libc::close(fd);
            }
            fd
        };
        match op {
            Op::Stat(_) => {
                let mut st: libc::stat = std::mem::zeroed();
                libc::stat(p, &mut st)
            }
            Op::Open(_, flags) => open(flags),
            Op::KvGet(..) => open(libc::O_RDONLY),
            Op::KvPut(..) => open(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC),
            Op::Unlink(_) | Op::KvDelete(..) => libc::unlink(p),
            Op::Rmdir(_) | Op::DeleteBucket(_) => libc::rmdir(p),
            Op::KvScan(_) => open(libc::O_RDONLY | libc::O_DIRECTORY),
            Op::CreateBucket(_) => libc::mkdir(p, 0o755),
            Op::Rename(..) => libc::rename(p, to.map_or(std::ptr::null(), |t| t.as_ptr())),
            Op::Chmod(_, mode) => libc::chmod(p, mode),
            Op::Chown(_, uid, gid) => libc::chown(p, uid, gid),
            Op::Utimes(_, now) => {
                let times = [libc::timespec { tv_sec: 5, tv_nsec: 0 }, libc::timespec { tv_sec: 5, tv_nsec: 0 }];
                libc::utimensat(libc::AT_FDCWD, p, if now { std::ptr::null() } else { times.as_ptr() }, 0)
            }
            Op::Mkdir(_) => libc::mkdir(p, 0o755),
            Op::RemoveXattr(_) => libc::removexattr(p, c"user.x".as_ptr()),
            Op::Access(_, mask) => libc::access(p, mask),
            Op::Symlink(_) => libc::symlink(c"t".as_ptr(), p),
            Op::Link(..) => libc::link(p, to.map_or(std::ptr::null(), |t| t.as_ptr())),
            Op::OpenDir(_) => open(libc::O_RDONLY | libc::O_DIRECTORY),
            Op::GetXattr(_) => {
                let mut value = [0u8; 16];
                let n = libc::getxattr(p, c"user.x".as_ptr(), value.as_mut_ptr().cast(), value.len());
                n as i32
            }
            Op::SetXattr(_) => libc::setxattr(p, c"user.x".as_ptr(), b"1".as_ptr().cast(), 1, 0),
            Op::Truncate(_) => libc::truncate(p, 1),
        }
    };
    if result < 0 {
        // SAFETY: errno is thread-local and this thread's.
        unsafe { *libc::__errno_location() }
    } else {
        0
    }
}

/// Runs `f` in a child process with B's ids (groups: only its own) and
/// returns what it returned.
#[allow(unsafe_code)]
fn as_user(uid: u32, f: impl Fn() -> i32) -> i32 {
    const NO_DROP: i32 = 250;
    // SAFETY: after the fork the child runs only async-signal-safe calls
    // (setgroups, setresgid, setresuid, the operation's system calls,
    // _exit) on memory prepared before it; it never returns.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            let groups = [uid];
            if libc::setgroups(1, groups.as_ptr()) != 0
                || libc::setresgid(uid, uid, uid) != 0
                || libc::setresuid(uid, uid, uid) != 0
            {
                libc::_exit(NO_DROP);
            }
            libc::_exit(f());
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(libc::WIFEXITED(status), "the child did not exit: status {status}");
    let code = libc::WEXITSTATUS(status);
    assert_ne!(code, NO_DROP, "the child could not become uid {uid}");
    code
}

/// The tree in a fresh store.
fn store_tree(fs: &Fs) {
    let root = Cred::root();
    let mut inos = HashMap::new();
    for &(path, is_dir, _, _) in TREE {
        let (parent, name) = match path.rsplit_once('/') {
            Some((parent, name)) => (inos[parent], name),
            None => (fs.root(), path),
        };
        let attr = if is_dir {
            fs.mkdir(&root, parent, name.as_bytes(), 0o755).unwrap()
        } else {
            let attr = fs.mknod(&root, parent, name.as_bytes(), 0o644, 0).unwrap();
            let h = fs.open_file(&root, attr.ino, libc::O_WRONLY).unwrap();
            fs.write(&root, h, 0, CONTENT).unwrap();
            fs.release(h).unwrap();
            attr
        };
        inos.insert(path, attr.ino);
    }
    for &(path, _, mode, owner) in TREE {
        let owned = SetAttr { uid: Some(owner), gid: Some(owner), ..SetAttr::default() };
        fs.setattr(&root, inos[path], &owned, None).unwrap();
        fs.setattr(&root, inos[path], &SetAttr { mode: Some(mode), ..SetAttr::default() }, None).unwrap();
    }
}

/// The errno of `op` done by B through the server on a fresh store.
fn through_server(op: Op) -> i32 {
    let t = common::server();
    store_tree(t.server.fs());
    let s = t.server.open_session(B, B, vec![B]).unwrap();
    // A client reaches objects by path first, as the kernel does for a
    // process: the walk's errno is the operation's.
    let reach = |path: &str| -> Result<u64, i32> {
        let path = format!("/{path}").into_bytes();
        match t.run(&s, R::Resolve { path, follow: true }) {
            Response::Resolved { attributes: Some(a), .. } => Ok(a.ino),
            Response::Resolved { attributes: None, .. } => Err(libc::ENOENT),
            Response::Error { errno, .. } => Err(errno),
            other => panic!("{other:?}"),
        }
    };
    let parent_and_name = |path: &'static str| -> Result<(u64, Vec<u8>), i32> {
        match path.rsplit_once('/') {
            Some((parent, name)) => Ok((reach(parent)?, name.as_bytes().to_vec())),
            None => Ok((t.server.fs().root(), path.as_bytes().to_vec())),
        }
    };
    let set = |ino: u64, set: SetAttributes| R::SetAttributes { ino, set, handle: None };
    let v = |s: &str| s.as_bytes().to_vec();
    let request = match request(op, &reach, &parent_and_name, &set, &v) {
        Ok(r) => r,
        Err(errno) => return errno,
    };
    let response = t.run(&s, request);
    // What a success did is checked too, where it is visible.
    match (op, &response) {
        (Op::KvGet(..), Response::Value(Some(value))) => assert_eq!(value, CONTENT),
        (Op::KvDelete(..), Response::Deleted(removed)) => assert!(removed),
        _ => {}
    }
    match response {
        Response::Error { errno, .. } => errno,
        _ => 0,
    }
}

/// The request doing `op`, after the walks it needs (an errno if one
/// fails).
fn request(
    op: Op,
    reach: &dyn Fn(&str) -> Result<u64, i32>,
    parent_and_name: &dyn Fn(&'static str) -> Result<(u64, Vec<u8>), i32>,
    set: &dyn Fn(u64, SetAttributes) -> R,
    v: &dyn Fn(&str) -> Vec<u8>,
) -> Result<R, i32> {
    Ok(match op {
        Op::Stat(p) => {
            let (parent, name) = parent_and_name(p)?;
            R::Lookup { parent, name }
        }
        Op::Open(p, flags) if flags & libc::O_CREAT != 0 => {
            let (parent, name) = parent_and_name(p)?;
            R::Create { parent, name, mode: 0o644, flags, lease: false }
        }
        Op::Open(p, flags) => R::Open { ino: reach(p)?, flags },
        Op::Unlink(p) => {
            let (parent, name) = parent_and_name(p)?;
            R::Unlink { parent, name }
        }
        Op::Rmdir(p) => {
            let (parent, name) = parent_and_name(p)?;
            R::Rmdir { parent, name }
        }
        Op::Rename(from, to) => {
            let ((parent, name), (new_parent, new_name)) = (parent_and_name(from)?, parent_and_name(to)?);
            R::Rename { parent, name, new_parent, new_name, flags: RenameFlags::default() }
        }
        Op::Chmod(p, mode) => set(reach(p)?, SetAttributes { mode: Some(mode), ..SetAttributes::default() }),
        Op::Chown(p, uid, gid) => {
            set(reach(p)?, SetAttributes { uid: Some(uid), gid: Some(gid), ..SetAttributes::default() })
        }
        Op::Utimes(p, now) => {
            let t = if now { TimeChange::Now } else { TimeChange::At(Timestamp { seconds: 5, nanoseconds: 0 }) };
            set(reach(p)?, SetAttributes { atime: Some(t), mtime: Some(t), ..SetAttributes::default() })
        }
        Op::Mkdir(p) => {
            let (parent, name) = parent_and_name(p)?;
            R::Mkdir { parent, name, mode: 0o755 }
        }
        Op::Symlink(p) => {
            let (parent, name) = parent_and_name(p)?;
            R::Symlink { parent, name, target: v("t") }
        }
        Op::Link(from, to) => {
            let (parent, name) = parent_and_name(to)?;
            R::Link { ino: reach(from)?, parent, name }
        }
        Op::OpenDir(p) => R::OpenDirectory { ino: reach(p)? },
        Op::GetXattr(p) => R::GetXattr { ino: reach(p)?, name: v("user.x") },
        Op::RemoveXattr(p) => R::RemoveXattr { ino: reach(p)?, name: v("user.x") },
        Op::Access(p, mask) => R::Access { ino: reach(p)?, mask: mask as u32 },
        Op::SetXattr(p) => {
            R::SetXattr { ino: reach(p)?, name: v("user.x"), value: v("1"), flags: XattrFlags::default() }
        }
        Op::Truncate(p) => set(reach(p)?, SetAttributes { size: Some(1), ..SetAttributes::default() }),
        Op::KvGet(b, k) => R::KvGet { bucket: v(b), key: v(k), into: None },
        Op::KvPut(b, k) => {
            R::KvPut { bucket: v(b), key: v(k), value: Payload::Inline(v("new")), durability: Durability::Buffered }
        }
        Op::KvDelete(b, k) => R::KvDelete { bucket: v(b), key: v(k), durability: Durability::Buffered },
        Op::KvScan(b) => R::KvScan { bucket: v(b), start: Vec::new(), end: None, max_entries: 10 },
        Op::CreateBucket(b) => R::CreateBucket { bucket: v(b) },
        Op::DeleteBucket(b) => R::DeleteBucket { bucket: v(b) },
    })
}
