//! Larder's client: a program's way into a store that `larder serve`
//! serves, shared live with other processes and with the server's FUSE
//! mount.
//!
//! [`Client::connect`] finds the server from the store's directory (its
//! socket is `STORE/larder.sock`). The client offers the KV API
//! ([`Client::put`], [`Client::get`], [`Client::scan`]...) and a file API
//! shaped like `std::fs` ([`Client::open`], [`File`], [`Client::read_dir`]...),
//! plus zero-copy buffers ([`Client::alloc_buffer`], [`File::write_buffer`],
//! [`File::read_buffer`]) that the server reads and fills in place.
//!
//! Under leases (the default; [`Client::connect_socket_with`] turns them
//! off) the client keeps what it read and the opens it closed: an open of
//! a regular file it opened before, a read of pages it read, a stat of it
//! and a listing of a directory it listed are served without a round
//! trip, until the server revokes the lease before another client's
//! change (a thread of the client answers at once) or its term runs out.
//! What another client changed is seen as soon as that change returned.
//!
//! The server checks every request against the credentials the kernel gave
//! it for this process (SO_PEERCRED), with the rules of a local file
//! system, so an operation through a client fails with the errno ext4 would
//! give this user. If the server dies, calls fail with
//! [`ClientError::ServerGone`] within a fraction of a second.
//!
//! ```no_run
//! use larder_client::{Client, Durability};
//! let client = Client::connect(std::path::Path::new("/srv/store"))?;
//! client.create_bucket("photos").or_else(|e| if e.errno() == libc::EEXIST { Ok(()) } else { Err(e) })?;
//! client.put("photos", "2024/a.jpg", b"...", Durability::Durable)?;
//! assert_eq!(client.get("photos", "2024/a.jpg")?.as_deref(), Some(&b"..."[..]));
//! # Ok::<(), larder_client::ClientError>(())
//! ```

mod batch;
mod buffers;
mod cache;
mod connection;
mod error;
mod files;
mod heap;
mod heap_mapping;
#[cfg(feature = "test-hooks")]
mod hooks;
mod kv;
mod paths;
mod walk;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use batch::MetadataBatch;
pub use buffers::Buffer;
pub use cache::CacheCounters;
pub use error::{ClientError, Result};
pub use files::{File, OpenOptions};
pub use heap::RemoteHeap;
#[cfg(feature = "test-hooks")]
pub use hooks::{HoldState, ResendHold};
pub use kv::{KvReader, KvWriter, Scan};
pub use larder_protocol::message::HeapPointer;
pub use larder_protocol::message::{
    Attributes, BufferSlice, DirectoryEntry, Durability, FileKind, FsStats, KeyHead, KvOperation, Payload, ScanEntry,
    Timestamp,
};
pub use paths::{DirEntries, Metadata};

use connection::Connection;

/// A connection to a Larder server. Cheap to clone (clones share the
/// connection); usable from many threads.
#[derive(Clone)]
pub struct Client {
    connection: Arc<Connection>,
    buffers: Arc<buffers::Allocator>,
}

impl Client {
    /// Connects to the server serving the store in `store` (its socket is
    /// `store/larder.sock`).
    pub fn connect(store: &Path) -> Result<Client> {
        Client::connect_socket(&socket_of(store))
    }

    /// Connects to the server listening at `socket`, caching under
    /// leases (see [`Client::connect_socket_with`]).
    pub fn connect_socket(socket: &Path) -> Result<Client> {
        Client::connect_socket_with(socket, true)
    }

    /// Connects to the server listening at `socket`. With `leases`, the
    /// client caches path resolutions, regular files' attributes and
    /// pages read, and opens kept after close, under leases the server
    /// revokes before another client's change (docs/server.md, "Leases");
    /// a thread of the client answers revocations. Without, every call
    /// is a round trip.
    pub fn connect_socket_with(socket: &Path, leases: bool) -> Result<Client> {
        Client::connect_socket_with_options(socket, &ClientOptions { leases, ..ClientOptions::default() })
    }

    /// Holds the posted writes this client sends again after a redirect
    /// (their file moved) just before each is sent, until the hold is
    /// released or dropped (the `test-hooks` feature, for tests only).
    #[cfg(feature = "test-hooks")]
    pub fn hold_resends(&self) -> ResendHold {
        self.connection.hooks.hold()
    }

    /// Connects to the server listening at `socket` with `options`: with
    /// or without leases, and how much the lease cache may hold.
    pub fn connect_socket_with_options(socket: &Path, options: &ClientOptions) -> Result<Client> {
        let connection = Arc::new(Connection::connect(socket, options)?);
        let area = connection.welcome().layout.data_bytes;
        if options.leases {
            let (weak, cache, region) =
                (Arc::downgrade(&connection), connection.cache().clone(), connection.shared_region());
            std::thread::Builder::new()
                .name("larder-client-leases".into())
                .spawn(move || cache::watch(weak, cache, region))
                .map_err(|source| ClientError::Thread { source })?;
        }
        Ok(Client { connection, buffers: Arc::new(buffers::Allocator::new(area)) })
    }

    /// What the lease cache served so far.
    pub fn cache_counters(&self) -> CacheCounters {
        self.connection.cache().counters()
    }

    /// The server's epoch: it changes every time a server starts, so a
    /// client that reconnects can tell its leases and handles are void.
    pub fn epoch(&self) -> u64 {
        self.connection.welcome().epoch
    }

    /// Opens the heap at `path` on the server (created if absent, as this
    /// process's credentials allow): PSHFS's mfdopen, served.
    pub fn heap(&self, path: &str) -> Result<RemoteHeap> {
        RemoteHeap::open(self.connection.clone(), path)
    }

    /// A round trip that does nothing; returns the server's epoch.
    pub fn ping(&self) -> Result<u64> {
        match self.connection.call(&larder_protocol::message::Request::Ping)? {
            larder_protocol::message::Response::Pong { epoch } => Ok(epoch),
            other => Err(unexpected("ping", &other)),
        }
    }

    /// The store's counters, as `larder stats` prints them.
    pub fn stats(&self) -> Result<String> {
        match self.connection.call(&larder_protocol::message::Request::Stats)? {
            larder_protocol::message::Response::Text(text) => Ok(text),
            other => Err(unexpected("stats", &other)),
        }
    }

    /// The largest request, in bytes, the server takes in one message
    /// (a batch's encoded size must stay within it).
    pub fn max_request_bytes(&self) -> usize {
        larder_protocol::ring::max_record(self.connection.welcome().layout.request_ring_bytes) as usize
    }

    /// The largest value or write, in bytes, sent inline in one request;
    /// larger ones go through the data area or a streamed writer.
    pub fn max_inline_bytes(&self) -> usize {
        self.connection.inline_request_bytes()
    }

    /// The socket this client is connected to.
    pub fn socket(&self) -> &Path {
        self.connection.socket()
    }
}

/// How a client connects ([`Client::connect_socket_with_options`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientOptions {
    /// Cache under leases (see [`Client::connect_socket_with`]). Default on.
    pub leases: bool,
    /// Bytes of file pages the lease cache holds at most, over all files;
    /// a page beyond is not cached (its reads are round trips). Default
    /// 128 MiB. A program that reads a larger working set again and
    /// again (a web server's files) sets it to cover that set: the pages
    /// are this process's memory.
    pub cache_page_bytes: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions { leases: true, cache_page_bytes: cache::DEFAULT_PAGE_BYTES }
    }
}

/// Where a store's server listens: `store/larder.sock`.
pub fn socket_of(store: &Path) -> PathBuf {
    store.join(larder_protocol::SOCKET_NAME)
}

/// The error for an answer of the wrong kind.
pub(crate) fn unexpected(request: &'static str, response: &larder_protocol::message::Response) -> ClientError {
    let mut shown = format!("{response:?}");
    shown.truncate(200);
    ClientError::Unexpected { request, response: shown }
}
