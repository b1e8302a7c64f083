//! Names and attributes: lookup, stat, setattr, path resolution, creating
//! and removing names, rename, access, statfs and sync, each the fs
//! layer's call with the session's credentials.

use larder_fs::Attr;
use larder_protocol::message::{RenameFlags, Response, SetAttributes};

use super::{Call, Outcome, Refusal};
use crate::convert;

/// The attributes of an object the session reached by this request, which
/// it may name by number from now on.
fn reached(call: &Call<'_>, attr: &Attr) -> Outcome {
    call.session.learn(attr.ino)?;
    Ok(Response::Attributes(convert::attributes(attr)))
}

/// The attributes of an object this request made: it is reached, unless
/// the session knows `max_known_objects` already (the object exists now;
/// the client finds it again by a lookup once it knows fewer).
fn made(call: &Call<'_>, attr: &Attr) -> Outcome {
    let _ = call.session.learn(attr.ino);
    Ok(Response::Attributes(convert::attributes(attr)))
}

/// ENOENT unless the session has reached every one of `inos`.
pub(super) fn known(call: &Call<'_>, inos: &[u64]) -> Result<(), Refusal> {
    for &ino in inos {
        call.session.check_known(ino)?;
    }
    Ok(())
}

pub(super) fn lookup(call: &Call<'_>, parent: u64, name: &[u8]) -> Outcome {
    known(call, &[parent])?;
    reached(call, &call.fs.lookup(call.cred, parent, name)?)
}

pub(super) fn getattr(call: &Call<'_>, ino: u64) -> Outcome {
    known(call, &[ino])?;
    Ok(Response::Attributes(convert::attributes(&call.fs.getattr(ino)?)))
}

pub(super) fn setattr(call: &Call<'_>, ino: u64, set: &SetAttributes, handle: Option<u64>) -> Outcome {
    known(call, &[ino])?;
    // A truncate through a handle goes through the fs layer's handle
    // behind the session's.
    let fs_handle = handle.map(|h| call.session.file(h).map(|(fs_handle, _)| fs_handle)).transpose()?;
    let attr = call.fs.setattr(call.cred, ino, &convert::set_attr(set), fs_handle)?;
    Ok(Response::Attributes(convert::attributes(&attr)))
}

pub(super) fn resolve(call: &Call<'_>, path: &[u8], follow: bool) -> Outcome {
    let resolved = call.session.resolve(call.server.path_changes(), path, follow)?;
    match &resolved.attr {
        Some(attr) => call.session.learn_all(&[resolved.parent, attr.ino])?,
        None => call.session.learn(resolved.parent)?,
    }
    let attributes = resolved.attr.as_ref().map(convert::attributes);
    Ok(Response::Resolved { parent: resolved.parent, name: resolved.name, attributes })
}

pub(super) fn mknod(call: &Call<'_>, parent: u64, name: &[u8], mode: u32, rdev: u64) -> Outcome {
    known(call, &[parent])?;
    made(call, &call.fs.mknod(call.cred, parent, name, mode, rdev)?)
}

pub(super) fn mkdir(call: &Call<'_>, parent: u64, name: &[u8], mode: u32) -> Outcome {
    known(call, &[parent])?;
    made(call, &call.fs.mkdir(call.cred, parent, name, mode)?)
}

pub(super) fn symlink(call: &Call<'_>, parent: u64, name: &[u8], target: &[u8]) -> Outcome {
    known(call, &[parent])?;
    made(call, &call.fs.symlink(call.cred, parent, name, target)?)
}

pub(super) fn readlink(call: &Call<'_>, ino: u64) -> Outcome {
    known(call, &[ino])?;
    Ok(Response::Data(call.fs.readlink(ino)?))
}

pub(super) fn link(call: &Call<'_>, ino: u64, parent: u64, name: &[u8]) -> Outcome {
    known(call, &[ino, parent])?;
    made(call, &call.fs.link(call.cred, ino, parent, name)?)
}

pub(super) fn unlink(call: &Call<'_>, parent: u64, name: &[u8]) -> Outcome {
    known(call, &[parent])?;
    call.fs.unlink(call.cred, parent, name)?;
    Ok(Response::Done)
}

pub(super) fn rmdir(call: &Call<'_>, parent: u64, name: &[u8]) -> Outcome {
    known(call, &[parent])?;
    call.fs.rmdir(call.cred, parent, name)?;
    Ok(Response::Done)
}

pub(super) fn rename(call: &Call<'_>, from: (u64, &[u8]), to: (u64, &[u8]), flags: RenameFlags) -> Outcome {
    known(call, &[from.0, to.0])?;
    call.fs.rename(call.cred, from.0, from.1, to.0, to.1, convert::rename_flags(flags))?;
    Ok(Response::Done)
}

pub(super) fn access(call: &Call<'_>, ino: u64, mask: u32) -> Outcome {
    known(call, &[ino])?;
    call.fs.access(call.cred, ino, mask)?;
    Ok(Response::Done)
}

pub(super) fn statfs(call: &Call<'_>) -> Outcome {
    Ok(Response::FsStats(convert::fs_stats(&call.fs.statfs()?)))
}

pub(super) fn sync(call: &Call<'_>) -> Outcome {
    call.fs.sync()?;
    Ok(Response::Done)
}
