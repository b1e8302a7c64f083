//! The heap's records (map `heap`, prefix `0x60`): a heap's root, each heap
//! object's table entry and each type. Layouts: docs/format.md, section 18;
//! design: docs/heap.md. Name records have an empty value and arena spans
//! are the arena's own encoding, so neither has a codec here.
//!
//! Kept in the object layer, beside the keys, so every reader (the heap,
//! recovery of heap files at store open, fsck) decodes them one way.

use crate::error::{ObjectError, Result};

use super::codec::{version, DecodeResult, Reader};
use super::MAX_OBJECT_BYTES;

/// The version of every heap record this build writes and the newest it
/// reads.
pub const HEAP_RECORD_VERSION: u8 = 1;
/// Bytes of an encoded heap root record.
pub const HEAP_ROOT_BYTES: usize = 17;
/// Bytes of an encoded heap object record.
pub const HEAP_OBJECT_BYTES: usize = 26;
/// Bytes of a persistent pointer (`PPtr`: object, offset, generation, each
/// u64): the span a type's pointer field covers.
pub const POINTER_BYTES: u64 = 24;
/// Most pointer fields one type may list, so a type record stays small
/// (8 bytes each: 32 KiB) and a clone's walk per object is bounded.
pub const MAX_TYPE_POINTERS: usize = 4096;

/// Object record flag: the object holds arena spans (`alloc_in`).
pub const HEAP_OBJECT_ARENA: u8 = 1 << 0;
/// Object record flag: the object's file was a freed object's, emptied and
/// renamed, and no sync has made its bytes durable since: after a crash,
/// recovery empties it again (zeros), since the emptying may not have
/// reached the disk while the rename did.
pub const HEAP_OBJECT_RECYCLED: u8 = 1 << 1;
const KNOWN_OBJECT_FLAGS: u8 = HEAP_OBJECT_ARENA | HEAP_OBJECT_RECYCLED;

/// A heap's root record (key: heap root directory id): the two directories
/// the heap alone changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeapRoot {
    /// The `objects/` directory: one entry per object, named by its id.
    pub objects_dir: u64,
    /// The `names/` directory: one entry per human name.
    pub names_dir: u64,
}

/// A heap object's table entry (key: object id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeapObject {
    /// The heap root directory the object belongs to.
    pub heap: u64,
    /// The type attached to the object, 0 for none.
    pub type_id: u64,
    /// Bytes of the object's file known durable at the last `sync`: a file
    /// found shorter is refused at attach (something outside Larder shrank
    /// it), one at least this long but shorter than the onode's size is
    /// extended at open.
    pub durable_size: u64,
    /// `HEAP_OBJECT_*` bits.
    pub flags: u8,
}

/// A type: the offsets of the persistent pointer fields in an object.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeapType {
    /// Offsets of 24-byte pointer fields, strictly increasing, multiples of
    /// 8, not overlapping; at most [`MAX_TYPE_POINTERS`].
    pub offsets: Vec<u64>,
}

/// Most bytes one page image holds: the largest page size Linux uses on
/// the machines Larder runs on.
pub const MAX_PAGE_IMAGE_BYTES: usize = 65536;

/// A page image (key: object id, page offset): a heap object's page as a
/// one-flush `sync` read it from the mapping, which recovery writes into the
/// object's file (docs/heap.md, "One flush per sync").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeapPageImage {
    /// The page's bytes: 1 to [`MAX_PAGE_IMAGE_BYTES`] (the object's last
    /// page may be shorter than a page).
    pub bytes: Vec<u8>,
}

fn bad(record: &'static str) -> impl Fn(String) -> ObjectError {
    move |what| ObjectError::BadRecord { record, what }
}

const ROOT: &str = "heap root record";
const OBJECT: &str = "heap object record";
const TYPE: &str = "heap type record";
const IMAGE: &str = "heap page image";

impl HeapRoot {
    fn check(&self) -> DecodeResult<()> {
        if self.objects_dir == 0 || self.names_dir == 0 {
            return Err("directory id 0 (never allocated)".into());
        }
        if self.objects_dir == self.names_dir {
            return Err(format!("objects and names are one directory ({})", self.objects_dir));
        }
        Ok(())
    }

    /// Encodes the record: version u8, objects dir u64 LE, names dir u64 LE.
    /// Refuses a zero or shared directory id ([`ObjectError::InvalidRecord`]).
    pub fn encode(&self) -> Result<[u8; HEAP_ROOT_BYTES]> {
        self.check().map_err(|what| ObjectError::InvalidRecord { record: ROOT, what })?;
        let mut b = [0u8; HEAP_ROOT_BYTES];
        b[0] = HEAP_RECORD_VERSION;
        b[1..9].copy_from_slice(&self.objects_dir.to_le_bytes());
        b[9..17].copy_from_slice(&self.names_dir.to_le_bytes());
        Ok(b)
    }

    /// Decodes a record read back from the index (refuses what `encode`
    /// refuses, version 0, a newer version, and any other length).
    pub fn decode(bytes: &[u8]) -> Result<HeapRoot> {
        let mut r = Reader::new(bytes);
        version(&mut r, ROOT, HEAP_RECORD_VERSION)?;
        let root = HeapRoot {
            objects_dir: r.u64("objects dir").map_err(bad(ROOT))?,
            names_dir: r.u64("names dir").map_err(bad(ROOT))?,
        };
        r.finish().map_err(bad(ROOT))?;
        root.check().map_err(bad(ROOT))?;
        Ok(root)
    }
}

impl HeapObject {
    fn check(&self) -> DecodeResult<()> {
        if self.heap == 0 {
            return Err("heap root id 0 (never allocated)".into());
        }
        if self.durable_size > MAX_OBJECT_BYTES {
            return Err(format!("durable size {} is above the largest object", self.durable_size));
        }
        if self.flags & !KNOWN_OBJECT_FLAGS != 0 {
            return Err(format!("unknown flags {:#x}", self.flags & !KNOWN_OBJECT_FLAGS));
        }
        Ok(())
    }

    /// Whether the object holds arena spans.
    pub fn has_arena(&self) -> bool {
        self.flags & HEAP_OBJECT_ARENA != 0
    }

    /// Whether the object's file is a recycled one whose bytes no sync has
    /// made durable yet ([`HEAP_OBJECT_RECYCLED`]).
    pub fn is_recycled(&self) -> bool {
        self.flags & HEAP_OBJECT_RECYCLED != 0
    }

    /// Encodes the record: version u8, heap u64 LE, type id u64 LE, durable
    /// size u64 LE, flags u8 (26 bytes). Refuses a zero heap id, a size
    /// above the largest object and unknown flags.
    pub fn encode(&self) -> Result<[u8; HEAP_OBJECT_BYTES]> {
        self.check().map_err(|what| ObjectError::InvalidRecord { record: OBJECT, what })?;
        let mut b = [0u8; HEAP_OBJECT_BYTES];
        b[0] = HEAP_RECORD_VERSION;
        b[1..9].copy_from_slice(&self.heap.to_le_bytes());
        b[9..17].copy_from_slice(&self.type_id.to_le_bytes());
        b[17..25].copy_from_slice(&self.durable_size.to_le_bytes());
        b[25] = self.flags;
        Ok(b)
    }

    /// Decodes a record read back from the index (refuses what `encode`
    /// refuses, version 0, a newer version, and any other length).
    pub fn decode(bytes: &[u8]) -> Result<HeapObject> {
        let mut r = Reader::new(bytes);
        version(&mut r, OBJECT, HEAP_RECORD_VERSION)?;
        let object = HeapObject {
            heap: r.u64("heap").map_err(bad(OBJECT))?,
            type_id: r.u64("type id").map_err(bad(OBJECT))?,
            durable_size: r.u64("durable size").map_err(bad(OBJECT))?,
            flags: r.u8("flags").map_err(bad(OBJECT))?,
        };
        r.finish().map_err(bad(OBJECT))?;
        object.check().map_err(bad(OBJECT))?;
        Ok(object)
    }
}

impl HeapType {
    /// Why the offsets cannot form a type, if they cannot.
    pub fn offsets_error(offsets: &[u64]) -> Option<String> {
        if offsets.len() > MAX_TYPE_POINTERS {
            return Some(format!("{} pointer fields, above the limit of {MAX_TYPE_POINTERS}", offsets.len()));
        }
        let mut next_free = 0u64;
        for (i, &offset) in offsets.iter().enumerate() {
            if offset % 8 != 0 {
                return Some(format!("offset {offset} is not a multiple of 8"));
            }
            if i > 0 && offset < next_free {
                return Some(format!(
                    "offset {offset} is not past the previous pointer field (offsets must increase by 24 or more)"
                ));
            }
            match offset.checked_add(POINTER_BYTES) {
                Some(end) if end <= MAX_OBJECT_BYTES => next_free = end,
                _ => return Some(format!("offset {offset} puts a pointer past the largest object")),
            }
        }
        None
    }

    /// The bytes an object needs to hold every pointer field of the type.
    pub fn min_object_bytes(&self) -> u64 {
        self.offsets.last().map_or(0, |o| o + POINTER_BYTES)
    }

    /// Encodes the record: version u8, count u32 LE, then each offset u64
    /// LE. Refuses offsets [`HeapType::offsets_error`] refuses.
    pub fn encode(&self) -> Result<Vec<u8>> {
        if let Some(what) = Self::offsets_error(&self.offsets) {
            return Err(ObjectError::InvalidRecord { record: TYPE, what });
        }
        let mut b = Vec::with_capacity(5 + 8 * self.offsets.len());
        b.push(HEAP_RECORD_VERSION);
        b.extend_from_slice(&(self.offsets.len() as u32).to_le_bytes());
        for offset in &self.offsets {
            b.extend_from_slice(&offset.to_le_bytes());
        }
        Ok(b)
    }

    /// Decodes a record read back from the index: refuses version 0, a
    /// newer version, a count above the limit or not matching the length,
    /// and offsets `encode` refuses. Allocates at most the input's length.
    pub fn decode(bytes: &[u8]) -> Result<HeapType> {
        let mut r = Reader::new(bytes);
        version(&mut r, TYPE, HEAP_RECORD_VERSION)?;
        let count = r.u32("pointer count").map_err(bad(TYPE))?;
        let count = r.count(u64::from(count), 8, "pointer count").map_err(bad(TYPE))?;
        if count > MAX_TYPE_POINTERS {
            return Err(bad(TYPE)(format!("{count} pointer fields, above the limit of {MAX_TYPE_POINTERS}")));
        }
        let mut offsets = Vec::with_capacity(count);
        for _ in 0..count {
            offsets.push(r.u64("pointer offset").map_err(bad(TYPE))?);
        }
        r.finish().map_err(bad(TYPE))?;
        if let Some(what) = Self::offsets_error(&offsets) {
            return Err(bad(TYPE)(what));
        }
        Ok(HeapType { offsets })
    }
}

impl HeapPageImage {
    fn check_len(len: usize) -> DecodeResult<()> {
        if len == 0 || len > MAX_PAGE_IMAGE_BYTES {
            return Err(format!("{len} bytes: an image holds 1 to {MAX_PAGE_IMAGE_BYTES}"));
        }
        Ok(())
    }

    /// Encodes the record: version u8, crc32c of the bytes u32 LE, the
    /// bytes (1 to [`MAX_PAGE_IMAGE_BYTES`]; other lengths refused).
    pub fn encode(&self) -> Result<Vec<u8>> {
        Self::check_len(self.bytes.len()).map_err(|what| ObjectError::InvalidRecord { record: IMAGE, what })?;
        let mut b = Vec::with_capacity(5 + self.bytes.len());
        b.push(HEAP_RECORD_VERSION);
        b.extend_from_slice(&larder_io::codec::crc(&self.bytes).to_le_bytes());
        b.extend_from_slice(&self.bytes);
        Ok(b)
    }

    /// Decodes a record read back from the index: refuses version 0, a
    /// newer version, a length `encode` refuses and a crc32c that does not
    /// match the bytes.
    pub fn decode(bytes: &[u8]) -> Result<HeapPageImage> {
        let mut r = Reader::new(bytes);
        version(&mut r, IMAGE, HEAP_RECORD_VERSION)?;
        let crc = r.u32("crc32c").map_err(bad(IMAGE))?;
        let page = r.rest();
        Self::check_len(page.len()).map_err(bad(IMAGE))?;
        if larder_io::codec::crc(page) != crc {
            return Err(bad(IMAGE)("crc32c does not match the bytes".into()));
        }
        Ok(HeapPageImage { bytes: page.to_vec() })
    }
}
