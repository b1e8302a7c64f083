//! Where the store commands send their calls: the server serving the
//! store, when one does (its socket in the store's directory answers), or
//! else the store itself, opened in this process. The person running the
//! command does not choose; `put`, `get`, `cat`, `ls`, `rm`, `import`,
//! `export` and `stats` work the same either way.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{Context, Result};
use larder_client::{Client, ClientError};
use larder_kv::{Kv, KvError};

use crate::store;

/// When a write returns (the CLI's choice, mapped for either target).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Durability {
    /// On disk when the call returns.
    Durable,
    /// Visible at once; durable within the store's interval or at a sync.
    Buffered,
}

impl Durability {
    fn embedded(self) -> larder_kv::Durability {
        match self {
            Durability::Durable => larder_kv::Durability::Durable,
            Durability::Buffered => larder_kv::Durability::Buffered,
        }
    }

    fn served(self) -> larder_client::Durability {
        match self {
            Durability::Durable => larder_client::Durability::Durable,
            Durability::Buffered => larder_client::Durability::Buffered,
        }
    }
}

/// A store reached in this process or through its server.
pub(crate) enum Target {
    /// Opened here: this process holds the store's LOCK until `close`.
    Embedded(Kv),
    /// Served by another process.
    Served(Client),
}

/// A value being written in pieces, stored whole at `finish`.
pub(crate) trait ValueWriter: Write {
    /// Stores what was written, atomically.
    fn finish(self: Box<Self>) -> Result<()>;
}

impl ValueWriter for larder_kv::KvWriter<'_> {
    fn finish(self: Box<Self>) -> Result<()> {
        Ok(larder_kv::KvWriter::finish(*self)?)
    }
}

impl ValueWriter for larder_client::KvWriter {
    fn finish(self: Box<Self>) -> Result<()> {
        Ok(larder_client::KvWriter::finish(*self)?)
    }
}

/// One key of a listing: the key and its value's size.
pub(crate) struct Listed {
    pub(crate) key: Vec<u8>,
    pub(crate) size: u64,
}

impl Target {
    /// The server serving `dir` if there is one, else the store opened here.
    pub(crate) fn open(dir: &Path) -> Result<Target> {
        if larder_client::socket_of(dir).exists() {
            // A command reads each thing once: leases would only add
            // round trips.
            match Client::connect_socket_with(&larder_client::socket_of(dir), false) {
                Ok(client) => return Ok(Target::Served(client)),
                // A socket file nobody listens on: a server that died.
                // Opening the store here recovers it.
                Err(ClientError::Connect { .. }) => {}
                Err(e) => {
                    return Err(anyhow::Error::new(e).context(format!(
                        "connecting to the server of the store at {}; is it a larder of the same version?",
                        dir.display()
                    )))
                }
            }
        }
        store::open(dir).map(Target::Embedded)
    }

    /// Finishes: a store opened here is closed (everything made durable);
    /// a served one stays with its server.
    pub(crate) fn close(self, dir: &Path) -> Result<()> {
        match self {
            Target::Embedded(kv) => store::close(kv, dir),
            Target::Served(_) => Ok(()),
        }
    }

    /// Creates `bucket` unless it exists.
    pub(crate) fn ensure_bucket(&self, bucket: &str) -> Result<()> {
        match self {
            Target::Embedded(kv) => store::ensure_bucket(kv, bucket),
            Target::Served(client) => match client.create_bucket(bucket) {
                Ok(()) => Ok(()),
                Err(e) if e.errno() == libc::EEXIST => Ok(()),
                Err(e) => Err(anyhow::Error::new(e).context(format!("creating bucket {bucket:?}"))),
            },
        }
    }

    /// Stores `value` under `key`.
    pub(crate) fn put(&self, bucket: &str, key: &[u8], value: &[u8], durability: Durability) -> Result<()> {
        match self {
            Target::Embedded(kv) => Ok(kv.put(bucket, key, value, durability.embedded())?),
            Target::Served(client) => Ok(client.put(bucket, key, value, durability.served())?),
        }
    }

    /// A writer for a value too large to hold whole.
    pub(crate) fn writer(&self, bucket: &str, key: &[u8], durability: Durability) -> Result<Box<dyn ValueWriter + '_>> {
        Ok(match self {
            Target::Embedded(kv) => Box::new(kv.writer(bucket, key, durability.embedded())?),
            Target::Served(client) => Box::new(client.writer(bucket, key, durability.served())?),
        })
    }

    /// A reader of the value under `key` and its size, or none.
    pub(crate) fn reader(&self, bucket: &str, key: &[u8]) -> Result<Option<(Box<dyn Read + '_>, u64)>> {
        Ok(match self {
            Target::Embedded(kv) => kv.reader(bucket, key)?.map(|r| {
                let size = r.size();
                (Box::new(r) as Box<dyn Read>, size)
            }),
            Target::Served(client) => client.reader(bucket, key)?.map(|r| {
                let size = r.size();
                (Box::new(r) as Box<dyn Read>, size)
            }),
        })
    }

    /// Removes `key`; whether it was there.
    pub(crate) fn delete(&self, bucket: &str, key: &[u8], durability: Durability) -> Result<bool> {
        match self {
            Target::Embedded(kv) => Ok(kv.delete(bucket, key, durability.embedded())?),
            Target::Served(client) => Ok(client.delete(bucket, key, durability.served())?),
        }
    }

    /// Removes an empty bucket.
    pub(crate) fn delete_bucket(&self, bucket: &str) -> Result<()> {
        match self {
            Target::Embedded(kv) => Ok(kv.delete_bucket(bucket)?),
            Target::Served(client) => Ok(client.delete_bucket(bucket)?),
        }
    }

    /// The buckets.
    pub(crate) fn buckets(&self) -> Result<Vec<Vec<u8>>> {
        match self {
            Target::Embedded(kv) => Ok(kv.buckets()?),
            Target::Served(client) => Ok(client.buckets()?),
        }
    }

    /// The keys of `bucket` under `prefix`, in order.
    pub(crate) fn scan_prefix(
        &self,
        bucket: &str,
        prefix: &[u8],
    ) -> Result<Box<dyn Iterator<Item = Result<Listed>> + '_>> {
        Ok(match self {
            Target::Embedded(kv) => Box::new(kv.scan_prefix(bucket, prefix)?.map(|entry| {
                entry.map(|e| Listed { key: e.key, size: e.size }).map_err(|e: KvError| anyhow::Error::new(e))
            })),
            Target::Served(client) => Box::new(
                client
                    .scan_prefix(bucket, prefix)
                    .map(|entry| entry.map(|e| Listed { key: e.key, size: e.size }).map_err(anyhow::Error::new)),
            ),
        })
    }

    /// Values above this size are better streamed through a writer than
    /// sent whole: the KV writer's chunk here, what one request holds
    /// inline through a server.
    pub(crate) fn stream_above(&self) -> u64 {
        match self {
            Target::Embedded(_) => crate::objects::STREAM_ABOVE_BYTES,
            Target::Served(client) => client.max_inline_bytes() as u64,
        }
    }

    /// The store's counters, as text.
    pub(crate) fn stats(&self) -> Result<String> {
        match self {
            Target::Embedded(kv) => crate::stats::report(kv).context("reading the counters"),
            Target::Served(client) => Ok(client.stats()?),
        }
    }
}
