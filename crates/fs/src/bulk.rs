//! Bulk creation: many empty files in one directory in a few
//! transactions, the paper's blind create made safe. Names are sorted and
//! checked against each other and against the directory under the
//! directory's lock; a name already there (or twice in the batch) is
//! returned as a duplicate and gets no object.
//!
//! The check against the directory: none at all while the directory is
//! empty, else an index point read per name, which for a name the
//! directory does not hold is answered by the memtable and the runs'
//! bloom filters without reading a data block (the index's counters show
//! it).
//!
//! A large batch ([`BULK_RUN_MIN`] names or more) is committed in chunks
//! of [`BULK_RUN_CHUNK`] names, each written directly as a sorted run of
//! the index (`Store::transact_as_run`): its bytes are written once,
//! bypassing the log, the memtable and the flush. A smaller one is
//! committed as log records of [`BULK_CHUNK`] names.

use larder_namespace::NamespaceTxn;
use larder_object::meta::{Kind, Name, MODE_PERM_MASK};
use larder_object::{Durability, LockRequest, Transaction};

use crate::cred::Cred;
use crate::error::Result;
use crate::names::{dir_in, new_name, touch_dir};
use crate::perm::{self, EXEC, WRITE};
use crate::Fs;

/// Names created per log record when a batch is small: a few hundred KiB.
pub const BULK_CHUNK: usize = 1024;
/// Batches of at least this many names are committed as index runs.
pub const BULK_RUN_MIN: usize = 16_384;
/// Names per index run of a large batch (tens of MiB of metadata).
pub const BULK_RUN_CHUNK: usize = 262_144;

/// What a bulk create did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BulkCreated {
    /// The names created and their objects, in name order.
    pub created: Vec<(Vec<u8>, u64)>,
    /// Names not created: already in the directory, or repeated in the
    /// batch (each repeat once), in name order.
    pub duplicates: Vec<Vec<u8>>,
}

impl Fs {
    /// Creates an empty regular file with permission bits `mode` for
    /// every name in `names` in directory `parent`. Returns what was
    /// created and the duplicates, which get no object. A name that is not
    /// valid fails the whole call before anything is written.
    ///
    /// Small batches commit in transactions of [`BULK_CHUNK`] names, the
    /// last with `durability` (earlier ones buffered); batches of
    /// [`BULK_RUN_MIN`] names or more commit each chunk of
    /// [`BULK_RUN_CHUNK`] durably as an index run, whatever `durability`
    /// says. Either way a crash keeps a prefix of the chunks.
    pub fn create_batch(
        &self,
        cred: &Cred,
        parent: u64,
        names: &[&[u8]],
        mode: u32,
        durability: Durability,
    ) -> Result<BulkCreated> {
        let mut sorted: Vec<Name> = names.iter().map(|n| new_name(n)).collect::<Result<_>>()?;
        sorted.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        let mut out = BulkCreated::default();
        let mut unique: Vec<Name> = Vec::with_capacity(sorted.len());
        for n in sorted {
            if unique.last().is_some_and(|last| last.as_bytes() == n.as_bytes()) {
                out.duplicates.push(n.into_bytes());
            } else {
                unique.push(n);
            }
        }
        let as_runs = unique.len() >= BULK_RUN_MIN;
        let chunks: Vec<&[Name]> = unique.chunks(if as_runs { BULK_RUN_CHUNK } else { BULK_CHUNK }).collect();
        let lock = [LockRequest::Exclusive(parent)];
        for (i, chunk) in chunks.iter().enumerate() {
            let create = |txn: &mut Transaction<'_>| create_chunk(txn, cred, parent, chunk, mode);
            let (created, dups) = if as_runs {
                self.store.transact_as_run(&lock, create)?.0
            } else {
                let d = if i + 1 == chunks.len() { durability } else { Durability::Buffered };
                self.store.transact_locked(&lock, d, create)?.0
            };
            out.created.extend(created);
            out.duplicates.extend(dups);
        }
        out.duplicates.sort_unstable();
        if out.created.is_empty() && durability == Durability::Durable {
            self.sync()?;
        }
        Ok(out)
    }
}

/// Names created and duplicates found by one chunk.
type ChunkDone = (Vec<(Vec<u8>, u64)>, Vec<Vec<u8>>);

/// Creates the names of `chunk` (sorted, distinct) in `parent`, held
/// exclusively, except those it already holds.
fn create_chunk(txn: &mut Transaction<'_>, cred: &Cred, parent: u64, chunk: &[Name], mode: u32) -> Result<ChunkDone> {
    let p = dir_in(txn, parent)?;
    perm::check(&p, parent, cred, WRITE | EXEC)?;
    let (mode, gid) = perm::new_owner(&p, cred, Kind::File, mode & MODE_PERM_MASK);
    let empty = p.dir.is_some_and(|d| d.entries == 0);
    let mut fresh: Vec<&Name> = Vec::with_capacity(chunk.len());
    let mut dups = Vec::new();
    for name in chunk {
        // An empty directory holds none of them: no read at all.
        if !empty && txn.lookup(parent, name)?.is_some() {
            dups.push(name.as_bytes().to_vec());
        } else {
            fresh.push(name);
        }
    }
    if fresh.is_empty() {
        return Ok((Vec::new(), dups));
    }
    let ids = txn.create_many_in(parent, &fresh, Kind::File, mode, cred.uid, gid)?;
    touch_dir(txn, parent)?;
    let created = fresh.iter().zip(ids).map(|(n, id)| (n.as_bytes().to_vec(), id)).collect();
    Ok((created, dups))
}
