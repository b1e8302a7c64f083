//! Replay of heap page images at store open (docs/heap.md, "One flush per
//! sync"). A heap's one-flush `sync` commits, with its records, an image of
//! every page of an object whose bytes it did not write back and flush
//! first; the images, not the file, hold those bytes until a later sync
//! with a device flush before its commit deletes them. Recovery writes
//! each into its file, syncs the files, and only then deletes the images,
//! before anything maps a heap file.
//!
//! A sync that images every page of an object up to its durable size (one
//! created since the last sync and small enough: docs/heap.md, "Whole
//! objects") leaves a file whose name and length need not be durable:
//! recovery makes such a file again, or extends it, before the replay
//! writes the images in ([`Store::heap_images_cover`]).

use std::collections::BTreeMap;
use std::ops::Bound;

use larder_io::{write_all_at, FileRef};

use crate::error::{ObjectError, Result};
use crate::meta::{
    decode_heap_key, heap_image_prefix, heap_kind_prefix, prefix_end, HeapObject, HeapPageImage, HeapRecord, MetaKey,
};
use crate::store::{Durability, Store};

impl Store {
    /// Whether the index holds any page image of heap object `object`.
    pub fn has_heap_images(&self, object: u64) -> Result<bool> {
        Ok(self.index().prefix(&heap_image_prefix(object), true)?.next().is_some())
    }

    /// Whether the page images of heap object `object` cover every byte of
    /// `[0, len)`, so that its file can be made again from them alone.
    pub(crate) fn heap_images_cover(&self, object: u64, len: u64) -> Result<bool> {
        let start = heap_image_prefix(object);
        let end = prefix_end(&start).unwrap_or_default();
        let mut covered = 0u64;
        for kv in self.index().range(Bound::Included(&start[..]), Bound::Excluded(&end[..]), true)? {
            let (key, value) = kv?;
            let MetaKey::HeapImage { offset, .. } = decode_heap_key(&key)? else {
                return Err(ObjectError::BadRecord { record: "heap key", what: "not a page image".into() });
            };
            if offset > covered {
                return Ok(false);
            }
            let image = HeapPageImage::decode(&value)?;
            covered = covered.max(offset.saturating_add(image.bytes.len() as u64));
            if covered >= len {
                return Ok(true);
            }
        }
        Ok(covered >= len)
    }

    /// Writes every heap page image into its object's file (up to the
    /// object's size), syncs those files and deletes the images durably.
    /// `records` are the heap object records (id order); images of an
    /// object without one (freed: a free deletes them, but a store written
    /// by a build without that rule may keep some) are deleted unwritten,
    /// and those of an object in `short` (its file shorter than its durable
    /// size: refused at attach, left for fsck) are left alone. Returns the
    /// objects written.
    pub(crate) fn replay_heap_images(&self, records: &[(u64, HeapObject)], short: &[u64]) -> Result<Vec<u64>> {
        let start = heap_kind_prefix(HeapRecord::Image);
        let end = prefix_end(&start).unwrap_or_default();
        let mut images = Vec::new();
        for kv in self.index().range(Bound::Included(&start[..]), Bound::Excluded(&end[..]), true)? {
            let (key, value) = kv?;
            let MetaKey::HeapImage { object, offset } = decode_heap_key(&key)? else {
                return Err(ObjectError::BadRecord { record: "heap key", what: "not a page image".into() });
            };
            images.push((key, object, offset, value));
        }
        if images.is_empty() {
            return Ok(Vec::new());
        }
        let mut files: BTreeMap<u64, FileRef> = BTreeMap::new();
        let mut done = Vec::new();
        for (key, object, offset, value) in images {
            if short.contains(&object) {
                continue;
            }
            done.push((key, object));
            if records.binary_search_by_key(&object, |(id, _)| *id).is_err() {
                continue;
            }
            let image = HeapPageImage::decode(&value)?;
            let size = self.stat(object)?.map_or(0, |onode| onode.size);
            if offset >= size {
                continue;
            }
            let take = (size - offset).min(image.bytes.len() as u64) as usize;
            let file = match files.get(&object) {
                Some(file) => file.clone(),
                None => {
                    let file = self.open_heap_file(object, true)?;
                    files.insert(object, file.clone());
                    file
                }
            };
            write_all_at(&*file, &image.bytes[..take], offset)?;
        }
        for file in files.values() {
            file.sync_data()?;
        }
        let mut ids: Vec<u64> = done.iter().map(|(_, id)| *id).collect();
        ids.dedup();
        // The files hold the images' bytes durably now: the images may go.
        self.transact(&ids, Durability::Durable, |txn| -> Result<()> {
            for (key, _) in &done {
                txn.delete(key);
            }
            Ok(())
        })?;
        Ok(files.into_keys().collect())
    }
}
