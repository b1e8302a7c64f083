//! Keys of the object layer's maps in the one index.
//!
//! Every map lives in the same index under its own one-byte prefix, so a
//! single index batch updates several maps atomically (an onode, its
//! extent map entries and a dentry in one transaction). Integers in keys
//! are **big-endian**, unlike everywhere else in Larder: the index orders
//! keys as unsigned bytes, and only big-endian fixed-width integers make
//! that order the numeric order. Layouts: docs/format.md, section 13.
//!
//! | map | key | value |
//! |---|---|---|
//! | store | `0x01`, name | per name (`next_object_id`: u64 LE) |
//! | omap | `0x10`, object id | [`Onode`](super::Onode) |
//! | fmap | `0x20`, object id, offset | [`ExtentMapEntry`](super::ExtentMapEntry) |
//! | dmap | `0x30`, parent id, name | [`Dentry`](super::Dentry) |
//! | xattr | `0x40`, object id, name | [`XattrValue`](super::XattrValue) |
//! | orphans | `0x50`, object id | [`Orphan`](super::Orphan) |
//! | heap | `0x60`, record kind, ... | the heap's records ([`super::heap`]) |
//! | trees | `0x70`, record kind, ... | the trees' records ([`super::tree`]) |

use crate::error::{ObjectError, Result};

use super::codec::{DecodeResult, Reader};
use super::name::{Name, StoreName, XattrName, MAX_NAME_BYTES};
use super::tree::{check_tree_name, MAX_TREE_KEY_BYTES};
use super::{BLOCK_BYTES, MAX_OBJECT_BYTES};

/// Store metadata name of the object id high-water mark (value: u64 LE,
/// the next id to hand out; ids are never reused).
pub const NEXT_OBJECT_ID: &str = "next_object_id";

/// Bytes of a key made of a prefix and one u64 (omap, orphans; and the
/// scan prefixes of fmap, dmap and xattr).
pub const ID_KEY_BYTES: usize = 9;
/// Bytes of an fmap key.
pub const FMAP_KEY_BYTES: usize = 17;

/// The maps, in key order. Prefixes are spaced so a future map can be
/// placed between two existing ones where its scans want it; `0x00` and
/// `0xFF` are never used, so a zeroed or all-ones key is always refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Map {
    /// Store-wide metadata (`0x01`), first so that open finds it at once.
    Store,
    /// Object map (`0x10`): object id -> onode.
    Omap,
    /// Extent map (`0x20`): (object id, offset) -> extent.
    Fmap,
    /// Directory map (`0x30`): (parent id, name) -> dentry.
    Dmap,
    /// Extended attributes (`0x40`): (object id, name) -> value.
    Xattr,
    /// Orphans (`0x50`): object id -> why it has no name.
    Orphans,
    /// The heap's records (`0x60`): a record kind byte ([`HeapRecord`]),
    /// then its fields (docs/heap.md).
    Heap,
    /// The transactional trees' records (`0x70`): a record kind byte
    /// ([`TreeRecord`]), then its fields (docs/trees.md).
    Trees,
}

/// The kinds of tree records: the byte after the trees map's prefix. Their
/// order is the order a check needs: the catalog, then the id high-water
/// mark, then counts and entries, which refer to catalog ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TreeRecord {
    /// A catalog entry (`0x01`): tree name (UTF-8) -> tree id.
    Catalog,
    /// The tree id high-water mark (`0x02`, no fields): the next id.
    NextId,
    /// A tree's entry count (`0x03`): tree id (u64 BE) -> count.
    Count,
    /// An entry (`0x04`): tree id (u64 BE), user key -> user value.
    Entry,
}

impl TreeRecord {
    /// Every kind, in key order.
    pub const ALL: [TreeRecord; 4] = [TreeRecord::Catalog, TreeRecord::NextId, TreeRecord::Count, TreeRecord::Entry];

    /// The kind's byte.
    pub const fn to_u8(self) -> u8 {
        match self {
            TreeRecord::Catalog => 0x01,
            TreeRecord::NextId => 0x02,
            TreeRecord::Count => 0x03,
            TreeRecord::Entry => 0x04,
        }
    }

    /// The kind stored as `b`, if any.
    pub fn from_u8(b: u8) -> Option<TreeRecord> {
        TreeRecord::ALL.into_iter().find(|k| k.to_u8() == b)
    }
}

/// The kinds of heap records: the byte after the heap map's prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HeapRecord {
    /// A heap's root (`0x01`): root directory id -> [`super::HeapRoot`].
    Root,
    /// An object's table entry (`0x02`): object id -> [`super::HeapObject`].
    Object,
    /// A name of an object (`0x03`): object id, name -> empty (the reverse
    /// index of the heap's `names/` directory).
    Name,
    /// A type (`0x04`): type id -> [`super::HeapType`].
    Type,
    /// An arena record (`0x05`): object id, span offset (or `u64::MAX` for
    /// the arena's header) -> the arena's encoding.
    Span,
    /// A page image (`0x06`): object id, page offset -> [`super::HeapPageImage`]:
    /// the page's bytes as a one-flush `sync` found them, written into the
    /// object's file at recovery (docs/heap.md, "One flush per sync").
    Image,
}

impl HeapRecord {
    /// Every kind, in key order.
    pub const ALL: [HeapRecord; 6] =
        [HeapRecord::Root, HeapRecord::Object, HeapRecord::Name, HeapRecord::Type, HeapRecord::Span, HeapRecord::Image];

    /// The kind's byte.
    pub const fn to_u8(self) -> u8 {
        match self {
            HeapRecord::Root => 0x01,
            HeapRecord::Object => 0x02,
            HeapRecord::Name => 0x03,
            HeapRecord::Type => 0x04,
            HeapRecord::Span => 0x05,
            HeapRecord::Image => 0x06,
        }
    }

    /// The kind stored as `b`, if any.
    pub fn from_u8(b: u8) -> Option<HeapRecord> {
        HeapRecord::ALL.into_iter().find(|k| k.to_u8() == b)
    }
}

impl Map {
    /// Every map, in key order.
    pub const ALL: [Map; 8] =
        [Map::Store, Map::Omap, Map::Fmap, Map::Dmap, Map::Xattr, Map::Orphans, Map::Heap, Map::Trees];

    /// The map's key prefix byte.
    pub const fn prefix(self) -> u8 {
        match self {
            Map::Store => 0x01,
            Map::Omap => 0x10,
            Map::Fmap => 0x20,
            Map::Dmap => 0x30,
            Map::Xattr => 0x40,
            Map::Orphans => 0x50,
            Map::Heap => 0x60,
            Map::Trees => 0x70,
        }
    }

    /// The map with this prefix byte.
    pub fn from_prefix(b: u8) -> Option<Map> {
        Map::ALL.into_iter().find(|m| m.prefix() == b)
    }

    /// The map's name as errors and dumps show it.
    pub const fn name(self) -> &'static str {
        match self {
            Map::Store => "store",
            Map::Omap => "omap",
            Map::Fmap => "fmap",
            Map::Dmap => "dmap",
            Map::Xattr => "xattr",
            Map::Orphans => "orphans",
            Map::Heap => "heap",
            Map::Trees => "trees",
        }
    }

    /// The record name used in errors about this map's keys.
    const fn key_record(self) -> &'static str {
        match self {
            Map::Store => "store key",
            Map::Omap => "omap key",
            Map::Fmap => "fmap key",
            Map::Dmap => "dmap key",
            Map::Xattr => "xattr key",
            Map::Orphans => "orphan key",
            Map::Heap => "heap key",
            Map::Trees => "tree key",
        }
    }
}

/// A decoded key of any map. The derived order (variant, then fields in
/// order) is exactly the byte order of the encoded keys; the tests check it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MetaKey {
    /// A store-wide metadata entry.
    Store(StoreName),
    /// An object's onode.
    Onode {
        /// The object.
        object: u64,
    },
    /// The extent map entry starting at byte `offset` of `object`.
    Extent {
        /// The object.
        object: u64,
        /// Where the entry's range starts: a multiple of 4096.
        offset: u64,
    },
    /// The entry `name` of directory `parent`.
    Dentry {
        /// The directory.
        parent: u64,
        /// The entry's name.
        name: Name,
    },
    /// The extended attribute `name` of `object`.
    Xattr {
        /// The object.
        object: u64,
        /// The attribute's name.
        name: XattrName,
    },
    /// The orphan record of `object`.
    Orphan {
        /// The object.
        object: u64,
    },
    /// The root record of the heap whose root directory is `root`.
    HeapRoot {
        /// The heap's root directory.
        root: u64,
    },
    /// The heap object table entry of `object`.
    HeapObject {
        /// The object.
        object: u64,
    },
    /// The name record `name` of heap object `object`.
    HeapName {
        /// The object.
        object: u64,
        /// One of its names in the heap's `names/` directory.
        name: Name,
    },
    /// The heap type `type_id`.
    HeapType {
        /// The type's id.
        type_id: u64,
    },
    /// An arena record of heap object `object`: the span at `span`, or the
    /// arena's header when `span` is `u64::MAX`.
    HeapSpan {
        /// The object.
        object: u64,
        /// The span's offset in the object, or `u64::MAX`.
        span: u64,
    },
    /// A page image of heap object `object`: its page at `offset`.
    HeapImage {
        /// The object.
        object: u64,
        /// The page's offset in the object.
        offset: u64,
    },
    /// The catalog entry of the tree named `name`.
    TreeCatalog {
        /// The tree's name: 1 to 255 bytes of UTF-8.
        name: String,
    },
    /// The tree id high-water mark.
    TreeNextId,
    /// The entry count of tree `tree`.
    TreeCount {
        /// The tree's id.
        tree: u64,
    },
    /// The entry `key` of tree `tree`.
    TreeEntry {
        /// The tree's id.
        tree: u64,
        /// The user's key: 0 to [`MAX_TREE_KEY_BYTES`] bytes.
        key: Vec<u8>,
    },
}

fn id_key(map: Map, id: u64) -> [u8; ID_KEY_BYTES] {
    let mut k = [0u8; ID_KEY_BYTES];
    k[0] = map.prefix();
    k[1..9].copy_from_slice(&id.to_be_bytes());
    k
}

fn id_name_key(map: Map, id: u64, name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(ID_KEY_BYTES + name.len());
    k.extend_from_slice(&id_key(map, id));
    k.extend_from_slice(name);
    k
}

/// The key of store metadata entry `name`.
pub fn store_key(name: &StoreName) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + name.as_bytes().len());
    k.push(Map::Store.prefix());
    k.extend_from_slice(name.as_bytes());
    k
}

/// The omap key of `object` (its onode).
pub fn onode_key(object: u64) -> [u8; ID_KEY_BYTES] {
    id_key(Map::Omap, object)
}

/// The fmap key of the entry of `object` starting at `offset` (a multiple
/// of 4096; a key with another offset is refused when read back).
pub fn fmap_key(object: u64, offset: u64) -> [u8; FMAP_KEY_BYTES] {
    let mut k = [0u8; FMAP_KEY_BYTES];
    k[..ID_KEY_BYTES].copy_from_slice(&id_key(Map::Fmap, object));
    k[ID_KEY_BYTES..].copy_from_slice(&offset.to_be_bytes());
    k
}

/// The dmap key of entry `name` in directory `parent`.
pub fn dentry_key(parent: u64, name: &Name) -> Vec<u8> {
    id_name_key(Map::Dmap, parent, name.as_bytes())
}

/// A dmap key built in place from a name's bytes, checked as [`Name::new`]
/// checks them: for a lookup, which keeps neither the name nor the key
/// (two allocations fewer than [`Name::new`] and [`dentry_key`]).
#[derive(Clone)]
pub struct DentryKey {
    len: usize,
    bytes: [u8; ID_KEY_BYTES + MAX_NAME_BYTES],
}

impl DentryKey {
    /// The key of entry `name` in directory `parent`, the same bytes as
    /// [`dentry_key`] gives; [`ObjectError::InvalidName`] for bytes
    /// [`Name::new`] refuses.
    pub fn new(parent: u64, name: &[u8]) -> Result<DentryKey> {
        if let Some(reason) = super::name::file_name_error(name) {
            return Err(ObjectError::InvalidName { class: "file name", name: super::name::shown(name), reason });
        }
        let mut bytes = [0u8; ID_KEY_BYTES + MAX_NAME_BYTES];
        bytes[..ID_KEY_BYTES].copy_from_slice(&id_key(Map::Dmap, parent));
        let len = ID_KEY_BYTES + name.len();
        bytes[ID_KEY_BYTES..len].copy_from_slice(name);
        Ok(DentryKey { len, bytes })
    }

    /// The key of entry `name` in directory `parent` (a name already
    /// checked), the same bytes as [`dentry_key`] gives, without
    /// allocating: for a bulk create's million keys.
    pub fn of(parent: u64, name: &Name) -> DentryKey {
        let name = name.as_bytes();
        let mut bytes = [0u8; ID_KEY_BYTES + MAX_NAME_BYTES];
        bytes[..ID_KEY_BYTES].copy_from_slice(&id_key(Map::Dmap, parent));
        // A Name holds at most MAX_NAME_BYTES bytes.
        let len = ID_KEY_BYTES + name.len().min(MAX_NAME_BYTES);
        bytes[ID_KEY_BYTES..len].copy_from_slice(&name[..len - ID_KEY_BYTES]);
        DentryKey { len, bytes }
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The xattr key of attribute `name` of `object`.
pub fn xattr_key(object: u64, name: &XattrName) -> Vec<u8> {
    id_name_key(Map::Xattr, object, name.as_bytes())
}

/// The orphans key of `object`.
pub fn orphan_key(object: u64) -> [u8; ID_KEY_BYTES] {
    id_key(Map::Orphans, object)
}

fn heap_key(kind: HeapRecord, id: u64, rest: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(HEAP_ID_KEY_BYTES + rest.len());
    k.push(Map::Heap.prefix());
    k.push(kind.to_u8());
    k.extend_from_slice(&id.to_be_bytes());
    k.extend_from_slice(rest);
    k
}

/// Bytes of a heap key made of the prefix, the record kind and one u64
/// (root, object and type records; and the scan prefixes of names and
/// spans of one object).
pub const HEAP_ID_KEY_BYTES: usize = 10;

/// The key of the root record of the heap rooted at directory `root`.
pub fn heap_root_key(root: u64) -> Vec<u8> {
    heap_key(HeapRecord::Root, root, &[])
}

/// The key of heap object `object`'s table entry.
pub fn heap_object_key(object: u64) -> Vec<u8> {
    heap_key(HeapRecord::Object, object, &[])
}

/// The key of name `name` of heap object `object`.
pub fn heap_name_key(object: u64, name: &Name) -> Vec<u8> {
    heap_key(HeapRecord::Name, object, name.as_bytes())
}

/// Prefix of every name record of heap object `object`, in name byte order.
pub fn heap_name_prefix(object: u64) -> Vec<u8> {
    heap_key(HeapRecord::Name, object, &[])
}

/// The key of heap type `type_id`.
pub fn heap_type_key(type_id: u64) -> Vec<u8> {
    heap_key(HeapRecord::Type, type_id, &[])
}

/// The key of the arena record of heap object `object` at `span` (a span
/// offset, or `u64::MAX` for the arena's header).
pub fn heap_span_key(object: u64, span: u64) -> Vec<u8> {
    heap_key(HeapRecord::Span, object, &span.to_be_bytes())
}

/// Prefix of every arena record of heap object `object`, in offset order
/// (the header, at `u64::MAX`, last).
pub fn heap_span_prefix(object: u64) -> Vec<u8> {
    heap_key(HeapRecord::Span, object, &[])
}

/// The key of the page image of heap object `object` at `offset`.
pub fn heap_image_key(object: u64, offset: u64) -> Vec<u8> {
    heap_key(HeapRecord::Image, object, &offset.to_be_bytes())
}

/// Prefix of every page image of heap object `object`, in offset order.
pub fn heap_image_prefix(object: u64) -> Vec<u8> {
    heap_key(HeapRecord::Image, object, &[])
}

fn tree_key(kind: TreeRecord, rest: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + rest.len());
    k.push(Map::Trees.prefix());
    k.push(kind.to_u8());
    k.extend_from_slice(rest);
    k
}

/// Bytes of a tree entry key before the user's key: prefix, kind, tree id.
pub const TREE_ENTRY_PREFIX_BYTES: usize = 10;

/// The catalog key of the tree named `name` (checked when read back).
pub fn tree_catalog_key(name: &str) -> Vec<u8> {
    tree_key(TreeRecord::Catalog, name.as_bytes())
}

/// The key of the tree id high-water mark.
pub fn tree_next_id_key() -> [u8; 2] {
    tree_kind_prefix(TreeRecord::NextId)
}

/// The key of tree `tree`'s entry count.
pub fn tree_count_key(tree: u64) -> Vec<u8> {
    tree_key(TreeRecord::Count, &tree.to_be_bytes())
}

/// The key of entry `key` of tree `tree`.
pub fn tree_entry_key(tree: u64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(TREE_ENTRY_PREFIX_BYTES + key.len());
    k.push(Map::Trees.prefix());
    k.push(TreeRecord::Entry.to_u8());
    k.extend_from_slice(&tree.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// Prefix of every entry of tree `tree`, in user key byte order. Exact:
/// the tree id is fixed-width.
pub fn tree_entry_prefix(tree: u64) -> [u8; TREE_ENTRY_PREFIX_BYTES] {
    let mut k = [0u8; TREE_ENTRY_PREFIX_BYTES];
    k[0] = Map::Trees.prefix();
    k[1] = TreeRecord::Entry.to_u8();
    k[2..].copy_from_slice(&tree.to_be_bytes());
    k
}

/// Prefix of every tree record of `kind` (the whole catalog, all counts).
pub fn tree_kind_prefix(kind: TreeRecord) -> [u8; 2] {
    [Map::Trees.prefix(), kind.to_u8()]
}

/// Prefix of every heap record of `kind` (all roots, all objects, ...).
pub fn heap_kind_prefix(kind: HeapRecord) -> [u8; 2] {
    [Map::Heap.prefix(), kind.to_u8()]
}

/// Prefix of every key of `map` (scan all onodes, all orphans, ...).
pub fn map_prefix(map: Map) -> [u8; 1] {
    [map.prefix()]
}

/// Prefix of every fmap entry of `object`, in offset order. Exact: the
/// object id is fixed-width, so no other object's keys share it.
pub fn fmap_prefix(object: u64) -> [u8; ID_KEY_BYTES] {
    id_key(Map::Fmap, object)
}

/// Prefix of every entry of directory `parent`, in name byte order. Exact:
/// the parent id is fixed-width and names are never empty.
pub fn dmap_prefix(parent: u64) -> [u8; ID_KEY_BYTES] {
    id_key(Map::Dmap, parent)
}

/// Prefix of every extended attribute of `object`, in name byte order.
pub fn xattr_prefix(object: u64) -> [u8; ID_KEY_BYTES] {
    id_key(Map::Xattr, object)
}

/// The smallest key above every key starting with `prefix` (the exclusive
/// end of a prefix scan), or `None` when no key is (the prefix is empty or
/// all `0xFF`; scan to the end then).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut end = prefix.get(..=last)?.to_vec();
    if let Some(b) = end.last_mut() {
        *b += 1;
    }
    Some(end)
}

impl MetaKey {
    /// The map the key belongs to.
    pub fn map(&self) -> Map {
        match self {
            MetaKey::Store(_) => Map::Store,
            MetaKey::Onode { .. } => Map::Omap,
            MetaKey::Extent { .. } => Map::Fmap,
            MetaKey::Dentry { .. } => Map::Dmap,
            MetaKey::Xattr { .. } => Map::Xattr,
            MetaKey::Orphan { .. } => Map::Orphans,
            MetaKey::HeapRoot { .. }
            | MetaKey::HeapObject { .. }
            | MetaKey::HeapName { .. }
            | MetaKey::HeapType { .. }
            | MetaKey::HeapSpan { .. }
            | MetaKey::HeapImage { .. } => Map::Heap,
            MetaKey::TreeCatalog { .. }
            | MetaKey::TreeNextId
            | MetaKey::TreeCount { .. }
            | MetaKey::TreeEntry { .. } => Map::Trees,
        }
    }

    /// Encodes the key.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            MetaKey::Store(name) => store_key(name),
            MetaKey::Onode { object } => onode_key(*object).to_vec(),
            MetaKey::Extent { object, offset } => fmap_key(*object, *offset).to_vec(),
            MetaKey::Dentry { parent, name } => dentry_key(*parent, name),
            MetaKey::Xattr { object, name } => xattr_key(*object, name),
            MetaKey::Orphan { object } => orphan_key(*object).to_vec(),
            MetaKey::HeapRoot { root } => heap_root_key(*root),
            MetaKey::HeapObject { object } => heap_object_key(*object),
            MetaKey::HeapName { object, name } => heap_name_key(*object, name),
            MetaKey::HeapType { type_id } => heap_type_key(*type_id),
            MetaKey::HeapSpan { object, span } => heap_span_key(*object, *span),
            MetaKey::HeapImage { object, offset } => heap_image_key(*object, *offset),
            MetaKey::TreeCatalog { name } => tree_catalog_key(name),
            MetaKey::TreeNextId => tree_next_id_key().to_vec(),
            MetaKey::TreeCount { tree } => tree_count_key(*tree),
            MetaKey::TreeEntry { tree, key } => tree_entry_key(*tree, key),
        }
    }

    /// Decodes a key read back from the index: refuses an unknown prefix, a
    /// wrong length, an fmap offset that is not a multiple of 4096 or past
    /// the largest object, and an invalid name. Never panics.
    pub fn decode(key: &[u8]) -> Result<MetaKey> {
        let Some(&prefix) = key.first() else {
            return Err(ObjectError::BadRecord { record: "index key", what: "empty key".into() });
        };
        let Some(map) = Map::from_prefix(prefix) else {
            return Err(ObjectError::BadRecord {
                record: "index key",
                what: format!("unknown map prefix {prefix:#04x}"),
            });
        };
        Self::decode_map(map, key).map_err(|what| ObjectError::BadRecord { record: map.key_record(), what })
    }

    fn decode_map(map: Map, key: &[u8]) -> DecodeResult<MetaKey> {
        let mut r = Reader::new(key);
        r.u8("prefix")?;
        // A name failing its check is corruption here, reported with the
        // reason the name type gives.
        let named = |e: ObjectError| e.to_string();
        let k = match map {
            Map::Store => MetaKey::Store(StoreName::new(r.rest()).map_err(named)?),
            Map::Omap => MetaKey::Onode { object: r.u64_be("object id")? },
            Map::Orphans => MetaKey::Orphan { object: r.u64_be("object id")? },
            Map::Fmap => {
                let object = r.u64_be("object id")?;
                let offset = r.u64_be("offset")?;
                if offset % BLOCK_BYTES != 0 {
                    return Err(format!("offset {offset} is not a multiple of {BLOCK_BYTES}"));
                }
                if offset >= MAX_OBJECT_BYTES {
                    return Err(format!("offset {offset} is past the largest object ({MAX_OBJECT_BYTES} bytes)"));
                }
                MetaKey::Extent { object, offset }
            }
            Map::Dmap => {
                let parent = r.u64_be("parent id")?;
                let name = Name::new(r.rest()).map_err(named)?;
                MetaKey::Dentry { parent, name }
            }
            Map::Xattr => {
                let object = r.u64_be("object id")?;
                let name = XattrName::new(r.rest()).map_err(named)?;
                MetaKey::Xattr { object, name }
            }
            Map::Heap => {
                let b = r.u8("heap record kind")?;
                let kind = HeapRecord::from_u8(b).ok_or_else(|| format!("unknown heap record kind {b:#04x}"))?;
                let id = r.u64_be("id")?;
                match kind {
                    HeapRecord::Root => MetaKey::HeapRoot { root: id },
                    HeapRecord::Object => MetaKey::HeapObject { object: id },
                    HeapRecord::Name => MetaKey::HeapName { object: id, name: Name::new(r.rest()).map_err(named)? },
                    HeapRecord::Type => MetaKey::HeapType { type_id: id },
                    HeapRecord::Span => MetaKey::HeapSpan { object: id, span: r.u64_be("span offset")? },
                    HeapRecord::Image => MetaKey::HeapImage { object: id, offset: r.u64_be("page offset")? },
                }
            }
            Map::Trees => {
                let b = r.u8("tree record kind")?;
                let kind = TreeRecord::from_u8(b).ok_or_else(|| format!("unknown tree record kind {b:#04x}"))?;
                match kind {
                    TreeRecord::Catalog => {
                        MetaKey::TreeCatalog { name: check_tree_name(r.rest()).map_err(named)?.into() }
                    }
                    TreeRecord::NextId => MetaKey::TreeNextId,
                    TreeRecord::Count => MetaKey::TreeCount { tree: r.u64_be("tree id")? },
                    TreeRecord::Entry => {
                        let tree = r.u64_be("tree id")?;
                        let key = r.rest();
                        if key.len() > MAX_TREE_KEY_BYTES {
                            return Err(format!("a key of {} bytes, over {MAX_TREE_KEY_BYTES}", key.len()));
                        }
                        MetaKey::TreeEntry { tree, key: key.to_vec() }
                    }
                }
            }
        };
        r.finish()?;
        Ok(k)
    }
}

/// Refuses a decoded key of another map than the caller scanned.
fn wrong_map(expected: Map, found: &MetaKey) -> ObjectError {
    ObjectError::BadRecord {
        record: expected.key_record(),
        what: format!(
            "found a {} key ({:#04x}) where a {} key was expected",
            found.map().name(),
            found.map().prefix(),
            expected.name()
        ),
    }
}

/// Decodes an omap key: the object id.
pub fn decode_onode_key(key: &[u8]) -> Result<u64> {
    match MetaKey::decode(key)? {
        MetaKey::Onode { object } => Ok(object),
        k => Err(wrong_map(Map::Omap, &k)),
    }
}

/// Decodes an fmap key: (object id, offset).
pub fn decode_fmap_key(key: &[u8]) -> Result<(u64, u64)> {
    match MetaKey::decode(key)? {
        MetaKey::Extent { object, offset } => Ok((object, offset)),
        k => Err(wrong_map(Map::Fmap, &k)),
    }
}

/// Decodes a dmap key: (parent id, name).
pub fn decode_dentry_key(key: &[u8]) -> Result<(u64, Name)> {
    match MetaKey::decode(key)? {
        MetaKey::Dentry { parent, name } => Ok((parent, name)),
        k => Err(wrong_map(Map::Dmap, &k)),
    }
}

/// Decodes an xattr key: (object id, name).
pub fn decode_xattr_key(key: &[u8]) -> Result<(u64, XattrName)> {
    match MetaKey::decode(key)? {
        MetaKey::Xattr { object, name } => Ok((object, name)),
        k => Err(wrong_map(Map::Xattr, &k)),
    }
}

/// Decodes an orphans key: the object id.
pub fn decode_orphan_key(key: &[u8]) -> Result<u64> {
    match MetaKey::decode(key)? {
        MetaKey::Orphan { object } => Ok(object),
        k => Err(wrong_map(Map::Orphans, &k)),
    }
}

/// Decodes a store metadata key: its name.
pub fn decode_store_key(key: &[u8]) -> Result<StoreName> {
    match MetaKey::decode(key)? {
        MetaKey::Store(name) => Ok(name),
        k => Err(wrong_map(Map::Store, &k)),
    }
}

/// Decodes a heap key: its record, refusing a key of another map.
pub fn decode_heap_key(key: &[u8]) -> Result<MetaKey> {
    let k = MetaKey::decode(key)?;
    match k.map() {
        Map::Heap => Ok(k),
        _ => Err(wrong_map(Map::Heap, &k)),
    }
}

/// Decodes a trees map key: its record, refusing a key of another map.
pub fn decode_tree_key(key: &[u8]) -> Result<MetaKey> {
    let k = MetaKey::decode(key)?;
    match k.map() {
        Map::Trees => Ok(k),
        _ => Err(wrong_map(Map::Trees, &k)),
    }
}
