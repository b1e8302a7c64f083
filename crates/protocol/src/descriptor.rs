//! Descriptor frames: how the server hands a client a heap object's file
//! (`docs/format.md`, "Descriptor frame"). After the handshake the socket
//! carries nothing else from the server, so a frame is all a client reads
//! from it. A frame is 16 bytes, `[u64 tag][u32 crc32c of the tag's 8
//! bytes][u32 reserved, 0]`, little-endian, with exactly one descriptor
//! attached by SCM_RIGHTS; the tag is the one the client put in its attach
//! request, so a client with attaches of several threads in flight gives
//! each its own descriptor.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

use rustix::io::Errno;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};

/// Bytes of a descriptor frame.
pub const FRAME_BYTES: usize = 16;

/// Why a descriptor frame was not sent or taken.
#[derive(Debug, thiserror::Error)]
pub enum DescriptorError {
    /// The peer's socket buffer is full (the server never waits for a
    /// client): try again once it reads.
    #[error("the socket is full")]
    Full,
    /// The peer closed the socket.
    #[error("the socket is closed")]
    Closed,
    /// Nothing arrived in time.
    #[error("no descriptor frame arrived in time")]
    TimedOut,
    /// Bytes or descriptors that are not one frame with one descriptor.
    #[error("a bad descriptor frame: {0}")]
    Bad(&'static str),
    /// The system call failed.
    #[error("descriptor frame: {0}")]
    Io(#[from] std::io::Error),
}

/// Encodes the frame carrying `tag`.
pub fn encode_frame(tag: u64) -> [u8; FRAME_BYTES] {
    let mut frame = [0u8; FRAME_BYTES];
    frame[..8].copy_from_slice(&tag.to_le_bytes());
    frame[8..12].copy_from_slice(&crc32c::crc32c(&tag.to_le_bytes()).to_le_bytes());
    frame
}

/// Decodes a frame's tag; refuses a wrong length, checksum or reserved
/// word.
pub fn decode_frame(bytes: &[u8]) -> Result<u64, DescriptorError> {
    if bytes.len() != FRAME_BYTES {
        return Err(DescriptorError::Bad("not 16 bytes"));
    }
    let mut tag = [0u8; 8];
    tag.copy_from_slice(&bytes[..8]);
    let mut crc = [0u8; 4];
    crc.copy_from_slice(&bytes[8..12]);
    if u32::from_le_bytes(crc) != crc32c::crc32c(&tag) {
        return Err(DescriptorError::Bad("checksum mismatch"));
    }
    if bytes[12..] != [0u8; 4] {
        return Err(DescriptorError::Bad("reserved bytes are not zero"));
    }
    Ok(u64::from_le_bytes(tag))
}

/// Server: sends `descriptor` in a frame carrying `tag`, without waiting:
/// [`DescriptorError::Full`] when the client's socket has no room.
pub fn send_descriptor(stream: &UnixStream, tag: u64, descriptor: BorrowedFd<'_>) -> Result<(), DescriptorError> {
    let frame = encode_frame(tag);
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let descriptors = [descriptor];
    if !control.push(SendAncillaryMessage::ScmRights(&descriptors)) {
        return Err(DescriptorError::Bad("no room for the descriptor"));
    }
    loop {
        match rustix::net::sendmsg(
            stream.as_fd(),
            &[IoSlice::new(&frame)],
            &mut control,
            SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
        ) {
            Ok(n) if n == FRAME_BYTES => return Ok(()),
            // A stream socket takes a small message whole or not at all
            // when it has room for it; a part would leave the peer a
            // broken frame, so the connection is no longer usable.
            Ok(_) => return Err(DescriptorError::Bad("the frame was sent in part")),
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => return Err(DescriptorError::Full),
            Err(Errno::PIPE) | Err(Errno::CONNRESET) => return Err(DescriptorError::Closed),
            Err(e) => return Err(std::io::Error::from(e).into()),
        }
    }
}

/// Client: takes the next frame and its descriptor from the socket,
/// waiting at most `timeout`. Extra descriptors are closed and refused.
pub fn receive_descriptor(
    stream: &UnixStream,
    timeout: std::time::Duration,
) -> Result<(u64, OwnedFd), DescriptorError> {
    let deadline = std::time::Instant::now() + timeout;
    let mut frame = [0u8; FRAME_BYTES];
    let mut have = 0;
    let mut descriptors: Vec<OwnedFd> = Vec::new();
    while have < FRAME_BYTES {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(DescriptorError::TimedOut);
        }
        let ready = wait_readable(stream, left)?;
        if !ready {
            continue;
        }
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let received = rustix::net::recvmsg(
            stream.as_fd(),
            &mut [IoSliceMut::new(&mut frame[have..])],
            &mut control,
            RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
        );
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(fds) = message {
                descriptors.extend(fds);
            }
        }
        match received {
            Ok(message) if message.bytes == 0 => return Err(DescriptorError::Closed),
            Ok(message) => have += message.bytes,
            Err(Errno::INTR) | Err(Errno::AGAIN) => {}
            Err(Errno::CONNRESET) => return Err(DescriptorError::Closed),
            Err(e) => return Err(std::io::Error::from(e).into()),
        }
    }
    let tag = decode_frame(&frame)?;
    if descriptors.len() != 1 {
        return Err(DescriptorError::Bad("a frame must carry exactly one descriptor"));
    }
    descriptors.pop().map(|fd| (tag, fd)).ok_or(DescriptorError::Bad("no descriptor"))
}

/// Waits until `stream` is readable (or hung up), at most `timeout`.
fn wait_readable(stream: &UnixStream, timeout: std::time::Duration) -> Result<bool, DescriptorError> {
    let mut fds = [rustix::event::PollFd::new(stream, rustix::event::PollFlags::IN)];
    let timeout = rustix::event::Timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    match rustix::event::poll(&mut fds, Some(&timeout)) {
        Ok(n) => Ok(n > 0),
        Err(Errno::INTR) => Ok(false),
        Err(e) => Err(std::io::Error::from(e).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_damage_is_refused() {
        for tag in [0u64, 1, u64::MAX, 0x0123_4567_89ab_cdef] {
            let frame = encode_frame(tag);
            assert_eq!(decode_frame(&frame).ok(), Some(tag));
            for bit in 0..FRAME_BYTES * 8 {
                let mut bad = frame;
                bad[bit / 8] ^= 1 << (bit % 8);
                assert!(decode_frame(&bad).is_err(), "bit {bit} flipped was accepted");
            }
            assert!(decode_frame(&frame[..FRAME_BYTES - 1]).is_err());
        }
    }

    #[test]
    fn a_descriptor_travels_with_its_tag() {
        let (server, client) = UnixStream::pair().expect("a socket pair");
        let file = tempfile::tempfile().expect("a temporary file");
        send_descriptor(&server, 7, file.as_fd()).expect("sent");
        send_descriptor(&server, 9, file.as_fd()).expect("sent");
        let (tag, _fd) = receive_descriptor(&client, std::time::Duration::from_secs(1)).expect("received");
        assert_eq!(tag, 7);
        let (tag, _fd) = receive_descriptor(&client, std::time::Duration::from_secs(1)).expect("received");
        assert_eq!(tag, 9);
        drop(server);
        assert!(matches!(receive_descriptor(&client, std::time::Duration::from_secs(1)), Err(DescriptorError::Closed)));
    }
}
