//! Batches of metadata operations (Aerie's batched journal): several
//! namespace changes sent in one request and applied by the server as one
//! transaction. The server checks each operation as it would alone, on
//! the state the earlier ones leave, and applies all of them or none.
//!
//! Operations name directories by inode number ([`crate::Metadata::ino`]
//! of a directory the client reached, or an `Attributes::ino` an earlier
//! call returned).

use larder_protocol::codec::MAX_BATCH_OPERATIONS;
use larder_protocol::message::{Attributes, Durability, RenameFlags, Request, Response};

use crate::error::{ClientError, Result};
use crate::{unexpected, Client};

/// Metadata operations to apply at once.
#[derive(Clone, Debug, Default)]
pub struct MetadataBatch {
    operations: Vec<Request>,
}

impl MetadataBatch {
    /// An empty batch.
    pub fn new() -> MetadataBatch {
        MetadataBatch::default()
    }

    /// Makes directory `name` in directory `parent`.
    pub fn mkdir(&mut self, parent: u64, name: impl AsRef<[u8]>, mode: u32) -> &mut Self {
        self.push(Request::Mkdir { parent, name: name.as_ref().to_vec(), mode })
    }

    /// Makes a special (or regular, empty) file.
    pub fn mknod(&mut self, parent: u64, name: impl AsRef<[u8]>, mode: u32, rdev: u64) -> &mut Self {
        self.push(Request::Mknod { parent, name: name.as_ref().to_vec(), mode, rdev })
    }

    /// Makes a symbolic link to `target`.
    pub fn symlink(&mut self, parent: u64, name: impl AsRef<[u8]>, target: impl AsRef<[u8]>) -> &mut Self {
        self.push(Request::Symlink { parent, name: name.as_ref().to_vec(), target: target.as_ref().to_vec() })
    }

    /// Gives object `ino` another name.
    pub fn link(&mut self, ino: u64, parent: u64, name: impl AsRef<[u8]>) -> &mut Self {
        self.push(Request::Link { ino, parent, name: name.as_ref().to_vec() })
    }

    /// Removes a name of a non-directory.
    pub fn unlink(&mut self, parent: u64, name: impl AsRef<[u8]>) -> &mut Self {
        self.push(Request::Unlink { parent, name: name.as_ref().to_vec() })
    }

    /// Removes an empty directory.
    pub fn rmdir(&mut self, parent: u64, name: impl AsRef<[u8]>) -> &mut Self {
        self.push(Request::Rmdir { parent, name: name.as_ref().to_vec() })
    }

    /// Moves a name, replacing what the target names.
    pub fn rename(
        &mut self,
        parent: u64,
        name: impl AsRef<[u8]>,
        new_parent: u64,
        new_name: impl AsRef<[u8]>,
    ) -> &mut Self {
        self.push(Request::Rename {
            parent,
            name: name.as_ref().to_vec(),
            new_parent,
            new_name: new_name.as_ref().to_vec(),
            flags: RenameFlags::default(),
        })
    }

    /// How many operations it holds.
    pub fn len(&self) -> usize {
        self.operations.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    fn push(&mut self, operation: Request) -> &mut Self {
        self.operations.push(operation);
        self
    }
}

impl Client {
    /// Applies `batch` as one transaction: all of it, or (on the first
    /// operation refused, whose error is returned) none. Per operation,
    /// the attributes of what it made or named (mkdir, mknod, symlink,
    /// link), or none (unlink, rmdir, rename).
    pub fn apply_batch(&self, batch: MetadataBatch, durability: Durability) -> Result<Vec<Option<Attributes>>> {
        if batch.len() > MAX_BATCH_OPERATIONS {
            return Err(ClientError::Invalid(format!(
                "a batch of {} operations; the most is {MAX_BATCH_OPERATIONS}",
                batch.len()
            )));
        }
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        match self.connection.call(&Request::MetadataBatch { operations: batch.operations, durability })? {
            Response::BatchApplied(results) => Ok(results),
            other => Err(unexpected("metadata batch", &other)),
        }
    }
}
