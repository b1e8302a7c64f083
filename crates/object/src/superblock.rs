//! The superblock: who the store is and how it was made.
//!
//! `STORE/SUPERBLOCK` holds two 4 KiB slots, A (offset 0) and B (offset
//! 4096), each a complete, checksummed copy with a generation number. An
//! update writes the slot not holding the current copy, with the next
//! generation, and syncs it; open takes the valid slot with the higher
//! generation. A crash tears at most the slot being written, and the other
//! still holds the previous generation, so the store is never lost to a
//! torn update. Layout byte by byte: docs/format.md, "Superblock".

use std::path::{Path, PathBuf};

use larder_io::{read_exact_at, write_all_at, OpenOptions, Storage};

use crate::error::{ObjectError, Result};

/// The superblock file's name inside the store directory.
pub const SUPERBLOCK_FILE: &str = "SUPERBLOCK";
/// The name a new superblock is written under before it is renamed to
/// [`SUPERBLOCK_FILE`] (see [`create`]).
pub const SUPERBLOCK_TMP_FILE: &str = "SUPERBLOCK.new";
/// Bytes per slot; the file holds two.
pub const SLOT_BYTES: usize = 4096;
/// The first 8 bytes of a slot.
pub const MAGIC: [u8; 8] = *b"LRDRSUPR";
/// The store format version this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;
/// Feature bits this build understands, per class (none yet).
pub const KNOWN_COMPAT: u64 = 0;
/// Read-only compatible features this build understands (none yet).
pub const KNOWN_RO_COMPAT: u64 = 0;
/// Incompatible feature bit 0: onodes may be in the compact layout
/// (version 2, docs/format.md section 13), which older builds cannot read.
/// Set when a store is created.
pub const INCOMPAT_COMPACT_ONODES: u64 = 1 << 0;
/// Incompatible feature bit 1: the extent map may hold unwritten entries
/// (tag 2, docs/format.md section 13: space `fallocate` set aside, reading
/// as zeros), which older builds cannot read. Set when a store is created;
/// a store without it never gets such entries.
pub const INCOMPAT_UNWRITTEN_EXTENTS: u64 = 1 << 1;
/// Incompatible feature bit 2: container files may be shorter than
/// `container_bytes` with extents in use in them (they start small and
/// grow, docs/format.md section 12), which older builds refuse as
/// corrupt. Set when a store is created.
pub const INCOMPAT_GROWING_CONTAINERS: u64 = 1 << 2;
/// Incompatible features this build understands.
pub const KNOWN_INCOMPAT: u64 = INCOMPAT_COMPACT_ONODES | INCOMPAT_UNWRITTEN_EXTENTS | INCOMPAT_GROWING_CONTAINERS;
/// Bytes of a slot covered by its checksum (the fields; the rest is zero).
const ENCODED_BYTES: usize = 8 + 4 + 4 + 8 * 3 + 16 + 8 + CreationOptions::ENCODED_BYTES + 4;

/// Options fixed when the store is created; changing them would change the
/// meaning of data already written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreationOptions {
    /// Size of every container file (a power of two, at least 1 MiB).
    pub container_bytes: u64,
    /// Size of every intent-log segment (a multiple of 4 KiB, at least 64 KiB).
    pub log_segment_bytes: u64,
    /// Objects up to this many bytes live inline in the index (default
    /// 4096): their bytes travel in the log record, so a durable write of a
    /// 4 KiB object costs one log write and one sync, where the container
    /// path costs a data write and a log write, synced concurrently.
    pub inline_max_bytes: u32,
    /// Allocation and checksum block size (4096).
    pub block_bytes: u32,
}

impl Default for CreationOptions {
    fn default() -> Self {
        CreationOptions {
            container_bytes: 1 << 30,
            log_segment_bytes: 64 << 20,
            inline_max_bytes: 4096,
            block_bytes: 4096,
        }
    }
}

impl CreationOptions {
    const ENCODED_BYTES: usize = 8 + 8 + 4 + 4;

    /// The defaults fitted to a file system with `available_bytes` free:
    /// log segments of a sixty-fourth of it, rounded down to a power of
    /// two, between 4 MiB and the default 64 MiB (a 256 MiB file system
    /// gets 4 MiB segments: 8 MiB of log at creation, not 128 MiB).
    /// Containers keep their default size: they start small and grow
    /// (`larder_space::Options::initial_container_bytes`).
    pub fn fitted_to(available_bytes: u64) -> CreationOptions {
        let default = CreationOptions::default();
        let share = (available_bytes / 64).max(1);
        let power = 1u64 << (63 - share.leading_zeros());
        CreationOptions { log_segment_bytes: power.clamp(4 << 20, default.log_segment_bytes), ..default }
    }

    /// Refuses values the engine cannot work with, naming the option.
    pub fn validate(&self) -> Result<()> {
        let bad = |name, reason: &str| Err(ObjectError::InvalidOption { name, reason: reason.to_string() });
        if !self.container_bytes.is_power_of_two() || self.container_bytes < (1 << 20) {
            return bad("container_bytes", "must be a power of two of at least 1 MiB");
        }
        if !self.log_segment_bytes.is_multiple_of(4096) || self.log_segment_bytes < (64 << 10) {
            return bad("log_segment_bytes", "must be a multiple of 4 KiB of at least 64 KiB");
        }
        if self.block_bytes != 4096 {
            return bad("block_bytes", "must be 4096");
        }
        if self.inline_max_bytes > (64 << 10) {
            return bad("inline_max_bytes", "must be at most 64 KiB");
        }
        Ok(())
    }
}

/// One copy of the superblock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// Features an older build may ignore.
    pub compat: u64,
    /// Features an older build may read but must not write.
    pub ro_compat: u64,
    /// Features an older build must not touch.
    pub incompat: u64,
    /// The store's identity, random at creation.
    pub uuid: [u8; 16],
    /// Bumped by every update; open takes the higher.
    pub generation: u64,
    /// Options fixed at creation.
    pub options: CreationOptions,
}

impl Superblock {
    /// A new store's superblock (generation 1, fresh uuid).
    pub fn new(options: CreationOptions) -> Self {
        let incompat = INCOMPAT_COMPACT_ONODES | INCOMPAT_UNWRITTEN_EXTENTS | INCOMPAT_GROWING_CONTAINERS;
        Superblock { compat: 0, ro_compat: 0, incompat, uuid: rand::random(), generation: 1, options }
    }

    /// Encodes one slot (`SLOT_BYTES`, zero padded).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(SLOT_BYTES);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        b.extend_from_slice(&(ENCODED_BYTES as u32).to_le_bytes());
        for f in [self.compat, self.ro_compat, self.incompat] {
            b.extend_from_slice(&f.to_le_bytes());
        }
        b.extend_from_slice(&self.uuid);
        b.extend_from_slice(&self.generation.to_le_bytes());
        let o = &self.options;
        b.extend_from_slice(&o.container_bytes.to_le_bytes());
        b.extend_from_slice(&o.log_segment_bytes.to_le_bytes());
        b.extend_from_slice(&o.inline_max_bytes.to_le_bytes());
        b.extend_from_slice(&o.block_bytes.to_le_bytes());
        let crc = larder_io::codec::crc(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(b.len(), ENCODED_BYTES);
        b.resize(SLOT_BYTES, 0);
        b
    }

    /// Decodes one slot. `Ok(None)` for a slot never written (all zeros).
    ///
    /// The checksum is checked first, before magic and version: a damaged
    /// slot is corruption (and the other copy is used), never "bad magic"
    /// or "newer version". Every version keeps magic, version and length
    /// at offsets 0, 8 and 12 and the crc32c of bytes `[0, length - 4)` at
    /// `length - 4`, so a newer slot is still recognised as one.
    pub fn decode(slot: &[u8], path: &Path, offset: u64) -> Result<Option<Superblock>> {
        let bad = |what: String| ObjectError::Corrupt { path: path.to_path_buf(), offset, what };
        if slot.iter().all(|&b| b == 0) {
            return Ok(None);
        }
        let field = |at: usize, n: usize| slot.get(at..at + n).ok_or_else(|| bad("slot too short".into()));
        let u32_at = |at: usize| -> Result<u32> {
            let s = field(at, 4)?;
            Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        };
        let u64_at = |at: usize| -> Result<u64> {
            let s = field(at, 8)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            Ok(u64::from_le_bytes(a))
        };
        let length = u32_at(12)? as usize;
        if !(16 + 4..=slot.len().min(SLOT_BYTES)).contains(&length) {
            return Err(bad(format!("checksum mismatch: length field {length} is outside the slot")));
        }
        if larder_io::codec::crc(field(0, length - 4)?) != u32_at(length - 4)? {
            return Err(bad("checksum mismatch".into()));
        }
        if field(0, 8)? != MAGIC {
            return Err(bad("bad magic: not a larder superblock".into()));
        }
        let version = u32_at(8)?;
        if version > FORMAT_VERSION {
            return Err(ObjectError::NewerVersion {
                path: path.to_path_buf(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        if version == 0 {
            return Err(bad("format version 0 was never written".into()));
        }
        if length != ENCODED_BYTES {
            return Err(bad(format!("slot length {length} is not {ENCODED_BYTES}")));
        }
        if slot[ENCODED_BYTES..].iter().any(|&b| b != 0) {
            return Err(bad("bytes after the fields are not zero".into()));
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(field(40, 16)?);
        let sb = Superblock {
            compat: u64_at(16)?,
            ro_compat: u64_at(24)?,
            incompat: u64_at(32)?,
            uuid,
            generation: u64_at(56)?,
            options: CreationOptions {
                container_bytes: u64_at(64)?,
                log_segment_bytes: u64_at(72)?,
                inline_max_bytes: u32_at(80)?,
                block_bytes: u32_at(84)?,
            },
        };
        sb.options.validate().map_err(|e| bad(format!("creation options: {e}")))?;
        Ok(Some(sb))
    }

    /// Refuses features this build must not ignore.
    fn check_features(&self, path: &Path) -> Result<()> {
        let unknown = self.incompat & !KNOWN_INCOMPAT;
        if unknown != 0 {
            return Err(ObjectError::UnknownFeature {
                path: path.to_path_buf(),
                class: "incompatible",
                flags: unknown,
            });
        }
        // There is no read-only mode yet, so these refuse too.
        let unknown = self.ro_compat & !KNOWN_RO_COMPAT;
        if unknown != 0 {
            return Err(ObjectError::UnknownFeature {
                path: path.to_path_buf(),
                class: "read-only compatible",
                flags: unknown,
            });
        }
        Ok(())
    }
}

/// The superblock of a store directory, and which slot holds it.
#[derive(Debug)]
pub struct Loaded {
    /// The current copy.
    pub superblock: Superblock,
    /// 0 for slot A, 1 for slot B: the slot the current copy was read
    /// from (A when both hold it).
    pub slot: usize,
}

/// What one slot of `SUPERBLOCK` holds, as [`inspect`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// The current copy.
    Current,
    /// A valid copy of an older generation (an update cut by a crash
    /// between its two writes).
    Stale {
        /// Its generation.
        generation: u64,
    },
    /// All zeros (a store created before both slots were written).
    Empty,
    /// A copy failing its checks.
    Damaged {
        /// Why, naming the file and offset.
        what: String,
    },
}

impl SlotState {
    /// Whether the slot holds the current copy.
    pub fn is_current(&self) -> bool {
        matches!(self, SlotState::Current)
    }
}

/// Both slots of a store's superblock.
#[derive(Clone, Debug)]
pub struct Copies {
    /// The superblock file.
    pub path: PathBuf,
    /// The current copy (the valid one with the higher generation).
    pub current: Superblock,
    /// Slots A and B.
    pub slots: [SlotState; 2],
}

/// Byte offset of `slot` in the superblock file.
pub fn slot_offset(slot: usize) -> u64 {
    (slot * SLOT_BYTES) as u64
}

fn path_of(dir: &Path) -> PathBuf {
    dir.join(SUPERBLOCK_FILE)
}

/// Creates the superblock of a new store in `dir` (which must hold none):
/// slots A and B both hold generation 1, so one damaged copy leaves the
/// other. Durable when this returns.
///
/// Written whole under [`SUPERBLOCK_TMP_FILE`], synced, then renamed into
/// place: a crash during creation leaves either no superblock (the
/// directory is not a store, and `create` can run again) or a complete
/// one, never a short or torn file that no open or create would accept.
/// The caller holds the store's lock, so no other creator races the rename.
pub fn create(storage: &dyn Storage, dir: &Path, sb: &Superblock) -> Result<()> {
    sb.options.validate()?;
    let path = path_of(dir);
    if storage.exists(&path)? {
        return Err(ObjectError::AlreadyExists { path: dir.to_path_buf() });
    }
    let tmp = dir.join(SUPERBLOCK_TMP_FILE);
    // Left by a creation that crashed before its rename.
    if storage.exists(&tmp)? {
        storage.remove_file(&tmp)?;
    }
    let file = storage.open(&tmp, OpenOptions::CREATE_NEW)?;
    let mut bytes = sb.encode();
    bytes.extend_from_slice(&sb.encode());
    write_all_at(&*file, &bytes, 0)?;
    file.sync_data()?;
    drop(file);
    storage.rename(&tmp, &path)?;
    storage.sync_dir(dir)?;
    Ok(())
}

/// Both slots decoded: the current copy and what each slot holds.
fn read_copies(storage: &dyn Storage, dir: &Path) -> Result<(Loaded, Copies)> {
    let path = path_of(dir);
    let file = match storage.open(&path, OpenOptions::READ) {
        Ok(f) => f,
        Err(e) if e.is_not_found() => return Err(ObjectError::NotAStore { path: dir.to_path_buf() }),
        Err(e) => return Err(e.into()),
    };
    let len = file.len()?;
    if len != 2 * SLOT_BYTES as u64 {
        return Err(ObjectError::Corrupt {
            path,
            offset: 0,
            what: format!("{len} bytes, expected {}", 2 * SLOT_BYTES),
        });
    }
    let mut bytes = vec![0u8; 2 * SLOT_BYTES];
    read_exact_at(&*file, &mut bytes, 0)?;
    let mut decoded: Vec<std::result::Result<Option<Superblock>, ObjectError>> = Vec::with_capacity(2);
    for slot in 0..2 {
        let one = Superblock::decode(&bytes[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES], &path, slot_offset(slot));
        // The checksum matched, so this is a newer format, not damage:
        // refuse rather than fall back to the other slot.
        if let Err(e @ ObjectError::NewerVersion { .. }) = one {
            return Err(e);
        }
        decoded.push(one);
    }
    let mut best: Option<Loaded> = None;
    for (slot, one) in decoded.iter().enumerate() {
        if let Ok(Some(sb)) = one {
            if best.as_ref().is_none_or(|b| sb.generation > b.superblock.generation) {
                best = Some(Loaded { superblock: sb.clone(), slot });
            }
        }
    }
    let Some(loaded) = best else {
        let first_error = decoded.into_iter().find_map(|d| d.err());
        return Err(first_error.unwrap_or(ObjectError::Corrupt {
            path,
            offset: 0,
            what: "both slots are empty".into(),
        }));
    };
    let state = |one: std::result::Result<Option<Superblock>, ObjectError>| match one {
        Ok(Some(sb)) if sb == loaded.superblock => SlotState::Current,
        Ok(Some(sb)) => SlotState::Stale { generation: sb.generation },
        Ok(None) => SlotState::Empty,
        Err(e) => SlotState::Damaged { what: e.to_string() },
    };
    let mut states = decoded.into_iter().map(state);
    let slots = [states.next().unwrap_or(SlotState::Empty), states.next().unwrap_or(SlotState::Empty)];
    let copies = Copies { path, current: loaded.superblock.clone(), slots };
    Ok((loaded, copies))
}

/// Reads both slots and returns the valid one with the higher generation.
/// A slot whose checksum matches but whose version is newer is refused
/// (even if the other slot is valid); a slot failing its checksum or any
/// other check is damage, and the other slot is used; two such are
/// corruption naming the file.
pub fn load(storage: &dyn Storage, dir: &Path) -> Result<Loaded> {
    let (loaded, copies) = read_copies(storage, dir)?;
    loaded.superblock.check_features(&copies.path)?;
    Ok(loaded)
}

/// What each slot of the superblock in `dir` holds (for fsck).
pub fn inspect(storage: &dyn Storage, dir: &Path) -> Result<Copies> {
    Ok(read_copies(storage, dir)?.1)
}

/// Rewrites every slot that does not hold the current copy with it, one
/// slot at a time, each synced: the slot being written is never the only
/// valid one, so a crash during repair loses nothing. Returns the slots
/// rewritten, with what they held. The caller holds the store's lock.
///
/// `open` is the copy the caller's store was opened with: when neither
/// slot on disk is valid any more (both damaged since open), both are
/// rewritten from it.
pub fn repair(storage: &dyn Storage, dir: &Path, open: &Superblock) -> Result<Vec<(usize, SlotState)>> {
    let copies = match inspect(storage, dir) {
        Ok(copies) => copies,
        Err(ObjectError::Corrupt { what, .. }) => {
            let damaged = SlotState::Damaged { what };
            Copies { path: path_of(dir), current: open.clone(), slots: [damaged.clone(), damaged] }
        }
        Err(e) => return Err(e),
    };
    copies.current.check_features(&copies.path)?;
    let bytes = copies.current.encode();
    let mut rewritten = Vec::new();
    for (slot, state) in copies.slots.into_iter().enumerate() {
        if state.is_current() {
            continue;
        }
        let file = storage.open(&copies.path, OpenOptions::WRITE)?;
        write_all_at(&*file, &bytes, slot_offset(slot))?;
        file.sync_data()?;
        rewritten.push((slot, state));
    }
    Ok(rewritten)
}

/// Writes `sb` with the next generation into both slots: first the slot
/// not holding the current copy, synced, then the other, synced. A crash
/// between them leaves the new copy in one slot and the previous one in
/// the other (open takes the new one; fsck reports the stale one, and
/// [`repair`] rewrites it). Returns the new current copy.
pub fn update(storage: &dyn Storage, dir: &Path, current: &Loaded, mut sb: Superblock) -> Result<Loaded> {
    sb.generation = current.superblock.generation + 1;
    let first = 1 - current.slot;
    let file = storage.open(&path_of(dir), OpenOptions::WRITE)?;
    let bytes = sb.encode();
    for slot in [first, current.slot] {
        write_all_at(&*file, &bytes, slot_offset(slot))?;
        file.sync_data()?;
    }
    Ok(Loaded { superblock: sb, slot: first })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_every_flip() {
        let sb = Superblock::new(CreationOptions::default());
        let slot = sb.encode();
        assert_eq!(Superblock::decode(&slot, Path::new("S"), 0).unwrap(), Some(sb));
        for bit in 0..slot.len() * 8 {
            let mut x = slot.clone();
            x[bit / 8] ^= 1 << (bit % 8);
            assert!(Superblock::decode(&x, Path::new("S"), 0).is_err(), "bit {bit}");
        }
        assert_eq!(Superblock::decode(&[0u8; SLOT_BYTES], Path::new("S"), 0).unwrap(), None);
    }

    #[test]
    fn bad_creation_options_are_named() {
        let o = CreationOptions { container_bytes: 3 << 20, ..CreationOptions::default() };
        assert!(o.validate().unwrap_err().to_string().contains("container_bytes"));
    }
}
