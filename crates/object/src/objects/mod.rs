//! Objects: u64 ids whose bytes live inline in their onode (small objects)
//! or in container extents described by fmap entries (DESIGN.md, layer 5).
//!
//! Every change is a transaction on the object (`Store::transact`), so its
//! onode and fmap entries change atomically in one log record. Large writes
//! shadow: new bytes go to fresh space, the fmap flips in the record, and
//! the space it stops referencing is freed at the record's LSN, reused only
//! once that record is durable and no older reader remains.
//!
//! Invariants the code keeps, so that every read-modify-write is simple:
//! fmap entries of an object never end past its size, and every byte of a
//! container block past an entry's logical end is zero (its crc says so).
//! So bytes past the size always read as zeros, and growing an object never
//! needs to clear anything.

mod delete;
mod extent_cache;
mod fmap;
mod heap_data;
mod heap_files;
mod heap_free;
mod heap_images;
mod in_txn;
mod prealloc;
mod read;
mod read_many;
mod replay;
mod write;
mod xattrs;

pub(crate) use extent_cache::{maps_after, ExtentCache};
pub use heap_files::{HeapRecovery, SpareFill, HEAP_DIR};
pub use heap_free::FreedHeapObject;
pub use read_many::FetchedOnodes;
pub(crate) use replay::{DataDamage, ReplayVerifier};

use crate::error::{ObjectError, Result};
use crate::meta::{Kind, Onode, Orphan, OrphanReason, Timestamp, BLOCK_BYTES};
use crate::store::{Durability, Store};
use crate::txn::Transaction;

/// `n` rounded down to a block boundary.
pub(crate) fn align_down(n: u64) -> u64 {
    n - n % BLOCK_BYTES
}

/// `n` rounded up to a block boundary (`n` is at most the largest object
/// size, so this cannot overflow).
pub(crate) fn align_up(n: u64) -> u64 {
    n.div_ceil(BLOCK_BYTES).saturating_mul(BLOCK_BYTES)
}

/// A usize from a u64 that indexes a buffer already in memory.
pub(crate) fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The onode of a locked object that has bytes: it exists and is a file
/// or a symlink. Its bytes may be in a heap file: callers check
/// [`heap_data::heap_file`] first, since those take their own path.
pub(crate) fn data_onode(txn: &Transaction<'_>, object: u64) -> Result<Onode> {
    let onode = txn.onode(object)?.ok_or(ObjectError::NoSuchObject { object })?;
    if !matches!(onode.kind, Kind::File | Kind::Symlink) {
        return Err(ObjectError::NoData { object, what: format!("a {:?}", onode.kind) });
    }
    Ok(onode)
}

/// Marks a change of the object's bytes.
pub(crate) fn touch_data(onode: &mut Onode) {
    let now = Timestamp::now();
    onode.mtime = now;
    onode.ctime = now;
    // Cached copies (leases, client caches) must notice new bytes.
    onode.generation = onode.generation.wrapping_add(1);
}

impl Store {
    /// Creates an object of `kind` with no name and returns its id (see
    /// [`Transaction::create_object`]). It is an anonymous orphan (as an
    /// `O_TMPFILE` file is): linking it gives it a name and ends that;
    /// otherwise the next open of the store frees it, so an object whose
    /// creator died before naming it never leaks.
    pub fn create_object(&self, kind: Kind, mode: u32, uid: u32, gid: u32, durability: Durability) -> Result<u64> {
        let record = Orphan { reason: OrphanReason::Anonymous, since: Timestamp::now() }.encode()?;
        Ok(self
            .transact(&[], durability, |txn| {
                let id = txn.create_object(kind, mode, uid, gid)?;
                txn.put(&crate::meta::orphan_key(id), &record);
                Ok(id)
            })?
            .0)
    }

    /// The onode of `object` as of now, or `None` if it does not exist.
    pub fn stat(&self, object: u64) -> Result<Option<Onode>> {
        self.get_meta(&crate::meta::onode_key(object))?.map(|v| v.onode(&self.limits())).transpose()
    }

    /// `f` of the onode of `object` as of now (`None` if it does not
    /// exist), borrowed from the metadata cache: no copy of the onode, for
    /// callers that want its attributes. An inline object's location is
    /// given without its bytes (read those with [`Store::read`]).
    pub fn with_attributes<T>(&self, object: u64, f: impl FnOnce(&Onode) -> T) -> Result<Option<T>> {
        let Some(v) = self.get_meta(&crate::meta::onode_key(object))? else { return Ok(None) };
        Ok(Some(f(v.attributes(&self.limits())?)))
    }

    /// As [`Store::with_attributes`], for the object a dentry names, read
    /// through the dentry's value `dentry` (from [`Store::get_meta`]): the
    /// dentry remembers the onode, so while nothing is committed a second
    /// lookup of the name costs one cache search (see
    /// [`Store::attributes_linked`]).
    pub fn with_attributes_linked<T>(
        &self,
        dentry: &crate::store::MetaValue,
        object: u64,
        f: impl FnOnce(&Onode) -> T,
    ) -> Result<Option<T>> {
        self.attributes_linked(dentry, &crate::meta::onode_key(object), f)
    }
}
