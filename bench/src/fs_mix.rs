//! FileBench-like mixes, run by our own harness: the file server, web
//! server and mail server personalities of FileBench's `fileserver.f`,
//! `webserver.f` and `varmail.f`, scaled to a 2-core machine and a short
//! run, against any file system reachable through [`MixFs`]: Larder's
//! native API, or paths (ext4, XFS, a FUSE mount).
//!
//! Each personality preallocates its file set (not timed), then `threads`
//! threads run `loops` iterations of its flow each, every thread on its own
//! share of the files (FileBench's threads pick files at random from one
//! shared set; a share per thread keeps two threads from deleting the same
//! file without a lock neither real workload has). The time ends after a
//! final sync, so every file system is measured durable at the end.
//!
//! | personality | files, dirs | size | one loop (ops) |
//! |---|---|---|---|
//! | file | 2,000 in dirs of 20, 80% preallocated | 128 KiB | create+write whole, append 16 KiB, read whole, delete, stat (5) |
//! | web | 1,000 in dirs of 20 | 16 KiB | read 10 whole files, append 16 KiB to a shared log (11) |
//! | mail | 1,000 in one dir | 16 KiB | delete, create+write+fsync, append 16 KiB+fsync, read whole (4) |

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use anyhow::{bail, Result};

/// The operations a personality uses, on file `name` of directory `dir`.
pub trait MixFs: Sync {
    /// Creates the file (it must not exist) holding `data`; `fsync` it.
    fn create_write(&self, dir: usize, name: &str, data: &[u8], fsync: bool) -> Result<()>;
    /// Appends `data` to the existing file; `fsync` it.
    fn append(&self, dir: usize, name: &str, data: &[u8], fsync: bool) -> Result<()>;
    /// Reads the whole file; returns its size.
    fn read_whole(&self, dir: usize, name: &str, buf: &mut Vec<u8>) -> Result<u64>;
    /// Removes the file.
    fn delete(&self, dir: usize, name: &str) -> Result<()>;
    /// The file's size, from its attributes.
    fn stat(&self, dir: usize, name: &str) -> Result<u64>;
    /// Makes every change durable.
    fn sync_all(&self) -> Result<()>;
}

/// One of the three personalities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Personality {
    /// FileBench's fileserver.
    File,
    /// FileBench's webserver.
    Web,
    /// FileBench's varmail.
    Mail,
}

impl Personality {
    /// From a workload name's suffix: file, web, mail.
    pub fn parse(s: &str) -> Result<Personality> {
        Ok(match s {
            "file" => Personality::File,
            "web" => Personality::Web,
            "mail" => Personality::Mail,
            _ => bail!("unknown personality {s:?}: file, web, mail"),
        })
    }

    fn files(self) -> usize {
        match self {
            Personality::File => 2_000,
            Personality::Web | Personality::Mail => 1_000,
        }
    }

    fn dirs(self) -> usize {
        match self {
            Personality::File | Personality::Web => self.files() / 20,
            Personality::Mail => 1,
        }
    }

    fn file_bytes(self) -> usize {
        match self {
            Personality::File => 128 << 10,
            Personality::Web | Personality::Mail => 16 << 10,
        }
    }

    /// Loops per thread at scale 1.
    fn loops(self) -> usize {
        match self {
            Personality::File => 500,
            Personality::Web => 1_000,
            Personality::Mail => 500,
        }
    }

    /// Share of the files made before the timed part.
    fn preallocated(self, i: usize) -> bool {
        match self {
            Personality::File => !i.is_multiple_of(5),
            Personality::Web | Personality::Mail => true,
        }
    }
}

/// Directory and name of file `i`.
fn place(p: Personality, i: usize) -> (usize, String) {
    (i % p.dirs(), format!("m{i:06}"))
}

/// Name of the web server's shared log (in directory 0).
const WEB_LOG: &str = "access.log";

/// xorshift64: enough for picking files.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// One thread's files: their indexes and which exist.
struct Share {
    files: Vec<usize>,
    exists: Vec<bool>,
}

impl Share {
    /// A random file that exists (`want`) or not; None if there is none.
    fn pick(&self, rng: &mut Rng, want: bool) -> Option<usize> {
        let n = self.files.len();
        let start = rng.below(n);
        (0..n).map(|k| (start + k) % n).find(|&k| self.exists[k] == want)
    }
}

/// Makes the file set (untimed) and the directories `fs` expects to exist
/// already (the caller made `dirs` of them).
pub fn preallocate(fs: &dyn MixFs, p: Personality) -> Result<()> {
    let data = vec![0x5a; p.file_bytes()];
    for i in (0..p.files()).filter(|&i| p.preallocated(i)) {
        let (d, name) = place(p, i);
        fs.create_write(d, &name, &data, false)?;
    }
    if p == Personality::Web {
        fs.create_write(0, WEB_LOG, &[], false)?;
    }
    fs.sync_all()
}

/// Directories personality `p` uses.
pub fn dir_count(p: Personality) -> usize {
    p.dirs()
}

/// Runs the timed part: `threads` threads, each `loops × scale` loops of
/// `p`'s flow, then a sync. With `progress`, prints the rate of every
/// 200 ms to stderr (where a long mix slows down, and when). Returns
/// (operations, seconds).
pub fn run(
    fs: &dyn MixFs,
    p: Personality,
    threads: usize,
    scale: f64,
    seed: u64,
    progress: bool,
) -> Result<(u64, f64)> {
    let threads = threads.max(1);
    let loops = ((p.loops() as f64 * scale).round() as usize).max(1);
    let log_lock = Mutex::new(());
    let done_ops = AtomicU64::new(0);
    let finished = (Mutex::new(false), Condvar::new());
    let start = Instant::now();
    let ops: Result<Vec<u64>> = std::thread::scope(|s| {
        if progress {
            s.spawn(|| report_progress(&done_ops, &finished, start));
        }
        let done_ops = &done_ops;
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let files: Vec<usize> = (0..p.files()).filter(|i| i % threads == t).collect();
                let exists = files.iter().map(|&i| p.preallocated(i)).collect();
                let share = Share { files, exists };
                let rng = Rng((seed ^ (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
                let log_lock = &log_lock;
                s.spawn(move || one_thread(fs, p, share, rng, loops, log_lock, done_ops))
            })
            .collect();
        let ops = handles.into_iter().map(|h| h.join().unwrap_or_else(|_| bail!("a mix thread panicked"))).collect();
        if let Ok(mut f) = finished.0.lock() {
            *f = true;
        }
        finished.1.notify_all();
        ops
    });
    let ops: u64 = ops?.iter().sum();
    let before_sync = start.elapsed().as_secs_f64();
    fs.sync_all()?;
    if progress {
        let total = start.elapsed().as_secs_f64();
        eprintln!("mix: {ops} operations in {before_sync:.3} s, then the final sync {:.3} s", total - before_sync);
    }
    Ok((ops, start.elapsed().as_secs_f64()))
}

/// Prints the operations per second of each 200 ms until `finished` is
/// set; wakes at once when it is (a sleep made the timed part end on a
/// 200 ms boundary).
fn report_progress(done_ops: &AtomicU64, finished: &(Mutex<bool>, Condvar), start: Instant) {
    let (mut last_ops, mut last_at) = (0, Instant::now());
    let Ok(mut done) = finished.0.lock() else { return };
    while !*done {
        match finished.1.wait_timeout(done, std::time::Duration::from_millis(200)) {
            Ok((d, _)) => done = d,
            Err(_) => return,
        }
        if *done {
            break;
        }
        let (ops, now) = (done_ops.load(Ordering::Relaxed), Instant::now());
        let rate = (ops - last_ops) as f64 / now.duration_since(last_at).as_secs_f64();
        eprintln!("mix progress: {:6.2} s {rate:9.0} ops/s", start.elapsed().as_secs_f64());
        (last_ops, last_at) = (ops, now);
    }
}

fn one_thread(
    fs: &dyn MixFs,
    p: Personality,
    mut share: Share,
    mut rng: Rng,
    loops: usize,
    log_lock: &Mutex<()>,
    done_ops: &AtomicU64,
) -> Result<u64> {
    let whole = vec![0xa5; p.file_bytes()];
    let append = vec![0x3c; 16 << 10];
    let mut buf = Vec::with_capacity(p.file_bytes() * 2);
    let mut ops = 0u64;
    // Runs `op` on a random file of the share that exists (`exists`) or
    // not, which afterwards exists as `then` says; returns the operations
    // done (0 when no file qualifies).
    let on = |share: &mut Share,
              rng: &mut Rng,
              exists: bool,
              then: bool,
              op: &mut dyn FnMut(usize, &str) -> Result<()>|
     -> Result<u64> {
        let Some(k) = share.pick(rng, exists) else { return Ok(0) };
        let (d, n) = place(p, share.files[k]);
        op(d, &n)?;
        share.exists[k] = then;
        done_ops.fetch_add(1, Ordering::Relaxed);
        Ok(1)
    };
    for _ in 0..loops {
        match p {
            Personality::File => {
                ops += on(&mut share, &mut rng, false, true, &mut |d, n| fs.create_write(d, n, &whole, false))?;
                ops += on(&mut share, &mut rng, true, true, &mut |d, n| fs.append(d, n, &append, false))?;
                ops += on(&mut share, &mut rng, true, true, &mut |d, n| fs.read_whole(d, n, &mut buf).map(drop))?;
                ops += on(&mut share, &mut rng, true, false, &mut |d, n| fs.delete(d, n))?;
                ops += on(&mut share, &mut rng, true, true, &mut |d, n| fs.stat(d, n).map(drop))?;
            }
            Personality::Web => {
                for _ in 0..10 {
                    // Any file of the set: web servers read what others read.
                    let (d, n) = place(p, rng.below(p.files()));
                    fs.read_whole(d, &n, &mut buf)?;
                }
                // The log's appends are ordered by the harness, the same
                // for every file system.
                let _g = log_lock.lock().map_err(|_| anyhow::anyhow!("log lock poisoned"))?;
                fs.append(0, WEB_LOG, &append, false)?;
                ops += 11;
                done_ops.fetch_add(11, Ordering::Relaxed);
            }
            Personality::Mail => {
                ops += on(&mut share, &mut rng, true, false, &mut |d, n| fs.delete(d, n))?;
                ops += on(&mut share, &mut rng, false, true, &mut |d, n| fs.create_write(d, n, &whole, true))?;
                ops += on(&mut share, &mut rng, true, true, &mut |d, n| fs.append(d, n, &append, true))?;
                ops += on(&mut share, &mut rng, true, true, &mut |d, n| fs.read_whole(d, n, &mut buf).map(drop))?;
            }
        }
    }
    Ok(ops)
}

/// Directories under a base directory: ext4, XFS, or a FUSE mount. Each
/// is held open and files are reached relative to it (openat, unlinkat,
/// statat), as [`LarderFs`] reaches them by directory and name: no
/// operation walks the base path again.
pub struct PathFs {
    dirs: Vec<std::fs::File>,
    /// Synced at the end: a directory whose `syncfs` (or, on a FUSE mount,
    /// `fsync`) makes everything durable.
    sync: Box<dyn Fn() -> Result<()> + Sync>,
}

impl PathFs {
    /// Makes `count` directories under `base`; `sync` makes all durable.
    pub fn new(base: &std::path::Path, count: usize, sync: Box<dyn Fn() -> Result<()> + Sync>) -> Result<PathFs> {
        let mut dirs = Vec::with_capacity(count);
        for d in 0..count {
            let p = base.join(format!("d{d:04}"));
            std::fs::create_dir_all(&p)?;
            dirs.push(std::fs::File::open(&p)?);
        }
        Ok(PathFs { dirs, sync })
    }

    /// Opens `name` in directory `dir` with `flags` (and mode 0644 if it creates).
    fn open(&self, dir: usize, name: &str, flags: rustix::fs::OFlags) -> Result<std::fs::File> {
        let mode = rustix::fs::Mode::from_raw_mode(0o644);
        let fd = rustix::fs::openat(&self.dirs[dir], name, flags | rustix::fs::OFlags::CLOEXEC, mode)?;
        Ok(std::fs::File::from(fd))
    }
}

impl MixFs for PathFs {
    fn create_write(&self, dir: usize, name: &str, data: &[u8], fsync: bool) -> Result<()> {
        use rustix::fs::OFlags;
        use std::io::Write;
        let mut f = self.open(dir, name, OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL)?;
        f.write_all(data)?;
        if fsync {
            f.sync_all()?;
        }
        Ok(())
    }

    fn append(&self, dir: usize, name: &str, data: &[u8], fsync: bool) -> Result<()> {
        use rustix::fs::OFlags;
        use std::io::Write;
        let mut f = self.open(dir, name, OFlags::WRONLY | OFlags::APPEND)?;
        f.write_all(data)?;
        if fsync {
            f.sync_all()?;
        }
        Ok(())
    }

    fn read_whole(&self, dir: usize, name: &str, buf: &mut Vec<u8>) -> Result<u64> {
        use std::io::Read;
        buf.clear();
        Ok(self.open(dir, name, rustix::fs::OFlags::RDONLY)?.read_to_end(buf)? as u64)
    }

    fn delete(&self, dir: usize, name: &str) -> Result<()> {
        Ok(rustix::fs::unlinkat(&self.dirs[dir], name, rustix::fs::AtFlags::empty())?)
    }

    fn stat(&self, dir: usize, name: &str) -> Result<u64> {
        Ok(rustix::fs::statat(&self.dirs[dir], name, rustix::fs::AtFlags::empty())?.st_size as u64)
    }

    fn sync_all(&self) -> Result<()> {
        (self.sync)()
    }
}

/// Larder's native API, as root.
pub struct LarderFs {
    fs: larder_fs::Fs,
    cred: larder_fs::Cred,
    dirs: Vec<u64>,
}

impl LarderFs {
    /// Makes `count` directories under the root of `fs`.
    pub fn new(fs: larder_fs::Fs, count: usize) -> Result<LarderFs> {
        let cred = larder_fs::Cred::root();
        let mut dirs = Vec::with_capacity(count);
        for d in 0..count {
            dirs.push(fs.mkdir(&cred, fs.root(), format!("d{d:04}").as_bytes(), 0o755)?.ino);
        }
        Ok(LarderFs { fs, cred, dirs })
    }

    /// Waits (up to a minute) until the spare container the space manager
    /// makes after the first allocation exists: its zero-fill (1 GiB by
    /// default) is part of making the store, not of the workload, as
    /// ext4's inode tables are (made at mkfs, without lazy init).
    pub fn quiesce(&self) -> Result<()> {
        let space = self.fs.store().space();
        let want = space.options().spare_containers;
        let deadline = Instant::now() + std::time::Duration::from_secs(60);
        while space.stats().spare_containers < want {
            if Instant::now() > deadline {
                bail!("the store's spare container did not appear within a minute");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Ok(())
    }

    /// Closes the file system (durably).
    pub fn close(self) -> Result<()> {
        Ok(self.fs.close()?)
    }

    fn open(&self, dir: usize, name: &str, flags: i32) -> Result<(larder_fs::Attr, u64)> {
        let a = self.fs.lookup(&self.cred, self.dirs[dir], name.as_bytes())?;
        let fh = self.fs.open_file(&self.cred, a.ino, flags)?;
        Ok((a, fh))
    }

    /// Runs `f` on handle `fh`, then releases it whatever `f` returned.
    fn with_handle<T>(&self, fh: u64, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let r = f();
        self.fs.release(fh)?;
        r
    }
}

impl MixFs for LarderFs {
    fn create_write(&self, dir: usize, name: &str, data: &[u8], fsync: bool) -> Result<()> {
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL;
        let (_, fh) = self.fs.create_file(&self.cred, self.dirs[dir], name.as_bytes(), 0o644, flags)?;
        self.with_handle(fh, || {
            self.fs.write(&self.cred, fh, 0, data)?;
            if fsync {
                self.fs.fsync(fh)?;
            }
            Ok(())
        })
    }

    fn append(&self, dir: usize, name: &str, data: &[u8], fsync: bool) -> Result<()> {
        let (_, fh) = self.open(dir, name, libc::O_WRONLY | libc::O_APPEND)?;
        self.with_handle(fh, || {
            self.fs.write(&self.cred, fh, 0, data)?;
            if fsync {
                self.fs.fsync(fh)?;
            }
            Ok(())
        })
    }

    fn read_whole(&self, dir: usize, name: &str, buf: &mut Vec<u8>) -> Result<u64> {
        let (a, fh) = self.open(dir, name, libc::O_RDONLY)?;
        self.with_handle(fh, || {
            // As read_to_end does for the other file systems: the buffer
            // is only initialized where it grows.
            let size = usize::try_from(a.size)?;
            if buf.len() < size {
                buf.resize(size, 0);
            }
            buf.truncate(size);
            let mut at = 0usize;
            while at < size {
                let n = self.fs.read_into(fh, at as u64, &mut buf[at..])?;
                if n == 0 {
                    break;
                }
                at += n;
            }
            buf.truncate(at);
            Ok(at as u64)
        })
    }

    fn delete(&self, dir: usize, name: &str) -> Result<()> {
        Ok(self.fs.unlink(&self.cred, self.dirs[dir], name.as_bytes())?)
    }

    fn stat(&self, dir: usize, name: &str) -> Result<u64> {
        Ok(self.fs.lookup(&self.cred, self.dirs[dir], name.as_bytes())?.size)
    }

    fn sync_all(&self) -> Result<()> {
        Ok(self.fs.sync()?)
    }
}
