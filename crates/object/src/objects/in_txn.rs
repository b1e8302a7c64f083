//! The object operations inside a caller's transaction, so that a
//! namespace change and the data it names commit in one record (a KV put
//! creates an object, writes its bytes and links its name atomically).

use super::delete::{delete_in, truncate_in};
use super::fmap::read_range;
use super::to_usize;
use super::write::write_in;
use crate::error::{ObjectError, Result};
use crate::meta::MAX_OBJECT_BYTES;
use crate::txn::Transaction;

impl Transaction<'_> {
    /// Writes `data` at `offset` of `object` (held exclusively), as
    /// [`Store::write`](crate::Store::write) does.
    pub fn write(&mut self, object: u64, offset: u64, data: &[u8]) -> Result<()> {
        let end =
            offset.checked_add(data.len() as u64).filter(|&e| e <= MAX_OBJECT_BYTES).ok_or(ObjectError::TooLarge {
                object,
                end: offset.saturating_add(data.len() as u64),
                max: MAX_OBJECT_BYTES,
            })?;
        write_in(self, object, offset, data, end)
    }

    /// Sets the size of `object` (held exclusively), as
    /// [`Store::truncate`](crate::Store::truncate) does.
    pub fn truncate(&mut self, object: u64, size: u64) -> Result<()> {
        if size > MAX_OBJECT_BYTES {
            return Err(ObjectError::TooLarge { object, end: size, max: MAX_OBJECT_BYTES });
        }
        truncate_in(self, object, size)
    }

    /// Deletes `object` (held exclusively) with its data, extended
    /// attributes and orphan record; its space is freed at the commit.
    /// Dentries naming it are the caller's to remove.
    pub fn delete_object(&mut self, object: u64) -> Result<()> {
        delete_in(self, object)
    }

    /// Up to `len` bytes of `object` (held) from `offset`, as this
    /// transaction sees them: fewer when the object ends first.
    pub fn read(&self, object: u64, offset: u64, len: u64) -> Result<Vec<u8>> {
        let onode = self.onode(object)?.ok_or(ObjectError::NoSuchObject { object })?;
        let n = onode.size.saturating_sub(offset).min(len);
        if n == 0 {
            return Ok(Vec::new());
        }
        let out = read_range(self, object, &onode, offset, n)?;
        debug_assert_eq!(out.len(), to_usize(n));
        Ok(out)
    }
}
