//! Heap objects' files: `STORE/heap/<id>` (decimal), one contiguous file
//! per object whose onode says `DataLocation::OwnFile { file: id }`
//! (docs/heap.md). This module keeps the files (create, open, map, extend,
//! remove, list, sync the directory), creates heap objects in transactions,
//! and brings files and records back in step when the store opens.
//!
//! Order, which recovery relies on: a heap object's file is created (or
//! extended) before the transaction naming its size commits, and removed
//! only after the transaction freeing it is durable. So at open a file with
//! no object record is a leftover (removed), and a record whose file is
//! missing or short was made or grown after the last heap sync (its file is
//! made up to the size, zero-filled: those bytes were never promised),
//! unless the file is shorter than the durable size the record keeps and
//! the page images do not hold every byte below it.
//!
//! A freed object's file may be reused for a new object instead of being
//! removed (a create costs an inode allocation, which on ext4 without a
//! journal walks every inode of the group freed in the last minutes): once
//! the free is durable and nothing holds the file open or mapped, it is
//! taken ([`Store::take_heap_file_if_unshared`]: emptied, or a small one
//! kept whole for a copy to overwrite), then renamed to an id issued for
//! the object that will take it ([`Store::rename_heap_file`]), and sized
//! (or filled) when that object is made
//! ([`Transaction::create_heap_object_in_mapped_spare`]). The new record
//! says so (`HEAP_OBJECT_RECYCLED`) until a sync makes the bytes durable:
//! a crash may keep the rename and lose the emptying or the new bytes, so
//! recovery empties such a file again.

use std::ops::Bound;
use std::path::PathBuf;

use larder_io::{FileRef, MapAccess, OpenOptions, SharedRegion};

use crate::error::{ObjectError, Result};
use crate::meta::{
    decode_heap_key, heap_kind_prefix, heap_object_key, prefix_end, DataLocation, HeapObject, HeapRecord, Kind,
    MetaKey, Onode, HEAP_OBJECT_RECYCLED, MAX_OBJECT_BYTES,
};
use crate::store::Durability;
use crate::store::Store;
use crate::txn::Transaction;

/// How a new heap object fills the spare file it takes
/// ([`Transaction::create_heap_object_in_mapped_spare`]).
#[derive(Debug, Clone, Copy)]
pub enum SpareFill<'a> {
    /// Zeros: an allocation. Bytes the spare kept are dropped first.
    Zeros,
    /// The first bytes of another heap object's mapping, written to the
    /// file ([`Store::write_heap_file_from`]).
    CopyFrom(&'a SharedRegion),
    /// Sized only, keeping what the spare held: the caller stores every
    /// byte through the mapping before anything can read it.
    Overwrite,
}

/// The directory of heap files under the store's directory.
pub const HEAP_DIR: &str = "heap";

/// What [`Store::recover_heap_files`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeapRecovery {
    /// Files without an object record, removed.
    pub removed: Vec<u64>,
    /// Objects whose file was missing or short (not below the durable
    /// size), made up to the object's size.
    pub extended: Vec<u64>,
    /// Objects whose file was longer than the object's size (a growth whose
    /// transaction was lost), cut back to the size.
    pub truncated: Vec<u64>,
    /// Objects whose file is shorter than the durable size: left alone,
    /// refused at attach, reported by fsck.
    pub short: Vec<u64>,
    /// Objects whose file was recycled and never synced since: emptied
    /// (zeros up to the object's size), their records' flag cleared.
    pub emptied: Vec<u64>,
    /// Objects whose page images (a one-flush sync's) were written into
    /// their files, then deleted.
    pub replayed: Vec<u64>,
}

impl Store {
    /// The directory holding heap files.
    pub fn heap_dir(&self) -> PathBuf {
        self.dir().join(HEAP_DIR)
    }

    /// The file of heap object `id`.
    pub fn heap_file_path(&self, id: u64) -> PathBuf {
        self.heap_dir().join(id.to_string())
    }

    /// Creates the heap directory (durably) if it is missing. Creating a
    /// heap calls it, so that its first object's create does not also pay
    /// for the directory (and the store directory's sync). Once it is
    /// known to exist, later calls do nothing: a heap file's create does
    /// not look for it first (a create that finds it gone makes it again).
    pub fn ensure_heap_dir(&self) -> Result<()> {
        if self.heap_dir_made.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(());
        }
        let dir = self.heap_dir();
        if !self.storage().exists(&dir)? {
            self.storage().create_dir_all(&dir)?;
            self.storage().sync_dir(self.dir())?;
        }
        self.heap_dir_made.store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Creates the file of heap object `id`, `len` bytes of zeros. Neither
    /// its name nor its length is durable until [`Store::sync_heap_dir`] and
    /// a sync of the file.
    pub fn create_heap_file(&self, id: u64, len: u64) -> Result<FileRef> {
        let path = self.heap_file_path(id);
        let file = self.create_in_heap_dir(id, len, || self.storage().open(&path, OpenOptions::CREATE_NEW))?;
        if len > 0 {
            file.set_len(len)?;
        }
        Ok(file)
    }

    /// Creates the file of heap object `id`, `len` bytes of zeros, as
    /// [`Store::create_heap_file`] does, and maps it in a reservation of
    /// `reserve` bytes (`larder_io::Storage::map_shared_sized`).
    pub fn create_heap_file_mapped(&self, id: u64, len: u64, reserve: u64, access: MapAccess) -> Result<SharedRegion> {
        let path = self.heap_file_path(id);
        self.create_in_heap_dir(id, len, || self.storage().map_shared_sized(&path, true, len, reserve, access))
    }

    /// Refuses id 0 and sizes past the limit, makes sure `heap/` exists,
    /// and runs `create` (which makes heap object `id`'s file); if `heap/`
    /// went behind the store's back since it was made, makes it again and
    /// runs `create` once more.
    fn create_in_heap_dir<T>(&self, id: u64, len: u64, create: impl Fn() -> larder_io::IoResult<T>) -> Result<T> {
        if id == 0 {
            return Err(ObjectError::NoSuchObject { object: 0 });
        }
        if len > MAX_OBJECT_BYTES {
            return Err(ObjectError::TooLarge { object: id, end: len, max: MAX_OBJECT_BYTES });
        }
        self.ensure_heap_dir()?;
        match create() {
            Ok(made) => Ok(made),
            Err(e) if e.is_not_found() => {
                self.heap_dir_made.store(false, std::sync::atomic::Ordering::Release);
                self.ensure_heap_dir()?;
                Ok(create()?)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Opens the file of heap object `id`.
    pub fn open_heap_file(&self, id: u64, write: bool) -> Result<FileRef> {
        let options = if write { OpenOptions::WRITE } else { OpenOptions::READ };
        Ok(self.storage().open(&self.heap_file_path(id), options)?)
    }

    /// Writes the first `len` bytes `source` (a heap object's mapping)
    /// exposes to the start of heap object `to`'s file
    /// (`larder_io::Storage::write_file_from`: straight from the mapped
    /// pages on the real backend). Durable once `to`'s file is synced.
    pub fn write_heap_file_from(&self, source: &SharedRegion, to: u64, len: u64) -> Result<()> {
        Ok(self.storage().write_file_from(source, &self.heap_file_path(to), len)?)
    }

    /// Extends the file of heap object `id` to `len` bytes (zeros); a file
    /// already that long is left alone: heap files never shrink here.
    pub fn extend_heap_file(&self, id: u64, len: u64) -> Result<()> {
        if len > MAX_OBJECT_BYTES {
            return Err(ObjectError::TooLarge { object: id, end: len, max: MAX_OBJECT_BYTES });
        }
        let file = self.open_heap_file(id, true)?;
        if file.len()? < len {
            file.set_len(len)?;
        }
        Ok(())
    }

    /// Removes the file of heap object `id`; a missing file is not an error
    /// (a removal that already happened). Durable after
    /// [`Store::sync_heap_dir`].
    pub fn remove_heap_file(&self, id: u64) -> Result<()> {
        match self.storage().remove_file(&self.heap_file_path(id)) {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Takes the file of heap object `id`, whose free is durable, for
    /// reuse by a new object, if nothing holds it open or mapped (in this
    /// process or another: a client may still map a freed object, and must
    /// not see a new object's bytes there). A file of at most `keep_bytes`
    /// keeps its bytes, for a copy to overwrite in place (pages and blocks
    /// already there); a longer one is emptied. Returns the bytes kept;
    /// `None`: in use, missing, or the storage cannot tell, and the caller
    /// removes it instead.
    pub fn take_heap_file_if_unshared(&self, id: u64, keep_bytes: u64) -> Result<Option<u64>> {
        let file = match self.storage().open_unshared(&self.heap_file_path(id)) {
            Ok(Some(file)) => file,
            Ok(None) => return Ok(None),
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let len = file.len()?;
        if len <= keep_bytes {
            return Ok(Some(len));
        }
        file.set_len(0)?;
        Ok(Some(0))
    }

    /// Renames the file of heap object `from` (a spare: emptied, without a
    /// record) to `heap/<to>`, `to` an id issued for the object that will
    /// take it ([`Transaction::create_heap_object_mapped`]). Durable after
    /// [`Store::sync_heap_dir`].
    pub fn rename_heap_file(&self, from: u64, to: u64) -> Result<()> {
        Ok(self.storage().rename(&self.heap_file_path(from), &self.heap_file_path(to))?)
    }

    /// Ids of the files in the heap directory, in id order, and the names
    /// there that are not heap files (not a decimal id).
    pub fn list_heap_files(&self) -> Result<(Vec<u64>, Vec<String>)> {
        let dir = self.heap_dir();
        if !self.storage().exists(&dir)? {
            return Ok((Vec::new(), Vec::new()));
        }
        let (mut ids, mut others) = (Vec::new(), Vec::new());
        for name in self.storage().list_dir(&dir)? {
            match name.parse::<u64>() {
                // Only the canonical spelling is a heap file's name.
                Ok(id) if id != 0 && id.to_string() == name => ids.push(id),
                _ => others.push(name),
            }
        }
        ids.sort_unstable();
        Ok((ids, others))
    }

    /// Makes creates and removes in the heap directory durable.
    pub fn sync_heap_dir(&self) -> Result<()> {
        self.ensure_heap_dir()?;
        Ok(self.storage().sync_dir(&self.heap_dir())?)
    }

    /// Whether syncing a heap file created since the heap directory's last
    /// sync also makes its name durable
    /// ([`larder_io::Storage::file_sync_keeps_new_entry`]): then a caller
    /// that synced every file it created need not sync the directory.
    pub fn heap_file_sync_keeps_entry(&self) -> Result<bool> {
        self.ensure_heap_dir()?;
        Ok(self.storage().file_sync_keeps_new_entry(&self.heap_dir())?)
    }

    /// Whether a sync of the log flushes the device that holds heap files,
    /// so that bytes written back to a heap file's written blocks before it
    /// started are durable when it returns
    /// ([`larder_io::Storage::shares_flush`]): a heap's one-flush sync
    /// relies on it (docs/heap.md, "One flush per sync").
    pub fn heap_files_share_log_flush(&self) -> Result<bool> {
        self.ensure_heap_dir()?;
        Ok(self.storage().shares_flush(&self.dir().join(crate::store::LOG_DIR), &self.heap_dir())?)
    }

    /// Maps the file of heap object `id` (see `larder_io::Storage::map_shared`).
    pub fn map_heap_file(&self, id: u64, reserve: u64, access: MapAccess) -> Result<SharedRegion> {
        Ok(self.storage().map_shared(&self.heap_file_path(id), reserve, access)?)
    }

    /// The identity and length of object `id`'s file, without opening it,
    /// for a heap that checks a mapping it kept is still of that file, and
    /// that the file was not shrunk, before it hands the mapping out again.
    /// One `fstatat` through the `heap/` directory's handle (one
    /// descriptor per store, opened at the first call), or a `stat` of the
    /// path where the storage has no directory handles.
    pub fn heap_file_status(&self, id: u64) -> Result<larder_io::FileStatus> {
        let handle = match self.heap_dir_handle.get() {
            Some(handle) => handle,
            None => match self.storage().open_directory(&self.heap_dir()) {
                Ok(opened) => self.heap_dir_handle.get_or_init(|| opened),
                // No `heap/` yet (no heap was made): nothing to keep open.
                Err(e) if e.is_not_found() => &None,
                Err(e) => return Err(e.into()),
            },
        };
        match handle {
            Some(dir) => Ok(dir.file_status(&id.to_string())?),
            None => Ok(self.storage().file_status(&self.heap_file_path(id))?),
        }
    }

    /// The heap object record of `id`, if it has one.
    pub fn heap_object(&self, id: u64) -> Result<Option<HeapObject>> {
        self.index().get(&heap_object_key(id))?.map(|v| HeapObject::decode(&v)).transpose()
    }

    /// Every heap object record, in id order.
    pub fn heap_objects(&self) -> Result<Vec<(u64, HeapObject)>> {
        let start = heap_kind_prefix(HeapRecord::Object);
        let end = prefix_end(&start).unwrap_or_default();
        let mut out = Vec::new();
        for kv in self.index().range(Bound::Included(&start[..]), Bound::Excluded(&end[..]), true)? {
            let (k, v) = kv?;
            let MetaKey::HeapObject { object } = decode_heap_key(&k)? else {
                return Err(ObjectError::BadRecord { record: "heap key", what: "not an object record".into() });
            };
            out.push((object, HeapObject::decode(&v)?));
        }
        Ok(out)
    }

    /// Brings heap files in step with their records (see the module doc):
    /// run at every open, before anything maps a heap file.
    pub fn recover_heap_files(&self) -> Result<HeapRecovery> {
        let mut report = HeapRecovery::default();
        let records = self.heap_objects()?;
        let (files, _others) = self.list_heap_files()?;
        let mut dir_changed = false;
        for &id in &files {
            if records.binary_search_by_key(&id, |(object, _)| *object).is_err() {
                self.remove_heap_file(id)?;
                report.removed.push(id);
                dir_changed = true;
            }
        }
        for (id, record) in &records {
            let Some(onode) = self.stat(*id)? else {
                return Err(ObjectError::BadRecord {
                    record: "heap object record",
                    what: format!("object {id} has a heap record but no onode"),
                });
            };
            let size = onode.size;
            let exists = files.binary_search(id).is_ok();
            let len = if exists { self.open_heap_file(*id, false)?.len()? } else { 0 };
            if record.is_recycled() {
                // Never synced since its file was recycled: none of its
                // bytes were promised, and some may be the freed object's.
                let file = if exists {
                    let file = self.open_heap_file(*id, true)?;
                    file.set_len(0)?;
                    file.set_len(size)?;
                    file
                } else {
                    dir_changed = true;
                    self.create_heap_file(*id, size)?
                };
                file.sync_data()?;
                report.emptied.push(*id);
                continue;
            }
            if len < record.durable_size && self.heap_images_cover(*id, record.durable_size)? {
                // A whole object's sync imaged every page it promised: its
                // file (name, length, bytes) is made again from the images,
                // which the replay below writes in.
                let file = if exists {
                    self.open_heap_file(*id, true)?
                } else {
                    dir_changed = true;
                    self.create_heap_file(*id, 0)?
                };
                file.set_len(size)?;
                file.sync_data()?;
                report.extended.push(*id);
                continue;
            }
            if len < record.durable_size {
                report.short.push(*id);
                tracing::warn!(
                    object = id,
                    len,
                    durable = record.durable_size,
                    "heap file shorter than its durable size"
                );
                continue;
            }
            if !exists {
                let file = self.create_heap_file(*id, size)?;
                file.sync_data()?;
                dir_changed = true;
                report.extended.push(*id);
            } else if len != size {
                let file = self.open_heap_file(*id, true)?;
                file.set_len(size)?;
                file.sync_data()?;
                if len < size {
                    report.extended.push(*id);
                } else {
                    report.truncated.push(*id);
                }
            }
        }
        if dir_changed {
            self.sync_heap_dir()?;
        }
        // The files are zeros on disk now: their records may say so.
        for &id in &report.emptied {
            self.transact(&[id], Durability::Buffered, |txn| -> Result<()> {
                if let Some(mut record) = txn.heap_object(id)? {
                    record.flags &= !HEAP_OBJECT_RECYCLED;
                    txn.put_heap_object(id, &record)?;
                }
                Ok(())
            })?;
        }
        if !report.emptied.is_empty() {
            self.sync()?;
        }
        report.replayed = self.replay_heap_images(&records, &report.short)?;
        Ok(report)
    }
}

impl Transaction<'_> {
    /// Creates heap object `id` of `size` bytes in this transaction, and
    /// its file (zeros). `id` comes from [`Store::allocate_object_ids`] and
    /// is held exclusively (so the caller can lock the names it will give
    /// the object before the transaction starts). Its onode is a regular
    /// file whose bytes are `heap/<id>`; `record` becomes its object table
    /// entry. The object has no name: the heap links it in its `objects/`
    /// directory in the same transaction. If the transaction then fails,
    /// the file is left behind for the caller to remove
    /// ([`Store::remove_heap_file`]) or the next open to remove.
    pub fn create_heap_object(
        &mut self,
        id: u64,
        size: u64,
        owner: (u32, u32, u32),
        record: &HeapObject,
    ) -> Result<()> {
        if size > MAX_OBJECT_BYTES {
            return Err(ObjectError::TooLarge { object: id, end: size, max: MAX_OBJECT_BYTES });
        }
        self.check_new_heap_object(id)?;
        self.store().create_heap_file(id, size)?;
        self.put_new_heap_object(id, size, owner, record)
    }

    /// Creates heap object `id` as [`Transaction::create_heap_object`]
    /// does, and maps its file (`reserve`, `access`: see
    /// [`Store::map_heap_file`]) through the descriptor that made it. With
    /// `spare` (the bytes it kept), `heap/<id>` is a freed object's file
    /// already there, renamed to this id ([`Store::take_heap_file_if_unshared`],
    /// [`Store::rename_heap_file`]): it is emptied if it kept bytes,
    /// extended to `size` (zeros) and the record flagged
    /// `HEAP_OBJECT_RECYCLED`, with no inode to allocate; a spare gone
    /// from the directory is passed over. Returns the mapping and whether
    /// the spare was used.
    pub fn create_heap_object_mapped(
        &mut self,
        id: u64,
        size: u64,
        owner: (u32, u32, u32),
        record: &HeapObject,
        spare: Option<u64>,
        (reserve, access): (u64, MapAccess),
    ) -> Result<(SharedRegion, bool)> {
        if size > MAX_OBJECT_BYTES {
            return Err(ObjectError::TooLarge { object: id, end: size, max: MAX_OBJECT_BYTES });
        }
        self.check_new_heap_object(id)?;
        let store = self.store();
        let path = store.heap_file_path(id);
        let spare_ready = match spare {
            Some(kept) if kept > 0 => match store.storage().set_file_len(&path, 0) {
                Ok(()) => true,
                Err(e) if e.is_not_found() => false,
                Err(e) => return Err(e.into()),
            },
            Some(_) => true,
            None => false,
        };
        let recycled = if spare_ready {
            match store.storage().map_shared_sized(&path, false, size, reserve, access) {
                Ok(region) => Some(region),
                Err(e) if e.is_not_found() => None,
                Err(e) => return Err(e.into()),
            }
        } else {
            None
        };
        let renamed = recycled.is_some();
        let region = match recycled {
            Some(region) => region,
            None => store.create_heap_file_mapped(id, size, reserve, access)?,
        };
        let flags = if renamed { record.flags | HEAP_OBJECT_RECYCLED } else { record.flags };
        self.put_new_heap_object(id, size, owner, &HeapObject { flags, ..*record })?;
        Ok((region, renamed))
    }

    /// Creates heap object `id` as [`Transaction::create_heap_object_mapped`]
    /// does with a spare, the spare `heap/<id>` being mapped already
    /// (`region`, made when the spare was, exposing none of its bytes, its
    /// reservation big enough for `size`) and holding `kept` bytes of the
    /// freed object it was: the file is made `size` bytes as `fill` says
    /// and the region grown to it. `NotFound` if the spare is gone from
    /// the directory.
    pub fn create_heap_object_in_mapped_spare(
        &mut self,
        id: u64,
        size: u64,
        owner: (u32, u32, u32),
        record: &HeapObject,
        (region, kept): (&SharedRegion, u64),
        fill: SpareFill<'_>,
    ) -> Result<()> {
        if size > MAX_OBJECT_BYTES {
            return Err(ObjectError::TooLarge { object: id, end: size, max: MAX_OBJECT_BYTES });
        }
        self.check_new_heap_object(id)?;
        let store = self.store();
        let path = store.heap_file_path(id);
        match fill {
            SpareFill::Zeros if kept > 0 => {
                let file = store.storage().open(&path, OpenOptions::WRITE)?;
                file.set_len(0)?;
                file.set_len(size)?;
            }
            SpareFill::Zeros => store.storage().set_file_len(&path, size)?,
            SpareFill::CopyFrom(source) => {
                store.write_heap_file_from(source, id, size)?;
                if kept > size {
                    store.storage().set_file_len(&path, size)?;
                }
            }
            SpareFill::Overwrite => {
                if kept != size {
                    store.storage().set_file_len(&path, size)?;
                }
            }
        }
        region.grow_to(size)?;
        let record = HeapObject { flags: record.flags | HEAP_OBJECT_RECYCLED, ..*record };
        self.put_new_heap_object(id, size, owner, &record)
    }

    /// Refuses an id not held exclusively or already an object.
    fn check_new_heap_object(&self, id: u64) -> Result<()> {
        self.check_locked(id)?;
        if self.onode(id)?.is_some() {
            return Err(ObjectError::InvalidRecord {
                record: "heap object",
                what: format!("object {id} exists already; heap objects take fresh ids"),
            });
        }
        Ok(())
    }

    /// The onode and record of a new heap object.
    fn put_new_heap_object(
        &mut self,
        id: u64,
        size: u64,
        (mode, uid, gid): (u32, u32, u32),
        record: &HeapObject,
    ) -> Result<()> {
        let mut onode = Onode::new(Kind::File, mode, uid, gid, id);
        onode.size = size;
        onode.location = DataLocation::OwnFile { file: id };
        self.put_onode(id, &onode)?;
        self.put(&heap_object_key(id), &record.encode()?);
        Ok(())
    }

    /// Sets heap object `id`'s table entry (held exclusively).
    pub fn put_heap_object(&mut self, id: u64, record: &HeapObject) -> Result<()> {
        self.check_locked(id)?;
        self.put(&heap_object_key(id), &record.encode()?);
        Ok(())
    }

    /// Heap object `id`'s table entry with this transaction's changes.
    pub fn heap_object(&self, id: u64) -> Result<Option<HeapObject>> {
        self.get(&heap_object_key(id))?.map(|v| HeapObject::decode(&v)).transpose()
    }
}
