//! The server's errors: what a caller of this crate (the listener and
//! the workers) must handle. A failed request is not one of them: it is a
//! `Response::Error` for the client.

/// Why a session could not be opened or closed cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// `max_clients` clients are connected already.
    #[error("{max} clients are connected, the limit (max_clients); try again later")]
    TooManyClients {
        /// The limit.
        max: usize,
    },
    /// `max_in_flight` requests of the client are executing already.
    #[error("{max} requests of this client are in flight, the limit (max_in_flight); try again later")]
    TooManyInFlight {
        /// The limit.
        max: u32,
    },
    /// Releasing a session's handles failed (the first failure; every
    /// handle was still released).
    #[error("releasing {failed} of a closing session's handles failed; the first failure")]
    Release {
        /// Handles whose release failed.
        failed: usize,
        /// The first failure.
        #[source]
        source: larder_fs::FsError,
    },
}

impl ServerError {
    /// The errno to tell a client refused for this reason.
    pub fn errno(&self) -> i32 {
        match self {
            ServerError::TooManyClients { .. } | ServerError::TooManyInFlight { .. } => libc::EAGAIN,
            ServerError::Release { source, .. } => source.errno(),
        }
    }
}

/// A client broke the protocol (a buffer slice outside its data area):
/// the caller ends its session; nobody else is affected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("protocol violation: {what}")]
pub struct Violation {
    /// What the client did.
    pub what: String,
}

impl Violation {
    /// A violation described by `what`.
    pub fn new(what: impl Into<String>) -> Violation {
        Violation { what: what.into() }
    }
}
