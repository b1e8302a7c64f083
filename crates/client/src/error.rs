//! The client's errors.

use std::io;
use std::path::PathBuf;

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No server answers at the socket.
    #[error("no server at {path}: {source} (start one with `larder serve STORE`)")]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why the connect failed.
        source: io::Error,
    },
    /// The handshake failed or the server refused the client.
    #[error("handshake with the server at {path}: {source}")]
    Handshake {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: larder_protocol::handshake::HandshakeError,
    },
    /// The server broke the protocol (a bad ring position or message).
    #[error("the server broke the protocol: {0}")]
    Protocol(String),
    /// The server is gone (it exited or was killed); reconnect when a new
    /// one serves the store.
    #[error("the server is gone (its socket hung up); reconnect when it is back")]
    ServerGone,
    /// The server answered with an error.
    #[error("{message} ({})", io::Error::from_raw_os_error(*errno))]
    Server {
        /// The errno, as the fs layer reports it.
        errno: i32,
        /// What went wrong.
        message: String,
    },
    /// The server answered with a response this call does not expect.
    #[error("unexpected answer from the server to {request}: {response}")]
    Unexpected {
        /// The request.
        request: &'static str,
        /// What came back.
        response: String,
    },
    /// A local argument was refused before anything was sent.
    #[error("{0}")]
    Invalid(String),
    /// The thread that answers lease revocations could not be started.
    #[error("starting the client's lease thread: {source}")]
    Thread {
        /// Why.
        source: io::Error,
    },
    /// The data area has no room for a buffer of this size.
    #[error("no room for a buffer of {wanted} bytes in the {area} byte data area")]
    NoBufferRoom {
        /// Bytes asked for.
        wanted: u64,
        /// The data area's size.
        area: u64,
    },
}

impl ClientError {
    /// The errno this error stands for (EIO for those that are not the
    /// server's answer).
    pub fn errno(&self) -> i32 {
        match self {
            ClientError::Server { errno, .. } => *errno,
            ClientError::Connect { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            ClientError::ServerGone => libc::ENOTCONN,
            ClientError::Invalid(_) => libc::EINVAL,
            ClientError::NoBufferRoom { .. } => libc::ENOMEM,
            _ => libc::EIO,
        }
    }

    /// Whether the server said the thing named does not exist.
    pub fn is_not_found(&self) -> bool {
        self.errno() == libc::ENOENT
    }
}

impl From<ClientError> for io::Error {
    fn from(e: ClientError) -> io::Error {
        io::Error::new(io::Error::from_raw_os_error(e.errno()).kind(), e)
    }
}

/// A client call's result.
pub type Result<T> = std::result::Result<T, ClientError>;
