//! The peers' ways of doing each single operation: syscalls relative to an
//! open directory (ext4, and Larder's FUSE mount), `larder_fs::Fs` calls
//! (embedded), and larder-client calls (served, and the do-nothing
//! server).

use std::ffi::CString;
use std::os::fd::OwnedFd;

use anyhow::{bail, Result};
use rustix::fs::{AtFlags, Mode, OFlags};

/// One peer's single operations. Names are relative to a directory made
/// with [`Target::mkdir`] under the peer's base directory.
pub trait Target {
    /// A directory to work in.
    type Dir;
    /// An open file.
    type File;
    /// Makes directory `name` under the base directory.
    fn mkdir(&self, name: &str) -> Result<Self::Dir>;
    /// Opens directory `name` under the base directory, which exists.
    fn open_dir(&self, name: &str) -> Result<Self::Dir>;
    /// Creates new empty file `name` (it must not exist) and closes it.
    fn create(&self, dir: &Self::Dir, name: &CString) -> Result<()>;
    /// Removes file `name`.
    fn unlink(&self, dir: &Self::Dir, name: &CString) -> Result<()>;
    /// Renames `from` to `to` in one directory.
    fn rename(&self, dir: &Self::Dir, from: &CString, to: &CString) -> Result<()>;
    /// The size of file `name` (its attributes, as stat(2)).
    fn stat(&self, dir: &Self::Dir, name: &CString) -> Result<u64>;
    /// Opens file `name` for reading and closes it.
    fn open_close(&self, dir: &Self::Dir, name: &CString) -> Result<()>;
    /// Lists the directory; returns its entries, `.` and `..` left out.
    fn list(&self, dir: &Self::Dir) -> Result<usize>;
    /// Opens `name` for reading and writing (every write at the end with
    /// `append`), creating it.
    fn open_file(&self, dir: &Self::Dir, name: &CString, append: bool) -> Result<Self::File>;
    /// Opens `name` for reading only.
    fn open_read(&self, dir: &Self::Dir, name: &CString) -> Result<Self::File>;
    /// pread(2).
    fn read_at(&self, file: &Self::File, buf: &mut [u8], offset: u64) -> Result<usize>;
    /// pwrite(2) (at the end, for a file opened to append).
    fn write_at(&self, file: &Self::File, data: &[u8], offset: u64) -> Result<usize>;
    /// A write whose failure may show at the next write, fsync or close
    /// of the file, as a buffered write(2)'s writeback failure does:
    /// `write_at` unless the target can post it without waiting.
    fn write_buffered(&self, file: &Self::File, data: &[u8], offset: u64) -> Result<usize> {
        self.write_at(file, data, offset)
    }
    /// fsync(2) of an open file.
    fn sync_file(&self, file: &Self::File) -> Result<()>;
    /// Makes everything written so far durable (syncfs(2)).
    fn sync_all(&self) -> Result<()>;
    /// Closes an open file.
    fn close(&self, file: Self::File) -> Result<()> {
        drop(file);
        Ok(())
    }
}

/// ext4 (or any mounted file system, Larder's FUSE mount included) by
/// syscalls relative to open directories.
pub struct Syscalls {
    base: OwnedFd,
}

impl Syscalls {
    /// Works under `base` (which must exist).
    pub fn new(base: &std::path::Path) -> Result<Syscalls> {
        let base = rustix::fs::open(base, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        Ok(Syscalls { base })
    }
}

impl Target for Syscalls {
    type Dir = OwnedFd;
    type File = OwnedFd;

    fn mkdir(&self, name: &str) -> Result<OwnedFd> {
        rustix::fs::mkdirat(&self.base, name, Mode::from_raw_mode(0o755))?;
        Ok(rustix::fs::openat(&self.base, name, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?)
    }

    fn open_dir(&self, name: &str) -> Result<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        Ok(rustix::fs::openat(&self.base, name, flags, Mode::empty())?)
    }

    fn create(&self, dir: &OwnedFd, name: &CString) -> Result<()> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
        drop(rustix::fs::openat(dir, name.as_c_str(), flags, Mode::from_raw_mode(0o644))?);
        Ok(())
    }

    fn unlink(&self, dir: &OwnedFd, name: &CString) -> Result<()> {
        Ok(rustix::fs::unlinkat(dir, name.as_c_str(), AtFlags::empty())?)
    }

    fn rename(&self, dir: &OwnedFd, from: &CString, to: &CString) -> Result<()> {
        Ok(rustix::fs::renameat(dir, from.as_c_str(), dir, to.as_c_str())?)
    }

    fn stat(&self, dir: &OwnedFd, name: &CString) -> Result<u64> {
        Ok(rustix::fs::statat(dir, name.as_c_str(), AtFlags::empty())?.st_size as u64)
    }

    fn open_close(&self, dir: &OwnedFd, name: &CString) -> Result<()> {
        drop(rustix::fs::openat(dir, name.as_c_str(), OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?);
        Ok(())
    }

    fn list(&self, dir: &OwnedFd) -> Result<usize> {
        // As `ls` does: open the directory, read it to the end, close it.
        let fd = rustix::fs::openat(dir, c".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        let mut count = 0;
        for entry in rustix::fs::Dir::new(fd)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                count += 1;
            }
        }
        Ok(count)
    }

    fn open_file(&self, dir: &OwnedFd, name: &CString, append: bool) -> Result<OwnedFd> {
        let mut flags = OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC;
        if append {
            flags |= OFlags::APPEND;
        }
        Ok(rustix::fs::openat(dir, name.as_c_str(), flags, Mode::from_raw_mode(0o644))?)
    }

    fn open_read(&self, dir: &OwnedFd, name: &CString) -> Result<OwnedFd> {
        Ok(rustix::fs::openat(dir, name.as_c_str(), OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?)
    }

    fn read_at(&self, file: &OwnedFd, buf: &mut [u8], offset: u64) -> Result<usize> {
        Ok(rustix::io::pread(file, buf, offset)?)
    }

    fn write_at(&self, file: &OwnedFd, data: &[u8], offset: u64) -> Result<usize> {
        Ok(rustix::io::pwrite(file, data, offset)?)
    }

    fn sync_file(&self, file: &OwnedFd) -> Result<()> {
        Ok(rustix::fs::fsync(file)?)
    }

    fn sync_all(&self) -> Result<()> {
        Ok(rustix::fs::syncfs(&self.base)?)
    }
}

/// Larder embedded: `larder_fs::Fs` calls by directory inode and name, as
/// root.
pub struct Embedded {
    pub fs: larder_fs::Fs,
    base: u64,
    cred: larder_fs::Cred,
}

impl Embedded {
    /// Works under a new directory `base` of the root of `fs`.
    pub fn new(fs: larder_fs::Fs, base: &str) -> Result<Embedded> {
        let cred = larder_fs::Cred::root();
        let base = fs.mkdir(&cred, fs.root(), base.as_bytes(), 0o755)?.ino;
        Ok(Embedded { fs, base, cred })
    }

    /// Works under the existing directory `base` of the root of `fs`.
    pub fn attach(fs: larder_fs::Fs, base: &str) -> Result<Embedded> {
        let cred = larder_fs::Cred::root();
        let base = fs.lookup(&cred, fs.root(), base.as_bytes())?.ino;
        Ok(Embedded { fs, base, cred })
    }
}

impl Target for Embedded {
    type Dir = u64;
    type File = u64;

    fn mkdir(&self, name: &str) -> Result<u64> {
        Ok(self.fs.mkdir(&self.cred, self.base, name.as_bytes(), 0o755)?.ino)
    }

    fn open_dir(&self, name: &str) -> Result<u64> {
        Ok(self.fs.lookup(&self.cred, self.base, name.as_bytes())?.ino)
    }

    fn create(&self, dir: &u64, name: &CString) -> Result<()> {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
        let (_, handle) = self.fs.create_file(&self.cred, *dir, name.as_bytes(), 0o644, flags)?;
        Ok(self.fs.release(handle)?)
    }

    fn unlink(&self, dir: &u64, name: &CString) -> Result<()> {
        Ok(self.fs.unlink(&self.cred, *dir, name.as_bytes())?)
    }

    fn rename(&self, dir: &u64, from: &CString, to: &CString) -> Result<()> {
        let flags = larder_fs::RenameFlags::default();
        Ok(self.fs.rename(&self.cred, *dir, from.as_bytes(), *dir, to.as_bytes(), flags)?)
    }

    fn stat(&self, dir: &u64, name: &CString) -> Result<u64> {
        Ok(self.fs.lookup(&self.cred, *dir, name.as_bytes())?.size)
    }

    fn open_close(&self, dir: &u64, name: &CString) -> Result<()> {
        let ino = self.fs.lookup(&self.cred, *dir, name.as_bytes())?.ino;
        let handle = self.fs.open_file(&self.cred, ino, libc::O_RDONLY)?;
        Ok(self.fs.release(handle)?)
    }

    fn list(&self, dir: &u64) -> Result<usize> {
        let handle = self.fs.opendir(&self.cred, *dir)?;
        let (mut offset, mut count) = (0, 0);
        loop {
            let page = self.fs.readdir(handle, offset, 512)?;
            let Some(last) = page.last() else { break };
            offset = last.next;
            count += page.iter().filter(|e| e.name != b"." && e.name != b"..").count();
        }
        self.fs.releasedir(handle)?;
        Ok(count)
    }

    fn open_file(&self, dir: &u64, name: &CString, append: bool) -> Result<u64> {
        let flags = libc::O_RDWR | libc::O_CREAT | if append { libc::O_APPEND } else { 0 };
        Ok(self.fs.create_file(&self.cred, *dir, name.as_bytes(), 0o644, flags)?.1)
    }

    fn open_read(&self, dir: &u64, name: &CString) -> Result<u64> {
        let ino = self.fs.lookup(&self.cred, *dir, name.as_bytes())?.ino;
        Ok(self.fs.open_file(&self.cred, ino, libc::O_RDONLY)?)
    }

    fn read_at(&self, file: &u64, buf: &mut [u8], offset: u64) -> Result<usize> {
        Ok(self.fs.read_into(*file, offset, buf)?)
    }

    fn write_at(&self, file: &u64, data: &[u8], offset: u64) -> Result<usize> {
        Ok(self.fs.write(&self.cred, *file, offset, data)?)
    }

    fn sync_file(&self, file: &u64) -> Result<()> {
        Ok(self.fs.fsync(*file)?)
    }

    fn sync_all(&self) -> Result<()> {
        Ok(self.fs.sync()?)
    }

    fn close(&self, file: u64) -> Result<()> {
        Ok(self.fs.release(file)?)
    }
}

/// A larder-client connection: to `larder serve`, or to the do-nothing
/// server. Paths are the store's, from its root.
pub struct Served {
    pub client: larder_client::Client,
    base: String,
}

impl Served {
    /// Works under a new directory `/base` of the store.
    pub fn new(client: larder_client::Client, base: &str) -> Result<Served> {
        let base = format!("/{base}");
        client.create_dir(&base, 0o755)?;
        Ok(Served { client, base })
    }

    /// Works under the existing directory `/base` of the store.
    pub fn attach(client: larder_client::Client, base: &str) -> Served {
        Served { client, base: format!("/{base}") }
    }
}

fn path(dir: &str, name: &CString) -> Result<String> {
    match name.to_str() {
        Ok(name) => Ok(format!("{dir}/{name}")),
        Err(_) => bail!("a name that is not UTF-8"),
    }
}

impl Target for Served {
    type Dir = String;
    type File = larder_client::File;

    fn mkdir(&self, name: &str) -> Result<String> {
        let dir = format!("{}/{name}", self.base);
        self.client.create_dir(&dir, 0o755)?;
        Ok(dir)
    }

    fn open_dir(&self, name: &str) -> Result<String> {
        let dir = format!("{}/{name}", self.base);
        self.client.metadata(&dir)?;
        Ok(dir)
    }

    fn create(&self, dir: &String, name: &CString) -> Result<()> {
        let file =
            larder_client::OpenOptions::new().write(true).create_new(true).open(&self.client, path(dir, name)?)?;
        drop(file);
        Ok(())
    }

    fn unlink(&self, dir: &String, name: &CString) -> Result<()> {
        Ok(self.client.remove_file(path(dir, name)?)?)
    }

    fn rename(&self, dir: &String, from: &CString, to: &CString) -> Result<()> {
        Ok(self.client.rename(path(dir, from)?, path(dir, to)?)?)
    }

    fn stat(&self, dir: &String, name: &CString) -> Result<u64> {
        Ok(self.client.metadata(path(dir, name)?)?.len())
    }

    fn open_close(&self, dir: &String, name: &CString) -> Result<()> {
        drop(self.client.open(path(dir, name)?)?);
        Ok(())
    }

    fn list(&self, dir: &String) -> Result<usize> {
        let mut count = 0;
        for entry in self.client.read_dir(dir)? {
            entry?;
            count += 1;
        }
        Ok(count)
    }

    fn open_file(&self, dir: &String, name: &CString, append: bool) -> Result<larder_client::File> {
        let mut options = larder_client::OpenOptions::new();
        options.read(true).write(true).create(true).append(append);
        Ok(options.open(&self.client, path(dir, name)?)?)
    }

    fn open_read(&self, dir: &String, name: &CString) -> Result<larder_client::File> {
        Ok(self.client.open(path(dir, name)?)?)
    }

    fn read_at(&self, file: &larder_client::File, buf: &mut [u8], offset: u64) -> Result<usize> {
        Ok(file.read_at(buf, offset)?)
    }

    fn write_at(&self, file: &larder_client::File, data: &[u8], offset: u64) -> Result<usize> {
        Ok(file.write_at(data, offset)?)
    }

    /// Posted (`File::write_posted`): the client goes on while the server
    /// writes; a failure shows at the file's next write, sync or close.
    fn write_buffered(&self, file: &larder_client::File, data: &[u8], offset: u64) -> Result<usize> {
        file.write_posted(data, offset)?;
        Ok(data.len())
    }

    fn sync_file(&self, file: &larder_client::File) -> Result<()> {
        Ok(file.sync_all()?)
    }

    fn sync_all(&self) -> Result<()> {
        Ok(self.client.sync()?)
    }
}
