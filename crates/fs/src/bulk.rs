//! Bulk creation: many empty files in one directory in a few
//! transactions, the paper's blind create made safe. Names are sorted
//! and checked against each other and against the directory under the
//! directory's lock; a name already there (or twice in the batch) is
//! returned as a duplicate and gets no object. The check is an index
//! point read per name, which for a name the directory does not hold is
//! answered by the memtable and the runs' bloom filters without reading a
//! data block (the index's counters show it).
//!
//! Not yet: a large batch written directly as a sorted run of the index
//! (bypassing memtable and log); today each chunk is one log record.

use larder_namespace::NamespaceTxn;
use larder_object::meta::{Kind, Name, MODE_PERM_MASK};
use larder_object::{Durability, LockRequest};

use crate::cred::Cred;
use crate::error::Result;
use crate::names::{dir_in, new_name, touch_dir};
use crate::perm::{self, EXEC, WRITE};
use crate::Fs;

/// Names created per transaction (one log record each): a few hundred KiB.
pub const BULK_CHUNK: usize = 1024;

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
    /// every name in `names` in directory `parent`, in transactions of
    /// [`BULK_CHUNK`] names committed with `durability` (the last one;
    /// earlier chunks are buffered). Returns what was created and the
    /// duplicates, which get no object. A name that is not valid fails
    /// the whole call before anything is written.
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
        let chunks: Vec<&[Name]> = unique.chunks(BULK_CHUNK).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let last = i + 1 == chunks.len();
            let d = if last { durability } else { Durability::Buffered };
            let (done, _) = self.store.transact_locked(&[LockRequest::Exclusive(parent)], d, |txn| -> Result<_> {
                let p = dir_in(txn, parent)?;
                perm::check(&p, parent, cred, WRITE | EXEC)?;
                let (mode, gid) = perm::new_owner(&p, cred, Kind::File, mode & MODE_PERM_MASK);
                let mut created = Vec::with_capacity(chunk.len());
                let mut dups = Vec::new();
                for name in chunk.iter() {
                    if txn.lookup(parent, name)?.is_some() {
                        dups.push(name.as_bytes().to_vec());
                        continue;
                    }
                    let id = txn.create_in(parent, name, Kind::File, mode, cred.uid, gid)?;
                    created.push((name.as_bytes().to_vec(), id));
                }
                if !created.is_empty() {
                    touch_dir(txn, parent)?;
                }
                Ok((created, dups))
            })?;
            out.created.extend(done.0);
            out.duplicates.extend(done.1);
        }
        out.duplicates.sort_unstable();
        if out.created.is_empty() && durability == Durability::Durable {
            self.sync()?;
        }
        Ok(out)
    }
}
