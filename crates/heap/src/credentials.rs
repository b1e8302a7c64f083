//! Who is using a heap, and what the mode bits let them do.

use larder_object::meta::Onode;

/// The user a heap acts for: objects it creates are theirs, and each
/// object's mode bits decide whether they may map it read-write, read-only
/// or not at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// User id (0: every access is allowed, as for root).
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary group ids.
    pub groups: Vec<u32>,
}

impl Credentials {
    /// The superuser.
    pub fn root() -> Credentials {
        Credentials { uid: 0, gid: 0, groups: Vec::new() }
    }

    /// A user with one group.
    pub fn user(uid: u32, gid: u32) -> Credentials {
        Credentials { uid, gid, groups: Vec::new() }
    }

    /// The mode bits (`rwx` as 4, 2, 1) that apply to this user for an
    /// object owned by `owner` with `mode`.
    fn bits(&self, owner: Owner) -> u32 {
        if self.uid == 0 {
            return 0o7;
        }
        if self.uid == owner.uid {
            (owner.mode >> 6) & 0o7
        } else if self.gid == owner.gid || self.groups.contains(&owner.gid) {
            (owner.mode >> 3) & 0o7
        } else {
            owner.mode & 0o7
        }
    }

    /// Whether the user may read the object.
    pub fn may_read(&self, onode: &Onode) -> bool {
        self.bits(Owner::of(onode)) & 0o4 != 0
    }

    /// Whether the user may write the object.
    pub fn may_write(&self, onode: &Onode) -> bool {
        self.bits(Owner::of(onode)) & 0o2 != 0
    }

    /// Whether the user may write an object owned by `owner`.
    pub(crate) fn may_write_owned(&self, owner: Owner) -> bool {
        self.bits(owner) & 0o2 != 0
    }

    /// Whether the user may read an object owned by `owner`.
    pub(crate) fn may_read_owned(&self, owner: Owner) -> bool {
        self.bits(owner) & 0o4 != 0
    }
}

/// An object's owner and mode as they were when it was attached: a
/// mapping's permissions are decided then, as an open file's are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) mode: u32,
}

impl Owner {
    pub(crate) fn of(onode: &Onode) -> Owner {
        Owner { uid: onode.uid, gid: onode.gid, mode: onode.mode }
    }
}
