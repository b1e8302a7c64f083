//! `OpenPath`: an existing file opened by path in one request, with its
//! attributes, optionally its first bytes and a lease on it, so that a
//! client reads a small file it has not resolved before in one round trip.
//!
//! Each step is the call its own request would make, with the same
//! checks: the path resolved by the fs layer with the session's
//! credentials (search permission on every directory, symbolic links
//! followed as `Resolve` follows them), the file opened as `Open` opens it
//! (read or write permission, ELOOP for a symbolic link), the lease granted
//! as `Lease` grants it, the bytes read as `Read` reads them.

use larder_fs::{FsError, Kind};
use larder_protocol::codec::check_response;
use larder_protocol::message::{LeaseGrant, LeaseTarget, Response};

use super::{Call, Outcome};
use crate::convert;
use crate::session::{Entry, HandleKind};

/// Flags `OpenPath` refuses: it opens existing files and changes none.
const REFUSED_FLAGS: i32 = libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC;

pub(super) fn open_path(call: &Call<'_>, path: &[u8], flags: i32, read: u32, lease: bool) -> Outcome {
    if flags & REFUSED_FLAGS != 0 {
        return Err(FsError::posix(
            libc::EINVAL,
            "OpenPath opens an existing file: O_CREAT, O_EXCL and O_TRUNC go through Create or Open",
        )
        .into());
    }
    // As open(2): O_NOFOLLOW leaves a final symbolic link unfollowed, and
    // opening the link itself is then ELOOP (the fs layer's open says so).
    let follow = flags & libc::O_NOFOLLOW == 0;
    // Taken before the resolution: while nothing is committed after it,
    // the open checks the attributes the resolution found.
    let stamp = call.fs.meta_stamp();
    let resolved = call.session.resolve(call.server.path_changes(), path, follow)?;
    let Some(found) = resolved.attr else {
        return Err(FsError::posix(
            libc::ENOENT,
            format!("{}: no such file or directory", String::from_utf8_lossy(path)),
        )
        .into());
    };
    call.session.learn_all(&[resolved.parent, found.ino])?;
    // The slot first: a client at its limit opens nothing.
    let slot = call.session.reserve()?;
    let fs_handle = call.fs.open_file_found(call.cred, &found, stamp, flags)?;
    let handle = slot.fill(Entry::File { fs_handle, ino: found.ino });
    match answer(call, resolved.parent, resolved.name, found, handle, fs_handle, flags, read, lease) {
        Ok(response) => Ok(response),
        Err(refusal) => {
            // The client never learns of a handle whose answer failed.
            if let Ok(entry) = call.session.take(handle, HandleKind::File) {
                let _ = call.session.release(entry);
            }
            Err(refusal)
        }
    }
}

/// The answer to an open that succeeded: the lease first, so that the
/// attributes and bytes read after it are covered by it (a change after
/// the grant revokes it), then the attributes and the bytes. Without a
/// lease the attributes are those the resolution found (`found`), as
/// `Resolve` and then `Open` would have answered them.
#[allow(clippy::too_many_arguments)]
fn answer(
    call: &Call<'_>,
    parent: u64,
    name: Vec<u8>,
    found: larder_fs::Attr,
    handle: u64,
    fs_handle: u64,
    flags: i32,
    read: u32,
    lease: bool,
) -> Outcome {
    let ino = found.ino;
    let grant = if lease { grant(call, ino) } else { None };
    let attr = if lease { call.fs.getattr(ino)? } else { found };
    let attributes = convert::attributes(&attr);
    let readable = flags & libc::O_ACCMODE != libc::O_WRONLY;
    let mut response = Response::PathOpened {
        parent,
        name,
        attributes,
        handle,
        data: (read > 0 && readable && attr.kind == Kind::File).then(Vec::new),
        lease: grant,
    };
    let wants_bytes = matches!(&response, Response::PathOpened { data: Some(_), .. });
    if wants_bytes {
        // No more than the file holds: the read's buffer is zeroed first,
        // and a client asks for whole pages (64 KiB) whatever the size.
        let wanted = call.io_length(u64::from(read).min(attr.size));
        // What fits the completion record beside the other fields: the
        // answer with no bytes yet, measured.
        let room = match check_response(&response) {
            Ok(base) => call.listing_bytes().saturating_sub(base),
            Err(_) => 0,
        };
        let bytes = call.fs.read(fs_handle, 0, wanted.min(room))?;
        call.count_read(bytes.len());
        if let Response::PathOpened { data, .. } = &mut response {
            *data = Some(bytes);
        }
    }
    Ok(response)
}

/// A lease on file `ino` for the session, if it holds leases and one can
/// be granted now: none while another client's change revokes leases on
/// it, at `max_leases`, or for an object left without a name (as `Lease`
/// refuses those; the client goes on uncached).
pub(super) fn grant(call: &Call<'_>, ino: u64) -> Option<LeaseGrant> {
    let holder = call.session.lease_holder()?;
    if call.fs.getattr(ino).ok()?.nlink == 0 {
        return None;
    }
    call.server.leases().grant(holder, LeaseTarget::Object(ino)).ok()
}
