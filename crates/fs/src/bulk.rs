//! Bulk creation of empty files in one directory: the namespace's bulk
//! create (`larder_namespace::bulk`, which says how names are checked and
//! how chunks commit) with the file system's checks: a valid name each,
//! write and search permission on the directory, the new files' owner
//! and group as `open(O_CREAT)` would give them, and the directory's times.

use larder_namespace::bulk::{self, NewFile, NewOwner};
use larder_object::meta::{Kind, MODE_PERM_MASK};
use larder_object::Durability;

use crate::cred::Cred;
use crate::error::Result;
use crate::names::{new_name, touch_dir};
use crate::perm::{self, EXEC, WRITE};
use crate::Fs;

pub use larder_namespace::bulk::BulkCreated;

impl Fs {
    /// Creates an empty regular file with permission bits `mode` for
    /// every name in `names` in directory `parent`. Returns what was
    /// created and the duplicates (already in the directory, or repeated
    /// in the batch), which get no object. A name that is not valid fails
    /// the whole call before anything is written.
    ///
    /// Small batches commit in transactions of
    /// [`BULK_CHUNK`](larder_namespace::bulk::BULK_CHUNK) names, the last
    /// with `durability` (earlier ones buffered); batches of
    /// [`BULK_RUN_MIN`](larder_namespace::bulk::BULK_RUN_MIN) names or more
    /// commit each chunk durably as an index run, whatever `durability`
    /// says. Either way a crash keeps a prefix of the chunks.
    pub fn create_batch(
        &self,
        cred: &Cred,
        parent: u64,
        names: &[&[u8]],
        mode: u32,
        durability: Durability,
    ) -> Result<BulkCreated> {
        let files: Vec<NewFile<'_>> =
            names.iter().map(|n| Ok(NewFile { name: new_name(n)?, data: &[] })).collect::<Result<_>>()?;
        bulk::create_files(
            &self.store,
            parent,
            files,
            durability,
            |_, p| -> Result<NewOwner> {
                crate::names::refuse_removed(p, parent)?;
                crate::heap::refuse_in_heap(p, parent, "create")?;
                perm::check(p, parent, cred, WRITE | EXEC)?;
                let (mode, gid) = perm::new_owner(p, cred, Kind::File, mode & MODE_PERM_MASK);
                Ok(NewOwner { mode, owner: (cred.uid, gid) })
            },
            |txn| touch_dir(txn, parent),
        )
    }
}
