//! The object layer's metadata records: the keys and values it keeps in
//! its one index.
//!
//! Every map (store metadata, omap, fmap, dmap, xattrs, orphans, heap) lives in
//! the same index under a one-byte key prefix, so one index batch, carried
//! by one intent-log record, updates all of them atomically. This module
//! only encodes and checks; it reads and writes nothing. Byte layouts:
//! docs/format.md, section 13.
//!
//! Conventions, as for every on-disk structure in Larder: fixed-width
//! little-endian integers written explicitly, except inside keys, whose
//! integers are big-endian so that the index's byte order is their numeric
//! order. Decoders never panic, refuse trailing bytes, accept only
//! canonical encodings (so a value that decodes re-encodes to the same
//! bytes), and report a failed check as `BadRecord` or a newer record
//! version as `NewerRecord`. Encoders refuse a value no decoder would
//! accept (`InvalidRecord`). All three are variants of
//! [`crate::ObjectError`].

mod codec;
pub mod dentry;
pub mod dir_entries;
pub mod extent_map;
pub mod fuzzing;
pub mod heap;
pub mod keys;
pub mod name;
pub mod onode;
mod onode_v2;
pub mod orphan;
pub mod tree;
pub mod types;
pub mod xattr;

pub use dentry::Dentry;
pub use dir_entries::{
    apply_dir_delta, decode_dir_delta, encode_dir_delta, encode_entries_delta, DirDelta, DirEntriesOperator,
    DIR_ENTRIES_OPERATOR,
};
pub use extent_map::{block_crcs, verify_block, ExtentMapEntry};
pub use heap::{
    HeapObject, HeapPageImage, HeapRoot, HeapType, HEAP_OBJECT_ARENA, HEAP_OBJECT_RECYCLED, MAX_TYPE_POINTERS,
    POINTER_BYTES,
};
pub use keys::{
    decode_dentry_key, decode_fmap_key, decode_heap_key, decode_onode_key, decode_orphan_key, decode_store_key,
    decode_xattr_key, dentry_key, dmap_prefix, fmap_key, fmap_prefix, heap_image_key, heap_image_prefix,
    heap_kind_prefix, heap_name_key, heap_name_prefix, heap_object_key, heap_root_key, heap_span_key, heap_span_prefix,
    heap_type_key, map_prefix, onode_key, orphan_key, prefix_end, store_key, xattr_key, xattr_prefix, DentryKey,
    HeapRecord, Map, MetaKey, NEXT_OBJECT_ID,
};
pub use keys::{
    decode_tree_key, tree_catalog_key, tree_count_key, tree_entry_key, tree_entry_prefix, tree_kind_prefix,
    tree_next_id_key, TreeRecord, TREE_ENTRY_PREFIX_BYTES,
};
pub use larder_space::Extent;
pub use name::{Name, StoreName, XattrName, MAX_NAME_BYTES};
pub use onode::{DataLocation, DirInfo, Onode};
pub use orphan::{Orphan, OrphanReason};
pub use tree::{
    check_tree_name, decode_tree_record, encode_tree_record, TreeRecordKind, MAX_TREE_KEY_BYTES, MAX_TREE_NAME_BYTES,
    TREE_RECORD_BYTES,
};
pub use types::{Kind, MetaLimits, Timestamp, MODE_PERM_MASK, MODE_TYPE_MASK};
pub use xattr::{XattrValue, MAX_XATTR_VALUE_BYTES};

use crate::error::{ObjectError, Result};

/// Allocation and checksum block size: the space layer's block.
pub const BLOCK_BYTES: u64 = larder_space::BLOCK_BYTES;

/// Largest object, in bytes (2^63 - 1), so every size and offset fits
/// POSIX's signed `off_t`. Sizes and fmap ranges beyond it are refused.
pub const MAX_OBJECT_BYTES: u64 = i64::MAX as u64;

/// Encodes a store metadata counter (such as [`NEXT_OBJECT_ID`]): u64 LE.
pub fn encode_counter(value: u64) -> [u8; 8] {
    value.to_le_bytes()
}

/// Decodes a store metadata counter: exactly 8 bytes, u64 LE.
pub fn decode_counter(bytes: &[u8]) -> Result<u64> {
    let a: [u8; 8] = bytes.try_into().map_err(|_| ObjectError::BadRecord {
        record: "store counter",
        what: format!("{} bytes, expected 8", bytes.len()),
    })?;
    Ok(u64::from_le_bytes(a))
}
