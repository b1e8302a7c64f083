//! The KV layer's errors.

use larder_namespace::NamespaceError;
use larder_object::ObjectError;

/// Why a KV call failed. Refusals of bad input change nothing.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    /// The engine below failed (I/O, corruption, a poisoned store...).
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// A namespace rule was broken below (a damaged store, usually).
    #[error(transparent)]
    Namespace(NamespaceError),
    /// The key breaks the bucket rules.
    #[error("key {key:?} is refused: {reason}")]
    InvalidKey {
        /// The key (lossily as UTF-8).
        key: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// The bucket name breaks the rules.
    #[error("bucket name {bucket:?} is refused: {reason}")]
    InvalidBucket {
        /// The name (lossily as UTF-8).
        bucket: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// No such bucket.
    #[error("no bucket {bucket:?}; create it first (`larder put` creates buckets, or Kv::create_bucket)")]
    NoSuchBucket {
        /// The bucket.
        bucket: String,
    },
    /// The bucket exists already.
    #[error("bucket {bucket:?} already exists")]
    BucketExists {
        /// The bucket.
        bucket: String,
    },
    /// The bucket still holds keys.
    #[error("bucket {bucket:?} is not empty; delete its keys first")]
    BucketNotEmpty {
        /// The bucket.
        bucket: String,
    },
    /// A key and a directory level would share a name: `a` cannot be a key
    /// while `a/b` is one (a `/` is a directory level, as in a file system).
    #[error("key {key:?} conflicts with {other:?}: {what}")]
    KeyConflict {
        /// The key asked for.
        key: String,
        /// The existing key or level it conflicts with.
        other: String,
        /// How.
        what: &'static str,
    },
    /// The key lies inside a heap (a directory flagged `FLAG_HEAP`):
    /// readable, but its names change only through the heap.
    #[error(
        "key {key:?} is inside a heap (directory {dir}): heap names change only through the heap \
         (the heap API, or `larder heap rm`); get still reads it"
    )]
    InHeap {
        /// The key (lossily as UTF-8).
        key: String,
        /// The heap directory it lies in.
        dir: u64,
    },
    /// Concurrent changes kept moving the key's directories for too long.
    #[error("key {key:?}: gave up after {attempts} attempts while its directories kept changing")]
    Contended {
        /// The key.
        key: String,
        /// Attempts made.
        attempts: usize,
    },
}

impl KvError {
    /// Whether this is a lack of space from any layer (see
    /// [`ObjectError::is_no_space`]): nothing was changed, and deletes
    /// still succeed and give space back.
    pub fn is_no_space(&self) -> bool {
        match self {
            KvError::Object(e) | KvError::Namespace(NamespaceError::Object(e)) => e.is_no_space(),
            _ => false,
        }
    }

    /// Whether stored bytes failed their check (see
    /// [`ObjectError::is_corrupt`]): the value read is damaged on disk,
    /// never returned as wrong bytes.
    pub fn is_corrupt(&self) -> bool {
        match self {
            KvError::Object(e) | KvError::Namespace(NamespaceError::Object(e)) => e.is_corrupt(),
            _ => false,
        }
    }
}

impl From<NamespaceError> for KvError {
    fn from(e: NamespaceError) -> Self {
        match e {
            NamespaceError::Object(o) => KvError::Object(o),
            other => KvError::Namespace(other),
        }
    }
}

/// Results of this layer.
pub type Result<T> = std::result::Result<T, KvError>;

pub(crate) fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
