//! Opcodes of requests and kinds of responses: the `u16` in a message's
//! header that says which variant follows.

use std::fmt;

use crate::message::{Request, Response};

/// Defines a field-less enum with its wire codes: `ALL`, `code`,
/// `from_code` and `name` come from one list, so they cannot disagree (a
/// code given twice is an unreachable pattern, which the lints refuse).
macro_rules! codes {
    ($(#[$doc:meta])* $name:ident of $message:literal { $($variant:ident = $code:literal,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $(
                #[doc = concat!("`", $message, "::", stringify!($variant), "`.")]
                $variant,
            )*
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// Its code on the wire.
            pub const fn code(self) -> u16 {
                match self {
                    $($name::$variant => $code,)*
                }
            }

            /// The value with wire code `code`, if there is one.
            pub const fn from_code(code: u16) -> Option<$name> {
                match code {
                    $($code => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// Its name, as the message type spells the variant.
            pub const fn name(self) -> &'static str {
                match self {
                    $($name::$variant => stringify!($variant),)*
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

codes! {
    /// Which request a message holds. Groups: 1 the server itself, 16 to
    /// 63 the file system, 64 to 95 the key-value store, 96 and up the heap.
    Opcode of "Request" {
        Ping = 1,
        Lease = 2,
        Lookup = 16,
        GetAttributes = 17,
        SetAttributes = 18,
        Resolve = 19,
        Mknod = 20,
        Mkdir = 21,
        Symlink = 22,
        Readlink = 23,
        Link = 24,
        Unlink = 25,
        Rmdir = 26,
        Rename = 27,
        Open = 28,
        Create = 29,
        Read = 30,
        ReadBuffer = 31,
        Write = 32,
        Fsync = 33,
        Fallocate = 34,
        Release = 35,
        OpenDirectory = 36,
        ReadDirectory = 37,
        ReleaseDirectory = 38,
        FsyncDirectory = 39,
        Access = 40,
        StatFs = 41,
        GetXattr = 42,
        SetXattr = 43,
        ListXattr = 44,
        RemoveXattr = 45,
        Sync = 46,
        MetadataBatch = 47,
        OpenPath = 48,
        KvPut = 64,
        KvGet = 65,
        KvHead = 66,
        KvDelete = 67,
        KvScan = 68,
        KvWriteBatch = 69,
        KvWriterOpen = 70,
        KvWriterFinish = 71,
        KvReaderOpen = 72,
        CreateBucket = 73,
        DeleteBucket = 74,
        ListBuckets = 75,
        Stats = 76,
        HeapOpen = 96,
        Heap = 97,
        HeapClose = 98,
    }
}

codes! {
    /// Which response a message holds.
    ResponseKind of "Response" {
        Done = 1,
        Pong = 2,
        Attributes = 3,
        Resolved = 4,
        Handle = 5,
        Opened = 6,
        Created = 7,
        Data = 8,
        Length = 9,
        Entries = 10,
        Names = 11,
        FsStats = 12,
        Value = 13,
        ValueInBuffer = 14,
        Head = 15,
        Deleted = 16,
        ScanPage = 17,
        Text = 18,
        Redirect = 19,
        Error = 20,
        BatchApplied = 21,
        Lease = 22,
        HeapObject = 23,
        HeapAttached = 24,
        HeapType = 25,
        HeapBlock = 26,
        PathOpened = 27,
    }
}

impl Request {
    /// Its opcode.
    pub fn opcode(&self) -> Opcode {
        match self {
            Request::Ping => Opcode::Ping,
            Request::Lease { .. } => Opcode::Lease,
            Request::Lookup { .. } => Opcode::Lookup,
            Request::GetAttributes { .. } => Opcode::GetAttributes,
            Request::SetAttributes { .. } => Opcode::SetAttributes,
            Request::Resolve { .. } => Opcode::Resolve,
            Request::Mknod { .. } => Opcode::Mknod,
            Request::Mkdir { .. } => Opcode::Mkdir,
            Request::Symlink { .. } => Opcode::Symlink,
            Request::Readlink { .. } => Opcode::Readlink,
            Request::Link { .. } => Opcode::Link,
            Request::Unlink { .. } => Opcode::Unlink,
            Request::Rmdir { .. } => Opcode::Rmdir,
            Request::Rename { .. } => Opcode::Rename,
            Request::Open { .. } => Opcode::Open,
            Request::OpenPath { .. } => Opcode::OpenPath,
            Request::Create { .. } => Opcode::Create,
            Request::Read { .. } => Opcode::Read,
            Request::ReadBuffer { .. } => Opcode::ReadBuffer,
            Request::Write { .. } => Opcode::Write,
            Request::Fsync { .. } => Opcode::Fsync,
            Request::Fallocate { .. } => Opcode::Fallocate,
            Request::Release { .. } => Opcode::Release,
            Request::OpenDirectory { .. } => Opcode::OpenDirectory,
            Request::ReadDirectory { .. } => Opcode::ReadDirectory,
            Request::ReleaseDirectory { .. } => Opcode::ReleaseDirectory,
            Request::FsyncDirectory { .. } => Opcode::FsyncDirectory,
            Request::Access { .. } => Opcode::Access,
            Request::StatFs => Opcode::StatFs,
            Request::GetXattr { .. } => Opcode::GetXattr,
            Request::SetXattr { .. } => Opcode::SetXattr,
            Request::ListXattr { .. } => Opcode::ListXattr,
            Request::RemoveXattr { .. } => Opcode::RemoveXattr,
            Request::Sync => Opcode::Sync,
            Request::KvPut { .. } => Opcode::KvPut,
            Request::KvGet { .. } => Opcode::KvGet,
            Request::KvHead { .. } => Opcode::KvHead,
            Request::KvDelete { .. } => Opcode::KvDelete,
            Request::KvScan { .. } => Opcode::KvScan,
            Request::KvWriteBatch { .. } => Opcode::KvWriteBatch,
            Request::KvWriterOpen { .. } => Opcode::KvWriterOpen,
            Request::KvWriterFinish { .. } => Opcode::KvWriterFinish,
            Request::KvReaderOpen { .. } => Opcode::KvReaderOpen,
            Request::CreateBucket { .. } => Opcode::CreateBucket,
            Request::DeleteBucket { .. } => Opcode::DeleteBucket,
            Request::ListBuckets => Opcode::ListBuckets,
            Request::Stats => Opcode::Stats,
            Request::MetadataBatch { .. } => Opcode::MetadataBatch,
            Request::HeapOpen { .. } => Opcode::HeapOpen,
            Request::Heap { .. } => Opcode::Heap,
            Request::HeapClose { .. } => Opcode::HeapClose,
        }
    }
}

impl Response {
    /// Its kind.
    pub fn kind(&self) -> ResponseKind {
        match self {
            Response::Done => ResponseKind::Done,
            Response::Pong { .. } => ResponseKind::Pong,
            Response::Attributes(_) => ResponseKind::Attributes,
            Response::Resolved { .. } => ResponseKind::Resolved,
            Response::Handle(_) => ResponseKind::Handle,
            Response::Opened { .. } => ResponseKind::Opened,
            Response::PathOpened { .. } => ResponseKind::PathOpened,
            Response::Created { .. } => ResponseKind::Created,
            Response::Data(_) => ResponseKind::Data,
            Response::Length(_) => ResponseKind::Length,
            Response::Entries(_) => ResponseKind::Entries,
            Response::Names(_) => ResponseKind::Names,
            Response::FsStats(_) => ResponseKind::FsStats,
            Response::Value(_) => ResponseKind::Value,
            Response::ValueInBuffer { .. } => ResponseKind::ValueInBuffer,
            Response::Head(_) => ResponseKind::Head,
            Response::Deleted(_) => ResponseKind::Deleted,
            Response::ScanPage { .. } => ResponseKind::ScanPage,
            Response::Text(_) => ResponseKind::Text,
            Response::Redirect { .. } => ResponseKind::Redirect,
            Response::Error { .. } => ResponseKind::Error,
            Response::BatchApplied(_) => ResponseKind::BatchApplied,
            Response::Lease(_) => ResponseKind::Lease,
            Response::HeapObject(_) => ResponseKind::HeapObject,
            Response::HeapAttached { .. } => ResponseKind::HeapAttached,
            Response::HeapType(_) => ResponseKind::HeapType,
            Response::HeapBlock { .. } => ResponseKind::HeapBlock,
        }
    }
}

/// The opcode's name, for logs: `Lookup`, `KvPut`.
impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.opcode().name())
    }
}

/// The kind's name, and for an error its errno and message, for logs.
impl fmt::Display for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Response::Error { errno, message } => write!(f, "Error (errno {errno}: {message})"),
            _ => f.write_str(self.kind().name()),
        }
    }
}
