//! Open files: open, create, read, write, fsync, fallocate, release. Reads
//! and writes also serve the KV API's reader and writer handles.

use std::io::Write as _;

use larder_fs::FsError;
use larder_kv::KvError;
use larder_protocol::message::{BufferSlice, Payload, Response};

use super::{Call, Outcome, Refusal};
use crate::convert;
use crate::session::{Entry, HandleKind, IoTarget};

pub(super) fn open(call: &Call<'_>, ino: u64, flags: i32) -> Outcome {
    // The slot first: a client at its limit opens (and truncates) nothing.
    super::names::known(call, &[ino])?;
    let slot = call.session.reserve()?;
    let fs_handle = call.fs.open_file(call.cred, ino, flags)?;
    Ok(Response::Handle(slot.fill(Entry::File { fs_handle, ino })))
}

/// Creates (or opens, without O_EXCL) `name` in `parent`; with `lease`,
/// also grants a lease on the file as `Lease` would (a refusal is not an
/// error: the answer then carries none), and the attributes are read
/// after the grant, so that a change after them revokes it.
pub(super) fn create(call: &Call<'_>, parent: u64, name: &[u8], mode: u32, flags: i32, lease: bool) -> Outcome {
    super::names::known(call, &[parent])?;
    let slot = call.session.reserve()?;
    let (attr, fs_handle) = call.fs.create_file(call.cred, parent, name, mode, flags)?;
    let handle = slot.fill(Entry::File { fs_handle, ino: attr.ino });
    // Open already: a full known set does not undo the create.
    let _ = call.session.learn(attr.ino);
    let grant = if lease { super::open_path::grant(call, attr.ino) } else { None };
    let attr = match grant {
        // The file is open: its attributes can be read (a failure answers
        // the create's without the lease, which the client then lacks).
        Some(_) => match call.fs.getattr(attr.ino) {
            Ok(after) => after,
            Err(_) => return Ok(Response::Created { attributes: convert::attributes(&attr), handle, lease: None }),
        },
        None => attr,
    };
    Ok(Response::Created { attributes: convert::attributes(&attr), handle, lease: grant })
}

/// Up to `length` bytes at `offset` through a file or KV reader handle.
fn read_bytes(call: &Call<'_>, handle: u64, offset: u64, length: usize) -> Result<Vec<u8>, Refusal> {
    let bytes = match call.session.io_target(handle) {
        Some(IoTarget::File { fs_handle }) => {
            let mut buffer = crate::read_buffer::take(length);
            let n = call.fs.read_into(fs_handle, offset, &mut buffer)?;
            buffer.truncate(n);
            buffer
        }
        Some(IoTarget::Other { kind: HandleKind::KvReader, object }) => {
            let mut buf = vec![0u8; length];
            let n = call.fs.store().read(object, offset, &mut buf).map_err(KvError::from)?;
            buf.truncate(n);
            buf
        }
        Some(IoTarget::Other { kind, .. }) => return Err(not_for(handle, kind, "reading").into()),
        None => return Err(not_open(handle).into()),
    };
    call.count_read(bytes.len());
    Ok(bytes)
}

pub(super) fn read(call: &Call<'_>, handle: u64, offset: u64, length: u32) -> Outcome {
    Ok(Response::Data(read_bytes(call, handle, offset, call.io_length(u64::from(length)))?))
}

pub(super) fn read_buffer(call: &Call<'_>, handle: u64, offset: u64, into: BufferSlice) -> Outcome {
    call.memory.check(into)?;
    let bytes = read_bytes(call, handle, offset, call.io_length(u64::from(into.length)))?;
    call.memory.copy_in(into, &bytes)?;
    Ok(Response::Length(bytes.len() as u64))
}

pub(super) fn write(call: &Call<'_>, handle: u64, offset: u64, data: Payload) -> Outcome {
    // Copied out of the client's memory before anything looks at it.
    let data = call.payload(data)?;
    let written = match call.session.io_target(handle) {
        Some(IoTarget::File { fs_handle }) => call.fs.write(call.cred, fs_handle, offset, &data)?,
        Some(IoTarget::Other { kind: HandleKind::KvWriter, .. }) => write_value(call, handle, offset, &data)?,
        Some(IoTarget::Other { kind, .. }) => return Err(not_for(handle, kind, "writing").into()),
        None => return Err(not_open(handle).into()),
    };
    call.count_written(written);
    Ok(Response::Length(written as u64))
}

/// Appends `data` to a KV writer's value; `offset` must be where the
/// value ends so far (a writer takes its bytes in order).
fn write_value(call: &Call<'_>, handle: u64, offset: u64, data: &[u8]) -> Result<usize, Refusal> {
    let shared = call.session.with_entry(handle, HandleKind::KvWriter, |e| match e {
        Entry::Writer { writer, .. } => Some(writer.clone()),
        _ => None,
    })?;
    let shared = shared.ok_or_else(|| not_open(handle))?;
    let mut guard = shared.lock();
    let writer = guard.as_mut().ok_or_else(|| not_open(handle))?;
    if offset != writer.position() {
        return Err(FsError::posix(
            libc::EINVAL,
            format!("a KV writer takes bytes in order: offset {offset}, but the value has {}", writer.position()),
        )
        .into());
    }
    writer.write_all(data).map_err(|e| match e.into_inner().map(|inner| inner.downcast::<KvError>()) {
        Some(Ok(kv)) => Refusal::Kv(*kv),
        Some(Err(other)) => Refusal::Fs(FsError::posix(libc::EIO, other.to_string())),
        None => Refusal::Fs(FsError::posix(libc::EIO, "writing a KV value failed")),
    })?;
    Ok(data.len())
}

pub(super) fn fsync(call: &Call<'_>, handle: u64) -> Outcome {
    let (fs_handle, _) = call.session.file(handle)?;
    call.fs.fsync(fs_handle)?;
    Ok(Response::Done)
}

pub(super) fn fallocate(call: &Call<'_>, handle: u64, offset: u64, length: u64, mode: i32) -> Outcome {
    let (fs_handle, _) = call.session.file(handle)?;
    call.fs.fallocate(call.cred, fs_handle, offset, length, mode)?;
    Ok(Response::Done)
}

/// Closes a file, a KV reader, or a KV writer (which stores nothing and
/// frees its object).
pub(super) fn release(call: &Call<'_>, handle: u64) -> Outcome {
    let entry = match call.session.take_unless(handle, HandleKind::Directory) {
        Ok(entry) => entry,
        Err(Some(kind)) => return Err(not_for(handle, kind, "Release").into()),
        Err(None) => return Err(not_open(handle).into()),
    };
    call.session.release(entry)?;
    Ok(Response::Done)
}

/// EBADF: `handle` is not open in this session.
pub(super) fn not_open(handle: u64) -> FsError {
    FsError::posix(libc::EBADF, format!("handle {handle} is not open in this session"))
}

/// EBADF: a handle of `kind` does not serve `what`.
fn not_for(handle: u64, kind: HandleKind, what: &str) -> FsError {
    FsError::posix(libc::EBADF, format!("handle {handle} ({kind:?}) is not open for {what}"))
}
