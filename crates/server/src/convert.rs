//! Conversions between the engine's types (`larder_fs`, `larder_kv`) and
//! the protocol's plain values, and errors to errno responses: all in one
//! place, so the wire never sees an engine type.

use larder_fs::{Attr, DirEntry, FsError, Kind, Resolved, SetAttr, SetTime, StatFs, Timestamp};
use larder_kv::KvError;
use larder_object::Durability as StoreDurability;
use larder_protocol::message::{
    Attributes, DirectoryEntry, Durability, FileKind, FsStats, RenameFlags, Response, ScanEntry, SetAttributes,
    TimeChange, Timestamp as WireTimestamp, XattrFlags,
};

/// A time on the wire.
pub fn timestamp(t: Timestamp) -> WireTimestamp {
    WireTimestamp { seconds: t.secs, nanoseconds: t.nanos }
}

/// A time from the wire.
pub fn from_timestamp(t: WireTimestamp) -> Timestamp {
    Timestamp { secs: t.seconds, nanos: t.nanoseconds }
}

/// An object's kind on the wire.
pub fn file_kind(kind: Kind) -> FileKind {
    match kind {
        Kind::File => FileKind::File,
        Kind::Directory => FileKind::Directory,
        Kind::Symlink => FileKind::Symlink,
        Kind::Fifo => FileKind::Fifo,
        Kind::Socket => FileKind::Socket,
        Kind::CharDevice => FileKind::CharDevice,
        Kind::BlockDevice => FileKind::BlockDevice,
    }
}

/// Attributes on the wire.
pub fn attributes(a: &Attr) -> Attributes {
    Attributes {
        ino: a.ino,
        kind: file_kind(a.kind),
        mode: a.mode,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        size: a.size,
        blocks: a.blocks,
        atime: timestamp(a.atime),
        mtime: timestamp(a.mtime),
        ctime: timestamp(a.ctime),
        btime: timestamp(a.btime),
        generation: a.generation,
    }
}

/// A `setattr` from the wire.
pub fn set_attr(s: &SetAttributes) -> SetAttr {
    let time = |t: TimeChange| match t {
        TimeChange::Now => SetTime::Now,
        TimeChange::At(t) => SetTime::At(from_timestamp(t)),
    };
    SetAttr { mode: s.mode, uid: s.uid, gid: s.gid, size: s.size, atime: s.atime.map(time), mtime: s.mtime.map(time) }
}

/// Rename flags from the wire.
pub fn rename_flags(f: RenameFlags) -> larder_fs::RenameFlags {
    larder_fs::RenameFlags { noreplace: f.noreplace, exchange: f.exchange }
}

/// `setxattr` flags from the wire.
pub fn xattr_flags(f: XattrFlags) -> larder_fs::XattrFlags {
    larder_fs::XattrFlags { create: f.create, replace: f.replace }
}

/// Durability from the wire.
pub fn durability(d: Durability) -> StoreDurability {
    match d {
        Durability::Durable => StoreDurability::Durable,
        Durability::Buffered => StoreDurability::Buffered,
    }
}

/// A directory entry on the wire.
pub fn directory_entry(e: DirEntry) -> DirectoryEntry {
    DirectoryEntry { ino: e.ino, kind: file_kind(e.kind), name: e.name, next: e.next }
}

/// `statfs` on the wire.
pub fn fs_stats(s: &StatFs) -> FsStats {
    FsStats {
        block_bytes: s.block_bytes,
        blocks: s.blocks,
        blocks_free: s.blocks_free,
        blocks_available: s.blocks_available,
        files: s.files,
        files_free: s.files_free,
        name_max: s.name_max,
    }
}

/// A resolved path on the wire.
pub fn resolved(r: &Resolved) -> Response {
    Response::Resolved { parent: r.parent, name: r.name.clone(), attributes: r.attr.as_ref().map(attributes) }
}

/// A scan entry on the wire.
pub fn scan_entry(e: larder_kv::ScanEntry) -> ScanEntry {
    ScanEntry { key: e.key, object: e.object, size: e.size }
}

/// The error response for a failed fs call.
pub fn fs_error(e: &FsError) -> Response {
    Response::Error { errno: e.errno(), message: e.to_string() }
}

/// The error response for a failed KV call.
pub fn kv_error(e: KvError) -> Response {
    let message = e.to_string();
    Response::Error { errno: kv_errno(e), message }
}

/// The errno a KV failure is reported with: the fs layer's for what the
/// engine below reports (so ENOSPC, EFBIG, EIO mean the same through
/// both), and the closest POSIX meaning of the KV layer's own refusals.
pub fn kv_errno(e: KvError) -> i32 {
    match e {
        KvError::Object(o) => FsError::Store(o).errno(),
        KvError::Namespace(n) => FsError::from(n).errno(),
        KvError::InvalidKey { .. } | KvError::InvalidBucket { .. } => libc::EINVAL,
        KvError::NoSuchBucket { .. } => libc::ENOENT,
        KvError::BucketExists { .. } => libc::EEXIST,
        KvError::BucketNotEmpty { .. } => libc::ENOTEMPTY,
        // A key where a level is, or a level where a key is.
        KvError::KeyConflict { .. } => libc::EEXIST,
        KvError::Contended { .. } => libc::EAGAIN,
        // A heap's names change only through the heap, as the fs says.
        KvError::InHeap { .. } => libc::EPERM,
    }
}

/// A response for a bare errno with a message.
pub fn errno(errno: i32, message: impl Into<String>) -> Response {
    Response::Error { errno, message: message.into() }
}
