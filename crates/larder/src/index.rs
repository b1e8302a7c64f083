//! The standalone index ([`larder_index`]): a persistent, ordered key-value
//! map with byte keys, on its own in a directory (not inside a store).
//!
//! Writes are atomic batches ([`WriteBatch`]: puts, deletes, range deletes
//! and merges), each with a sequence number greater than any before it
//! ([`Index::last_seq`] + 1 for a single writer). They are visible at once
//! and durable only once flushed: the index keeps no log of its own, so
//! [`Index::flush`] (or [`Index::close`]) makes every batch so far durable
//! and [`Index::durable_seq`] says how far that has got; a crash loses the
//! batches after it. Reads see whole batches; a [`Snapshot`] keeps seeing
//! the index as it was when taken. Scans ([`Index::range`],
//! [`Index::prefix`], [`Index::iter`]) run forward or backward in byte
//! order.

use std::path::Path;
use std::sync::Arc;

pub use larder_index::{
    BatchOp, CounterOperator, Index, IndexError, IndexStats, Iter, MergeOperator, Options as IndexOptions, Snapshot,
    WriteBatch, MAX_KEY_BYTES, MAX_VALUE_BYTES,
};

use crate::error::Result;

/// Opens the index in `dir` on the real file system, creating it if the
/// directory is empty or missing, and taking its lock (one process at a
/// time). [`crate::Options::index_options`] gives the options from the
/// crate's one set of settings.
///
/// Refuses, naming the file, an index whose files fail their checks or
/// come from a newer version ([`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt)),
/// and invalid options ([`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)).
///
/// ```
/// use std::ops::Bound;
/// use larder::index::WriteBatch;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let tmp = tempfile::tempdir()?;
/// let index = larder::index::open(tmp.path(), larder::Options::new().memtable_bytes(4 << 20).index_options())?;
/// let mut batch = WriteBatch::new();
/// batch.put(b"apple", b"red").put(b"banana", b"yellow").put(b"cherry", b"dark red");
/// index.write(index.last_seq() + 1, &batch)?;
///
/// let before = index.snapshot();
/// index.write(index.last_seq() + 1, WriteBatch::new().delete(b"banana"))?;
/// assert_eq!(index.get(b"banana")?, None);
/// assert_eq!(before.get(b"banana")?, Some(b"yellow".to_vec()));
///
/// // Keys from "b" up to (not including) "d", forward.
/// let keys: Vec<Vec<u8>> = before
///     .range(Bound::Included(&b"b"[..]), Bound::Excluded(&b"d"[..]), true)?
///     .map(|entry| entry.map(|(key, _value)| key))
///     .collect::<Result<_, _>>()?;
/// assert_eq!(keys, [b"banana".to_vec(), b"cherry".to_vec()]);
///
/// index.flush()?; // every batch so far is durable now
/// assert_eq!(index.durable_seq(), index.last_seq());
/// index.close()?;
/// # Ok(())
/// # }
/// ```
pub fn open(dir: impl AsRef<Path>, options: IndexOptions) -> Result<Index> {
    Ok(Index::open(Arc::new(larder_io::RealStorage::new()), dir.as_ref(), options)?)
}
