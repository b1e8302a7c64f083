//! Directory handles and extended attributes.

use larder_protocol::codec::{directory_entry_bytes, LISTING_BASE_BYTES};
use larder_protocol::message::{Response, XattrFlags};

use super::{Call, Outcome};
use crate::convert;
use crate::session::{Entry, HandleKind};

pub(super) fn open(call: &Call<'_>, ino: u64) -> Outcome {
    // The slot first: a client at its limit opens nothing.
    super::names::known(call, &[ino])?;
    let slot = call.session.reserve()?;
    let fs_handle = call.fs.opendir(call.cred, ino)?;
    Ok(Response::Handle(slot.fill(Entry::Directory { fs_handle, ino })))
}

pub(super) fn read(call: &Call<'_>, handle: u64, offset: u64, max_entries: u32) -> Outcome {
    let fs_handle = call.session.directory(handle)?;
    let entries = call.fs.readdir(fs_handle, offset, call.entries(max_entries))?;
    // As many as fit one ring record (at least one: a name longer than a
    // record is refused as too large when the answer is sent).
    let budget = call.listing_bytes();
    let mut used = LISTING_BASE_BYTES;
    let mut page = Vec::with_capacity(entries.len());
    for entry in entries {
        let entry = convert::directory_entry(entry);
        used += directory_entry_bytes(&entry);
        if used > budget && !page.is_empty() {
            break;
        }
        page.push(entry);
    }
    Ok(Response::Entries(page))
}

pub(super) fn release(call: &Call<'_>, handle: u64) -> Outcome {
    let entry = call.session.take(handle, HandleKind::Directory)?;
    call.session.release(entry)?;
    Ok(Response::Done)
}

pub(super) fn fsync(call: &Call<'_>, handle: u64) -> Outcome {
    call.fs.fsyncdir(call.session.directory(handle)?)?;
    Ok(Response::Done)
}

pub(super) fn getxattr(call: &Call<'_>, ino: u64, name: &[u8]) -> Outcome {
    super::names::known(call, &[ino])?;
    let value = call.fs.getxattr(call.cred, ino, name)?;
    call.count_read(value.len());
    Ok(Response::Data(value))
}

pub(super) fn setxattr(call: &Call<'_>, ino: u64, name: &[u8], value: &[u8], flags: XattrFlags) -> Outcome {
    super::names::known(call, &[ino])?;
    call.fs.setxattr(call.cred, ino, name, value, convert::xattr_flags(flags))?;
    call.count_written(value.len());
    Ok(Response::Done)
}

pub(super) fn listxattr(call: &Call<'_>, ino: u64) -> Outcome {
    super::names::known(call, &[ino])?;
    Ok(Response::Names(call.fs.listxattr(call.cred, ino)?))
}

pub(super) fn removexattr(call: &Call<'_>, ino: u64, name: &[u8]) -> Outcome {
    super::names::known(call, &[ino])?;
    call.fs.removexattr(call.cred, ino, name)?;
    Ok(Response::Done)
}
