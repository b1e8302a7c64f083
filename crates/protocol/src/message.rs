//! The requests a client sends and the responses a server returns.
//!
//! These are plain values: the engine's own types stay in the engine, so
//! a client links none of it. A request names objects by inode number
//! (the object id) and open files and directories by the handle the
//! server gave; the server checks every one against the client's
//! credentials and handle table. Errors are errno values, as the fs layer
//! and the FUSE mount report them, with a message for people.

/// A point in time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timestamp {
    /// Whole seconds since 1970-01-01T00:00:00Z.
    pub seconds: i64,
    /// Nanoseconds, below 1,000,000,000.
    pub nanoseconds: u32,
}

/// What an object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
}

/// An object's attributes (`stat`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attributes {
    /// Inode number: the object id.
    pub ino: u64,
    /// What the object is.
    pub kind: FileKind,
    /// Type and permission bits.
    pub mode: u32,
    /// Number of names (a directory: as Unix counts them).
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number of a device node.
    pub rdev: u64,
    /// Size in bytes.
    pub size: u64,
    /// 512-byte sectors allocated.
    pub blocks: u64,
    /// Last access.
    pub atime: Timestamp,
    /// Last change of the bytes.
    pub mtime: Timestamp,
    /// Last change of the attributes.
    pub ctime: Timestamp,
    /// Creation.
    pub btime: Timestamp,
    /// Changes whenever cached copies must be dropped.
    pub generation: u64,
}

/// How `setattr` sets a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeChange {
    /// The server's current time (`UTIME_NOW`).
    Now,
    /// A given time.
    At(Timestamp),
}

/// The attributes a `setattr` changes; `None` leaves one as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetAttributes {
    /// New permission bits.
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size (truncate or extend with zeros).
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<TimeChange>,
    /// New modification time.
    pub mtime: Option<TimeChange>,
}

/// How `rename` treats the target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenameFlags {
    /// Fail with EEXIST if the target exists (RENAME_NOREPLACE).
    pub noreplace: bool,
    /// Swap source and target, which must both exist (RENAME_EXCHANGE).
    pub exchange: bool,
}

/// How `setxattr` treats an existing attribute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XattrFlags {
    /// XATTR_CREATE: fail with EEXIST if the attribute exists.
    pub create: bool,
    /// XATTR_REPLACE: fail with ENODATA if it does not.
    pub replace: bool,
}

/// When a write returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Once it is on disk (its log group synced).
    Durable,
    /// Once it is visible to everyone; durable at the next sync or within
    /// the store's buffered interval.
    Buffered,
}

/// A stretch of the client's data area (see the handshake's layout): the
/// server copies bytes out of it, or into it, and checks that it lies
/// inside the area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferSlice {
    /// Offset from the start of the data area.
    pub offset: u64,
    /// Length in bytes.
    pub length: u32,
}

/// Bytes a request carries: inline in the message, or in the client's
/// data area (the zero-copy path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// In the message itself.
    Inline(Vec<u8>),
    /// In the client's data area.
    Buffer(BufferSlice),
}

/// One entry of a directory listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectoryEntry {
    /// The entry's object.
    pub ino: u64,
    /// What it is.
    pub kind: FileKind,
    /// Its name.
    pub name: Vec<u8>,
    /// The offset to pass to continue after this entry.
    pub next: u64,
}

/// Space and limits of the store's file system (`statfs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsStats {
    /// Block size in bytes.
    pub block_bytes: u32,
    /// Blocks in all.
    pub blocks: u64,
    /// Blocks free.
    pub blocks_free: u64,
    /// Blocks free to callers (the store's reserve excluded).
    pub blocks_available: u64,
    /// Inodes in all.
    pub files: u64,
    /// Inodes free.
    pub files_free: u64,
    /// Longest name.
    pub name_max: u32,
}

/// A key's object and size (`head`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyHead {
    /// The object holding the value.
    pub object: u64,
    /// The value's size in bytes.
    pub size: u64,
}

/// One key of a scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanEntry {
    /// The whole key.
    pub key: Vec<u8>,
    /// The object holding its value.
    pub object: u64,
    /// The value's size in bytes.
    pub size: u64,
}

/// One write of a KV batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvOperation {
    /// Store a value under a key.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Payload,
    },
    /// Remove a key.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
}

/// What a lease covers (`Request::Lease`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeaseTarget {
    /// One object: its attributes, a file's bytes, and opens of it kept
    /// after close. Revoked when another client changes the object.
    Object(u64),
    /// Every path resolution of the client (a hierarchical lease on the
    /// root): revoked when another client removes or renames a name, or
    /// changes a directory's permissions.
    Namespace,
    /// A directory and every directory below it (Aerie's directory lease
    /// over a subtree): their attributes, the lookups of their entries and
    /// their listings. Revoked when another client changes the entries or
    /// attributes of any directory in the subtree. Files' attributes and
    /// bytes stay under their own object leases.
    Subtree(u64),
}

/// A lease the server granted (or renewed): valid until the client sees
/// its sequence in its slot's notice word, or `term_nanos` after the
/// client sent the request, whichever comes first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseGrant {
    /// The slot of the client's lease area.
    pub slot: u32,
    /// The lease's sequence number in that slot (never 0).
    pub sequence: u32,
    /// How long the lease lasts, in nanoseconds.
    pub term_nanos: u64,
}

/// A persistent pointer of a served heap: the same 24 bytes as
/// `larder_heap::PPtr` (`repr(C)`, object, offset, generation), so a
/// pointer stored in an object by one process reads as the same pointer in
/// another, embedded or served.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HeapPointer {
    /// The object (0: the null pointer).
    pub object: u64,
    /// Byte offset inside the object.
    pub offset: u64,
    /// 0 for user bytes, else an `alloc_in` block's generation.
    pub generation: u64,
}

/// One operation on a heap the session opened (`Request::Heap`). Each is
/// the `larder_heap::Heap` call of the same name, executed by the server
/// with the client's credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeapOperation {
    /// Allocate an object of `size` zero bytes: `HeapObject`.
    Alloc {
        /// Its size in bytes.
        size: u64,
    },
    /// Attach an object: `HeapAttached`, and the object's file descriptor
    /// follows on the client's socket in a descriptor frame carrying `tag`
    /// (read-write only when `write` and the client's uid may write the
    /// object, else read-only).
    Attach {
        /// The object.
        object: u64,
        /// Whether the client wants to write through its mapping.
        write: bool,
        /// The client's number for this attach, echoed in the frame.
        tag: u64,
        /// Descriptor frames the client has taken from its socket so far
        /// on this connection (the server bounds those in flight).
        received: u64,
    },
    /// An object's size now: `Length`.
    Size {
        /// The object.
        object: u64,
    },
    /// The object a name names: `HeapObject`, or ENOENT.
    GetByName {
        /// The name.
        name: Vec<u8>,
    },
    /// Name an object, if the name is free (else EEXIST): `Done`.
    AddName {
        /// The object.
        object: u64,
        /// The name.
        name: Vec<u8>,
    },
    /// An object's names, in byte order: `Names`.
    Names {
        /// The object.
        object: u64,
    },
    /// Free an object and drop all its names: `Done`.
    Free {
        /// The object.
        object: u64,
    },
    /// Copy an object's bytes and type into a new object: `HeapObject`.
    Copy {
        /// The object.
        object: u64,
    },
    /// Deep-copy the objects reachable through typed pointers: `HeapObject`.
    Clone {
        /// The root object.
        object: u64,
    },
    /// Make a type from the offsets of its pointer fields: `HeapType`.
    AllocType {
        /// The offsets of `HeapPointer` fields.
        offsets: Vec<u64>,
    },
    /// Give an object a type: `Done`.
    AttachType {
        /// The object.
        object: u64,
        /// The type.
        type_id: u64,
    },
    /// An object's type, if it has one: `HeapType`.
    TypeOf {
        /// The object.
        object: u64,
    },
    /// Grow an object to `size` bytes (never shrink): `Done`.
    Grow {
        /// The object.
        object: u64,
        /// Its new size.
        size: u64,
    },
    /// The dereference check: `length` bytes at the pointer lie inside its
    /// object and its generation is live: `Done`, or ESTALE, ERANGE, ENOENT.
    Check {
        /// The pointer.
        pointer: HeapPointer,
        /// Bytes the caller will use at it.
        length: u64,
    },
    /// Make the heap's mapped bytes and metadata durable: `Done`.
    Sync,
    /// Allocate a block of `size` bytes aligned to `align` inside an
    /// object the client may write (growing it when the object's allocator
    /// needs room): `HeapBlock`, or EACCES, EINVAL, ENOENT.
    AllocIn {
        /// The object.
        object: u64,
        /// The block's size in bytes (at least 1).
        size: u64,
        /// Its alignment: a power of two up to 4096.
        align: u64,
    },
    /// Free a block `AllocIn` handed out: `Done`, or ESTALE for a pointer
    /// that names no live block, EACCES, ENOENT.
    FreeIn {
        /// The block's pointer, as `HeapBlock` gave it.
        pointer: HeapPointer,
    },
}

/// A request from a client. Its request id travels in the message header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Answer at once (measures a round trip; checks the server is there).
    Ping,
    /// Take, or renew, a lease; the response is `Lease`, or ENOLCK when
    /// the client holds `max_leases`, or EAGAIN while another client's
    /// change revokes leases on the target.
    Lease {
        /// What the lease covers.
        target: LeaseTarget,
    },

    /// Look a name up in a directory.
    Lookup {
        /// The directory.
        parent: u64,
        /// The name.
        name: Vec<u8>,
    },
    /// An object's attributes.
    GetAttributes {
        /// The object.
        ino: u64,
    },
    /// Change an object's attributes.
    SetAttributes {
        /// The object.
        ino: u64,
        /// What to change.
        set: SetAttributes,
        /// The open handle the change is made through, if any (a
        /// truncate through a handle opened for writing needs no write
        /// permission now).
        handle: Option<u64>,
    },
    /// Resolve a path from the root, as the client's credentials may.
    Resolve {
        /// The path (absolute; relative paths start at the root).
        path: Vec<u8>,
        /// Follow a symbolic link in the last component.
        follow: bool,
    },
    /// Make a special file (or a regular one).
    Mknod {
        /// The directory.
        parent: u64,
        /// The new name.
        name: Vec<u8>,
        /// Type and permission bits.
        mode: u32,
        /// Device number.
        rdev: u64,
    },
    /// Make a directory.
    Mkdir {
        /// The parent directory.
        parent: u64,
        /// The new name.
        name: Vec<u8>,
        /// Permission bits.
        mode: u32,
    },
    /// Make a symbolic link.
    Symlink {
        /// The directory.
        parent: u64,
        /// The new name.
        name: Vec<u8>,
        /// What it points to.
        target: Vec<u8>,
    },
    /// A symbolic link's target.
    Readlink {
        /// The link.
        ino: u64,
    },
    /// Give an object another name.
    Link {
        /// The object.
        ino: u64,
        /// The directory of the new name.
        parent: u64,
        /// The new name.
        name: Vec<u8>,
    },
    /// Remove a name of a non-directory.
    Unlink {
        /// The directory.
        parent: u64,
        /// The name.
        name: Vec<u8>,
    },
    /// Remove an empty directory.
    Rmdir {
        /// The parent directory.
        parent: u64,
        /// The name.
        name: Vec<u8>,
    },
    /// Move a name, atomically.
    Rename {
        /// The source directory.
        parent: u64,
        /// The source name.
        name: Vec<u8>,
        /// The target directory.
        new_parent: u64,
        /// The target name.
        new_name: Vec<u8>,
        /// How to treat the target.
        flags: RenameFlags,
    },
    /// Open a file; the response is a handle.
    Open {
        /// The file.
        ino: u64,
        /// `open(2)` flags (access mode, O_APPEND, O_TRUNC...).
        flags: i32,
    },
    /// Open an existing file by path in one round trip: the path resolved
    /// from the root with the client's credentials as `Resolve` resolves
    /// it (following a final symbolic link unless `flags` holds
    /// O_NOFOLLOW, which makes a final link ELOOP), then opened as `Open`
    /// opens it; optionally with the file's first bytes and a lease on
    /// it. The response is `PathOpened`. O_CREAT, O_EXCL and O_TRUNC are
    /// EINVAL here (`Create`, or `Open` by number, does those).
    OpenPath {
        /// The path (absolute; relative paths start at the root).
        path: Vec<u8>,
        /// `open(2)` flags: the access mode, O_APPEND, O_NOFOLLOW...
        flags: i32,
        /// Bytes of the file's start to return with the answer (0: none);
        /// the server returns fewer only at the file's end, or when this
        /// is more than `max_io_bytes` or than fits one completion record.
        read: u32,
        /// Take (or renew) a lease on the opened file, as `Lease` would.
        lease: bool,
    },
    /// Create and open a file.
    Create {
        /// The directory.
        parent: u64,
        /// The new name.
        name: Vec<u8>,
        /// Permission bits.
        mode: u32,
        /// `open(2)` flags (O_EXCL...).
        flags: i32,
        /// Take a lease on the file created or opened, as `Lease` would
        /// (protocol version 7): a client that writes the file it made
        /// keeps what it wrote cached under it.
        lease: bool,
    },
    /// Read from an open file; the bytes come back in the response.
    Read {
        /// The handle.
        handle: u64,
        /// Where to start.
        offset: u64,
        /// Most bytes to read.
        length: u32,
    },
    /// Read from an open file into the client's data area; the response
    /// is the number of bytes read.
    ReadBuffer {
        /// The handle.
        handle: u64,
        /// Where to start.
        offset: u64,
        /// Where the bytes go.
        into: BufferSlice,
    },
    /// Write to an open file (at its end if it was opened with O_APPEND).
    Write {
        /// The handle.
        handle: u64,
        /// Where to write.
        offset: u64,
        /// The bytes, inline or in the client's data area.
        data: Payload,
    },
    /// Make an open file's changes (and every earlier change) durable.
    Fsync {
        /// The handle.
        handle: u64,
    },
    /// Set space aside, or punch a hole (`fallocate(2)`).
    Fallocate {
        /// The handle.
        handle: u64,
        /// Where the range starts.
        offset: u64,
        /// Its length.
        length: u64,
        /// `fallocate(2)` mode bits.
        mode: i32,
    },
    /// Close an open file.
    Release {
        /// The handle.
        handle: u64,
    },
    /// Open a directory for listing.
    OpenDirectory {
        /// The directory.
        ino: u64,
    },
    /// List entries of an open directory.
    ReadDirectory {
        /// The handle.
        handle: u64,
        /// 0 for the start, else an entry's `next`.
        offset: u64,
        /// Most entries to return.
        max_entries: u32,
    },
    /// Close an open directory.
    ReleaseDirectory {
        /// The handle.
        handle: u64,
    },
    /// Make a directory's changes (and every earlier change) durable.
    FsyncDirectory {
        /// The handle.
        handle: u64,
    },
    /// Check access (`access(2)`).
    Access {
        /// The object.
        ino: u64,
        /// R_OK, W_OK, X_OK bits, or F_OK.
        mask: u32,
    },
    /// Space and limits.
    StatFs,
    /// An extended attribute's value.
    GetXattr {
        /// The object.
        ino: u64,
        /// The attribute's name.
        name: Vec<u8>,
    },
    /// Set an extended attribute.
    SetXattr {
        /// The object.
        ino: u64,
        /// The attribute's name.
        name: Vec<u8>,
        /// Its value.
        value: Vec<u8>,
        /// Create or replace only.
        flags: XattrFlags,
    },
    /// The names of an object's extended attributes.
    ListXattr {
        /// The object.
        ino: u64,
    },
    /// Remove an extended attribute.
    RemoveXattr {
        /// The object.
        ino: u64,
        /// The attribute's name.
        name: Vec<u8>,
    },
    /// Make every change so far durable.
    Sync,
    /// Metadata operations applied as one transaction (Aerie's batched
    /// journal): each is checked as it would be alone, on the state the
    /// earlier ones leave, and either all are applied or none. Only
    /// `Mknod`, `Mkdir`, `Symlink`, `Link`, `Unlink`, `Rmdir` and
    /// `Rename` may be operations; the response is `BatchApplied`, or the
    /// first refusal's error.
    MetadataBatch {
        /// The operations, in order.
        operations: Vec<Request>,
        /// When to answer.
        durability: Durability,
    },

    /// Store a value under a key.
    KvPut {
        /// The bucket.
        bucket: Vec<u8>,
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Payload,
        /// When to answer.
        durability: Durability,
    },
    /// A key's value: in the response, or written into `into` when given
    /// (the response then says how long it is; a value longer than the
    /// slice is not written and the response says its length).
    KvGet {
        /// The bucket.
        bucket: Vec<u8>,
        /// The key.
        key: Vec<u8>,
        /// Where the value goes, if not in the response.
        into: Option<BufferSlice>,
    },
    /// A key's object and size.
    KvHead {
        /// The bucket.
        bucket: Vec<u8>,
        /// The key.
        key: Vec<u8>,
    },
    /// Remove a key.
    KvDelete {
        /// The bucket.
        bucket: Vec<u8>,
        /// The key.
        key: Vec<u8>,
        /// When to answer.
        durability: Durability,
    },
    /// Keys of a bucket from `start` (inclusive) to `end` (exclusive), in
    /// byte order, at most `max_entries` of them.
    KvScan {
        /// The bucket.
        bucket: Vec<u8>,
        /// The first key (inclusive).
        start: Vec<u8>,
        /// The end (exclusive); none for the bucket's end.
        end: Option<Vec<u8>>,
        /// Most entries to return.
        max_entries: u32,
    },
    /// Puts and deletes applied atomically.
    KvWriteBatch {
        /// The bucket.
        bucket: Vec<u8>,
        /// The writes, in order.
        operations: Vec<KvOperation>,
        /// When to answer.
        durability: Durability,
    },
    /// Start writing a value too large for one message: the response is
    /// a handle that takes `Write` requests at increasing offsets from 0;
    /// `KvWriterFinish` stores the value under the key atomically, and
    /// `Release` without it drops what was written.
    KvWriterOpen {
        /// The bucket.
        bucket: Vec<u8>,
        /// The key.
        key: Vec<u8>,
        /// When `KvWriterFinish` answers.
        durability: Durability,
    },
    /// Store what a writer handle was given under its key, and close it.
    KvWriterFinish {
        /// The writer's handle.
        handle: u64,
    },
    /// Open a key's value for reading in pieces: the response is
    /// `Opened` (a handle for `Read` and `ReadBuffer`, and the size), or
    /// an ENOENT error.
    KvReaderOpen {
        /// The bucket.
        bucket: Vec<u8>,
        /// The key.
        key: Vec<u8>,
    },
    /// Create a bucket.
    CreateBucket {
        /// The bucket.
        bucket: Vec<u8>,
    },
    /// Remove an empty bucket.
    DeleteBucket {
        /// The bucket.
        bucket: Vec<u8>,
    },
    /// The buckets.
    ListBuckets,
    /// The store's counters, as `larder stats` prints them.
    Stats,

    /// Open the heap at `path` (created if absent, as the client's
    /// credentials allow): a `Handle` naming it in this session.
    HeapOpen {
        /// The heap's path in the store's namespace.
        path: Vec<u8>,
    },
    /// One operation on an open heap.
    Heap {
        /// The heap's handle.
        heap: u64,
        /// What to do.
        operation: HeapOperation,
    },
    /// Close an open heap, synced first if `sync` (mfclose), else as a
    /// heap dropped without closing: `Done`.
    HeapClose {
        /// The heap's handle.
        heap: u64,
        /// Whether to sync it first.
        sync: bool,
    },
}

impl Request {
    /// Whether the request may be an operation of a `MetadataBatch`.
    pub fn is_metadata_operation(&self) -> bool {
        matches!(
            self,
            Request::Mknod { .. }
                | Request::Mkdir { .. }
                | Request::Symlink { .. }
                | Request::Link { .. }
                | Request::Unlink { .. }
                | Request::Rmdir { .. }
                | Request::Rename { .. }
        )
    }

    /// Whether the request changes the namespace (a metadata operation, a
    /// create, a batch of them): the server's primary worker serves those
    /// (docs/server.md, "Workers").
    pub fn changes_namespace(&self) -> bool {
        self.is_metadata_operation()
            || matches!(
                self,
                Request::Create { .. }
                    | Request::MetadataBatch { .. }
                    | Request::HeapOpen { .. }
                    | Request::Heap { .. }
                    | Request::HeapClose { .. }
            )
    }
}

/// A server's answer to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// Done; nothing to return.
    Done,
    /// Answer to `Ping`: the server's epoch (it changes at every start).
    Pong {
        /// The server's epoch.
        epoch: u64,
    },
    /// An object's attributes.
    Attributes(Attributes),
    /// A resolved path: the directory holding the last component, that
    /// component, and the object if it exists.
    Resolved {
        /// The directory.
        parent: u64,
        /// The last component (empty for the root).
        name: Vec<u8>,
        /// The object, if the path names one.
        attributes: Option<Attributes>,
    },
    /// A new open handle.
    Handle(u64),
    /// An opened value: its handle and size.
    Opened {
        /// The handle.
        handle: u64,
        /// The value's size in bytes.
        size: u64,
    },
    /// A file opened by path (`OpenPath`).
    PathOpened {
        /// The directory holding the name the path resolved to (after
        /// following symbolic links).
        parent: u64,
        /// That name.
        name: Vec<u8>,
        /// The file's attributes, read after the open (and after the
        /// lease, when one was granted).
        attributes: Attributes,
        /// The open handle.
        handle: u64,
        /// The file's first bytes, when asked for: fewer than asked only
        /// at the file's end or at the server's limits.
        data: Option<Vec<u8>>,
        /// The lease on the file, when asked for and granted (none when
        /// the server grants no leases, the client holds `max_leases`, or
        /// another client's change is revoking leases on it).
        lease: Option<LeaseGrant>,
    },
    /// A created file and its open handle.
    Created {
        /// The new file's attributes (read after the lease, when one was
        /// granted).
        attributes: Attributes,
        /// Its open handle.
        handle: u64,
        /// The lease on the file, when asked for and granted (none when
        /// the server grants no leases, the client holds `max_leases`, or
        /// another client's change is revoking leases on it).
        lease: Option<LeaseGrant>,
    },
    /// Bytes (a read, a link target, an attribute value).
    Data(Vec<u8>),
    /// A count of bytes (read into or written from the data area).
    Length(u64),
    /// Directory entries; an empty list is the end.
    Entries(Vec<DirectoryEntry>),
    /// Names (extended attributes, buckets).
    Names(Vec<Vec<u8>>),
    /// Space and limits.
    FsStats(FsStats),
    /// A key's value, or none.
    Value(Option<Vec<u8>>),
    /// A key's value was written to the data area; or, if longer than the
    /// slice, not written: the length says which.
    ValueInBuffer {
        /// The value's length.
        length: u64,
    },
    /// A key's object and size, or none.
    Head(Option<KeyHead>),
    /// Whether a delete removed a key.
    Deleted(bool),
    /// One page of a scan.
    ScanPage {
        /// Keys in order.
        entries: Vec<ScanEntry>,
        /// Whether keys remain after the last one.
        more: bool,
    },
    /// A metadata batch was applied: per operation, the attributes of
    /// the object it made or named (mknod, mkdir, symlink, link), or none
    /// (unlink, rmdir, rename).
    BatchApplied(Vec<Option<Attributes>>),
    /// Text for people (`Stats`).
    Text(String),
    /// A lease granted or renewed.
    Lease(LeaseGrant),
    /// This worker does not own the object: send the request to `worker`.
    Redirect {
        /// The owning worker.
        worker: u32,
    },
    /// A heap object's id.
    HeapObject(u64),
    /// An attached heap object: its descriptor follows on the socket.
    HeapAttached {
        /// The object.
        object: u64,
        /// Its size in bytes now.
        size: u64,
        /// Whether the descriptor was opened read-write.
        writable: bool,
    },
    /// A heap type's id, or none (an object without a type).
    HeapType(Option<u64>),
    /// A block `AllocIn` allocated: its pointer, and the size of its
    /// object now (the allocator may have grown it), so a client takes in
    /// the growth without asking again.
    HeapBlock {
        /// The block.
        pointer: HeapPointer,
        /// Its object's size in bytes now.
        object_size: u64,
    },
    /// The request failed.
    Error {
        /// The errno value (as the fs layer reports it).
        errno: i32,
        /// What went wrong, for people.
        message: String,
    },
}
