//! Larder's client-server protocol (DESIGN.md, "access": the server).
//!
//! A client connects to the server's Unix socket; the server learns the
//! client's uid, gid and groups from the kernel (SO_PEERCRED,
//! SO_PEERGROUPS), never from the client. The handshake hands the client a
//! sealed memfd holding, per worker, a request ring and a completion ring,
//! and a data area for zero-copy buffers. After that, requests and
//! completions travel through the rings; the socket stays open only so
//! that each side learns at once when the other is gone.
//!
//! This crate holds what both sides share and nothing of the engine:
//! the message types ([`message`]) and their encoding ([`codec`]). The wire formats
//! are in `docs/format.md`, the design in `docs/server.md`.

pub mod backoff;
pub mod codec;
pub mod credentials;
pub mod descriptor;
pub mod doorbell;
pub mod error;
pub mod futex;
pub mod fuzzing;
pub mod handshake;
pub mod id_hash;
pub mod layout;
pub mod lease;
mod mapping;
pub mod message;
pub mod region;
pub mod ring;

/// Version of the protocol: the handshake refuses a peer with another.
pub const PROTOCOL_VERSION: u32 = 7;

/// Name of the server's socket in a store's directory, where clients (and
/// the CLI) look for a server serving that store.
pub const SOCKET_NAME: &str = "larder.sock";
