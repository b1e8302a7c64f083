//! A file per object through `std::fs`, what an application does without an
//! engine: the key is the path under the store's directory.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::Store;
use crate::objects::ObjSpec;

/// Files under one directory; `obj/0000123` is the file `0000123` of `obj/`.
pub struct Ext4 {
    root: PathBuf,
    /// The root, open: gets open keys relative to it (openat), walking the
    /// key's own levels only, as Larder resolves a key within its store.
    root_dir: File,
}

impl Ext4 {
    /// Creates the store's directory and `obj/` in it, durably.
    pub fn open(spec: &ObjSpec) -> Result<Ext4> {
        let root = spec.dir.join("ext4");
        std::fs::create_dir_all(root.join("obj")).with_context(|| format!("creating {}", root.display()))?;
        for dir in [root.join("obj"), root.clone(), spec.dir.clone()] {
            File::open(&dir)?.sync_all()?;
        }
        let root_dir = File::open(&root)?;
        Ok(Ext4 { root, root_dir })
    }

    /// fsync of the directory holding `path`, which makes a create or unlink durable.
    fn sync_parent(path: &Path) -> Result<()> {
        let parent = path.parent().context("object path without a parent")?;
        File::open(parent)?.sync_all().with_context(|| format!("fsync of {}", parent.display()))?;
        Ok(())
    }

    /// Opens `path` for writing from offset 0, making missing directory
    /// levels (durably if `durable`); whether the file was created.
    fn create(path: &Path, durable: bool) -> Result<(File, bool)> {
        let open_new = || OpenOptions::new().write(true).create_new(true).open(path);
        let first = match open_new() {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let parent = path.parent().context("object path without a parent")?;
                let mut missing = Vec::new();
                let mut level = parent;
                while !level.exists() {
                    missing.push(level.to_path_buf());
                    level = level.parent().context("no existing ancestor")?;
                }
                std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
                if durable {
                    for dir in &missing {
                        Self::sync_parent(dir)?;
                    }
                }
                open_new()
            }
            other => other,
        };
        match first {
            Ok(f) => Ok((f, true)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                Ok((OpenOptions::new().write(true).truncate(true).open(path)?, false))
            }
            Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
        }
    }
}

impl Store for Ext4 {
    fn describe(&self) -> String {
        "ext4, a file per object via std::fs: put = create + write + fdatasync (File::sync_data) + fsync of the \
         directory on create (and of the parent of a directory level it creates); get = openat (relative to the store's directory) + read + close; \
         delete = unlink + fsync of the directory"
            .to_string()
    }

    fn put(&self, key: &str, value: &[u8], durable: bool) -> Result<()> {
        let path = self.root.join(key);
        let (mut file, created) = Self::create(&path, durable)?;
        file.write_all(value)?;
        if durable {
            file.sync_data()?;
            if created {
                Self::sync_parent(&path)?;
            }
        }
        Ok(())
    }

    fn get(&self, key: &str, out: &mut Vec<u8>) -> Result<bool> {
        use rustix::fs::{Mode, OFlags};
        let mut file = match rustix::fs::openat(&self.root_dir, key, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => File::from(fd),
            Err(rustix::io::Errno::NOENT) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        out.clear();
        file.read_to_end(out)?;
        Ok(true)
    }

    fn put_stream(&self, key: &str, chunks: &mut dyn Iterator<Item = &[u8]>) -> Result<()> {
        let path = self.root.join(key);
        let (mut file, created) = Self::create(&path, true)?;
        for chunk in chunks {
            file.write_all(chunk)?;
        }
        file.sync_data()?;
        if created {
            Self::sync_parent(&path)?;
        }
        Ok(())
    }

    fn delete(&self, key: &str) -> Result<bool> {
        let path = self.root.join(key);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e).with_context(|| format!("unlinking {}", path.display())),
        }
        Self::sync_parent(&path)?;
        Ok(true)
    }

    fn close(self: Box<Self>) -> Result<()> {
        // Nothing buffered in the process; the child syncs the file system before measuring space.
        Ok(())
    }
}
