//! Request bodies: the fields after the header, per opcode, in the order
//! `docs/format.md` lists them.

use super::decode::Reader;
use super::encode::{Encoder, Sink};
use super::error::DecodeError;
use super::opcode::Opcode;
use super::{MAX_BATCH_OPERATIONS, MAX_DATA_BYTES, MAX_LIST_ENTRIES, MAX_NAME_BYTES, MAX_PATH_BYTES};
use crate::message::{KvOperation, LeaseTarget, RenameFlags, Request, SetAttributes, XattrFlags};

/// `LeaseTarget`'s tags.
const LEASE_OBJECT: u8 = 0;
const LEASE_NAMESPACE: u8 = 1;
const LEASE_SUBTREE: u8 = 2;

/// `RenameFlags`' bits.
const RENAME_NOREPLACE: u8 = 1;
const RENAME_EXCHANGE: u8 = 2;

/// `XattrFlags`' bits.
const XATTR_CREATE: u8 = 1;
const XATTR_REPLACE: u8 = 2;

/// Smallest encoding of a batch operation: tag, a key's length, and a
/// delete has nothing more.
const KV_OPERATION_MIN_BYTES: usize = 5;

/// Smallest encoding of a metadata batch's operation, as the count check
/// counts it: its opcode. (A real operation is longer, but an operation
/// that may not be batched is refused for what it is, as the encoder's
/// check refuses it, not as a truncation.)
const METADATA_OPERATION_MIN_BYTES: usize = 2;

pub(super) fn encode<S: Sink>(e: &mut Encoder<'_, S>, request: &Request) {
    match request {
        Request::Ping | Request::StatFs | Request::Sync | Request::ListBuckets | Request::Stats => {}
        Request::Lease { target } => match target {
            LeaseTarget::Object(ino) => {
                e.u8(LEASE_OBJECT);
                e.u64(*ino);
            }
            LeaseTarget::Namespace => e.u8(LEASE_NAMESPACE),
            LeaseTarget::Subtree(ino) => {
                e.u8(LEASE_SUBTREE);
                e.u64(*ino);
            }
        },
        Request::MetadataBatch { operations, durability } => {
            e.count("MetadataBatch.operations", MAX_BATCH_OPERATIONS, operations.len());
            for operation in operations {
                if !operation.is_metadata_operation() {
                    e.refuse(DecodeError::OutOfRange {
                        field: "MetadataBatch.operations",
                        reason: "only mknod, mkdir, symlink, link, unlink, rmdir and rename may be batched",
                    });
                }
                e.u16(operation.opcode().code());
                encode(e, operation);
            }
            e.durability(*durability);
        }
        Request::Lookup { parent, name } => {
            e.u64(*parent);
            e.bytes("Lookup.name", MAX_NAME_BYTES, name);
        }
        Request::GetAttributes { ino } | Request::Readlink { ino } | Request::OpenDirectory { ino } => e.u64(*ino),
        Request::SetAttributes { ino, set, handle } => {
            e.u64(*ino);
            set_attributes(e, set);
            e.option(handle);
            if let Some(handle) = handle {
                e.u64(*handle);
            }
        }
        Request::Resolve { path, follow } => {
            e.bytes("Resolve.path", MAX_PATH_BYTES, path);
            e.bool(*follow);
        }
        Request::OpenPath { path, flags, read, lease } => {
            e.bytes("OpenPath.path", MAX_PATH_BYTES, path);
            e.i32(*flags);
            e.u32(*read);
            e.bool(*lease);
        }
        Request::Mknod { parent, name, mode, rdev } => {
            e.u64(*parent);
            e.bytes("Mknod.name", MAX_NAME_BYTES, name);
            e.u32(*mode);
            e.u64(*rdev);
        }
        Request::Mkdir { parent, name, mode } => {
            e.u64(*parent);
            e.bytes("Mkdir.name", MAX_NAME_BYTES, name);
            e.u32(*mode);
        }
        Request::Symlink { parent, name, target } => {
            e.u64(*parent);
            e.bytes("Symlink.name", MAX_NAME_BYTES, name);
            e.bytes("Symlink.target", MAX_PATH_BYTES, target);
        }
        Request::Link { ino, parent, name } => {
            e.u64(*ino);
            e.u64(*parent);
            e.bytes("Link.name", MAX_NAME_BYTES, name);
        }
        Request::Unlink { parent, name } => {
            e.u64(*parent);
            e.bytes("Unlink.name", MAX_NAME_BYTES, name);
        }
        Request::Rmdir { parent, name } => {
            e.u64(*parent);
            e.bytes("Rmdir.name", MAX_NAME_BYTES, name);
        }
        Request::Rename { parent, name, new_parent, new_name, flags } => {
            e.u64(*parent);
            e.bytes("Rename.name", MAX_NAME_BYTES, name);
            e.u64(*new_parent);
            e.bytes("Rename.new_name", MAX_NAME_BYTES, new_name);
            e.u8(rename_bits(*flags));
        }
        Request::Open { ino, flags } => {
            e.u64(*ino);
            e.i32(*flags);
        }
        Request::Create { parent, name, mode, flags, lease } => {
            e.u64(*parent);
            e.bytes("Create.name", MAX_NAME_BYTES, name);
            e.u32(*mode);
            e.i32(*flags);
            e.bool(*lease);
        }
        Request::Read { handle, offset, length } => {
            e.u64(*handle);
            e.u64(*offset);
            e.u32(*length);
        }
        Request::ReadBuffer { handle, offset, into } => {
            e.u64(*handle);
            e.u64(*offset);
            e.buffer_slice(*into);
        }
        Request::Write { handle, offset, data } => {
            e.u64(*handle);
            e.u64(*offset);
            e.payload("Write.data", data);
        }
        Request::Fsync { handle }
        | Request::Release { handle }
        | Request::ReleaseDirectory { handle }
        | Request::FsyncDirectory { handle }
        | Request::KvWriterFinish { handle } => e.u64(*handle),
        Request::Fallocate { handle, offset, length, mode } => {
            e.u64(*handle);
            e.u64(*offset);
            e.u64(*length);
            e.i32(*mode);
        }
        Request::ReadDirectory { handle, offset, max_entries } => {
            e.u64(*handle);
            e.u64(*offset);
            e.u32(*max_entries);
        }
        Request::Access { ino, mask } => {
            e.u64(*ino);
            e.u32(*mask);
        }
        Request::GetXattr { ino, name } => {
            e.u64(*ino);
            e.bytes("GetXattr.name", MAX_NAME_BYTES, name);
        }
        Request::SetXattr { ino, name, value, flags } => {
            e.u64(*ino);
            e.bytes("SetXattr.name", MAX_NAME_BYTES, name);
            e.bytes("SetXattr.value", MAX_DATA_BYTES, value);
            e.u8(xattr_bits(*flags));
        }
        Request::ListXattr { ino } => e.u64(*ino),
        Request::RemoveXattr { ino, name } => {
            e.u64(*ino);
            e.bytes("RemoveXattr.name", MAX_NAME_BYTES, name);
        }
        Request::KvPut { bucket, key, value, durability } => {
            e.bytes("KvPut.bucket", MAX_NAME_BYTES, bucket);
            e.bytes("KvPut.key", MAX_PATH_BYTES, key);
            e.payload("KvPut.value", value);
            e.durability(*durability);
        }
        Request::KvGet { bucket, key, into } => {
            e.bytes("KvGet.bucket", MAX_NAME_BYTES, bucket);
            e.bytes("KvGet.key", MAX_PATH_BYTES, key);
            e.option(into);
            if let Some(into) = into {
                e.buffer_slice(*into);
            }
        }
        Request::KvHead { bucket, key } => {
            e.bytes("KvHead.bucket", MAX_NAME_BYTES, bucket);
            e.bytes("KvHead.key", MAX_PATH_BYTES, key);
        }
        Request::KvDelete { bucket, key, durability } => {
            e.bytes("KvDelete.bucket", MAX_NAME_BYTES, bucket);
            e.bytes("KvDelete.key", MAX_PATH_BYTES, key);
            e.durability(*durability);
        }
        Request::KvScan { bucket, start, end, max_entries } => {
            e.bytes("KvScan.bucket", MAX_NAME_BYTES, bucket);
            e.bytes("KvScan.start", MAX_PATH_BYTES, start);
            e.option(end);
            if let Some(end) = end {
                e.bytes("KvScan.end", MAX_PATH_BYTES, end);
            }
            e.u32(*max_entries);
        }
        Request::KvWriteBatch { bucket, operations, durability } => {
            e.bytes("KvWriteBatch.bucket", MAX_NAME_BYTES, bucket);
            e.count("KvWriteBatch.operations", MAX_LIST_ENTRIES, operations.len());
            for operation in operations {
                match operation {
                    KvOperation::Put { key, value } => {
                        e.u8(1);
                        e.bytes("KvWriteBatch.Put.key", MAX_PATH_BYTES, key);
                        e.payload("KvWriteBatch.Put.value", value);
                    }
                    KvOperation::Delete { key } => {
                        e.u8(2);
                        e.bytes("KvWriteBatch.Delete.key", MAX_PATH_BYTES, key);
                    }
                }
            }
            e.durability(*durability);
        }
        Request::KvWriterOpen { bucket, key, durability } => {
            e.bytes("KvWriterOpen.bucket", MAX_NAME_BYTES, bucket);
            e.bytes("KvWriterOpen.key", MAX_PATH_BYTES, key);
            e.durability(*durability);
        }
        Request::KvReaderOpen { bucket, key } => {
            e.bytes("KvReaderOpen.bucket", MAX_NAME_BYTES, bucket);
            e.bytes("KvReaderOpen.key", MAX_PATH_BYTES, key);
        }
        Request::CreateBucket { bucket } => e.bytes("CreateBucket.bucket", MAX_NAME_BYTES, bucket),
        Request::HeapOpen { path } => e.bytes("HeapOpen.path", MAX_PATH_BYTES, path),
        Request::Heap { heap, operation } => {
            e.u64(*heap);
            super::heap::encode_operation(e, operation);
        }
        Request::HeapClose { heap, sync } => {
            e.u64(*heap);
            e.bool(*sync);
        }
        Request::DeleteBucket { bucket } => e.bytes("DeleteBucket.bucket", MAX_NAME_BYTES, bucket),
    }
}

/// Each field: an option tag, then the value when present.
fn set_attributes<S: Sink>(e: &mut Encoder<'_, S>, set: &SetAttributes) {
    for value in [set.mode, set.uid, set.gid] {
        e.option(&value);
        if let Some(value) = value {
            e.u32(value);
        }
    }
    e.option(&set.size);
    if let Some(size) = set.size {
        e.u64(size);
    }
    for (field, change) in [("SetAttributes.atime", set.atime), ("SetAttributes.mtime", set.mtime)] {
        e.option(&change);
        if let Some(change) = change {
            e.time_change(field, change);
        }
    }
}

fn rename_bits(flags: RenameFlags) -> u8 {
    let mut bits = 0;
    if flags.noreplace {
        bits |= RENAME_NOREPLACE;
    }
    if flags.exchange {
        bits |= RENAME_EXCHANGE;
    }
    bits
}

fn xattr_bits(flags: XattrFlags) -> u8 {
    let mut bits = 0;
    if flags.create {
        bits |= XATTR_CREATE;
    }
    if flags.replace {
        bits |= XATTR_REPLACE;
    }
    bits
}

/// Flag bits, of which only `known` may be set.
fn flag_bits(r: &mut Reader<'_>, field: &'static str, known: u8) -> Result<u8, DecodeError> {
    let bits = r.u8(field)?;
    if bits & !known != 0 {
        return Err(DecodeError::ReservedBits { field, bits: u16::from(bits & !known) });
    }
    Ok(bits)
}

pub(super) fn decode(r: &mut Reader<'_>, opcode: Opcode) -> Result<Request, DecodeError> {
    Ok(match opcode {
        Opcode::Ping => Request::Ping,
        Opcode::Lease => Request::Lease {
            target: match r.u8("Lease.target")? {
                LEASE_OBJECT => LeaseTarget::Object(r.u64("Lease.ino")?),
                LEASE_NAMESPACE => LeaseTarget::Namespace,
                LEASE_SUBTREE => LeaseTarget::Subtree(r.u64("Lease.ino")?),
                tag => return Err(DecodeError::UnknownTag { field: "Lease.target", tag }),
            },
        },
        Opcode::Lookup => {
            Request::Lookup { parent: r.u64("Lookup.parent")?, name: r.bytes("Lookup.name", MAX_NAME_BYTES)? }
        }
        Opcode::GetAttributes => Request::GetAttributes { ino: r.u64("GetAttributes.ino")? },
        Opcode::SetAttributes => {
            let ino = r.u64("SetAttributes.ino")?;
            let set = decode_set_attributes(r)?;
            let handle = if r.option("SetAttributes.handle")? { Some(r.u64("SetAttributes.handle")?) } else { None };
            Request::SetAttributes { ino, set, handle }
        }
        Opcode::Resolve => {
            Request::Resolve { path: r.bytes("Resolve.path", MAX_PATH_BYTES)?, follow: r.bool("Resolve.follow")? }
        }
        Opcode::OpenPath => Request::OpenPath {
            path: r.bytes("OpenPath.path", MAX_PATH_BYTES)?,
            flags: r.i32("OpenPath.flags")?,
            read: r.u32("OpenPath.read")?,
            lease: r.bool("OpenPath.lease")?,
        },
        Opcode::Mknod => Request::Mknod {
            parent: r.u64("Mknod.parent")?,
            name: r.bytes("Mknod.name", MAX_NAME_BYTES)?,
            mode: r.u32("Mknod.mode")?,
            rdev: r.u64("Mknod.rdev")?,
        },
        Opcode::Mkdir => Request::Mkdir {
            parent: r.u64("Mkdir.parent")?,
            name: r.bytes("Mkdir.name", MAX_NAME_BYTES)?,
            mode: r.u32("Mkdir.mode")?,
        },
        Opcode::Symlink => Request::Symlink {
            parent: r.u64("Symlink.parent")?,
            name: r.bytes("Symlink.name", MAX_NAME_BYTES)?,
            target: r.bytes("Symlink.target", MAX_PATH_BYTES)?,
        },
        Opcode::Readlink => Request::Readlink { ino: r.u64("Readlink.ino")? },
        Opcode::Link => Request::Link {
            ino: r.u64("Link.ino")?,
            parent: r.u64("Link.parent")?,
            name: r.bytes("Link.name", MAX_NAME_BYTES)?,
        },
        Opcode::Unlink => {
            Request::Unlink { parent: r.u64("Unlink.parent")?, name: r.bytes("Unlink.name", MAX_NAME_BYTES)? }
        }
        Opcode::Rmdir => {
            Request::Rmdir { parent: r.u64("Rmdir.parent")?, name: r.bytes("Rmdir.name", MAX_NAME_BYTES)? }
        }
        Opcode::Rename => {
            let parent = r.u64("Rename.parent")?;
            let name = r.bytes("Rename.name", MAX_NAME_BYTES)?;
            let new_parent = r.u64("Rename.new_parent")?;
            let new_name = r.bytes("Rename.new_name", MAX_NAME_BYTES)?;
            let bits = flag_bits(r, "Rename.flags", RENAME_NOREPLACE | RENAME_EXCHANGE)?;
            let flags = RenameFlags { noreplace: bits & RENAME_NOREPLACE != 0, exchange: bits & RENAME_EXCHANGE != 0 };
            Request::Rename { parent, name, new_parent, new_name, flags }
        }
        Opcode::Open => Request::Open { ino: r.u64("Open.ino")?, flags: r.i32("Open.flags")? },
        Opcode::Create => Request::Create {
            parent: r.u64("Create.parent")?,
            name: r.bytes("Create.name", MAX_NAME_BYTES)?,
            mode: r.u32("Create.mode")?,
            flags: r.i32("Create.flags")?,
            lease: r.bool("Create.lease")?,
        },
        Opcode::Read => Request::Read {
            handle: r.u64("Read.handle")?,
            offset: r.u64("Read.offset")?,
            length: r.u32("Read.length")?,
        },
        Opcode::ReadBuffer => Request::ReadBuffer {
            handle: r.u64("ReadBuffer.handle")?,
            offset: r.u64("ReadBuffer.offset")?,
            into: r.buffer_slice("ReadBuffer.into")?,
        },
        Opcode::Write => Request::Write {
            handle: r.u64("Write.handle")?,
            offset: r.u64("Write.offset")?,
            data: r.payload("Write.data")?,
        },
        Opcode::Fsync => Request::Fsync { handle: r.u64("Fsync.handle")? },
        Opcode::Fallocate => Request::Fallocate {
            handle: r.u64("Fallocate.handle")?,
            offset: r.u64("Fallocate.offset")?,
            length: r.u64("Fallocate.length")?,
            mode: r.i32("Fallocate.mode")?,
        },
        Opcode::Release => Request::Release { handle: r.u64("Release.handle")? },
        Opcode::OpenDirectory => Request::OpenDirectory { ino: r.u64("OpenDirectory.ino")? },
        Opcode::ReadDirectory => Request::ReadDirectory {
            handle: r.u64("ReadDirectory.handle")?,
            offset: r.u64("ReadDirectory.offset")?,
            max_entries: r.u32("ReadDirectory.max_entries")?,
        },
        Opcode::ReleaseDirectory => Request::ReleaseDirectory { handle: r.u64("ReleaseDirectory.handle")? },
        Opcode::FsyncDirectory => Request::FsyncDirectory { handle: r.u64("FsyncDirectory.handle")? },
        Opcode::Access => Request::Access { ino: r.u64("Access.ino")?, mask: r.u32("Access.mask")? },
        Opcode::StatFs => Request::StatFs,
        Opcode::GetXattr => {
            Request::GetXattr { ino: r.u64("GetXattr.ino")?, name: r.bytes("GetXattr.name", MAX_NAME_BYTES)? }
        }
        Opcode::SetXattr => {
            let ino = r.u64("SetXattr.ino")?;
            let name = r.bytes("SetXattr.name", MAX_NAME_BYTES)?;
            let value = r.bytes("SetXattr.value", MAX_DATA_BYTES)?;
            let bits = flag_bits(r, "SetXattr.flags", XATTR_CREATE | XATTR_REPLACE)?;
            let flags = XattrFlags { create: bits & XATTR_CREATE != 0, replace: bits & XATTR_REPLACE != 0 };
            Request::SetXattr { ino, name, value, flags }
        }
        Opcode::ListXattr => Request::ListXattr { ino: r.u64("ListXattr.ino")? },
        Opcode::RemoveXattr => {
            Request::RemoveXattr { ino: r.u64("RemoveXattr.ino")?, name: r.bytes("RemoveXattr.name", MAX_NAME_BYTES)? }
        }
        Opcode::Sync => Request::Sync,
        Opcode::KvPut => Request::KvPut {
            bucket: r.bytes("KvPut.bucket", MAX_NAME_BYTES)?,
            key: r.bytes("KvPut.key", MAX_PATH_BYTES)?,
            value: r.payload("KvPut.value")?,
            durability: r.durability("KvPut.durability")?,
        },
        Opcode::KvGet => {
            let bucket = r.bytes("KvGet.bucket", MAX_NAME_BYTES)?;
            let key = r.bytes("KvGet.key", MAX_PATH_BYTES)?;
            let into = if r.option("KvGet.into")? { Some(r.buffer_slice("KvGet.into")?) } else { None };
            Request::KvGet { bucket, key, into }
        }
        Opcode::KvHead => Request::KvHead {
            bucket: r.bytes("KvHead.bucket", MAX_NAME_BYTES)?,
            key: r.bytes("KvHead.key", MAX_PATH_BYTES)?,
        },
        Opcode::KvDelete => Request::KvDelete {
            bucket: r.bytes("KvDelete.bucket", MAX_NAME_BYTES)?,
            key: r.bytes("KvDelete.key", MAX_PATH_BYTES)?,
            durability: r.durability("KvDelete.durability")?,
        },
        Opcode::KvScan => {
            let bucket = r.bytes("KvScan.bucket", MAX_NAME_BYTES)?;
            let start = r.bytes("KvScan.start", MAX_PATH_BYTES)?;
            let end = if r.option("KvScan.end")? { Some(r.bytes("KvScan.end", MAX_PATH_BYTES)?) } else { None };
            let max_entries = r.u32("KvScan.max_entries")?;
            Request::KvScan { bucket, start, end, max_entries }
        }
        Opcode::KvWriteBatch => {
            let bucket = r.bytes("KvWriteBatch.bucket", MAX_NAME_BYTES)?;
            let count = r.count("KvWriteBatch.operations", MAX_LIST_ENTRIES, KV_OPERATION_MIN_BYTES)?;
            let mut operations = Vec::with_capacity(count);
            for _ in 0..count {
                operations.push(match r.u8("KvWriteBatch.operations")? {
                    1 => KvOperation::Put {
                        key: r.bytes("KvWriteBatch.Put.key", MAX_PATH_BYTES)?,
                        value: r.payload("KvWriteBatch.Put.value")?,
                    },
                    2 => KvOperation::Delete { key: r.bytes("KvWriteBatch.Delete.key", MAX_PATH_BYTES)? },
                    tag => return Err(DecodeError::UnknownTag { field: "KvWriteBatch.operations", tag }),
                });
            }
            let durability = r.durability("KvWriteBatch.durability")?;
            Request::KvWriteBatch { bucket, operations, durability }
        }
        Opcode::KvWriterOpen => Request::KvWriterOpen {
            bucket: r.bytes("KvWriterOpen.bucket", MAX_NAME_BYTES)?,
            key: r.bytes("KvWriterOpen.key", MAX_PATH_BYTES)?,
            durability: r.durability("KvWriterOpen.durability")?,
        },
        Opcode::KvWriterFinish => Request::KvWriterFinish { handle: r.u64("KvWriterFinish.handle")? },
        Opcode::KvReaderOpen => Request::KvReaderOpen {
            bucket: r.bytes("KvReaderOpen.bucket", MAX_NAME_BYTES)?,
            key: r.bytes("KvReaderOpen.key", MAX_PATH_BYTES)?,
        },
        Opcode::CreateBucket => Request::CreateBucket { bucket: r.bytes("CreateBucket.bucket", MAX_NAME_BYTES)? },
        Opcode::DeleteBucket => Request::DeleteBucket { bucket: r.bytes("DeleteBucket.bucket", MAX_NAME_BYTES)? },
        Opcode::ListBuckets => Request::ListBuckets,
        Opcode::HeapOpen => Request::HeapOpen { path: r.bytes("HeapOpen.path", MAX_PATH_BYTES)? },
        Opcode::Heap => Request::Heap { heap: r.u64("Heap.heap")?, operation: super::heap::decode_operation(r)? },
        Opcode::HeapClose => Request::HeapClose { heap: r.u64("HeapClose.heap")?, sync: r.bool("HeapClose.sync")? },
        Opcode::Stats => Request::Stats,
        Opcode::MetadataBatch => {
            let count = r.count("MetadataBatch.operations", MAX_BATCH_OPERATIONS, METADATA_OPERATION_MIN_BYTES)?;
            let mut operations = Vec::with_capacity(count);
            for _ in 0..count {
                let code = r.u16("MetadataBatch.operations")?;
                let opcode = match Opcode::from_code(code) {
                    Some(
                        opcode @ (Opcode::Mknod
                        | Opcode::Mkdir
                        | Opcode::Symlink
                        | Opcode::Link
                        | Opcode::Unlink
                        | Opcode::Rmdir
                        | Opcode::Rename),
                    ) => opcode,
                    // Not a metadata operation: in particular never a
                    // batch, so decoding never nests.
                    _ => {
                        return Err(DecodeError::OutOfRange {
                            field: "MetadataBatch.operations",
                            reason: "only mknod, mkdir, symlink, link, unlink, rmdir and rename may be batched",
                        })
                    }
                };
                operations.push(decode(r, opcode)?);
            }
            let durability = r.durability("MetadataBatch.durability")?;
            Request::MetadataBatch { operations, durability }
        }
    })
}

fn decode_set_attributes(r: &mut Reader<'_>) -> Result<SetAttributes, DecodeError> {
    let mut u32_field = |field| -> Result<Option<u32>, DecodeError> {
        if r.option(field)? {
            Ok(Some(r.u32(field)?))
        } else {
            Ok(None)
        }
    };
    let mode = u32_field("SetAttributes.mode")?;
    let uid = u32_field("SetAttributes.uid")?;
    let gid = u32_field("SetAttributes.gid")?;
    let size = if r.option("SetAttributes.size")? { Some(r.u64("SetAttributes.size")?) } else { None };
    let atime = if r.option("SetAttributes.atime")? { Some(r.time_change("SetAttributes.atime")?) } else { None };
    let mtime = if r.option("SetAttributes.mtime")? { Some(r.time_change("SetAttributes.mtime")?) } else { None };
    Ok(SetAttributes { mode, uid, gid, size, atime, mtime })
}
