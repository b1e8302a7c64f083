//! Permission checks, as Linux makes them for a local file system: the
//! owner, group or other class of the mode bits; the superuser passes all
//! but executing a file nobody may execute; the sticky bit restricts
//! removal; only the owner changes modes and times; setuid and setgid bits
//! are dropped where Linux drops them.

use larder_object::meta::{Kind, Onode, MODE_PERM_MASK};

use crate::cred::Cred;
use crate::error::{FsError, Result};

/// Read permission (for a directory: list it).
pub const READ: u32 = 4;
/// Write permission (for a directory: add and remove names).
pub const WRITE: u32 = 2;
/// Execute permission (for a directory: look names up in it).
pub const EXEC: u32 = 1;

/// Set-user-id bit.
pub const S_ISUID: u32 = 0o4000;
/// Set-group-id bit.
pub const S_ISGID: u32 = 0o2000;
/// Sticky bit.
pub const S_ISVTX: u32 = 0o1000;
/// Group execute bit.
const S_IXGRP: u32 = 0o010;

/// Whether `cred` may access `o` for `mask` (`READ | WRITE | EXEC` bits).
pub fn allowed(o: &Onode, cred: &Cred, mask: u32) -> bool {
    allowed_by(o.kind, o.mode, o.uid, o.gid, cred, mask)
}

/// [`allowed`] from the kind, mode and owners alone (an [`Attr`](crate::Attr)
/// holds them, so a caller with one needs no second read of the onode).
pub(crate) fn allowed_by(kind: Kind, mode: u32, uid: u32, gid: u32, cred: &Cred, mask: u32) -> bool {
    if cred.is_root() {
        // Execute needs some execute bit, except on directories.
        return mask & EXEC == 0 || kind == Kind::Directory || mode & 0o111 != 0;
    }
    let class = if cred.uid == uid {
        (mode >> 6) & 7
    } else if cred.in_group(gid) {
        (mode >> 3) & 7
    } else {
        mode & 7
    };
    class & mask == mask
}

/// [`allowed`], or EACCES naming what was refused.
pub fn check(o: &Onode, ino: u64, cred: &Cred, mask: u32) -> Result<()> {
    if allowed(o, cred, mask) {
        Ok(())
    } else {
        Err(refused(ino, cred, mask))
    }
}

/// EACCES: `cred` may not access object `ino` for `mask`.
pub(crate) fn refused(ino: u64, cred: &Cred, mask: u32) -> FsError {
    FsError::posix(libc::EACCES, format!("{} access to object {ino} refused for uid {}", rwx(mask), cred.uid))
}

fn rwx(mask: u32) -> String {
    let mut s = String::new();
    for (bit, c) in [(READ, 'r'), (WRITE, 'w'), (EXEC, 'x')] {
        if mask & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// Whether the caller owns `o` or is the superuser.
pub fn owns(o: &Onode, cred: &Cred) -> bool {
    cred.is_root() || cred.uid == o.uid
}

/// Checks that `cred` may remove (or rename away) `child`'s name from
/// `dir`: write and search on the directory, and in a sticky directory
/// ownership of the directory or the child.
pub fn check_remove(dir: &Onode, dir_ino: u64, child: &Onode, cred: &Cred) -> Result<()> {
    check(dir, dir_ino, cred, WRITE | EXEC)?;
    if dir.mode & S_ISVTX != 0 && !cred.is_root() && cred.uid != dir.uid && cred.uid != child.uid {
        return Err(FsError::posix(
            libc::EPERM,
            format!("directory {dir_ino} is sticky: uid {} owns neither it nor the entry", cred.uid),
        ));
    }
    Ok(())
}

/// Checks that `cred` may give `o` another name, as Linux does with
/// `fs.protected_hardlinks = 1` (the default of every major distribution,
/// and what the kernel checks before a mount's `link` reaches the file
/// system): the owner and the superuser may; anyone else only for a
/// regular file that is neither setuid nor setgid-executable and that they
/// may both read and write. Otherwise EPERM.
pub fn check_link(o: &Onode, ino: u64, cred: &Cred) -> Result<()> {
    let safe_source = o.kind == Kind::File
        && o.mode & S_ISUID == 0
        && o.mode & (S_ISGID | S_IXGRP) != (S_ISGID | S_IXGRP)
        && allowed(o, cred, READ | WRITE);
    if owns(o, cred) || safe_source {
        Ok(())
    } else {
        Err(FsError::posix(
            libc::EPERM,
            format!("uid {} may not link object {ino}: it owns it not, or cannot read and write it", cred.uid),
        ))
    }
}

/// The mode `o` keeps after a write, truncate or chown by `cred`, if it
/// loses setuid or setgid bits, as Linux decides for callers without
/// CAP_FSETID (`setattr_should_drop_suidgid`): setuid always; setgid when
/// group execute is set, or when the caller is outside the file's group
/// (without group execute, setgid marks mandatory locking, which only a
/// group member may leave in place).
pub fn kill_suid(o: &Onode, cred: &Cred) -> Option<u32> {
    let kill = killable_bits(o, cred);
    (kill != 0).then_some(o.mode & !kill)
}

/// The setuid and setgid bits a write by `cred` drops from `o`.
fn killable_bits(o: &Onode, cred: &Cred) -> u32 {
    if cred.is_root() || o.kind != Kind::File {
        return 0;
    }
    let mut kill = o.mode & S_ISUID;
    if o.mode & S_ISGID != 0 && (o.mode & S_IXGRP != 0 || !cred.in_group(o.gid)) {
        kill |= S_ISGID;
    }
    kill
}

/// Whether `cred`, who does not own `o`, may change its permission bits
/// to `bits`: only when that drops some of the setuid and setgid bits a
/// write by `cred` would drop and changes nothing else, and `cred` may
/// write the file (`may_write`: write permission, or a handle open for
/// writing). This is the change a kernel asks for before an unprivileged
/// write or truncate reaches the file system: FUSE without
/// `handle_killpriv` turns the VFS's ATTR_KILL_SUID and ATTR_KILL_SGID
/// into a mode setattr sent with the writer's credentials, which a
/// chmod's ownership rule would refuse and so fail the write.
pub fn may_drop_privileges(o: &Onode, cred: &Cred, bits: u32, may_write: bool) -> bool {
    let old = o.mode & MODE_PERM_MASK;
    let bits = bits & MODE_PERM_MASK;
    let dropped = old & !bits;
    may_write && bits & !old == 0 && dropped != 0 && dropped & !killable_bits(o, cred) == 0
}

/// The mode and group of a new object of `kind` with `mode` made by
/// `cred` in `parent`: a setgid directory gives its group (and, to new
/// directories, its setgid bit); a caller outside the new group loses a
/// requested setgid bit on files.
pub fn new_owner(parent: &Onode, cred: &Cred, kind: Kind, mode: u32) -> (u32, u32) {
    let mut mode = mode;
    let gid = if parent.mode & S_ISGID != 0 {
        if kind == Kind::Directory {
            mode |= S_ISGID;
        }
        parent.gid
    } else {
        cred.gid
    };
    if kind != Kind::Directory && mode & S_ISGID != 0 && !cred.is_root() && !cred.in_group(gid) {
        mode &= !S_ISGID;
    }
    (mode, gid)
}
