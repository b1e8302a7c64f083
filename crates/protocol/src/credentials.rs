//! Who is at the other end of a Unix socket, from the kernel: SO_PEERCRED
//! (pid, uid, gid at connect) and SO_PEERGROUPS (supplementary groups).
//! The server checks every request against these, never against anything
//! the client says.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::UnixStream;

/// The peer's credentials as the kernel recorded them at connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCredentials {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups, as the kernel lists them.
    pub groups: Vec<u32>,
}

/// The credentials of the process at the other end of `stream`.
pub fn peer_credentials(stream: &UnixStream) -> io::Result<PeerCredentials> {
    let credentials = rustix::net::sockopt::socket_peercred(stream.as_fd())?;
    Ok(PeerCredentials {
        pid: credentials.pid.as_raw_nonzero().get(),
        uid: credentials.uid.as_raw(),
        gid: credentials.gid.as_raw(),
        groups: peer_groups(stream)?,
    })
}

/// SO_PEERGROUPS: the kernel answers ERANGE with the length it needs, so
/// the buffer grows to that and the call is repeated (the peer's groups
/// are fixed at connect, so this ends after one retry; the bound guards
/// against a kernel that says otherwise). It starts empty: one extra call
/// per connect, and the growing path runs on every connection with
/// groups, not only on rare ones with many.
fn peer_groups(stream: &UnixStream) -> io::Result<Vec<u32>> {
    const GROUP_BYTES: usize = size_of::<libc::gid_t>();
    let mut groups: Vec<libc::gid_t> = Vec::new();
    for _ in 0..4 {
        let mut length = libc::socklen_t::try_from(groups.len() * GROUP_BYTES)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "SO_PEERGROUPS: too many groups"))?;
        // SAFETY: rustix has no wrapper for SO_PEERGROUPS. The buffer is
        // a live, writable Vec of `length` bytes (none while it is empty:
        // its pointer is then dangling but never written), the kernel writes at
        // most `length` bytes into it and stores the length it used (or
        // needs) in `length`, a live socklen_t; the fd is borrowed from
        // `stream` and open for the whole call.
        #[allow(unsafe_code)]
        let result = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut length,
            )
        };
        let used = length as usize / GROUP_BYTES;
        if result == 0 {
            groups.truncate(used.min(groups.len()));
            return Ok(groups);
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::ERANGE) || used <= groups.len() {
            return Err(error);
        }
        groups.resize(used, 0);
    }
    Err(io::Error::new(io::ErrorKind::InvalidData, "SO_PEERGROUPS: the group list kept growing"))
}
