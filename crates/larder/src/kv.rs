//! The key-value API ([`larder_kv`]): buckets of objects whose keys are
//! paths, reached through [`Store::kv`](crate::Store::kv).
//!
//! A bucket is a directory under the store's root and a key a path in it,
//! whose `/` separates directory levels (created by a put, removed when a
//! delete empties them); the same objects appear as files through the
//! file system API. Keys breaking the rules ([`key`]) are refused with
//! [`KvError::InvalidKey`] and change nothing. Scans return keys in byte
//! order of the whole key.
//!
//! Every change is one transaction, committed with the [`Durability`] the
//! call asks for: [`Durability::Durable`] returns once the change and
//! everything before it is on disk; [`Durability::Buffered`] returns at
//! once (the change is visible to every reader) and is durable within the
//! store's buffered sync interval, or at the next durable call or
//! [`Kv::sync`]. A crash loses at most the latest buffered changes, never
//! one without those before it. Bucket creation and deletion are always
//! durable.

pub use larder_kv::{
    key, Durability, Head, Kv, KvBatch, KvCreated, KvError, KvOptions, KvReader, KvWriter, Scan, ScanEntry,
};
