//! Path-based calls, shaped like `std::fs`: paths are resolved by the
//! server from the store's root with the client's credentials, then the
//! call goes to the object by inode number.

use std::path::Path;

use larder_protocol::message::{
    Attributes, DirectoryEntry, FileKind, RenameFlags, Request, Response, SetAttributes, TimeChange, Timestamp,
};

use crate::error::{ClientError, Result};
use crate::{unexpected, Client};

/// Entries one directory listing request asks for.
const LISTING_PAGE: u32 = 512;

/// Longest listing the lease cache keeps.
const MAX_CACHED_ENTRIES: usize = 16_384;

/// An object's metadata, as `std::fs::Metadata` gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    /// The attributes the server returned.
    pub attributes: Attributes,
}

impl Metadata {
    /// Whether it is a regular file.
    pub fn is_file(&self) -> bool {
        self.attributes.kind == FileKind::File
    }

    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        self.attributes.kind == FileKind::Directory
    }

    /// Whether it is a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.attributes.kind == FileKind::Symlink
    }

    /// Its size in bytes.
    pub fn len(&self) -> u64 {
        self.attributes.size
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.attributes.size == 0
    }

    /// Its permission bits.
    pub fn mode(&self) -> u32 {
        self.attributes.mode
    }

    /// Its inode number.
    pub fn ino(&self) -> u64 {
        self.attributes.ino
    }
}

/// The parts of a resolved path.
pub(crate) struct Resolved {
    pub(crate) parent: u64,
    pub(crate) name: Vec<u8>,
    pub(crate) attributes: Option<Attributes>,
}

/// A path's bytes, refusing what cannot be sent.
pub(crate) fn path_bytes(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes().to_vec()
}

impl Client {
    pub(crate) fn resolve(&self, path: &Path, follow: bool) -> Result<Resolved> {
        match self.connection.call(&Request::Resolve { path: path_bytes(path), follow })? {
            Response::Resolved { parent, name, attributes } => Ok(Resolved { parent, name, attributes }),
            other => Err(unexpected("resolve", &other)),
        }
    }

    /// The object `path` names, following a final symbolic link.
    pub(crate) fn existing(&self, path: &Path, follow: bool) -> Result<Attributes> {
        self.resolve(path, follow)?.attributes.ok_or_else(|| ClientError::Server {
            errno: libc::ENOENT,
            message: format!("{}: no such file or directory", path.display()),
        })
    }

    /// The object `path` names, following a final symbolic link: walked
    /// through the lease cache, or resolved by the server.
    pub(crate) fn existing_cached(&self, path: &Path) -> Result<crate::cache::CachedPath> {
        if let Some(found) = self.walk(path)? {
            return Ok(found);
        }
        let attributes = self.existing(path, true)?;
        Ok(crate::cache::CachedPath { ino: attributes.ino, kind: attributes.kind })
    }

    /// Takes a lease on the directory `path` names and every directory
    /// below it (Aerie's directory lease over a subtree), or renews it:
    /// while it holds, walks and listings anywhere inside are served from
    /// this client's cache without a lease request per directory, and
    /// another client's change to any directory inside revokes it (files'
    /// attributes and bytes keep their own leases). It lasts one lease
    /// term; call again to renew. Returns whether the server granted it:
    /// false when the cache is off, the server grants no leases, this
    /// client holds as many as it may, or another client is changing the
    /// subtree (the cache then goes on with a lease per directory).
    /// ENOTDIR when `path` is not a directory.
    pub fn lease_subtree(&self, path: impl AsRef<Path>) -> Result<bool> {
        let path = path.as_ref();
        let cache = self.connection.cache();
        if !cache.enabled() {
            return Ok(false);
        }
        let found = self.existing_cached(path)?;
        if found.kind != FileKind::Directory {
            return Err(ClientError::Server {
                errno: libc::ENOTDIR,
                message: format!("{}: not a directory", path.display()),
            });
        }
        let sent = std::time::Instant::now();
        match self
            .connection
            .call(&Request::Lease { target: larder_protocol::message::LeaseTarget::Subtree(found.ino) })
        {
            Ok(Response::Lease(grant)) => Ok(cache.adopt_subtree(&self.connection, found.ino, grant, sent)),
            Ok(other) => Err(unexpected("lease", &other)),
            Err(ClientError::Server { errno, .. })
                if errno == libc::EAGAIN || errno == libc::EOPNOTSUPP || errno == libc::ENOLCK =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// The metadata of what `path` names (following symbolic links). A
    /// regular file's comes from the lease cache while the client holds
    /// the leases on its directories and on it.
    pub fn metadata(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        if let Some(found) = self.walk(path.as_ref())? {
            if found.kind == FileKind::File {
                return self.metadata_of(found.ino);
            }
        }
        Ok(Metadata { attributes: self.existing(path.as_ref(), true)? })
    }

    /// The metadata of `path` itself (not following a final symbolic link).
    pub fn symlink_metadata(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        Ok(Metadata { attributes: self.existing(path.as_ref(), false)? })
    }

    /// Makes a directory with permission bits `mode`.
    pub fn create_dir(&self, path: impl AsRef<Path>, mode: u32) -> Result<Metadata> {
        let r = self.resolve(path.as_ref(), false)?;
        let request = Request::Mkdir { parent: r.parent, name: r.name, mode };
        self.attributes("mkdir", request).map(|attributes| Metadata { attributes })
    }

    /// Removes a file (or a symbolic link).
    pub fn remove_file(&self, path: impl AsRef<Path>) -> Result<()> {
        let r = self.resolve(path.as_ref(), false)?;
        self.done("unlink", Request::Unlink { parent: r.parent, name: r.name })
    }

    /// Removes an empty directory.
    pub fn remove_dir(&self, path: impl AsRef<Path>) -> Result<()> {
        let r = self.resolve(path.as_ref(), false)?;
        self.done("rmdir", Request::Rmdir { parent: r.parent, name: r.name })
    }

    /// Moves `from` to `to`, atomically, replacing what `to` names.
    pub fn rename(&self, from: impl AsRef<Path>, to: impl AsRef<Path>) -> Result<()> {
        let (from, to) = (self.resolve(from.as_ref(), false)?, self.resolve(to.as_ref(), false)?);
        let request = Request::Rename {
            parent: from.parent,
            name: from.name,
            new_parent: to.parent,
            new_name: to.name,
            flags: RenameFlags::default(),
        };
        self.done("rename", request)
    }

    /// Makes a hard link `link` to what `original` names.
    pub fn hard_link(&self, original: impl AsRef<Path>, link: impl AsRef<Path>) -> Result<()> {
        let target = self.existing(original.as_ref(), false)?;
        let at = self.resolve(link.as_ref(), false)?;
        self.attributes("link", Request::Link { ino: target.ino, parent: at.parent, name: at.name }).map(|_| ())
    }

    /// Makes a symbolic link `link` that points to `target`.
    pub fn symlink(&self, target: impl AsRef<Path>, link: impl AsRef<Path>) -> Result<()> {
        let at = self.resolve(link.as_ref(), false)?;
        let request = Request::Symlink { parent: at.parent, name: at.name, target: path_bytes(target.as_ref()) };
        self.attributes("symlink", request).map(|_| ())
    }

    /// What a symbolic link points to.
    pub fn read_link(&self, path: impl AsRef<Path>) -> Result<std::path::PathBuf> {
        use std::os::unix::ffi::OsStringExt;
        let link = self.existing(path.as_ref(), false)?;
        match self.connection.call(&Request::Readlink { ino: link.ino })? {
            Response::Data(target) => Ok(std::ffi::OsString::from_vec(target).into()),
            other => Err(unexpected("readlink", &other)),
        }
    }

    /// Sets the permission bits of what `path` names.
    pub fn set_permissions(&self, path: impl AsRef<Path>, mode: u32) -> Result<()> {
        self.set_attributes(path.as_ref(), SetAttributes { mode: Some(mode), ..SetAttributes::default() })
    }

    /// Sets the owner and group of what `path` names (`chown`).
    pub fn set_owner(&self, path: impl AsRef<Path>, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.set_attributes(path.as_ref(), SetAttributes { uid, gid, ..SetAttributes::default() })
    }

    /// Sets the access and modification times of what `path` names.
    pub fn set_times(&self, path: impl AsRef<Path>, atime: Timestamp, mtime: Timestamp) -> Result<()> {
        let set = SetAttributes {
            atime: Some(TimeChange::At(atime)),
            mtime: Some(TimeChange::At(mtime)),
            ..SetAttributes::default()
        };
        self.set_attributes(path.as_ref(), set)
    }

    fn set_attributes(&self, path: &Path, set: SetAttributes) -> Result<()> {
        let target = self.existing(path, true)?;
        self.attributes("setattr", Request::SetAttributes { ino: target.ino, set, handle: None }).map(|_| ())
    }

    /// The entries of a directory (without `.` and `..`), fetched a page
    /// at a time.
    pub fn read_dir(&self, path: impl AsRef<Path>) -> Result<DirEntries> {
        let cache = self.connection.cache();
        let ino = self.existing_cached(path.as_ref())?.ino;
        if let Some(entries) = cache.listing(&self.connection, ino) {
            return Ok(DirEntries {
                client: self.clone(),
                handle: None,
                offset: None,
                page: Vec::clone(&entries).into_iter(),
            });
        }
        let version = cache.file_version(&self.connection, ino);
        let handle = match self.connection.call(&Request::OpenDirectory { ino })? {
            Response::Handle(handle) => handle,
            other => return Err(unexpected("opendir", &other)),
        };
        let mut listing =
            DirEntries { client: self.clone(), handle: Some(handle), offset: Some(0), page: Vec::new().into_iter() };
        let Some(version) = version else { return Ok(listing) };
        // Under a lease the whole listing is read now and kept, unless it
        // is too long to keep: then the rest comes page by page.
        let mut entries = Vec::new();
        while let Some(offset) = listing.offset {
            if entries.len() >= MAX_CACHED_ENTRIES {
                listing.page = entries.into_iter();
                return Ok(listing);
            }
            match self.connection.call(&Request::ReadDirectory { handle, offset, max_entries: LISTING_PAGE })? {
                Response::Entries(page) => {
                    listing.offset = page.last().map(|e| e.next);
                    entries.extend(page);
                }
                other => return Err(unexpected("readdir", &other)),
            }
        }
        if let Some(handle) = listing.handle.take() {
            self.done("releasedir", Request::ReleaseDirectory { handle })?;
        }
        let entries = std::sync::Arc::new(entries);
        cache.insert_listing(&self.connection, ino, version, entries.clone());
        listing.page = Vec::clone(&entries).into_iter();
        Ok(listing)
    }

    /// Makes every change so far durable.
    pub fn sync(&self) -> Result<()> {
        self.done("sync", Request::Sync)
    }

    /// Space and limits of the store.
    pub fn statfs(&self) -> Result<larder_protocol::message::FsStats> {
        match self.connection.call(&Request::StatFs)? {
            Response::FsStats(stats) => Ok(stats),
            other => Err(unexpected("statfs", &other)),
        }
    }

    pub(crate) fn attributes(&self, what: &'static str, request: Request) -> Result<Attributes> {
        match self.connection.call(&request)? {
            Response::Attributes(attributes) => Ok(attributes),
            other => Err(unexpected(what, &other)),
        }
    }
}

/// A directory's entries, in order (`.` and `..` left out).
pub struct DirEntries {
    client: Client,
    /// The open directory, while pages remain to read from it.
    handle: Option<u64>,
    /// Where the next page starts; none at the end.
    offset: Option<u64>,
    page: std::vec::IntoIter<DirectoryEntry>,
}

impl Iterator for DirEntries {
    type Item = Result<DirectoryEntry>;

    fn next(&mut self) -> Option<Result<DirectoryEntry>> {
        loop {
            for entry in self.page.by_ref() {
                if entry.name != b"." && entry.name != b".." {
                    return Some(Ok(entry));
                }
            }
            let offset = self.offset?;
            let handle = self.handle?;
            let request = Request::ReadDirectory { handle, offset, max_entries: LISTING_PAGE };
            match self.client.connection.call(&request) {
                Ok(Response::Entries(entries)) => {
                    self.offset = entries.last().map(|e| e.next);
                    self.page = entries.into_iter();
                }
                Ok(other) => {
                    self.offset = None;
                    return Some(Err(unexpected("readdir", &other)));
                }
                Err(e) => {
                    self.offset = None;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl Drop for DirEntries {
    fn drop(&mut self) {
        if let Some(handle) = self.handle {
            let _ = self.client.done("releasedir", Request::ReleaseDirectory { handle });
        }
    }
}
