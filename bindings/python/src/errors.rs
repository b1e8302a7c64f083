//! Python exceptions, one class per failure a caller can act on, mapped
//! from the layers' typed errors; each keeps the Rust message (with its
//! sources where the message does not already include them).

use larder_index::IndexError;
use larder_io::IoError as StorageIoError;
use larder_kv::KvError;
use larder_object::ObjectError;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(larder, Error, PyException, "Base class of every error Larder raises.");
create_exception!(larder, NotFound, Error, "Something the call names does not exist.");
create_exception!(larder, NoSuchBucket, NotFound, "The bucket does not exist; create it first.");
create_exception!(larder, NotAStore, NotFound, "The directory holds no store.");
create_exception!(larder, AlreadyExists, Error, "Something the call would create exists already.");
create_exception!(larder, BucketExists, AlreadyExists, "The bucket exists already.");
create_exception!(larder, InvalidKey, Error, "The key breaks the rules (KV keys are paths of valid file names).");
create_exception!(larder, InvalidBucket, Error, "The bucket name breaks the rules.");
create_exception!(larder, BucketNotEmpty, Error, "The bucket still holds keys.");
create_exception!(larder, KeyConflict, Error, "A key and a directory level would share a name (`a` and `a/b`).");
create_exception!(larder, Contended, Error, "Concurrent changes kept moving the key's directories; retry.");
create_exception!(
    larder,
    NoSpace,
    Error,
    "No space left (file system or store); nothing was changed, deletes still work."
);
create_exception!(larder, TooLarge, Error, "A key, value or batch passes a documented limit.");
create_exception!(larder, Corrupt, Error, "Bytes read back fail a check (checksum, structure).");
create_exception!(
    larder,
    Poisoned,
    Error,
    "The store stopped taking writes at its first failure; reads work; reopen it."
);
create_exception!(larder, Locked, Error, "Another handle or process has the store or index open.");
create_exception!(larder, Unsupported, Error, "Written by a newer format version or with an unknown feature.");
create_exception!(larder, InvalidOption, Error, "An option is refused.");
create_exception!(larder, IoError, Error, "The operating system refused an I/O call.");
create_exception!(larder, Closed, Error, "The store, index or snapshot was closed.");

/// Adds every exception class to the module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add("Error", py.get_type::<Error>())?;
    module.add("NotFound", py.get_type::<NotFound>())?;
    module.add("NoSuchBucket", py.get_type::<NoSuchBucket>())?;
    module.add("NotAStore", py.get_type::<NotAStore>())?;
    module.add("AlreadyExists", py.get_type::<AlreadyExists>())?;
    module.add("BucketExists", py.get_type::<BucketExists>())?;
    module.add("InvalidKey", py.get_type::<InvalidKey>())?;
    module.add("InvalidBucket", py.get_type::<InvalidBucket>())?;
    module.add("BucketNotEmpty", py.get_type::<BucketNotEmpty>())?;
    module.add("KeyConflict", py.get_type::<KeyConflict>())?;
    module.add("Contended", py.get_type::<Contended>())?;
    module.add("NoSpace", py.get_type::<NoSpace>())?;
    module.add("TooLarge", py.get_type::<TooLarge>())?;
    module.add("Corrupt", py.get_type::<Corrupt>())?;
    module.add("Poisoned", py.get_type::<Poisoned>())?;
    module.add("Locked", py.get_type::<Locked>())?;
    module.add("Unsupported", py.get_type::<Unsupported>())?;
    module.add("InvalidOption", py.get_type::<InvalidOption>())?;
    module.add("IoError", py.get_type::<IoError>())?;
    module.add("Closed", py.get_type::<Closed>())?;
    Ok(())
}

/// Which exception class an error maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Base,
    NoSuchBucket,
    NotAStore,
    NotFound,
    AlreadyExists,
    BucketExists,
    InvalidKey,
    InvalidBucket,
    BucketNotEmpty,
    KeyConflict,
    Contended,
    NoSpace,
    TooLarge,
    Corrupt,
    Poisoned,
    Locked,
    Unsupported,
    InvalidOption,
    Io,
}

impl Class {
    fn error(self, message: String) -> PyErr {
        match self {
            Class::Base => Error::new_err(message),
            Class::NoSuchBucket => NoSuchBucket::new_err(message),
            Class::NotAStore => NotAStore::new_err(message),
            Class::NotFound => NotFound::new_err(message),
            Class::AlreadyExists => AlreadyExists::new_err(message),
            Class::BucketExists => BucketExists::new_err(message),
            Class::InvalidKey => InvalidKey::new_err(message),
            Class::InvalidBucket => InvalidBucket::new_err(message),
            Class::BucketNotEmpty => BucketNotEmpty::new_err(message),
            Class::KeyConflict => KeyConflict::new_err(message),
            Class::Contended => Contended::new_err(message),
            Class::NoSpace => NoSpace::new_err(message),
            Class::TooLarge => TooLarge::new_err(message),
            Class::Corrupt => Corrupt::new_err(message),
            Class::Poisoned => Poisoned::new_err(message),
            Class::Locked => Locked::new_err(message),
            Class::Unsupported => Unsupported::new_err(message),
            Class::InvalidOption => InvalidOption::new_err(message),
            Class::Io => IoError::new_err(message),
        }
    }
}

/// The error's message followed by those of its sources that it does not
/// already quote (`#[error(transparent)]` and `{source}` quote them).
fn message(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn io_class(error: &StorageIoError) -> Class {
    match error {
        StorageIoError::NoSpace { .. } => Class::NoSpace,
        StorageIoError::NotFound { .. } => Class::NotFound,
        StorageIoError::AlreadyExists { .. } => Class::AlreadyExists,
        StorageIoError::Locked { .. } => Class::Locked,
        StorageIoError::Poisoned { .. } => Class::Poisoned,
        StorageIoError::UnexpectedEof { .. } => Class::Corrupt,
        _ => Class::Io,
    }
}

fn index_class(error: &IndexError) -> Class {
    match error {
        IndexError::Io(io) => io_class(io),
        IndexError::Corrupt { .. } => Class::Corrupt,
        IndexError::NewerVersion { .. } | IndexError::UnknownFeature { .. } => Class::Unsupported,
        IndexError::TooLarge { .. } => Class::TooLarge,
        IndexError::InvalidOption { .. } => Class::InvalidOption,
        IndexError::Poisoned(_) => Class::Poisoned,
        _ => Class::Base,
    }
}

fn log_class(error: &larder_log::LogError) -> Class {
    use larder_log::LogError;
    match error {
        LogError::Io(io) => io_class(io),
        LogError::Corrupt { .. } | LogError::CorruptRecord { .. } | LogError::MissingRecords { .. } => Class::Corrupt,
        LogError::NewerVersion { .. } | LogError::UnknownFeature { .. } => Class::Unsupported,
        LogError::TooLarge { .. } => Class::TooLarge,
        LogError::Full { .. } => Class::NoSpace,
        LogError::Poisoned(_) => Class::Poisoned,
        LogError::InvalidOption { .. } => Class::InvalidOption,
        _ => Class::Base,
    }
}

fn space_class(error: &larder_space::SpaceError) -> Class {
    use larder_space::SpaceError;
    match error {
        SpaceError::Io(io) => io_class(io),
        SpaceError::Corrupt { .. } => Class::Corrupt,
        SpaceError::InvalidOption { .. } => Class::InvalidOption,
        SpaceError::Stopped => Class::Poisoned,
        _ => Class::Base,
    }
}

fn object_class(error: &ObjectError) -> Class {
    if error.is_no_space() {
        return Class::NoSpace;
    }
    match error {
        ObjectError::Io(io) => io_class(io),
        ObjectError::Index(e) => index_class(e),
        ObjectError::Log(e) => log_class(e),
        ObjectError::Space(e) => space_class(e),
        ObjectError::ApplyFailed { .. } | ObjectError::Stopped { .. } | ObjectError::Poisoned { .. } => Class::Poisoned,
        ObjectError::Checkpoint { source, .. } => match source {
            larder_object::CheckpointError::IndexFlush(e) => index_class(e),
            larder_object::CheckpointError::Log(e) => log_class(e),
            _ => Class::Base,
        },
        ObjectError::Corrupt { .. } | ObjectError::BadRecord { .. } => Class::Corrupt,
        ObjectError::NewerVersion { .. } | ObjectError::UnknownFeature { .. } | ObjectError::NewerRecord { .. } => {
            Class::Unsupported
        }
        ObjectError::InvalidOption { .. } => Class::InvalidOption,
        ObjectError::AlreadyExists { .. } => Class::AlreadyExists,
        ObjectError::NotAStore { .. } => Class::NotAStore,
        ObjectError::TooLarge { .. } => Class::TooLarge,
        ObjectError::InvalidName { .. } => Class::InvalidKey,
        _ => Class::Base,
    }
}

fn kv_class(error: &KvError) -> Class {
    if error.is_no_space() {
        return Class::NoSpace;
    }
    match error {
        KvError::Object(e) => object_class(e),
        KvError::InvalidKey { .. } => Class::InvalidKey,
        KvError::InvalidBucket { .. } => Class::InvalidBucket,
        KvError::NoSuchBucket { .. } => Class::NoSuchBucket,
        KvError::BucketExists { .. } => Class::BucketExists,
        KvError::BucketNotEmpty { .. } => Class::BucketNotEmpty,
        KvError::KeyConflict { .. } => Class::KeyConflict,
        KvError::Contended { .. } => Class::Contended,
        _ => Class::Base,
    }
}

/// The Python exception for a KV error.
pub(crate) fn kv_error(error: KvError) -> PyErr {
    kv_class(&error).error(message(&error))
}

/// The Python exception for an index error.
pub(crate) fn index_error(error: IndexError) -> PyErr {
    index_class(&error).error(message(&error))
}

/// The exception for a call on something closed.
pub(crate) fn closed(what: &str) -> PyErr {
    Closed::new_err(format!("the {what} is closed"))
}
