//! The kernel's requests, served by [`larder_fs::Fs`]: each handler turns
//! the request into one larder-fs call with the caller's credentials and
//! replies with its result or its errno.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, KernelConfig, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use larder_fs::{Attr, Cred, Fs, FsError, SetAttr, XattrFlags};

use crate::convert::{file_attr, file_type, set_time};
use crate::MountOptions;

/// Object ids are never reused, so one generation serves every inode (the
/// kernel treats a changed generation as a new inode).
const GENERATION: Generation = Generation(1);

/// Largest write the kernel is asked to send in one request.
pub const MAX_WRITE_BYTES: u32 = 1 << 20;

/// A mounted file system.
pub(crate) struct LarderFuse {
    pub(crate) fs: Arc<Fs>,
    pub(crate) entry_ttl: Duration,
    pub(crate) attr_ttl: Duration,
}

impl LarderFuse {
    pub(crate) fn new(fs: Arc<Fs>, options: &MountOptions) -> LarderFuse {
        LarderFuse { fs, entry_ttl: options.entry_timeout, attr_ttl: options.attr_timeout }
    }
}

/// The caller's credentials; supplementary groups are read from
/// `/proc/PID/status` only if a check needs them.
/// Flags of every file open: no FLUSH at close. close(2) does not sync
/// here (durability is fsync's), no POSIX locks are served (the kernel
/// keeps them), and without the writeback cache no dirty pages wait for
/// it, so a flush had nothing to do but cost a round trip per close
/// (creates through the mount: 6,258 against 6,096/s, medians of three).
/// Kernels without the flag still send FLUSH, which `flush` answers.
const FILE_OPEN_FLAGS: FopenFlags = FopenFlags::FOPEN_NOFLUSH;

fn cred(req: &Request) -> Cred {
    crate::watch::serving();
    let pid = req.pid();
    Cred::lazy(req.uid(), req.gid(), move || proc_groups(pid))
}

/// The supplementary groups of process `pid`, or none if it is gone.
fn proc_groups(pid: u32) -> Vec<u32> {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return Vec::new() };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| g.split_whitespace().filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default()
}

fn errno(e: &FsError) -> Errno {
    let n = e.errno();
    if n == libc::EIO {
        tracing::warn!(error = %e, "I/O error served to the kernel");
    }
    Errno::from_i32(n)
}

fn name(n: &OsStr) -> &[u8] {
    n.as_bytes()
}

impl LarderFuse {
    /// Replies entry `r`. The kernel counts a reference for each entry
    /// replied (lookup, mknod, mkdir, symlink, link) until it forgets it;
    /// the fs counts it too, before the reply, so that a directory that is
    /// only some process's working directory, or a file the kernel still
    /// knows, outlasts its removal as on Linux.
    fn entry(&self, reply: ReplyEntry, r: larder_fs::Result<Attr>) {
        match r {
            Ok(a) => match self.retain(a.ino) {
                Ok(()) => reply.entry(&self.entry_ttl, &file_attr(&a), GENERATION),
                Err(e) => reply.error(errno(&e)),
            },
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// Counts a kernel reference to `ino`. The root is never removed and
    /// never forgotten, so it is not counted. ENOENT if the object lost
    /// its last name since it was looked up (see [`larder_fs::Fs::retain`]).
    fn retain(&self, ino: u64) -> larder_fs::Result<()> {
        if ino == self.fs.root() {
            return Ok(());
        }
        self.fs.retain(ino)
    }

    /// Drops `n` kernel references to `ino` (FORGET).
    fn forget_refs(&self, ino: u64, n: u64) {
        if ino == self.fs.root() {
            return;
        }
        if let Err(e) = self.fs.forget(ino, n) {
            // No reply to send: the orphan record stays, and the next
            // open of the store frees it.
            tracing::warn!(error = %e, ino, "freeing an object the kernel forgot failed");
        }
    }
}

fn empty(reply: ReplyEmpty, r: larder_fs::Result<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(&e)),
    }
}

impl Filesystem for LarderFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Not marked as serving: fuser may run init on the mounting thread.
        if let Err(nearest) = config.set_max_write(MAX_WRITE_BYTES) {
            tracing::info!(nearest, "the kernel caps writes below 1 MiB per request");
            let _ = config.set_max_write(nearest);
        }
        Ok(())
    }

    fn destroy(&mut self) {
        if let Err(e) = self.fs.sync() {
            tracing::error!(error = %e, "sync at unmount failed");
        }
    }

    fn lookup(&self, req: &Request, parent: INodeNo, n: &OsStr, reply: ReplyEntry) {
        self.entry(reply, self.fs.lookup(&cred(req), parent.0, name(n)));
    }

    // BATCH_FORGET comes here too: fuser's default `batch_forget` calls
    // `forget` for each node (its node type is not public to override).
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        crate::watch::serving();
        self.forget_refs(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.fs.getattr(ino.0) {
            Ok(a) => reply.attr(&self.attr_ttl, &file_attr(&a)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr { mode, uid, gid, size, atime: atime.map(set_time), mtime: mtime.map(set_time) };
        match self.fs.setattr(&cred(req), ino.0, &set, fh.map(|f| f.0)) {
            Ok(a) => reply.attr(&self.attr_ttl, &file_attr(&a)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.fs.readlink(ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mknod(&self, req: &Request, parent: INodeNo, n: &OsStr, mode: u32, _umask: u32, rdev: u32, reply: ReplyEntry) {
        self.entry(reply, self.fs.mknod(&cred(req), parent.0, name(n), mode, u64::from(rdev)));
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, n: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        self.entry(reply, self.fs.mkdir(&cred(req), parent.0, name(n), mode));
    }

    fn unlink(&self, req: &Request, parent: INodeNo, n: &OsStr, reply: ReplyEmpty) {
        empty(reply, self.fs.unlink(&cred(req), parent.0, name(n)));
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, n: &OsStr, reply: ReplyEmpty) {
        empty(reply, self.fs.rmdir(&cred(req), parent.0, name(n)));
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link: &OsStr, target: &Path, reply: ReplyEntry) {
        self.entry(reply, self.fs.symlink(&cred(req), parent.0, name(link), target.as_os_str().as_bytes()));
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        n: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.contains(RenameFlags::RENAME_WHITEOUT) {
            return reply.error(Errno::from_i32(libc::EINVAL));
        }
        let flags = larder_fs::RenameFlags {
            noreplace: flags.contains(RenameFlags::RENAME_NOREPLACE),
            exchange: flags.contains(RenameFlags::RENAME_EXCHANGE),
        };
        empty(reply, self.fs.rename(&cred(req), parent.0, name(n), newparent.0, name(newname), flags));
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        self.entry(reply, self.fs.link(&cred(req), ino.0, newparent.0, name(newname)));
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.fs.open_file(&cred(req), ino.0, flags.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FILE_OPEN_FLAGS),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        thread_local! {
            /// Each FUSE thread's read buffer, kept between requests so a
            /// read costs no allocation and no zeroing (the store zeroes
            /// holes itself).
            static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        BUF.with(|buf| {
            let mut buf = buf.borrow_mut();
            let size = size as usize;
            if buf.len() < size {
                buf.resize(size, 0);
            }
            match self.fs.read_into(fh.0, offset, &mut buf[..size]) {
                Ok(n) => reply.data(&buf[..n]),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.fs.write(&cred(req), fh.0, offset, data) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        // close(2) does not sync: durability is fsync's.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        crate::watch::serving();
        empty(reply, self.fs.release(fh.0));
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        empty(reply, self.fs.fsync(fh.0));
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.fs.opendir(&cred(req), ino.0) {
            Ok(dh) => reply.opened(FileHandle(dh), FopenFlags::empty()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let mut at = offset;
        loop {
            let batch = match self.fs.readdir(fh.0, at, 128) {
                Ok(b) => b,
                Err(e) => return reply.error(errno(&e)),
            };
            let Some(last) = batch.last().map(|e| e.next) else { break };
            for e in &batch {
                if reply.add(INodeNo(e.ino), e.next, file_type(e.kind), OsStr::from_bytes(&e.name)) {
                    // The kernel's buffer is full: it asks again from here.
                    return reply.ok();
                }
            }
            at = last;
        }
        reply.ok();
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        empty(reply, self.fs.releasedir(fh.0));
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        empty(reply, self.fs.fsyncdir(fh.0));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.fs.statfs() {
            Ok(s) => reply.statfs(
                s.blocks,
                s.blocks_free,
                s.blocks_available,
                s.files,
                s.files_free,
                s.block_bytes,
                s.name_max,
                s.block_bytes,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        n: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let flags = XattrFlags { create: flags & libc::XATTR_CREATE != 0, replace: flags & libc::XATTR_REPLACE != 0 };
        empty(reply, self.fs.setxattr(&cred(req), ino.0, name(n), value, flags));
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, n: &OsStr, size: u32, reply: ReplyXattr) {
        match self.fs.getxattr(&cred(req), ino.0, name(n)) {
            Ok(v) => xattr_reply(reply, size, &v),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.fs.listxattr(&cred(req), ino.0) {
            Ok(names) => {
                let mut list = Vec::new();
                for n in names {
                    list.extend_from_slice(&n);
                    list.push(0);
                }
                xattr_reply(reply, size, &list);
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, n: &OsStr, reply: ReplyEmpty) {
        empty(reply, self.fs.removexattr(&cred(req), ino.0, name(n)));
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        empty(reply, self.fs.access(&cred(req), ino.0, mask.bits() as u32));
    }

    fn fallocate(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        empty(reply, self.fs.fallocate(&cred(req), fh.0, offset, length, mode));
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        n: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.fs.create_file(&cred(req), parent.0, name(n), mode, flags) {
            // The new file is open, so it is counted whatever happened to
            // its name meanwhile; an error here is the store's.
            Ok((a, fh)) => match self.retain(a.ino) {
                Ok(()) => reply.created(&self.entry_ttl, &file_attr(&a), GENERATION, FileHandle(fh), FILE_OPEN_FLAGS),
                Err(e) => {
                    if let Err(release) = self.fs.release(fh) {
                        tracing::warn!(error = %release, fh, "releasing a created file the kernel will not learn of failed");
                    }
                    reply.error(errno(&e));
                }
            },
            Err(e) => reply.error(errno(&e)),
        }
    }
}

/// A getxattr/listxattr reply: the size when asked for it (`size` 0),
/// ERANGE when the caller's buffer is too small, else the bytes.
fn xattr_reply(reply: ReplyXattr, size: u32, bytes: &[u8]) {
    if size == 0 {
        reply.size(bytes.len() as u32);
    } else if bytes.len() > size as usize {
        reply.error(Errno::from_i32(libc::ERANGE));
    } else {
        reply.data(bytes);
    }
}
