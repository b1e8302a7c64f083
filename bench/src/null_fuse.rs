//! A FUSE file system that does (almost) nothing, built with the same
//! library as Larder's mount: the ceiling of what any FUSE file system
//! can do here. It keeps only a name table, so that creates are real
//! creates (a lookup of a new name fails) and stats find what was made.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags,
    ReplyAttr, ReplyCreate, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, Request,
};

/// The do-nothing file system.
pub struct NullFs {
    names: parking_lot::Mutex<HashMap<(u64, OsString), u64>>,
    next: AtomicU64,
    ttl: Duration,
    /// Answers CREATE and OPEN with ENOSYS: the kernel then creates by
    /// MKNOD and opens without a request, and sends no RELEASE.
    stateless: bool,
}

impl NullFs {
    /// With the kernel's caches kept for `ttl`.
    pub fn new(ttl: Duration) -> NullFs {
        NullFs { names: Default::default(), next: AtomicU64::new(2), ttl, stateless: false }
    }

    /// A new file's inode number, named `name` in `parent`.
    fn new_file(&self, parent: INodeNo, name: &OsStr) -> u64 {
        let ino = self.next.fetch_add(1, Ordering::Relaxed);
        self.names.lock().insert((parent.0, name.to_os_string()), ino);
        ino
    }

    /// With no CREATE, OPEN or RELEASE (see `stateless`).
    pub fn stateless(ttl: Duration) -> NullFs {
        NullFs { stateless: true, ..NullFs::new(ttl) }
    }
}

fn attr(ino: u64) -> FileAttr {
    let dir = ino == 1 || ino == u64::MAX;
    FileAttr {
        ino: INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: SystemTime::UNIX_EPOCH,
        mtime: SystemTime::UNIX_EPOCH,
        ctime: SystemTime::UNIX_EPOCH,
        crtime: SystemTime::UNIX_EPOCH,
        kind: if dir { FileType::Directory } else { FileType::RegularFile },
        perm: if dir { 0o755 } else { 0o644 },
        nlink: if dir { 2 } else { 1 },
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl Filesystem for NullFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.names.lock().get(&(parent.0, name.to_os_string())) {
            Some(&ino) => reply.entry(&self.ttl, &attr(ino), Generation(1)),
            None => reply.error(Errno::from_i32(libc::ENOENT)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        reply.attr(&self.ttl, &attr(ino.0));
    }

    fn mkdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, _mode: u32, _umask: u32, reply: ReplyEntry) {
        // Directories all get the one directory inode number: enough for a
        // benchmark that makes one.
        self.names.lock().insert((parent.0, name.to_os_string()), u64::MAX);
        reply.entry(&self.ttl, &attr(u64::MAX), Generation(1));
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        if self.stateless {
            return reply.error(Errno::from_i32(libc::ENOSYS));
        }
        let ino = self.new_file(parent, name);
        reply.created(&self.ttl, &attr(ino), Generation(1), FileHandle(0), FopenFlags::FOPEN_NOFLUSH);
    }

    // No FLUSH at close, as Larder's mount asks: the ceiling makes no
    // round trip that Larder avoids.
    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if self.stateless {
            return reply.error(Errno::from_i32(libc::ENOSYS));
        }
        reply.opened(FileHandle(0), FopenFlags::FOPEN_NOFLUSH);
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let ino = self.new_file(parent, name);
        reply.entry(&self.ttl, &attr(ino), Generation(1));
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        // A file opened without OPEN has no FOPEN_NOFLUSH to ask for: ENOSYS
        // once, and the kernel sends no more FLUSH.
        if self.stateless {
            return reply.error(Errno::from_i32(libc::ENOSYS));
        }
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        reply.ok();
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _offset: u64, reply: ReplyDirectory) {
        reply.ok();
    }
}
