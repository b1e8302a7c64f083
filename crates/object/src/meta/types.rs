//! Small types shared by several records: the object kind, timestamps and
//! the limits a store fixes at creation.

use crate::superblock::CreationOptions;

/// The type bits of a mode (`S_IFMT`).
pub const MODE_TYPE_MASK: u32 = 0o170_000;
/// The permission bits of a mode, including setuid, setgid and sticky.
pub const MODE_PERM_MASK: u32 = 0o7777;

/// What an object is. Stored as one byte in onodes and dentries (a dentry
/// carries it so `readdir` needs no onode lookup).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A regular file (byte 1).
    File,
    /// A directory (byte 2).
    Directory,
    /// A symbolic link; its target is the object's bytes (byte 3).
    Symlink,
    /// A named pipe (byte 4).
    Fifo,
    /// A Unix socket (byte 5).
    Socket,
    /// A character device; its number is the onode's `rdev` (byte 6).
    CharDevice,
    /// A block device; its number is the onode's `rdev` (byte 7).
    BlockDevice,
}

impl Kind {
    /// Every kind, in byte order.
    pub const ALL: [Kind; 7] =
        [Kind::File, Kind::Directory, Kind::Symlink, Kind::Fifo, Kind::Socket, Kind::CharDevice, Kind::BlockDevice];

    /// The stored byte. 0 is never used, so a zeroed record is refused.
    pub const fn to_u8(self) -> u8 {
        match self {
            Kind::File => 1,
            Kind::Directory => 2,
            Kind::Symlink => 3,
            Kind::Fifo => 4,
            Kind::Socket => 5,
            Kind::CharDevice => 6,
            Kind::BlockDevice => 7,
        }
    }

    /// The kind stored as `b`, if any.
    pub fn from_u8(b: u8) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.to_u8() == b)
    }

    /// The kind's type bits in a mode (`S_IFREG`, `S_IFDIR`, ...).
    pub const fn mode_bits(self) -> u32 {
        match self {
            Kind::File => 0o100_000,
            Kind::Directory => 0o040_000,
            Kind::Symlink => 0o120_000,
            Kind::Fifo => 0o010_000,
            Kind::Socket => 0o140_000,
            Kind::CharDevice => 0o020_000,
            Kind::BlockDevice => 0o060_000,
        }
    }

    /// The kind whose type bits `mode` carries, if any.
    pub fn from_mode(mode: u32) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.mode_bits() == mode & MODE_TYPE_MASK)
    }
}

/// A point in time: seconds since the Unix epoch (negative before it) and
/// nanoseconds within the second, 0 to 999,999,999. Stored as i64 LE
/// seconds then u32 LE nanoseconds (12 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    /// Whole seconds since 1970-01-01T00:00:00Z.
    pub secs: i64,
    /// Nanoseconds, below 1,000,000,000.
    pub nanos: u32,
}

impl Timestamp {
    /// Bytes of an encoded timestamp.
    pub const ENCODED_BYTES: usize = 12;

    /// The current time, or the epoch if the clock is before it.
    pub fn now() -> Timestamp {
        match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => Timestamp { secs: i64::try_from(d.as_secs()).unwrap_or(i64::MAX), nanos: d.subsec_nanos() },
            Err(_) => Timestamp::default(),
        }
    }

    pub(crate) fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.secs.to_le_bytes());
        out.extend_from_slice(&self.nanos.to_le_bytes());
    }

    /// Why the timestamp cannot be stored, if it cannot.
    pub(crate) fn check(&self, what: &str) -> Result<(), String> {
        if self.nanos >= 1_000_000_000 {
            return Err(format!("{what}: {} nanoseconds is not below one second", self.nanos));
        }
        Ok(())
    }
}

/// The limits record checks depend on, fixed when the store was created
/// (superblock, docs/format.md section 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaLimits {
    /// Objects up to this many bytes may live inline in their onode.
    pub inline_max_bytes: u32,
    /// Size of every container: no extent runs past it.
    pub container_bytes: u64,
    /// Onodes are written in the compact layout (version 2; the store has
    /// the superblock's `INCOMPAT_COMPACT_ONODES` bit). Both layouts are
    /// read either way.
    pub compact_onodes: bool,
}

impl MetaLimits {
    /// The limits of a store created now with `options` (compact onodes).
    pub fn from_options(options: &CreationOptions) -> MetaLimits {
        MetaLimits {
            inline_max_bytes: options.inline_max_bytes,
            container_bytes: options.container_bytes,
            compact_onodes: true,
        }
    }

    /// The limits of the store whose superblock is `sb`.
    pub fn from_superblock(sb: &crate::superblock::Superblock) -> MetaLimits {
        MetaLimits {
            compact_onodes: sb.incompat & crate::superblock::INCOMPAT_COMPACT_ONODES != 0,
            ..MetaLimits::from_options(&sb.options)
        }
    }
}

impl Default for MetaLimits {
    /// The limits of a store created with default options.
    fn default() -> Self {
        MetaLimits::from_options(&CreationOptions::default())
    }
}
