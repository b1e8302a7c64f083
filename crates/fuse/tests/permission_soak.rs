//! A randomized run of permission-heavy operations through an
//! `allow_other` mount, as root, uid 65534 and uid 1000, each applied in
//! lockstep to the mount and to a directory of the machine's own file
//! system (ext4 or tmpfs under the temporary directory), which is the
//! model: every errno and every entry's type, mode, owner and link count
//! afterwards must match. Renames (across 0777, sticky, setgid and closed
//! directories, over existing targets, of files just created, linked,
//! chmodded, chowned or held open by root) are a third of the operations.
//! Meanwhile another process of uid 65534 creates files in one 0777
//! directory of the mount and renames them to another and back (over
//! earlier ones every other time) without a pause: every one of its calls
//! must succeed.
//!
//! The store's log segments are the smallest allowed, so checkpoints and
//! index flushes happen during the run; the kernel keeps its default 60 s
//! caches. `LARDER_PERMISSION_SOAK_STEPS` sets the operations (default
//! 1,500) and `LARDER_PERMISSION_SOAK_SEED` the seed (printed), for the
//! long run in README.md ("Tests"). Needs /dev/fuse and root (to switch
//! users); without them the test fails unless `LARDER_SKIP_FUSE=1` says
//! to skip it.
#![allow(clippy::unwrap_used)]

mod root;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use larder_fs::{Fs, FsOptions};
use larder_fuse::{spawn, MountOptions};
use larder_object::CreationOptions;

/// SplitMix64: a small, seedable source of choices.
struct Choices(u64);

impl Choices {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// Directories of the work area (relative to it), all 0777 at the start.
const DIRS: [&str; 5] = ["d0", "d1", "d2", "d0/s", "d1/s"];
/// Names in each directory the operations pick from.
const NAMES: [&str; 6] = ["f0", "f1", "f2", "f3", "x", "y"];
/// Directory and file modes a chmod picks from (0777 most often).
const MODES: [u32; 13] =
    [0o777, 0o777, 0o777, 0o755, 0o1777, 0o2777, 0o3777, 0o700, 0o733, 0o711, 0o644, 0o4755, 0o666];

/// One operation, on paths relative to the work area.
#[derive(Clone, Debug)]
enum Op {
    Rename(String, String),
    Create(String, u32),
    Mkdir(String, u32),
    Unlink(String),
    Rmdir(String),
    Chmod(String, u32),
    /// uid and gid (u32::MAX: unchanged).
    Chown(String, u32, u32),
    Link(String, String),
    Append(String),
    Stat(String),
    /// Root opens the file and keeps it open (in the test process).
    Hold(String),
    /// Root closes every file it holds.
    CloseAll,
}

impl Op {
    fn paths(&self) -> Vec<&str> {
        match self {
            Op::Rename(a, b) | Op::Link(a, b) => vec![a, b],
            Op::Create(a, _)
            | Op::Mkdir(a, _)
            | Op::Unlink(a)
            | Op::Rmdir(a)
            | Op::Chmod(a, _)
            | Op::Chown(a, _, _)
            | Op::Append(a)
            | Op::Stat(a)
            | Op::Hold(a) => vec![a],
            Op::CloseAll => vec![],
        }
    }
}

fn random_path(c: &mut Choices) -> String {
    format!("{}/{}", c.pick(&DIRS), c.pick(&NAMES))
}

/// The next operation and the uid that makes it.
fn random_op(c: &mut Choices) -> (u32, Op) {
    let mut uid = c.pick(&[0, 65534, 65534, 65534, 1000]);
    let r = c.below(100);
    let op = if r < 35 {
        Op::Rename(random_path(c), random_path(c))
    } else if r < 45 {
        Op::Create(random_path(c), c.pick(&[0o644, 0o666, 0o600, 0o4755]))
    } else if r < 50 {
        Op::Mkdir(random_path(c), c.pick(&[0o777, 0o755, 0o700]))
    } else if r < 55 {
        Op::Unlink(random_path(c))
    } else if r < 58 {
        Op::Rmdir(random_path(c))
    } else if r < 68 {
        uid = c.pick(&[0, 0, 65534]);
        let target = if c.below(2) == 0 { c.pick(&DIRS).to_string() } else { random_path(c) };
        Op::Chmod(target, c.pick(&MODES))
    } else if r < 73 {
        uid = 0;
        let target = if c.below(2) == 0 { c.pick(&DIRS).to_string() } else { random_path(c) };
        Op::Chown(target, c.pick(&[0, 65534, 1000, u32::MAX]), c.pick(&[0, 65534, u32::MAX]))
    } else if r < 77 {
        Op::Link(random_path(c), random_path(c))
    } else if r < 82 {
        Op::Append(random_path(c))
    } else if r < 86 {
        uid = 0;
        Op::Hold(random_path(c))
    } else if r < 88 {
        uid = 0;
        Op::CloseAll
    } else {
        let target = if c.below(3) == 0 { c.pick(&DIRS).to_string() } else { random_path(c) };
        Op::Stat(target)
    };
    (uid, op)
}

fn c_path(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// An operation's paths under one base, ready before a fork (the child
/// must not allocate).
struct Prepared {
    op: Op,
    paths: Vec<CString>,
}

impl Prepared {
    fn new(op: &Op, base: &Path) -> Prepared {
        Prepared { op: op.clone(), paths: op.paths().iter().map(|p| c_path(&base.join(p))).collect() }
    }

    /// Runs the operation in this process: 0 or the errno.
    #[allow(unsafe_code)]
    fn run(&self) -> i32 {
        let p = |i: usize| self.paths[i].as_ptr();
        // SAFETY: every pointer is a NUL-terminated path owned by `self`,
        // alive across the calls; the buffer for the append is a local.
        let result = unsafe {
            match self.op {
                Op::Rename(..) => libc::rename(p(0), p(1)),
                Op::Link(..) => libc::link(p(0), p(1)),
                Op::Create(_, mode) => {
                    let fd = libc::open(p(0), libc::O_CREAT | libc::O_WRONLY, mode);
                    if fd >= 0 {
                        libc::close(fd)
                    } else {
                        fd
                    }
                }
                Op::Mkdir(_, mode) => libc::mkdir(p(0), mode),
                Op::Unlink(_) => libc::unlink(p(0)),
                Op::Rmdir(_) => libc::rmdir(p(0)),
                Op::Chmod(_, mode) => libc::chmod(p(0), mode),
                Op::Chown(_, uid, gid) => libc::chown(p(0), uid, gid),
                Op::Append(_) => {
                    let fd = libc::open(p(0), libc::O_WRONLY | libc::O_APPEND);
                    if fd >= 0 {
                        let byte = [b'x'];
                        let n = libc::write(fd, byte.as_ptr().cast(), 1);
                        let closed = libc::close(fd);
                        if n < 0 {
                            -1
                        } else {
                            closed
                        }
                    } else {
                        fd
                    }
                }
                Op::Stat(_) => {
                    let mut st: libc::stat = std::mem::zeroed();
                    libc::lstat(p(0), &mut st)
                }
                Op::Hold(_) | Op::CloseAll => 0,
            }
        };
        if result < 0 {
            // SAFETY: errno is thread-local and this thread's.
            unsafe { *libc::__errno_location() }
        } else {
            0
        }
    }
}

/// Closes, in a forked child, every descriptor above stderr but `keep`:
/// the child must not hold the mount's /dev/fuse descriptors, or a test
/// that dies leaves it waiting forever on a mount only it keeps alive.
/// Only the close_range system call: async-signal-safe.
#[allow(unsafe_code)]
fn close_inherited(keep: Option<i32>) {
    let keep = keep.and_then(|fd| u32::try_from(fd).ok());
    let ranges = match keep {
        Some(fd) if fd > 3 => [(3, fd - 1), (fd + 1, u32::MAX)],
        Some(3) => [(4, u32::MAX), (1, 0)],
        _ => [(3, u32::MAX), (1, 0)],
    };
    for (first, last) in ranges.into_iter().filter(|(first, last)| first <= last) {
        // SAFETY: closes descriptors of this (forked) process only.
        unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) };
    }
}

/// A forked child, killed and reaped if dropped before it was waited for
/// (a failed assertion must not leave it running against the mount).
struct Child {
    pid: Option<libc::pid_t>,
}

impl Child {
    /// Waits for the child; its exit code.
    #[allow(unsafe_code)]
    fn wait(&mut self, what: &str) -> i32 {
        let pid = self.pid.take().unwrap();
        let mut status = 0;
        // SAFETY: waits for the child this value forked.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(waited, pid);
        assert!(libc::WIFEXITED(status), "{what} did not exit: status {status}");
        libc::WEXITSTATUS(status)
    }
}

impl Drop for Child {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            let mut status = 0;
            // SAFETY: kills and reaps the child this value forked.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
        }
    }
}

/// Runs `prepared` in a child process as `uid` (gid the same, no
/// supplementary groups, umask 0) and returns its errno (0: success).
#[allow(unsafe_code)]
fn as_user(uid: u32, prepared: &Prepared) -> i32 {
    const NO_DROP: i32 = 250;
    // SAFETY: after the fork the child runs only async-signal-safe calls
    // (close_range, umask, setgroups, setresgid, setresuid, the operation's system
    // calls, _exit) on memory prepared before it; it never returns.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: as above.
        close_inherited(None);
        unsafe {
            libc::umask(0);
            if uid != 0
                && (libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setresgid(uid, uid, uid) != 0
                    || libc::setresuid(uid, uid, uid) != 0)
            {
                libc::_exit(NO_DROP);
            }
            libc::_exit(prepared.run());
        }
    }
    let code = Child { pid: Some(pid) }.wait("the child");
    assert_ne!(code, NO_DROP, "the child could not become uid {uid}");
    code
}

/// What root sees of a path: type, permission bits, owner, group and (for
/// non-directories) link count; or the errno of lstat.
fn seen(path: &Path) -> Result<(u32, u32, u32, u32, u64), i32> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => {
            let kind = m.mode() & libc::S_IFMT;
            let links = if m.is_dir() { 0 } else { m.nlink() };
            Ok((kind, m.mode() & 0o7777, m.uid(), m.gid(), links))
        }
        Err(e) => Err(e.raw_os_error().unwrap_or(-1)),
    }
}

/// Names the background renamer moves between `bg0` and `bg1`.
const BACKGROUND_NAMES: usize = 8;

/// A process of uid 65534 that, until `stop` exists, creates a file in
/// `bg0` of the mount, renames it to `bg1` (over an earlier one every
/// other time), renames it back and unlinks it: every call must succeed
/// on two 0777 directories nobody else changes. Its exit code is the
/// number of failed calls (at most 200); it writes the number of rounds
/// it made to a pipe.
struct Renamer {
    child: Child,
    rounds: std::io::PipeReader,
}

impl Renamer {
    #[allow(unsafe_code)]
    fn start(mnt_work: &Path, stop: &Path) -> Renamer {
        let names: Vec<[CString; 2]> = (0..BACKGROUND_NAMES)
            .map(|i| [c_path(&mnt_work.join(format!("bg0/n{i}"))), c_path(&mnt_work.join(format!("bg1/n{}", i / 2)))])
            .collect();
        let stop = c_path(stop);
        let (read_end, write_end) = std::io::pipe().unwrap();
        let write_fd = std::os::fd::AsRawFd::as_raw_fd(&write_end);
        // SAFETY: after the fork the child runs only async-signal-safe
        // calls (close_range, setgroups, setresgid, setresuid, access, open, close,
        // rename, unlink, _exit) on memory prepared before it; it never
        // returns.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            close_inherited(Some(write_fd));
            // SAFETY: as above.
            unsafe {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setresgid(65534, 65534, 65534) != 0
                    || libc::setresuid(65534, 65534, 65534) != 0
                {
                    libc::_exit(250);
                }
                let (mut failed, mut rounds) = (0, 0u64);
                while libc::access(stop.as_ptr(), libc::F_OK) != 0 {
                    for [a, b] in &names {
                        let fd = libc::open(a.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644);
                        if fd < 0 || libc::close(fd) != 0 {
                            failed += 1;
                        }
                        if libc::rename(a.as_ptr(), b.as_ptr()) != 0 {
                            failed += 1;
                        }
                    }
                    for [a, b] in names.iter().skip(1).step_by(2) {
                        if libc::rename(b.as_ptr(), a.as_ptr()) != 0 || libc::unlink(a.as_ptr()) != 0 {
                            failed += 1;
                        }
                    }
                    rounds += 1;
                    if failed >= 200 {
                        break;
                    }
                }
                let bytes = rounds.to_le_bytes();
                libc::write(write_fd, bytes.as_ptr().cast(), bytes.len());
                libc::_exit(failed.min(200));
            }
        }
        drop(write_end);
        Renamer { child: Child { pid: Some(pid) }, rounds: read_end }
    }

    /// Waits for the renamer (after `stop` was made); its rounds (each
    /// of eight creates, eight renames there and four back) and its
    /// failed calls.
    fn finish(mut self) -> (u64, i32) {
        let code = self.child.wait("the renamer");
        assert_ne!(code, 250, "the renamer could not become uid 65534");
        let mut bytes = [0u8; 8];
        std::io::Read::read_exact(&mut self.rounds, &mut bytes).unwrap();
        (u64::from_le_bytes(bytes), code)
    }
}

/// A process of root that, until `stop` exists, looks up and stats every
/// path the operations pick from: reads of the very names and objects the
/// run changes, racing with each change (the run's own steps are one at a
/// time). Its exit code is 0; what it saw is not checked, what the run
/// sees after it is.
struct Reader {
    child: Child,
}

impl Reader {
    #[allow(unsafe_code)]
    fn start(mnt_work: &Path, stop: &Path) -> Reader {
        let mut paths: Vec<CString> = DIRS.iter().map(|d| c_path(&mnt_work.join(d))).collect();
        paths.extend(DIRS.iter().flat_map(|d| NAMES.iter().map(move |n| c_path(&mnt_work.join(d).join(n)))));
        let stop = c_path(stop);
        // SAFETY: after the fork the child runs only async-signal-safe
        // calls (close_range, access, lstat, _exit) on memory prepared before it; it
        // never returns.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            close_inherited(None);
            // SAFETY: as above; `st` is a local the calls fill.
            unsafe {
                let mut st: libc::stat = std::mem::zeroed();
                while libc::access(stop.as_ptr(), libc::F_OK) != 0 {
                    for p in &paths {
                        libc::lstat(p.as_ptr(), &mut st);
                    }
                }
                libc::_exit(0);
            }
        }
        Reader { child: Child { pid: Some(pid) } }
    }

    /// Waits for the reader (after `stop` was made).
    fn finish(mut self) {
        assert_eq!(self.child.wait("the reader"), 0, "the reader failed");
    }
}

#[test]
fn permission_operations_through_the_mount_match_the_local_file_system() {
    if root::can_run("to run operations as another user") {
        soak(MountOptions { allow_other: true, ..MountOptions::default() });
    }
}

/// As above with no kernel caching, so that every lookup and stat of the
/// run (and of the checks after each step) reaches the file system while
/// the second process keeps changing the store: a stale value anywhere in
/// its caches shows.
#[test]
fn permission_operations_through_an_uncached_mount_match_the_local_file_system() {
    if root::can_run("to run operations as another user") {
        let zero = std::time::Duration::ZERO;
        soak(MountOptions { allow_other: true, entry_timeout: zero, attr_timeout: zero, ..MountOptions::default() });
    }
}

/// The soak on a mount with `options`.
fn soak(options: MountOptions) {
    let steps: usize = std::env::var("LARDER_PERMISSION_SOAK_STEPS")
        .map_or(1500, |v| v.parse().expect("LARDER_PERMISSION_SOAK_STEPS: a number"));
    let seed: u64 = std::env::var("LARDER_PERMISSION_SOAK_SEED").map_or_else(
        |_| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64,
        |v| v.parse().expect("LARDER_PERMISSION_SOAK_SEED: a number"),
    );
    eprintln!("permission soak: {steps} steps, LARDER_PERMISSION_SOAK_SEED={seed}, {options:?}");

    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (store, mnt, model) = (tmp.path().join("store"), tmp.path().join("mnt"), tmp.path().join("model"));
    std::fs::create_dir(&mnt).unwrap();
    std::fs::create_dir(&model).unwrap();
    // The smallest log segments: checkpoints and index flushes happen
    // many times during the run.
    let creation =
        CreationOptions { container_bytes: 8 << 20, log_segment_bytes: 64 << 10, ..CreationOptions::default() };
    let fs = Arc::new(Fs::create(&store, FsOptions { creation, ..FsOptions::default() }).unwrap());
    let mounted = spawn(fs, &mnt, &options).unwrap();

    let bases: [PathBuf; 2] = [mnt.join("w"), model.join("w")];
    for base in &bases {
        std::fs::create_dir(base).unwrap();
        std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o777)).unwrap();
        for d in DIRS {
            std::fs::create_dir(base.join(d)).unwrap();
            std::fs::set_permissions(base.join(d), std::fs::Permissions::from_mode(0o777)).unwrap();
        }
    }

    for d in ["bg0", "bg1"] {
        std::fs::create_dir(bases[0].join(d)).unwrap();
        std::fs::set_permissions(bases[0].join(d), std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let stop = tmp.path().join("stop");
    let renamer = Renamer::start(&bases[0], &stop);
    let reader = Reader::start(&bases[0], &stop);

    let mut choices = Choices(seed);
    let mut held: Vec<std::fs::File> = Vec::new();
    let mut history: Vec<String> = Vec::new();
    let mut renames = [0usize; 2];
    for step in 0..steps {
        let (uid, op) = random_op(&mut choices);
        let results: Vec<i32> = bases
            .iter()
            .map(|base| match &op {
                Op::Hold(p) => match std::fs::File::open(base.join(p)) {
                    Ok(f) => {
                        held.push(f);
                        0
                    }
                    Err(e) => e.raw_os_error().unwrap_or(-1),
                },
                Op::CloseAll => 0,
                _ => as_user(uid, &Prepared::new(&op, base)),
            })
            .collect();
        if matches!(op, Op::CloseAll) {
            held.clear();
        }
        if let Op::Rename(..) = op {
            renames[usize::from(results[0] != 0)] += 1;
        }
        history.push(format!("{step}: uid {uid} {op:?} -> mount {}, model {}", results[0], results[1]));
        let context = || history[history.len().saturating_sub(25)..].join("\n");
        assert_eq!(
            results[0],
            results[1],
            "step {step} (seed {seed}): uid {uid} {op:?}: errno {} through the mount, {} on the local file system\n{}",
            results[0],
            results[1],
            context()
        );
        for p in op.paths() {
            let (m, l) = (seen(&bases[0].join(p)), seen(&bases[1].join(p)));
            assert_eq!(m, l, "step {step} (seed {seed}): {p} after uid {uid} {op:?} (mount, model)\n{}", context());
        }
        // Every 50 steps root opens the directories up again, so renames
        // between 0777 directories keep happening.
        if step % 50 == 49 {
            for base in &bases {
                for d in DIRS {
                    let _ = std::fs::set_permissions(base.join(d), std::fs::Permissions::from_mode(0o777));
                }
            }
        }
    }
    drop(held);
    std::fs::write(&stop, b"").unwrap();
    reader.finish();
    let (rounds, failures) = renamer.finish();
    eprintln!("permission soak: the second uid-65534 process made {} renames in {rounds} rounds", rounds * 12);
    assert_eq!(failures, 0, "renames by uid 65534 between two 0777 directories failed alongside the run");
    assert!(rounds > 0, "the second uid-65534 process made no round");
    eprintln!("permission soak: {} renames succeeded, {} refused alike", renames[0], renames[1]);
    assert!(renames[0] > steps / 20, "too few renames succeeded to mean anything: {renames:?}");
    mounted.unmount().unwrap();
}
