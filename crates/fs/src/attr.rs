//! File attributes as `stat` reports them, and the changes `setattr`
//! makes.

use larder_object::meta::{Kind, Onode, Timestamp, MODE_PERM_MASK};
use larder_object::ROOT_ID;

/// Block size reported in `st_blksize`: the store's allocation block.
pub const BLOCK_BYTES: u32 = 4096;

/// What `stat` returns for an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    /// Inode number: the object id.
    pub ino: u64,
    /// What the object is.
    pub kind: Kind,
    /// Type and permission bits.
    pub mode: u32,
    /// Names referring to it; for a directory, as Unix counts them: its
    /// name, its `.` and each subdirectory's `..` (the root: 2 plus its
    /// subdirectories).
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number of a device node.
    pub rdev: u64,
    /// Size in bytes (a symlink: its target's length).
    pub size: u64,
    /// 512-byte sectors allocated (the size rounded up to whole blocks:
    /// holes are not subtracted).
    pub blocks: u64,
    /// Last access.
    pub atime: Timestamp,
    /// Last change of the bytes.
    pub mtime: Timestamp,
    /// Last change of the attributes.
    pub ctime: Timestamp,
    /// Creation.
    pub btime: Timestamp,
    /// Changes whenever cached copies must be dropped.
    pub generation: u64,
}

impl Attr {
    /// The attributes of object `ino` with onode `o`.
    pub fn from_onode(ino: u64, o: &Onode) -> Attr {
        // A directory's onode counts its name and its subdirectories' `..`;
        // add its `.` (and, for the root, which has no name, its own `..`).
        let nlink = match o.kind {
            Kind::Directory if ino == ROOT_ID => o.nlink.saturating_add(2),
            // Removed while open: no name, not even its own `.` (Linux
            // shows 0 links after rmdir).
            Kind::Directory if o.nlink == 0 => 0,
            Kind::Directory => o.nlink.saturating_add(1),
            _ => o.nlink,
        };
        let size = o.size;
        let blocks = size.div_ceil(u64::from(BLOCK_BYTES)) * (u64::from(BLOCK_BYTES) / 512);
        Attr {
            ino,
            kind: o.kind,
            mode: o.mode,
            nlink,
            uid: o.uid,
            gid: o.gid,
            rdev: o.rdev,
            size,
            blocks,
            atime: o.atime,
            mtime: o.mtime,
            ctime: o.ctime,
            btime: o.btime,
            generation: o.generation,
        }
    }

    /// Permission bits (with setuid, setgid and sticky).
    pub fn perm(&self) -> u32 {
        self.mode & MODE_PERM_MASK
    }

    /// Whether this is the root directory.
    pub fn is_root(&self) -> bool {
        self.ino == ROOT_ID
    }
}

/// A time to set: now, or a given time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetTime {
    /// The current time (`UTIME_NOW`): needs write permission, not
    /// ownership.
    Now,
    /// A given time: needs ownership.
    At(Timestamp),
}

/// The attributes a `setattr` changes; `None` leaves one as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission bits (type bits are ignored).
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size (truncate or extend with zeros).
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<SetTime>,
    /// New modification time.
    pub mtime: Option<SetTime>,
}
