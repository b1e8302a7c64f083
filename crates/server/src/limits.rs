//! What one client, and all of them together, may hold of the server.
//!
//! Every limit is checked before the request it refuses changes anything:
//! a refused open creates no file and takes no handle.

/// The server's limits (docs/server.md, "Limits"). Exceeding one gives the
/// client an errno and changes nothing:
///
/// | limit | errno |
/// |---|---|
/// | `max_clients` | EAGAIN, at connect |
/// | `max_open_handles` | EMFILE |
/// | `max_in_flight` | EAGAIN |
/// | `max_known_objects` | ENFILE, for a lookup that would add one more |
/// | `max_leases` | ENOLCK, for a lease that would be one more |
/// | `max_open_heaps` | EMFILE, for a `HeapOpen` that would be one more |
/// | `max_heap_descriptors_in_flight` | EAGAIN, for an attach while that many descriptors were sent and not taken |
/// | `max_io_bytes` | a read returns at most this many bytes; a write, put or batch carrying more is EMSGSIZE |
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Clients connected at once. Default 1,024.
    pub max_clients: usize,
    /// Handles one client may hold open at once: files, directories, KV
    /// writers and KV readers together (like RLIMIT_NOFILE). Default
    /// 1,024.
    pub max_open_handles: usize,
    /// Requests of one client being executed at once (on any worker).
    /// Default 256.
    pub max_in_flight: u32,
    /// Bytes of one client's data area (its zero-copy buffers). Default
    /// 16 MiB.
    pub data_area_bytes: u64,
    /// Objects one client may name by inode number: those it reached by
    /// a lookup, a path, or by creating them (see [`Session`]'s doc).
    /// Default 1,048,576.
    ///
    /// [`Session`]: crate::Session
    pub max_known_objects: usize,
    /// Leases one client may hold at once; one more is ENOLCK. At most
    /// 16,384 (the slots of a region's lease area). Default 16,384.
    pub max_leases: usize,
    /// How long a lease lasts from its grant or renewal: a client that
    /// does not answer a revocation delays the conflicting change by at
    /// most this. Zero grants no leases (EOPNOTSUPP), as when the store
    /// is also changed by other means (a FUSE mount). Default 1 second.
    pub lease_term: std::time::Duration,
    /// Bytes one request may read or write (a read asks for fewer, a
    /// write, put or batch carrying more is refused). At least 64 KiB when
    /// leases are granted (a caching client takes a shorter read of up to
    /// that for the file's end). Default 16 MiB.
    pub max_io_bytes: u32,
    /// Entries one directory listing or scan page may return (a request
    /// asking for more gets this many; fewer when more would not fit one
    /// completion ring record). Default 4,096.
    pub max_entries: u32,
    /// Bytes of each request ring, and of each completion ring. Default
    /// 256 KiB.
    pub ring_bytes: u32,
    /// Heaps one client may have open at once (`HeapOpen`). Default 64.
    pub max_open_heaps: usize,
    /// Descriptors of attached heap objects the server sent one client
    /// that the client has not yet taken from its socket (it says how many
    /// it took in each attach). Default 64.
    pub max_heap_descriptors_in_flight: u64,
    /// Directories one client's path resolutions keep (a path's prefix to
    /// the directory it led to, dropped whenever a directory may have
    /// been renamed, removed or had its mode or owners changed), so that
    /// `Resolve` and `OpenPath` walk only the last component. Zero keeps
    /// none: needed when the store is also changed by other means (a FUSE
    /// mount), which the server does not see. Prefixes longer than 1 KiB
    /// are not kept, so a client's cache holds at most about this many
    /// KiB of paths. Default 256.
    pub max_cached_directories: usize,
    /// Fewest workers. Default 1.
    pub min_workers: u32,
    /// Most workers: the region holds a ring pair for each. Default 4.
    pub max_workers: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_clients: 1024,
            max_open_handles: 1024,
            max_in_flight: 256,
            data_area_bytes: 16 << 20,
            max_known_objects: 1 << 20,
            max_leases: larder_protocol::layout::MAX_LEASE_SLOTS as usize,
            lease_term: std::time::Duration::from_secs(1),
            max_io_bytes: 16 << 20,
            max_entries: 4096,
            ring_bytes: 256 << 10,
            max_open_heaps: 64,
            max_heap_descriptors_in_flight: 64,
            max_cached_directories: 256,
            min_workers: 1,
            max_workers: 4,
        }
    }
}
