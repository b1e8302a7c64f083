//! Open files: open and create, read, write (O_APPEND included), fsync,
//! release, and `access`.

use larder_object::meta::{Kind, Timestamp};
use larder_object::superblock::INCOMPAT_UNWRITTEN_EXTENTS;
use larder_object::{Durability, LockRequest};

use crate::attr::Attr;
use crate::cred::Cred;
use crate::error::{FsError, Result};
use crate::handles::{Closed, FileHandle};
use crate::names::{make_in, new_name, onode_in, NewObject};
use crate::perm::{self, EXEC, READ, WRITE};
use crate::Fs;

/// Largest read or write one call moves (larger ones are cut short, as a
/// kernel's are).
pub const MAX_IO_BYTES: usize = 64 << 20;

impl Fs {
    /// Opens object `ino` with `open(2)` `flags` (access mode, O_TRUNC,
    /// O_APPEND); returns the handle. Directories open read-only (through
    /// [`Fs::opendir`] for listing).
    pub fn open_file(&self, cred: &Cred, ino: u64, flags: i32) -> Result<u64> {
        self.open_checked(cred, ino, None, flags)
    }

    /// A stamp to take before resolving a path whose object
    /// [`Fs::open_file_found`] then opens (`None`: nothing read after it
    /// may be reused).
    pub fn meta_stamp(&self) -> Option<u64> {
        self.store.meta_stamp()
    }

    /// As [`Fs::open_file`] of `found.ino`, where `found` are the object's
    /// attributes as a resolution read them after [`Fs::meta_stamp`] gave
    /// `stamp`: while nothing was committed since, they are the object's
    /// attributes now, and the open checks them instead of looking the
    /// object up again; otherwise it looks it up as `open_file` does. Only
    /// a regular file's are reused: a directory's attributes may come from
    /// a caller's cache of resolved directories ([`Fs::resolve_in`]'s
    /// `directory`), read before the stamp. The caller vouches for `found`
    /// as it does for `cred`: both must come from this store (a
    /// resolution) and the kernel (the peer's credentials), never from a
    /// client.
    pub fn open_file_found(&self, cred: &Cred, found: &Attr, stamp: Option<u64>, flags: i32) -> Result<u64> {
        self.open_checked(cred, found.ino, stamp.map(|s| (found, s)), flags)
    }

    fn open_checked(&self, cred: &Cred, ino: u64, found: Option<(&Attr, u64)>, flags: i32) -> Result<u64> {
        let (read, write) = access_mode(flags)?;
        let _gate = self.handles.gate(ino);
        let truncate = flags & libc::O_TRUNC != 0;
        let check = |kind: Kind, nlink: u32, mode: u32, uid: u32, gid: u32| -> Result<Kind> {
            if nlink == 0 && kind != Kind::Directory && !self.handles.is_open(ino) {
                return Err(FsError::posix(libc::ENOENT, format!("object {ino} has no name")));
            }
            match kind {
                Kind::Directory if write => {
                    return Err(FsError::posix(libc::EISDIR, format!("object {ino} opened for writing")))
                }
                Kind::Symlink => return Err(FsError::posix(libc::ELOOP, format!("object {ino} is a symlink"))),
                _ => {}
            }
            let mask = if read { READ } else { 0 } | if write { WRITE } else { 0 };
            let allowed = |mask| perm::allowed_by(kind, mode, uid, gid, cred, mask);
            if !allowed(mask) {
                return Err(perm::refused(ino, cred, mask));
            }
            if truncate && kind == Kind::File && !write && !allowed(WRITE) {
                return Err(perm::refused(ino, cred, WRITE));
            }
            Ok(kind)
        };
        // Under the gate, so that an unlink that leaves the object without
        // a name either went in before the check (the stamp then differs,
        // and the look-up finds nlink 0) or finds this handle open.
        let current = |(attr, stamp): &(&Attr, u64)| {
            attr.ino == ino && attr.kind == Kind::File && self.store.meta_unchanged_since(*stamp)
        };
        let kind = match found.filter(current) {
            // A file's `Attr::nlink` is its onode's.
            Some((a, _)) => check(a.kind, a.nlink, a.mode, a.uid, a.gid)?,
            // Checked on the cached onode, borrowed: an open copies nothing.
            None => self.with_onode(ino, |o| check(o.kind, o.nlink, o.mode, o.uid, o.gid))??,
        };
        if truncate && kind == Kind::File {
            self.truncate_for_open(cred, ino)?;
        }
        Ok(self.handles.add_file(FileHandle { ino, read, write, append: flags & libc::O_APPEND != 0 }))
    }

    /// Creates regular file `name` in `parent` with `mode` and opens it
    /// with `flags`; with O_EXCL an existing name is EEXIST, without it the
    /// existing object is opened (as `open(O_CREAT)` does). Needs write and
    /// search permission on `parent` (else EACCES). Returns the new file's
    /// attributes and the handle, to [`Fs::release`] when done. Buffered:
    /// durable at the next fsync or [`Fs::sync`]. See [`Fs::create`] for
    /// an example.
    pub fn create_file(&self, cred: &Cred, parent: u64, name: &[u8], mode: u32, flags: i32) -> Result<(Attr, u64)> {
        let (read, write) = access_mode(flags)?;
        let n = new_name(name)?;
        self.store.check_room_for_name()?;
        let requests = [LockRequest::Exclusive(parent), LockRequest::Name(parent, n.as_bytes().to_vec())];
        let new = NewObject { kind: Kind::File, mode, rdev: 0, target: None };
        let made =
            self.store.transact_locked(&requests, Durability::Buffered, |txn| make_in(txn, cred, parent, &n, &new));
        match made {
            Ok((attr, _)) => {
                // A new object only this call knows: the open cannot fail on
                // permissions the creator set (POSIX: the mode applies to
                // later opens).
                let _gate = self.handles.gate(attr.ino);
                let fh = self.handles.add_file(FileHandle {
                    ino: attr.ino,
                    read,
                    write,
                    append: flags & libc::O_APPEND != 0,
                });
                Ok((attr, fh))
            }
            Err(e) if e.errno() == libc::EEXIST && flags & libc::O_EXCL == 0 => {
                let attr = self.lookup(cred, parent, name)?;
                if attr.kind == Kind::Directory {
                    return Err(FsError::posix(
                        libc::EISDIR,
                        format!("{:?} is a directory", String::from_utf8_lossy(name)),
                    ));
                }
                let fh = self.open_file(cred, attr.ino, flags)?;
                Ok((self.getattr(attr.ino)?, fh))
            }
            Err(e) => Err(e),
        }
    }

    /// O_TRUNC: empties the file and, as Linux does even when it was empty
    /// already, drops the setuid and setgid bits a write would drop.
    fn truncate_for_open(&self, cred: &Cred, ino: u64) -> Result<()> {
        self.store.transact_locked(&[LockRequest::Exclusive(ino)], Durability::Buffered, |txn| -> Result<()> {
            let o = onode_in(txn, ino)?;
            if o.size > 0 {
                txn.truncate(ino, 0)?;
            }
            if let Some(mode) = perm::kill_suid(&o, cred) {
                let mut o = onode_in(txn, ino)?;
                o.mode = mode;
                txn.put_onode(ino, &o)?;
            }
            Ok(())
        })?;
        Ok(())
    }

    /// Reads up to `len` bytes at `offset` through handle `fh` (fewer at
    /// the end of the file). Every block read is checked against its
    /// checksum: a mismatch is EIO, never wrong bytes. EBADF for a handle
    /// not open for reading.
    pub fn read(&self, fh: u64, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len.min(MAX_IO_BYTES)];
        let n = self.read_into(fh, offset, &mut buf)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Reads from `offset` through handle `fh` into `buf` (at most
    /// `MAX_IO_BYTES` of it), as pread(2) does; returns the bytes read,
    /// fewer than asked at the end of the file.
    pub fn read_into(&self, fh: u64, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let h = self.file_handle(fh)?;
        if !h.read {
            return Err(FsError::posix(libc::EBADF, format!("handle {fh} is not open for reading")));
        }
        let len = buf.len().min(MAX_IO_BYTES);
        Ok(self.store.read(h.ino, offset, &mut buf[..len])?)
    }

    /// Writes `data` at `offset` (at the end with O_APPEND) through handle
    /// `fh`; returns the bytes written. Drops setuid and setgid bits as
    /// Linux does for unprivileged writers. Visible at once, durable at the
    /// next [`Fs::fsync`] (or within the log's buffered interval); a crash
    /// before then leaves the file as it was before the write or after it.
    /// EBADF for a handle not open for writing, ENOSPC when the store or
    /// the file system below is full, EFBIG past the largest file size.
    /// See [`Fs::create`] for an example.
    pub fn write(&self, cred: &Cred, fh: u64, offset: u64, data: &[u8]) -> Result<usize> {
        let h = self.file_handle(fh)?;
        if !h.write {
            return Err(FsError::posix(libc::EBADF, format!("handle {fh} is not open for writing")));
        }
        let data = data.get(..MAX_IO_BYTES).unwrap_or(data);
        // Small writes go to the log and the index; large ones to
        // containers, which never grow into the reserve.
        self.store.check_room(data.len() as u64)?;
        let ino = h.ino;
        self.store.transact_locked(&[LockRequest::Exclusive(ino)], Durability::Buffered, |txn| -> Result<()> {
            let o = onode_in(txn, ino)?;
            let at = if h.append { o.size } else { offset };
            txn.write(ino, at, data)?;
            if let Some(mode) = perm::kill_suid(&o, cred) {
                let mut o = onode_in(txn, ino)?;
                o.mode = mode;
                txn.put_onode(ino, &o)?;
            }
            Ok(())
        })?;
        Ok(data.len())
    }

    /// Makes the file behind `fh` durable with its name and every earlier
    /// change (the log is prefix-closed, so this is one sync of it):
    /// durable when it returns.
    pub fn fsync(&self, fh: u64) -> Result<()> {
        self.file_handle(fh)?;
        self.sync()
    }

    /// `fallocate(2)` through handle `fh`, open for writing. Mode 0 makes
    /// `[offset, offset + len)` part of the file, extending its size (what
    /// was never written reads as zeros); `FALLOC_FL_KEEP_SIZE` leaves the
    /// size. Both set the range's space aside (unwritten extents, durable
    /// with the change): a later write inside it fills that space in place
    /// and cannot fail for want of space. With KEEP_SIZE, the part of the
    /// range past the end of the file is only checked to fit the store now
    /// (extent map entries never pass the size), as the whole range is on
    /// a store created before unwritten extents existed. Other modes
    /// (punching holes, zeroing, collapsing or inserting ranges) are
    /// EOPNOTSUPP; a zero length is EINVAL; ENOSPC when the space is not
    /// there, changing nothing.
    pub fn fallocate(&self, cred: &Cred, fh: u64, offset: u64, len: u64, mode: i32) -> Result<()> {
        let h = self.file_handle(fh)?;
        if !h.write {
            return Err(FsError::posix(libc::EBADF, format!("handle {fh} is not open for writing")));
        }
        if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
            return Err(FsError::posix(libc::EOPNOTSUPP, format!("fallocate mode {mode:#x}")));
        }
        if len == 0 {
            return Err(FsError::posix(libc::EINVAL, "fallocate of zero bytes"));
        }
        let end = offset.checked_add(len).ok_or_else(|| FsError::posix(libc::EFBIG, "offset + length overflows"))?;
        // A range larger than the free space fails before anything changes.
        let room = self.statfs()?;
        if len > room.blocks_available.saturating_mul(u64::from(room.block_bytes)) {
            return Err(FsError::posix(libc::ENOSPC, format!("{len} bytes asked, the store has less free")));
        }
        let unwritten = self.store.superblock().incompat & INCOMPAT_UNWRITTEN_EXTENTS != 0;
        let keep_size = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let ino = h.ino;
        self.store.transact_locked(&[LockRequest::Exclusive(ino)], Durability::Buffered, |txn| -> Result<()> {
            let o = onode_in(txn, ino)?;
            if !keep_size && end > o.size {
                // Through the file's handle: write access was checked
                // at open, as for ftruncate.
                txn.truncate(ino, end)?;
                let mut o = onode_in(txn, ino)?;
                if let Some(mode) = perm::kill_suid(&o, cred) {
                    o.mode = mode;
                }
                o.ctime = Timestamp::now();
                txn.put_onode(ino, &o)?;
            }
            if unwritten {
                txn.preallocate(ino, offset, end)?;
            }
            Ok(())
        })?;
        Ok(())
    }

    /// Closes handle `fh`. The last close of an object with no name left
    /// frees it.
    pub fn release(&self, fh: u64) -> Result<()> {
        let ino = self.file_handle(fh)?.ino;
        let _gate = self.handles.gate(ino);
        // Checked again under the gate: a concurrent release may have won.
        let (_, closed) = self.handles.remove_file(fh).ok_or_else(|| not_open(fh))?;
        // Known without reading the object: every unlink that leaves an
        // open object nameless marks it, under this gate.
        if closed == Closed::LastOfOrphan {
            self.store.free_orphan(ino, Durability::Buffered)?;
        }
        Ok(())
    }

    /// Counts a reference to `ino` that a kernel holds without a handle
    /// (a FUSE lookup count: each entry replied by lookup, create, mkdir,
    /// mknod, symlink or link). Until [`Fs::forget`] drops the last one,
    /// the object is kept as an open one is: removed meanwhile, it lasts
    /// nameless (its attributes read, 0 links; a removed directory takes
    /// no new names), as a Linux inode lasts while a process has it as
    /// its working directory. Call it before the kernel learns of the
    /// entry, so that its forget cannot come first. ENOENT, counting
    /// nothing, if the object lost its last name since it was looked up
    /// (a delete beside the mount, a KV or server one, may be freeing it)
    /// and nothing holds it open or counted.
    pub fn retain(&self, ino: u64) -> Result<()> {
        let _gate = self.handles.gate(ino);
        // An object open or counted already is held (a create's new file
        // is open): only one with no holder needs its onode read.
        if !self.handles.is_open(ino) {
            self.with_onode(ino, |o| match o.nlink {
                0 => Err(FsError::posix(libc::ENOENT, format!("object {ino} has no name"))),
                _ => Ok(()),
            })??;
        }
        self.handles.retain(ino);
        Ok(())
    }

    /// Drops `n` of the references [`Fs::retain`] counted for `ino`; the
    /// last reference and handle of an object with no name left frees it.
    pub fn forget(&self, ino: u64, n: u64) -> Result<()> {
        let _gate = self.handles.gate(ino);
        if self.handles.forget(ino, n) == Closed::LastOfOrphan {
            self.store.free_orphan(ino, Durability::Buffered)?;
        }
        Ok(())
    }

    /// Checks `access(2)` `mask` (`R_OK | W_OK | X_OK`, or `F_OK` = 0) on
    /// `ino` for `cred`.
    pub fn access(&self, cred: &Cred, ino: u64, mask: u32) -> Result<()> {
        let o = self.onode(ino)?;
        perm::check(&o, ino, cred, mask & (READ | WRITE | EXEC))
    }

    /// Marks `ino` accessed now (for callers that keep atime; reads do not
    /// update it: the store behaves as mounted `noatime`).
    pub fn touch_atime(&self, ino: u64) -> Result<()> {
        self.store.transact_locked(&[LockRequest::Exclusive(ino)], Durability::Buffered, |txn| -> Result<()> {
            let mut o = onode_in(txn, ino)?;
            o.atime = Timestamp::now();
            Ok(txn.put_onode(ino, &o)?)
        })?;
        Ok(())
    }

    fn file_handle(&self, fh: u64) -> Result<FileHandle> {
        self.handles.file(fh).ok_or_else(|| not_open(fh))
    }
}

/// EBADF for file handle `fh`.
fn not_open(fh: u64) -> FsError {
    FsError::posix(libc::EBADF, format!("handle {fh} is not open"))
}

/// (read, write) of `flags`' access mode; EINVAL for an invalid one.
fn access_mode(flags: i32) -> Result<(bool, bool)> {
    match flags & libc::O_ACCMODE {
        libc::O_RDONLY => Ok((true, false)),
        libc::O_WRONLY => Ok((false, true)),
        libc::O_RDWR => Ok((true, true)),
        other => Err(FsError::posix(libc::EINVAL, format!("access mode {other}"))),
    }
}
