//! The heap's error type.

use larder_io::IoError;
use larder_namespace::NamespaceError;
use larder_object::ObjectError;

/// Result of a heap call.
pub type Result<T, E = HeapError> = std::result::Result<T, E>;

/// What went wrong in the heap, and on what.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HeapError {
    /// No such object, name, type or heap (or it was freed).
    #[error("not found: {what}")]
    NotFound {
        /// What was looked for.
        what: String,
    },
    /// The name is taken (`add_name` lost a race or the name was given).
    #[error("name {name:?} already exists in the heap")]
    AlreadyExists {
        /// The name.
        name: String,
    },
    /// A persistent pointer's target was freed (its generation no longer
    /// matches): the bytes it named may have been reused.
    #[error("stale pointer to object {object} offset {offset} generation {generation}")]
    Stale {
        /// The pointer's object.
        object: u64,
        /// Its offset.
        offset: u64,
        /// Its generation.
        generation: u64,
    },
    /// The object's file is shorter than its durable size: something
    /// outside Larder shrank it. Not mapped (a load past the file's end
    /// would be a SIGBUS).
    #[error(
        "heap object {object}: its file has {file_len} bytes, below the {durable} known durable; refusing to map it"
    )]
    Shrunk {
        /// The object.
        object: u64,
        /// The file's length.
        file_len: u64,
        /// Its durable size.
        durable: u64,
    },
    /// The caller's credentials do not allow the operation.
    #[error("permission denied: {what}")]
    PermissionDenied {
        /// What was refused.
        what: String,
    },
    /// A type's offsets are not valid, or do not fit the object.
    #[error("bad type: {reason}")]
    BadType {
        /// Why.
        reason: String,
    },
    /// A pointer read from an object (by `clone`) or given by the caller
    /// names no object of this heap or lies outside its target.
    #[error("bad pointer to object {object} offset {offset}: {reason}")]
    BadPointer {
        /// The pointer's object.
        object: u64,
        /// Its offset.
        offset: u64,
        /// Why.
        reason: String,
    },
    /// An access past the object's size.
    #[error("object {object}: {len} bytes at offset {offset} are past its size {size}")]
    OutOfBounds {
        /// The object.
        object: u64,
        /// Where the access starts.
        offset: u64,
        /// How many bytes.
        len: u64,
        /// The object's size.
        size: u64,
    },
    /// A size, alignment or count above the heap's limits, or an object
    /// asked to shrink.
    #[error("invalid argument: {what}")]
    InvalidArgument {
        /// What was wrong.
        what: String,
    },
    /// The path names something that is not a heap.
    #[error("{path} is not a heap: {why}")]
    NotAHeap {
        /// The path.
        path: String,
        /// Why.
        why: String,
    },
    /// The heap stores pointers in the machine's byte order and its files
    /// are little-endian.
    #[error("the heap needs a little-endian machine")]
    BigEndian,
    /// The object allocator failed.
    #[error("allocator of object {object}: {source}")]
    Arena {
        /// The object.
        object: u64,
        /// What the allocator said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The object layer failed (I/O, corruption, a poisoned store).
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// The namespace failed.
    #[error(transparent)]
    Namespace(NamespaceError),
    /// The io layer failed.
    #[error(transparent)]
    Io(#[from] IoError),
}

impl From<NamespaceError> for HeapError {
    fn from(e: NamespaceError) -> Self {
        match e {
            NamespaceError::Object(o) => HeapError::Object(o),
            NamespaceError::Exists { name, .. } => HeapError::AlreadyExists { name },
            NamespaceError::NotFound { name, .. } => HeapError::NotFound { what: format!("name {name:?}") },
            other => HeapError::Namespace(other),
        }
    }
}

impl From<larder_index::IndexError> for HeapError {
    fn from(e: larder_index::IndexError) -> Self {
        HeapError::Object(e.into())
    }
}

pub(crate) fn not_found(what: impl Into<String>) -> HeapError {
    HeapError::NotFound { what: what.into() }
}

pub(crate) fn invalid(what: impl Into<String>) -> HeapError {
    HeapError::InvalidArgument { what: what.into() }
}
