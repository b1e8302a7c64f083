//! Conversions between larder-fs types and the kernel's.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo, TimeOrNow};
use larder_fs::{Attr, Kind, SetTime, Timestamp};

/// The FUSE file type of a kind.
pub(crate) fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::File => FileType::RegularFile,
        Kind::Directory => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
        Kind::Fifo => FileType::NamedPipe,
        Kind::Socket => FileType::Socket,
        Kind::CharDevice => FileType::CharDevice,
        Kind::BlockDevice => FileType::BlockDevice,
    }
}

/// A stored time as the kernel's.
pub(crate) fn system_time(t: Timestamp) -> SystemTime {
    let nanos = Duration::from_nanos(u64::from(t.nanos));
    if t.secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(t.secs.unsigned_abs()) + nanos
    } else {
        UNIX_EPOCH - Duration::from_secs(t.secs.unsigned_abs()) + nanos
    }
}

/// The kernel's time as a stored one.
pub(crate) fn timestamp(t: SystemTime) -> Timestamp {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timestamp { secs: i64::try_from(d.as_secs()).unwrap_or(i64::MAX), nanos: d.subsec_nanos() },
        Err(e) => {
            // Before the epoch: whole seconds down, nanoseconds up.
            let d = e.duration();
            let mut secs = -i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            let mut nanos = d.subsec_nanos();
            if nanos > 0 {
                secs -= 1;
                nanos = 1_000_000_000 - nanos;
            }
            Timestamp { secs, nanos }
        }
    }
}

/// A setattr time.
pub(crate) fn set_time(t: TimeOrNow) -> SetTime {
    match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(t) => SetTime::At(timestamp(t)),
    }
}

/// The kernel's attributes of an object.
pub(crate) fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: system_time(a.atime),
        mtime: system_time(a.mtime),
        ctime: system_time(a.ctime),
        crtime: system_time(a.btime),
        kind: file_type(a.kind),
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev as u32,
        blksize: larder_fs::BLOCK_BYTES,
        flags: 0,
    }
}
