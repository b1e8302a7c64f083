//! The onode: an object's attributes and where its bytes live, the value
//! of its omap key. Layout byte by byte: docs/format.md, section 13.
//!
//! The encoding is canonical: every field is stored whole, reserved values
//! are refused, and a value decodes only if it has exactly the length its
//! fields call for. So an onode that decodes re-encodes to the same bytes,
//! and damage is either refused or shows as a different valid onode, never
//! as a silent mis-parse. No checksum: the index checks the block holding
//! the value, and the intent log the record carrying it.
//!
//! Versions: byte 0 is the record version. Version 1 stores every field at
//! a fixed width (95 bytes before the variable part). Version 2, the
//! compact layout, stores integers as minimal varints, leaves out a zero
//! flags word and device number, and stores three of the four timestamps
//! as nanosecond differences from the birth time (a few bytes each, where
//! they are close): about 30 bytes for a file, which matters when millions
//! of small objects are kept inline. Stores created by this build set the
//! superblock's incompat bit `INCOMPAT_COMPACT_ONODES` and write version 2
//! (`MetaLimits::compact_onodes`), so older builds refuse them at open;
//! stores without the bit keep writing version 1. Both versions are read
//! everywhere. A version above 2 is reported as
//! [`ObjectError::NewerRecord`], not corruption.

use crate::error::{ObjectError, Result};

use super::codec::{version, DecodeResult, Reader};
use super::types::{Kind, MetaLimits, Timestamp, MODE_PERM_MASK, MODE_TYPE_MASK};
use super::MAX_OBJECT_BYTES;

/// The newest onode version this build reads (and writes, in stores with
/// compact onodes).
pub const ONODE_VERSION: u8 = 2;
/// The fixed-width version, written in stores without compact onodes.
pub const ONODE_VERSION_FIXED: u8 = 1;
/// Bytes of a version-1 onode before its variable part (directory fields,
/// inline bytes or file id).
pub const ONODE_FIXED_BYTES: usize = 95;

/// Flag: the object may not be changed, renamed, linked or removed
/// (`chattr +i`).
pub const FLAG_IMMUTABLE: u32 = 1 << 0;
/// Flag: writes may only append (`chattr +a`).
pub const FLAG_APPEND_ONLY: u32 = 1 << 1;
/// Flag: reads do not update the access time (`chattr +A`).
pub const FLAG_NO_ATIME: u32 = 1 << 2;
/// Flag: backup tools skip the object (`chattr +d`).
pub const FLAG_NO_DUMP: u32 = 1 << 3;
/// Flag: a heap's root directory or one of its `objects/` and `names/`
/// directories (docs/heap.md): their entries change only through the
/// heap, so the file system and the KV API refuse to change them.
pub const FLAG_HEAP: u32 = 1 << 4;
/// Every flag this build defines; other bits are refused, because an
/// ignored flag could mean a lost restriction (a build that predates a
/// flag refuses onodes carrying it rather than drop it).
pub const KNOWN_FLAGS: u32 = FLAG_IMMUTABLE | FLAG_APPEND_ONLY | FLAG_NO_ATIME | FLAG_NO_DUMP | FLAG_HEAP;

const RECORD: &str = "onode";

/// Where an object's bytes live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataLocation {
    /// In the onode value itself (tag 1): exactly `size` bytes, at most the
    /// store's `inline_max_bytes`. Objects without bytes (directories,
    /// devices, fifos, sockets) use this with no bytes.
    Inline(Vec<u8>),
    /// In container extents described by the object's fmap entries (tag
    /// 2); ranges without an entry are holes and read as zeros.
    Extents,
    /// In a file of its own under `heap/` (tag 3), so it can be mapped:
    /// heap objects.
    OwnFile {
        /// The heap file's id (its name is derived from it).
        file: u64,
    },
}

impl DataLocation {
    /// The stored tag byte.
    pub fn tag(&self) -> u8 {
        match self {
            DataLocation::Inline(_) => 1,
            DataLocation::Extents => 2,
            DataLocation::OwnFile { .. } => 3,
        }
    }
}

/// What a directory's onode adds, so `..` and emptiness need no scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirInfo {
    /// The parent directory's id (the root is its own parent). Never 0.
    pub parent: u64,
    /// Number of entries in the directory's dmap (`.` and `..` are not
    /// entries).
    pub entries: u64,
}

/// An object's onode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Onode {
    /// What the object is.
    pub kind: Kind,
    /// `FLAG_*` bits.
    pub flags: u32,
    /// Logical size in bytes, at most [`MAX_OBJECT_BYTES`].
    pub size: u64,
    /// Type and permission bits (`st_mode`); the type bits must be
    /// `kind`'s, and no bits beyond type and permissions may be set.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Number of names (dentries) referring to the object; 0 for an orphan.
    pub nlink: u32,
    /// Bumped whenever the object is changed in a way cached copies must
    /// notice (leases, client caches).
    pub generation: u64,
    /// Last access.
    pub atime: Timestamp,
    /// Last change of the bytes.
    pub mtime: Timestamp,
    /// Last change of the onode.
    pub ctime: Timestamp,
    /// Creation.
    pub btime: Timestamp,
    /// Device number of a character or block device; 0 for other kinds.
    pub rdev: u64,
    /// Where the bytes live.
    pub location: DataLocation,
    /// Present exactly when `kind` is [`Kind::Directory`].
    pub dir: Option<DirInfo>,
}

impl Onode {
    /// A new object's onode: size 0, no links (the namespace adds them),
    /// generation 1, every time now, no bytes. `mode` holds the permission
    /// bits, with or without `kind`'s type bits. A directory (`id` is its
    /// own) is its own parent until the namespace links it.
    pub fn new(kind: Kind, mode: u32, uid: u32, gid: u32, id: u64) -> Onode {
        let now = Timestamp::now();
        let mode = if mode & MODE_TYPE_MASK == 0 { mode | kind.mode_bits() } else { mode };
        Onode {
            kind,
            flags: 0,
            size: 0,
            mode,
            uid,
            gid,
            nlink: 0,
            generation: 1,
            atime: now,
            mtime: now,
            ctime: now,
            btime: now,
            rdev: 0,
            location: DataLocation::Inline(Vec::new()),
            dir: (kind == Kind::Directory).then_some(DirInfo { parent: id, entries: 0 }),
        }
    }

    /// Whether objects of this kind have bytes (files and symlinks).
    fn has_bytes(kind: Kind) -> bool {
        matches!(kind, Kind::File | Kind::Symlink)
    }

    /// Why the onode cannot be stored, if it cannot. Run on both encode
    /// and decode, so what one accepts the other does.
    pub(super) fn check(&self, limits: &MetaLimits) -> DecodeResult<()> {
        self.check_inline_len(limits, None)
    }

    /// [`Onode::check`] of an onode decoded with `inline`: one decoded
    /// with its inline bytes left in the encoding holds none, and is
    /// checked as if it held `size` of them (the decode read that many).
    pub(super) fn check_decoded(&self, limits: &MetaLimits, inline: InlineBytes) -> DecodeResult<()> {
        let left = match (&self.location, inline) {
            (DataLocation::Inline(_), InlineBytes::Left) => usize::try_from(self.size).ok(),
            _ => None,
        };
        self.check_inline_len(limits, left)
    }

    /// [`Onode::check`], taking the inline bytes' length as `left` when
    /// given instead of the bytes held.
    fn check_inline_len(&self, limits: &MetaLimits, left: Option<usize>) -> DecodeResult<()> {
        let kind = self.kind;
        if self.mode & !(MODE_TYPE_MASK | MODE_PERM_MASK) != 0 {
            return Err(format!("mode {:#o} has bits beyond type and permissions", self.mode));
        }
        if self.mode & MODE_TYPE_MASK != kind.mode_bits() {
            return Err(format!("mode {:#o} has type bits of another kind than {kind:?}", self.mode));
        }
        if self.flags & !KNOWN_FLAGS != 0 {
            return Err(format!("unknown flags {:#x}", self.flags & !KNOWN_FLAGS));
        }
        if self.size > MAX_OBJECT_BYTES {
            return Err(format!("size {} is above the largest object ({MAX_OBJECT_BYTES} bytes)", self.size));
        }
        for (t, what) in [(self.atime, "atime"), (self.mtime, "mtime"), (self.ctime, "ctime"), (self.btime, "btime")] {
            t.check(what)?;
        }
        if self.rdev != 0 && !matches!(kind, Kind::CharDevice | Kind::BlockDevice) {
            return Err(format!("a {kind:?} has device number {:#x}; only devices have one", self.rdev));
        }
        match &self.location {
            DataLocation::Inline(data) => {
                let len = left.unwrap_or(data.len());
                if len as u64 != self.size {
                    return Err(format!("{len} inline bytes for size {}", self.size));
                }
                if len as u64 > u64::from(limits.inline_max_bytes) {
                    return Err(format!(
                        "{len} inline bytes, above the store's inline_max_bytes ({})",
                        limits.inline_max_bytes
                    ));
                }
                if !Self::has_bytes(kind) && len != 0 {
                    return Err(format!("a {kind:?} has no bytes, but size is {}", self.size));
                }
            }
            DataLocation::Extents if !Self::has_bytes(kind) => {
                return Err(format!("a {kind:?} has no bytes to keep in extents"));
            }
            DataLocation::Extents => {}
            DataLocation::OwnFile { .. } if kind != Kind::File => {
                return Err(format!("a {kind:?} cannot live in a file of its own; only regular files do"));
            }
            DataLocation::OwnFile { .. } => {}
        }
        match (kind, self.dir) {
            (Kind::Directory, Some(d)) if d.parent == 0 => Err("directory's parent id is 0 (never allocated)".into()),
            (Kind::Directory, Some(_)) => Ok(()),
            (Kind::Directory, None) => Err("directory without parent and entry count".into()),
            (_, Some(_)) => Err(format!("a {kind:?} has directory fields")),
            (_, None) => Ok(()),
        }
    }

    /// Encodes the onode (current version). Refuses an onode no reader
    /// would accept ([`ObjectError::InvalidRecord`]), such as inline bytes
    /// above `limits.inline_max_bytes` or a mode of another kind.
    pub fn encode(&self, limits: &MetaLimits) -> Result<Vec<u8>> {
        self.check(limits).map_err(|what| ObjectError::InvalidRecord { record: RECORD, what })?;
        if limits.compact_onodes {
            return Ok(super::onode_v2::encode(self));
        }
        let inline = match &self.location {
            DataLocation::Inline(d) => d.len(),
            _ => 0,
        };
        let mut b = Vec::with_capacity(ONODE_FIXED_BYTES + 16 + inline.max(8));
        b.push(ONODE_VERSION_FIXED);
        b.push(self.kind.to_u8());
        b.push(self.location.tag());
        b.extend_from_slice(&self.flags.to_le_bytes());
        b.extend_from_slice(&self.size.to_le_bytes());
        for v in [self.mode, self.uid, self.gid, self.nlink] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&self.generation.to_le_bytes());
        for t in [self.atime, self.mtime, self.ctime, self.btime] {
            t.put(&mut b);
        }
        b.extend_from_slice(&self.rdev.to_le_bytes());
        debug_assert_eq!(b.len(), ONODE_FIXED_BYTES);
        if let Some(d) = self.dir {
            b.extend_from_slice(&d.parent.to_le_bytes());
            b.extend_from_slice(&d.entries.to_le_bytes());
        }
        match &self.location {
            DataLocation::Inline(d) => b.extend_from_slice(d),
            DataLocation::Extents => {}
            DataLocation::OwnFile { file } => b.extend_from_slice(&file.to_le_bytes()),
        }
        Ok(b)
    }

    /// Decodes an onode read back from the index. Refuses a version above
    /// [`ONODE_VERSION`] ([`ObjectError::NewerRecord`]) and anything else
    /// that fails a check ([`ObjectError::BadRecord`]): version 0, an
    /// unknown kind or location tag, a length other than the fields call
    /// for, and every check of [`Onode::encode`]. Never panics; allocates
    /// at most the input's length.
    pub fn decode(bytes: &[u8], limits: &MetaLimits) -> Result<Onode> {
        Self::decode_as(bytes, limits, InlineBytes::Copied)
    }

    /// Decodes as [`Onode::decode`] does, with the same checks, but leaves
    /// an inline object's bytes where they are: the location is
    /// `DataLocation::Inline` with no bytes, and the second value is their
    /// length, `n`. They are the encoding's last `n` bytes (the location is
    /// an onode's last field in both layouts, and a decode refuses bytes
    /// after it). For a reader that copies them out of the encoded value
    /// once: copying them into the onode first was a 1 KiB allocation, copy
    /// and compare per decode of a KV value.
    pub fn decode_attributes(bytes: &[u8], limits: &MetaLimits) -> Result<(Onode, Option<usize>)> {
        let onode = Self::decode_as(bytes, limits, InlineBytes::Left)?;
        let inline = match onode.location {
            DataLocation::Inline(_) => Some(to_usize_checked(onode.size)?),
            _ => None,
        };
        Ok((onode, inline))
    }

    fn decode_as(bytes: &[u8], limits: &MetaLimits, inline: InlineBytes) -> Result<Onode> {
        let mut r = Reader::new(bytes);
        let decoded = match version(&mut r, RECORD, ONODE_VERSION)? {
            1 => Self::decode_v1(&mut r, limits, inline),
            _ => super::onode_v2::decode(&mut r, limits, inline),
        };
        decoded.map_err(|what| ObjectError::BadRecord { record: RECORD, what })
    }

    fn decode_v1(r: &mut Reader<'_>, limits: &MetaLimits, inline: InlineBytes) -> DecodeResult<Onode> {
        let kind_byte = r.u8("kind")?;
        let kind = Kind::from_u8(kind_byte).ok_or_else(|| format!("unknown kind {kind_byte}"))?;
        let tag = r.u8("location tag")?;
        let flags = r.u32("flags")?;
        let size = r.u64("size")?;
        let mode = r.u32("mode")?;
        let uid = r.u32("uid")?;
        let gid = r.u32("gid")?;
        let nlink = r.u32("nlink")?;
        let generation = r.u64("generation")?;
        let mut time =
            |what: &str| -> DecodeResult<Timestamp> { Ok(Timestamp { secs: r.i64(what)?, nanos: r.u32(what)? }) };
        let atime = time("atime")?;
        let mtime = time("mtime")?;
        let ctime = time("ctime")?;
        let btime = time("btime")?;
        let rdev = r.u64("rdev")?;
        let dir = if kind == Kind::Directory {
            Some(DirInfo { parent: r.u64("directory parent")?, entries: r.u64("directory entry count")? })
        } else {
            None
        };
        let location = location(r, tag, size, limits, inline, |r| r.u64("heap file id"))?;
        r.finish()?;
        let onode = Onode {
            kind,
            flags,
            size,
            mode,
            uid,
            gid,
            nlink,
            generation,
            atime,
            mtime,
            ctime,
            btime,
            rdev,
            location,
            dir,
        };
        onode.check_decoded(limits, inline)?;
        Ok(onode)
    }
}

/// Whether a decode copies an inline object's bytes into its onode
/// ([`Onode::decode`]) or leaves them in the encoding
/// ([`Onode::decode_attributes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum InlineBytes {
    Copied,
    Left,
}

/// `size` as a length in memory (an inline size, bounded by the store's
/// `inline_max_bytes` already).
fn to_usize_checked(size: u64) -> Result<usize> {
    usize::try_from(size)
        .map_err(|_| ObjectError::BadRecord { record: RECORD, what: format!("inline size {size} does not fit memory") })
}

/// The location data of an onode whose location tag is `tag` and size
/// `size`, read from `r` (`heap_id` reads a heap file id, each layout in
/// its own encoding).
pub(super) fn location(
    r: &mut Reader<'_>,
    tag: u8,
    size: u64,
    limits: &MetaLimits,
    inline: InlineBytes,
    heap_id: impl FnOnce(&mut Reader<'_>) -> DecodeResult<u64>,
) -> DecodeResult<DataLocation> {
    Ok(match tag {
        1 => {
            // Bound the length before reading, so a damaged size cannot
            // make the decoder allocate.
            if size > u64::from(limits.inline_max_bytes) {
                return Err(format!(
                    "inline size {size} is above the store's inline_max_bytes ({})",
                    limits.inline_max_bytes
                ));
            }
            let n = usize::try_from(size).map_err(|_| format!("inline size {size} does not fit memory"))?;
            let bytes = r.bytes(n, "inline bytes")?;
            DataLocation::Inline(if inline == InlineBytes::Copied { bytes.to_vec() } else { Vec::new() })
        }
        2 => DataLocation::Extents,
        3 => DataLocation::OwnFile { file: heap_id(r)? },
        t => return Err(format!("unknown data location tag {t}")),
    })
}
