//! The object operations inside a caller's transaction, so that a
//! namespace change and the data it names commit in one record (a KV put
//! creates an object, writes its bytes and links its name atomically).

use super::delete::{delete_in, truncate_in};
use super::fmap::{block_parts, read_range, write_blocks};
use super::write::write_in;
use super::{to_usize, touch_data};
use crate::error::{ObjectError, Result};
use crate::meta::{DataLocation, Kind, Onode, MAX_OBJECT_BYTES};
use crate::store::DerivedPath;
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

    /// Creates an object of `kind` holding `data` and returns its id, as
    /// [`Transaction::create_object_as`] then [`Transaction::write`] at 0
    /// would, `shape` setting the onode's other fields. Bytes up to the
    /// store's inline limit go into the onode, which is then written once,
    /// with them: not first empty, then read back, decoded and written
    /// again (a fresh key's durable put did both, and its batch carried the
    /// empty onode too). Larger bytes take the create-then-write path.
    pub fn create_object_with(
        &mut self,
        kind: Kind,
        mode: u32,
        (uid, gid): (u32, u32),
        shape: impl FnOnce(&mut Onode),
        data: &[u8],
    ) -> Result<u64> {
        let len = data.len() as u64;
        let inline = !data.is_empty()
            && matches!(kind, Kind::File | Kind::Symlink)
            && len <= u64::from(self.limits().inline_max_bytes);
        if !inline {
            let id = self.create_object_as(kind, mode, uid, gid, shape)?;
            self.write(id, 0, data)?;
            return Ok(id);
        }
        self.create_object_as(kind, mode, uid, gid, |onode| {
            shape(onode);
            onode.size = len;
            onode.location = DataLocation::Inline(data.to_vec());
            // As the write after the create would: new bytes, new generation.
            touch_data(onode);
        })
    }

    /// Creates a regular file for each of `contents`, holding those bytes,
    /// with consecutive ids (returned, in `contents`' order) and one
    /// high-water update at most; `shape` sets the new onodes' other
    /// fields (their first name's link count), the same for every file,
    /// before each is written once. Bytes up to the store's inline limit
    /// go into the onode, larger ones to fresh container extents synced
    /// with the commit.
    ///
    /// For bulk creation: the onodes are written blind, so this
    /// transaction does not read them back ([`Transaction::onode`] of one
    /// sees nothing); the objects are held exclusively all the same and,
    /// like every new object, have no name until the caller links them.
    pub fn create_files_blind(
        &mut self,
        contents: &[&[u8]],
        mode: u32,
        (uid, gid): (u32, u32),
        shape: impl FnOnce(&mut Onode),
    ) -> Result<std::ops::Range<u64>> {
        let limits = self.limits();
        let ids = self.allocate_blind(contents.len() as u64)?;
        // One clock read for the batch: its files are created at one time.
        let mut born = Onode::new(Kind::File, mode, uid, gid, ids.start);
        shape(&mut born);
        // The onodes of empty files are all the same bytes: encoded once
        // (a bulk create of empty files spent a tenth of its time encoding
        // each).
        let mut empty: Option<Vec<u8>> = None;
        for (id, data) in ids.clone().zip(contents) {
            let len = data.len() as u64;
            if len > MAX_OBJECT_BYTES {
                return Err(ObjectError::TooLarge { object: id, end: len, max: MAX_OBJECT_BYTES });
            }
            if len == 0 {
                let bytes = match &empty {
                    Some(bytes) => bytes,
                    None => empty.insert(born.encode(&limits)?),
                };
                self.put_encoded_onode_blind(id, bytes);
                continue;
            }
            let mut onode = born.clone();
            onode.size = len;
            if len <= u64::from(limits.inline_max_bytes) {
                onode.location = DataLocation::Inline(data.to_vec());
            } else {
                let (body, tail) = block_parts(data);
                write_blocks(self, id, 0, (body, &tail), len)?;
                onode.location = DataLocation::Extents;
            }
            self.put_onode_blind(id, &onode, &limits)?;
        }
        Ok(ids)
    }

    /// Sets the size of `object` (held exclusively), as
    /// [`Store::truncate`](crate::Store::truncate) does.
    pub fn truncate(&mut self, object: u64, size: u64) -> Result<()> {
        if size > MAX_OBJECT_BYTES {
            return Err(ObjectError::TooLarge { object, end: size, max: MAX_OBJECT_BYTES });
        }
        truncate_in(self, object, size)
    }

    /// Replaces the whole of `object` (held exclusively) with `data`, as
    /// [`Transaction::truncate`] to 0 and [`Transaction::write`] at 0 would:
    /// an inline object staying inline has its onode read and written
    /// once, not twice.
    pub fn replace(&mut self, object: u64, data: &[u8]) -> Result<()> {
        self.replace_from(None, object, data)
    }

    /// As [`Transaction::replace`], reading the object's committed onode
    /// through `path`, a path entry leading to it
    /// ([`Store::derived_for_read`](crate::Store::derived_for_read)): a
    /// value a get just read through the path is not read from the index
    /// again (the path entry holds it, not the cache under its own key).
    pub fn replace_via(&mut self, path: &DerivedPath, object: u64, data: &[u8]) -> Result<()> {
        self.replace_from(Some(path), object, data)
    }

    fn replace_from(&mut self, path: Option<&DerivedPath>, object: u64, data: &[u8]) -> Result<()> {
        let len = data.len() as u64;
        if len > MAX_OBJECT_BYTES {
            return Err(ObjectError::TooLarge { object, end: len, max: MAX_OBJECT_BYTES });
        }
        let onode = match path {
            Some(path) => self.onode_via(path, object)?,
            None => self.onode(object)?,
        };
        let mut onode = onode.ok_or(ObjectError::NoSuchObject { object })?;
        if !matches!(onode.kind, Kind::File | Kind::Symlink) {
            return Err(ObjectError::NoData { object, what: format!("a {:?}", onode.kind) });
        }
        if matches!(onode.location, DataLocation::Inline(_)) && len <= u64::from(self.limits().inline_max_bytes) {
            onode.location = DataLocation::Inline(data.to_vec());
            onode.size = len;
            touch_data(&mut onode);
            return self.put_onode(object, &onode);
        }
        truncate_in(self, object, 0)?;
        self.write(object, 0, data)
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
