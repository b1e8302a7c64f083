//! Who is calling: every file system call takes the caller's credentials.

use std::sync::OnceLock;

/// A caller's user, group and supplementary groups.
///
/// Supplementary groups may be given up front, or fetched only when a
/// check needs them (the FUSE mount reads them from `/proc` for the
/// requesting process, which costs a file read it should not pay on every
/// request).
pub struct Cred {
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
    groups: OnceLock<Vec<u32>>,
    fetch: Option<Box<dyn Fn() -> Vec<u32> + Send + Sync>>,
}

impl std::fmt::Debug for Cred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cred")
            .field("uid", &self.uid)
            .field("gid", &self.gid)
            .field("groups", &self.groups.get())
            .finish()
    }
}

impl Cred {
    /// A caller with these ids and supplementary groups.
    pub fn new(uid: u32, gid: u32, groups: Vec<u32>) -> Cred {
        Cred { uid, gid, groups: OnceLock::from(groups), fetch: None }
    }

    /// The superuser.
    pub fn root() -> Cred {
        Cred::new(0, 0, Vec::new())
    }

    /// A caller whose supplementary groups `fetch` finds on first need.
    pub fn lazy(uid: u32, gid: u32, fetch: impl Fn() -> Vec<u32> + Send + Sync + 'static) -> Cred {
        Cred { uid, gid, groups: OnceLock::new(), fetch: Some(Box::new(fetch)) }
    }

    /// This process's effective ids and supplementary groups.
    pub fn current() -> Cred {
        let groups = rustix::process::getgroups().map(|g| g.iter().map(|g| g.as_raw()).collect()).unwrap_or_default();
        Cred::new(rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw(), groups)
    }

    /// Whether the caller is the superuser (which passes every permission
    /// check except executing a file no one may execute).
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// Whether `gid` is the caller's group or one of its supplementary
    /// groups.
    pub fn in_group(&self, gid: u32) -> bool {
        if gid == self.gid {
            return true;
        }
        let groups = self.groups.get_or_init(|| self.fetch.as_ref().map(|f| f()).unwrap_or_default());
        groups.contains(&gid)
    }
}
