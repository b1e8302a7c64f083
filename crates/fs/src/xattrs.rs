//! Extended attributes with Linux's namespace rules: `user.` on regular
//! files and directories, by file permissions; `trusted.` and `security.`
//! changed only by the superuser (`trusted.` also read only by it);
//! `system.` (POSIX ACLs) and unknown prefixes are not supported.

use larder_object::meta::{xattr_key, Kind, Onode, XattrName, MAX_XATTR_VALUE_BYTES};
use larder_object::{Durability, LockRequest};

use crate::cred::Cred;
use crate::error::{FsError, Result};
use crate::names::{onode_in, shown};
use crate::perm::{self, READ, WRITE};
use crate::Fs;

/// `setxattr` flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XattrFlags {
    /// XATTR_CREATE: fail with EEXIST if the attribute exists.
    pub create: bool,
    /// XATTR_REPLACE: fail with ENODATA if it does not.
    pub replace: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    User,
    Trusted,
    Security,
}

fn class(name: &[u8]) -> Result<Class> {
    if name.starts_with(b"user.") {
        Ok(Class::User)
    } else if name.starts_with(b"trusted.") {
        Ok(Class::Trusted)
    } else if name.starts_with(b"security.") {
        Ok(Class::Security)
    } else {
        Err(FsError::posix(libc::EOPNOTSUPP, format!("xattr namespace of {:?}", shown(name))))
    }
}

fn xname(name: &[u8]) -> Result<XattrName> {
    if name.len() > 255 {
        return Err(FsError::posix(libc::ERANGE, format!("an xattr name of {} bytes", name.len())));
    }
    XattrName::new(name.to_vec()).map_err(|e| FsError::posix(libc::EINVAL, e.to_string()))
}

/// Checks that `cred` may read (`write` false) or change xattr class `c`
/// of object `o`.
fn check(c: Class, o: &Onode, ino: u64, cred: &Cred, write: bool) -> Result<()> {
    match c {
        Class::User => {
            if !matches!(o.kind, Kind::File | Kind::Directory) {
                let errno = if write { libc::EPERM } else { libc::ENODATA };
                return Err(FsError::posix(errno, format!("user xattrs on object {ino}, not a file or directory")));
            }
            perm::check(o, ino, cred, if write { WRITE } else { READ })
        }
        Class::Trusted if !cred.is_root() => {
            let errno = if write { libc::EPERM } else { libc::ENODATA };
            Err(FsError::posix(errno, "trusted xattrs are the superuser's"))
        }
        Class::Security if write && !cred.is_root() => {
            Err(FsError::posix(libc::EPERM, "security xattrs are changed by the superuser"))
        }
        _ => Ok(()),
    }
}

impl Fs {
    /// The value of xattr `name` of `ino`.
    pub fn getxattr(&self, cred: &Cred, ino: u64, name: &[u8]) -> Result<Vec<u8>> {
        let c = class(name)?;
        let o = self.onode(ino)?;
        check(c, &o, ino, cred, false)?;
        self.store
            .get_xattr(ino, &xname(name)?)?
            .ok_or_else(|| FsError::posix(libc::ENODATA, format!("xattr {:?} of object {ino}", shown(name))))
    }

    /// Sets xattr `name` of `ino` to `value`.
    pub fn setxattr(&self, cred: &Cred, ino: u64, name: &[u8], value: &[u8], flags: XattrFlags) -> Result<()> {
        let c = class(name)?;
        let n = xname(name)?;
        if value.len() > MAX_XATTR_VALUE_BYTES {
            return Err(FsError::posix(libc::E2BIG, format!("an xattr value of {} bytes", value.len())));
        }
        self.store.check_room((name.len() + value.len()) as u64)?;
        self.store.transact_locked(&[LockRequest::Exclusive(ino)], Durability::Buffered, |txn| -> Result<()> {
            let o = onode_in(txn, ino)?;
            check(c, &o, ino, cred, true)?;
            let exists = txn.get(&xattr_key(ino, &n))?.is_some();
            if flags.create && exists {
                return Err(FsError::posix(libc::EEXIST, format!("xattr {:?} of object {ino}", shown(name))));
            }
            if flags.replace && !exists {
                return Err(FsError::posix(libc::ENODATA, format!("xattr {:?} of object {ino}", shown(name))));
            }
            Ok(txn.set_xattr(ino, &n, value)?)
        })?;
        Ok(())
    }

    /// The names of `ino`'s xattrs the caller may see.
    pub fn listxattr(&self, cred: &Cred, ino: u64) -> Result<Vec<Vec<u8>>> {
        self.onode(ino)?;
        let names = self.store.list_xattrs(ino)?;
        Ok(names
            .into_iter()
            .map(|n| n.into_bytes())
            .filter(|n| cred.is_root() || !n.starts_with(b"trusted."))
            .collect())
    }

    /// Removes xattr `name` of `ino`.
    pub fn removexattr(&self, cred: &Cred, ino: u64, name: &[u8]) -> Result<()> {
        let c = class(name)?;
        let n = xname(name)?;
        self.store.transact_locked(&[LockRequest::Exclusive(ino)], Durability::Buffered, |txn| -> Result<()> {
            let o = onode_in(txn, ino)?;
            check(c, &o, ino, cred, true)?;
            if !txn.remove_xattr(ino, &n)? {
                return Err(FsError::posix(libc::ENODATA, format!("xattr {:?} of object {ino}", shown(name))));
            }
            Ok(())
        })?;
        Ok(())
    }
}
