//! The socket handshake (`docs/format.md`, "Server protocol"): the client
//! sends a hello; the server answers with a welcome and two descriptors
//! (SCM_RIGHTS: the client's region, the doorbell) or with a refusal.
//!
//! Every message is one frame: magic, the sender's protocol version, kind,
//! body length, crc32c, body. The frame's header never changes between
//! versions, so a server can always read a client's version and refuse it
//! in words the client understands.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use rustix::io::Errno;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};
use thiserror::Error;

pub use crate::credentials::{peer_credentials, PeerCredentials};
use crate::doorbell::Doorbell;
use crate::error::TransportError;
use crate::futex::Deadline;
use crate::layout::{Layout, ENCODED_LAYOUT_BYTES};
use crate::region::Region;
use crate::PROTOCOL_VERSION;

/// First bytes of every handshake frame.
pub const FRAME_MAGIC: [u8; 4] = *b"LRDH";
/// Bytes of a frame's header.
pub const FRAME_HEADER_BYTES: usize = 20;
/// Largest body a frame may carry.
pub const MAX_BODY_BYTES: u32 = 2048;
/// Largest refusal message, in bytes of UTF-8.
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// Bytes of a welcome's body.
pub const WELCOME_BODY_BYTES: usize = 56;

const KIND_HELLO: u32 = 1;
const KIND_WELCOME: u32 = 2;
const KIND_REFUSAL: u32 = 3;

/// The client's first message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// The client's protocol version.
    pub version: u32,
}

impl Hello {
    /// Whether this server speaks the client's version.
    pub fn is_supported(&self) -> bool {
        self.version == PROTOCOL_VERSION
    }
}

/// The server's acceptance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Welcome {
    /// The server's epoch: a restarted server has a new one, which voids
    /// every lease of the old.
    pub epoch: u64,
    /// This connection's id, unique within the epoch.
    pub client_id: u64,
    /// The layout of the region passed with the welcome.
    pub layout: Layout,
    /// The worker that owns the namespace; send namespace requests there.
    pub primary_worker: u32,
    /// Most handles this client may hold open.
    pub max_open_handles: u32,
    /// Most requests this client may have in flight.
    pub max_in_flight: u32,
}

/// The server's refusal: an errno and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub errno: i32,
    pub message: String,
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Hello(Hello),
    Welcome(Welcome),
    Refusal(Refusal),
}

/// What is wrong with a frame's bytes.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error("frame of {0} bytes is shorter than its header or than the length it states")]
    Truncated(usize),
    #[error("frame magic {0:02x?} is not LRDH")]
    Magic([u8; 4]),
    #[error("frame body of {length} bytes is longer than {max}")]
    BodyTooLong { length: u32, max: u32 },
    #[error("frame has {0} bytes after its body")]
    TrailingBytes(usize),
    #[error("frame crc32c {actual:#010x}, header says {expected:#010x}")]
    Checksum { expected: u32, actual: u32 },
    #[error("frame kind {0} is not hello (1), welcome (2) or refusal (3)")]
    Kind(u32),
    #[error("welcome of protocol version {0}, this side speaks {PROTOCOL_VERSION}")]
    Version(u32),
    #[error("{kind} body of {length} bytes is malformed: {why}")]
    Body { kind: &'static str, length: usize, why: &'static str },
}

/// Why a handshake failed.
#[derive(Debug, Error)]
pub enum HandshakeError {
    #[error("handshake {what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("handshake timed out waiting for the peer")]
    TimedOut,
    #[error("the peer closed the connection during the handshake")]
    Closed,
    #[error("handshake frame: {0}")]
    Frame(#[from] FrameError),
    #[error("expected a {expected}, got a {got}")]
    Unexpected { expected: &'static str, got: &'static str },
    #[error("the server refused the connection: {message} (errno {errno})")]
    Refused { errno: i32, message: String },
    #[error("the welcome came with {0} descriptors, not 2 (region, doorbell)")]
    Descriptors(usize),
    #[error("refusal message of {0} bytes is longer than {MAX_MESSAGE_BYTES}")]
    MessageTooLong(usize),
    #[error(transparent)]
    Transport(#[from] TransportError),
}

fn io_error(what: &'static str, error: impl Into<io::Error>) -> HandshakeError {
    let error = error.into();
    match error.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => HandshakeError::TimedOut,
        _ => HandshakeError::Io { what, source: error },
    }
}

impl Frame {
    fn kind_name(&self) -> &'static str {
        match self {
            Frame::Hello(_) => "hello",
            Frame::Welcome(_) => "welcome",
            Frame::Refusal(_) => "refusal",
        }
    }

    /// The frame's bytes, stamped with this side's protocol version (a
    /// hello with its own). A refusal's message is cut to
    /// [`MAX_MESSAGE_BYTES`] at a character boundary.
    pub fn encode(&self) -> Vec<u8> {
        let (kind, body) = match self {
            Frame::Hello(_) => (KIND_HELLO, Vec::new()),
            Frame::Welcome(welcome) => (KIND_WELCOME, encode_welcome(welcome).to_vec()),
            Frame::Refusal(refusal) => {
                let message = truncate_utf8(&refusal.message, MAX_MESSAGE_BYTES);
                let mut body = Vec::with_capacity(8 + message.len());
                body.extend_from_slice(&refusal.errno.to_le_bytes());
                body.extend_from_slice(&(message.len() as u32).to_le_bytes());
                body.extend_from_slice(message.as_bytes());
                (KIND_REFUSAL, body)
            }
        };
        let version = match self {
            Frame::Hello(hello) => hello.version,
            _ => PROTOCOL_VERSION,
        };
        let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + body.len());
        out.extend_from_slice(&FRAME_MAGIC);
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&out), &body);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Decodes one whole frame (and nothing after it).
    pub fn decode(bytes: &[u8]) -> Result<Frame, FrameError> {
        let body_length = frame_length(bytes)? - FRAME_HEADER_BYTES;
        let total = FRAME_HEADER_BYTES + body_length;
        if bytes.len() > total {
            return Err(FrameError::TrailingBytes(bytes.len() - total));
        }
        let expected = le32(bytes, 16);
        let actual = crc32c::crc32c_append(crc32c::crc32c(&bytes[..16]), &bytes[FRAME_HEADER_BYTES..]);
        if expected != actual {
            return Err(FrameError::Checksum { expected, actual });
        }
        let version = le32(bytes, 4);
        let body = &bytes[FRAME_HEADER_BYTES..];
        match le32(bytes, 8) {
            KIND_HELLO => {
                // A newer client's hello may carry more; this version's is empty.
                if version == PROTOCOL_VERSION && !body.is_empty() {
                    return Err(FrameError::Body { kind: "hello", length: body.len(), why: "not empty" });
                }
                Ok(Frame::Hello(Hello { version }))
            }
            KIND_WELCOME if version != PROTOCOL_VERSION => Err(FrameError::Version(version)),
            KIND_WELCOME => decode_welcome(body).map(Frame::Welcome),
            KIND_REFUSAL => decode_refusal(body).map(Frame::Refusal),
            other => Err(FrameError::Kind(other)),
        }
    }
}

/// A frame's total length from its header: checks the magic and the
/// body's bound; `Truncated` if `bytes` holds less than the header or the
/// whole frame.
fn frame_length(bytes: &[u8]) -> Result<usize, FrameError> {
    if bytes.len() < FRAME_HEADER_BYTES {
        return Err(FrameError::Truncated(bytes.len()));
    }
    let mut magic = [0u8; 4];
    magic.copy_from_slice(&bytes[..4]);
    if magic != FRAME_MAGIC {
        return Err(FrameError::Magic(magic));
    }
    let length = le32(bytes, 12);
    if length > MAX_BODY_BYTES {
        return Err(FrameError::BodyTooLong { length, max: MAX_BODY_BYTES });
    }
    let total = FRAME_HEADER_BYTES + length as usize;
    if bytes.len() < total {
        return Err(FrameError::Truncated(bytes.len()));
    }
    Ok(total)
}

fn le32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn le64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

fn truncate_utf8(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn encode_welcome(welcome: &Welcome) -> [u8; WELCOME_BODY_BYTES] {
    let mut body = [0u8; WELCOME_BODY_BYTES];
    body[0..8].copy_from_slice(&welcome.epoch.to_le_bytes());
    body[8..16].copy_from_slice(&welcome.client_id.to_le_bytes());
    body[16..40].copy_from_slice(&welcome.layout.encode());
    body[40..44].copy_from_slice(&welcome.primary_worker.to_le_bytes());
    body[44..48].copy_from_slice(&welcome.max_open_handles.to_le_bytes());
    body[48..52].copy_from_slice(&welcome.max_in_flight.to_le_bytes());
    body
}

fn decode_welcome(body: &[u8]) -> Result<Welcome, FrameError> {
    let bad = |why| FrameError::Body { kind: "welcome", length: body.len(), why };
    if body.len() != WELCOME_BODY_BYTES {
        return Err(bad("not 56 bytes"));
    }
    let mut encoded = [0u8; ENCODED_LAYOUT_BYTES];
    encoded.copy_from_slice(&body[16..40]);
    let layout = Layout::decode(&encoded).ok_or_else(|| bad("layout's reserved bytes are not zero"))?;
    layout.validate().map_err(|_| bad("layout out of bounds"))?;
    if le32(body, 52) != 0 {
        return Err(bad("reserved bytes are not zero"));
    }
    let welcome = Welcome {
        epoch: le64(body, 0),
        client_id: le64(body, 8),
        layout,
        primary_worker: le32(body, 40),
        max_open_handles: le32(body, 44),
        max_in_flight: le32(body, 48),
    };
    if welcome.primary_worker >= layout.workers {
        return Err(bad("primary worker beyond the layout's workers"));
    }
    Ok(welcome)
}

fn decode_refusal(body: &[u8]) -> Result<Refusal, FrameError> {
    let bad = |why| FrameError::Body { kind: "refusal", length: body.len(), why };
    if body.len() < 8 {
        return Err(bad("shorter than errno and message length"));
    }
    let length = le32(body, 4) as usize;
    if length > MAX_MESSAGE_BYTES || body.len() != 8 + length {
        return Err(bad("message length does not match the body"));
    }
    let message = std::str::from_utf8(&body[8..]).map_err(|_| bad("message is not UTF-8"))?;
    Ok(Refusal { errno: le32(body, 0) as i32, message: message.to_owned() })
}

/// Sends all of `frame`, with `descriptors` attached to its first byte.
fn send_frame(
    stream: &UnixStream,
    frame: &[u8],
    descriptors: &[std::os::fd::BorrowedFd<'_>],
) -> Result<(), HandshakeError> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !descriptors.is_empty() && !control.push(SendAncillaryMessage::ScmRights(descriptors)) {
        return Err(HandshakeError::Descriptors(descriptors.len()));
    }
    let mut sent = 0;
    while sent < frame.len() {
        let result = if sent == 0 {
            rustix::net::sendmsg(stream.as_fd(), &[IoSlice::new(frame)], &mut control, SendFlags::NOSIGNAL)
        } else {
            rustix::net::send(stream.as_fd(), &frame[sent..], SendFlags::NOSIGNAL)
        };
        match result {
            Ok(0) => return Err(HandshakeError::Closed),
            Ok(n) => sent += n,
            Err(Errno::INTR) => {}
            Err(Errno::PIPE) | Err(Errno::CONNRESET) => return Err(HandshakeError::Closed),
            Err(e) => return Err(io_error("send", e)),
        }
    }
    Ok(())
}

/// Receives one frame, reading no byte past it, and every descriptor
/// that came with it.
fn receive_frame(stream: &UnixStream, timeout: Duration) -> Result<(Frame, Vec<OwnedFd>), HandshakeError> {
    let previous = stream.read_timeout().map_err(|e| io_error("read timeout", e))?;
    let result = receive_frame_bytes(stream, Deadline::after(timeout));
    stream.set_read_timeout(previous).map_err(|e| io_error("read timeout", e))?;
    let (bytes, descriptors) = result?;
    Ok((Frame::decode(&bytes)?, descriptors))
}

fn receive_frame_bytes(stream: &UnixStream, deadline: Deadline) -> Result<(Vec<u8>, Vec<OwnedFd>), HandshakeError> {
    let mut bytes = vec![0u8; FRAME_HEADER_BYTES];
    let mut have = 0;
    let mut descriptors = Vec::new();
    loop {
        if have == bytes.len() {
            match frame_length(&bytes) {
                // `bytes` is exactly the header's length, or was resized to
                // the frame's: whole.
                Ok(_) => return Ok((bytes, descriptors)),
                Err(FrameError::Truncated(_)) => {
                    let total = FRAME_HEADER_BYTES + le32(&bytes, 12) as usize;
                    bytes.resize(total, 0);
                }
                Err(e) => return Err(e.into()),
            }
        }
        let left = deadline.remaining().ok_or(HandshakeError::TimedOut)?;
        stream.set_read_timeout(Some(left)).map_err(|e| io_error("read timeout", e))?;
        // Room for more descriptors than the welcome's two: extra ones
        // are received (and closed on drop) instead of silently dropped.
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(8))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let received = rustix::net::recvmsg(
            stream.as_fd(),
            &mut [IoSliceMut::new(&mut bytes[have..])],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        );
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(fds) = message {
                descriptors.extend(fds);
            }
        }
        match received {
            Ok(message) if message.bytes == 0 => return Err(HandshakeError::Closed),
            Ok(message) => have += message.bytes,
            Err(Errno::INTR) => {}
            Err(Errno::CONNRESET) => return Err(HandshakeError::Closed),
            Err(e) => return Err(io_error("receive", e)),
        }
    }
}

/// Client: sends `version`'s hello. [`client_handshake`] sends this
/// side's version; tests send others.
pub fn send_hello(stream: &UnixStream, version: u32) -> Result<(), HandshakeError> {
    send_frame(stream, &Frame::Hello(Hello { version }).encode(), &[])
}

/// The client's end of a completed handshake.
#[derive(Debug)]
pub struct Connected {
    pub welcome: Welcome,
    pub region: Region,
    pub doorbell: Doorbell,
}

/// Client: says hello, waits at most `timeout` for the answer, and on a
/// welcome checks and maps the region and the doorbell.
pub fn client_handshake(stream: &UnixStream, timeout: Duration) -> Result<Connected, HandshakeError> {
    send_hello(stream, PROTOCOL_VERSION)?;
    let (frame, mut descriptors) = receive_frame(stream, timeout)?;
    let welcome = match frame {
        Frame::Welcome(welcome) => welcome,
        Frame::Refusal(refusal) => {
            return Err(HandshakeError::Refused { errno: refusal.errno, message: refusal.message })
        }
        other => return Err(HandshakeError::Unexpected { expected: "welcome", got: other.kind_name() }),
    };
    if descriptors.len() != 2 {
        return Err(HandshakeError::Descriptors(descriptors.len()));
    }
    let doorbell_fd = descriptors.pop().ok_or(HandshakeError::Descriptors(1))?;
    let region_fd = descriptors.pop().ok_or(HandshakeError::Descriptors(0))?;
    let region = Region::attach(region_fd, welcome.layout)?;
    let doorbell = Doorbell::attach(doorbell_fd, welcome.layout.workers)?;
    Ok(Connected { welcome, region, doorbell })
}

/// Server: reads the client's hello, waiting at most `timeout`. A hello
/// that came with descriptors is refused (the client has no reason to
/// send any; they are closed). Check [`Hello::is_supported`] and answer
/// with [`send_welcome`] or [`send_refusal`].
pub fn read_hello(stream: &UnixStream, timeout: Duration) -> Result<Hello, HandshakeError> {
    let (frame, descriptors) = receive_frame(stream, timeout)?;
    if !descriptors.is_empty() {
        return Err(HandshakeError::Descriptors(descriptors.len()));
    }
    match frame {
        Frame::Hello(hello) => Ok(hello),
        other => Err(HandshakeError::Unexpected { expected: "hello", got: other.kind_name() }),
    }
}

/// Server: sends the welcome with the client's region and the doorbell.
pub fn send_welcome(
    stream: &UnixStream,
    welcome: &Welcome,
    region: impl AsFd,
    doorbell: impl AsFd,
) -> Result<(), HandshakeError> {
    send_frame(stream, &Frame::Welcome(*welcome).encode(), &[region.as_fd(), doorbell.as_fd()])
}

/// Server: refuses the client with `errno` and a message (at most
/// [`MAX_MESSAGE_BYTES`]; longer ones are an error, not cut).
pub fn send_refusal(stream: &UnixStream, errno: i32, message: &str) -> Result<(), HandshakeError> {
    if message.len() > MAX_MESSAGE_BYTES {
        return Err(HandshakeError::MessageTooLong(message.len()));
    }
    send_frame(stream, &Frame::Refusal(Refusal { errno, message: message.to_owned() }).encode(), &[])
}
