//! `statfs`: the store's container space, plus what the host file system
//! still has room for within the space manager's container bound.

use crate::attr::BLOCK_BYTES;
use crate::error::Result;
use crate::{Fs, NAME_MAX};

/// What `statfs` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    /// Block size (and fragment size) in bytes.
    pub block_bytes: u32,
    /// Blocks in all.
    pub blocks: u64,
    /// Blocks free.
    pub blocks_free: u64,
    /// Blocks free to callers: `blocks_free` less the store's reserve on
    /// the host file system, kept for deletes (as ext4 keeps blocks for
    /// root out of `f_bavail`).
    pub blocks_available: u64,
    /// Inodes in all. Object ids are 64-bit and never reused: there is no
    /// inode table to fill, so this and `files_free` are a fixed 2^32.
    pub files: u64,
    /// Inodes free (see `files`).
    pub files_free: u64,
    /// Longest name.
    pub name_max: u32,
}

impl Fs {
    /// The file system's space and limits.
    pub fn statfs(&self) -> Result<StatFs> {
        let space = self.store.space();
        let s = space.stats();
        let container = space.options().container_bytes.max(1);
        let bound = space.options().max_containers.saturating_mul(container);
        let host_free = self.store.host_available_bytes()?;
        // Containers not yet created can still be made, as far as the host
        // has room and the bound allows.
        let growable = bound.saturating_sub(s.bytes_total).min(host_free);
        let total = s.bytes_total + growable;
        let free = s.bytes_free + growable;
        // Containers do not grow into the reserve.
        let growable_to_callers =
            bound.saturating_sub(s.bytes_total).min(host_free.saturating_sub(space.reserve_bytes()));
        let available = s.bytes_free + growable_to_callers;
        let block = u64::from(BLOCK_BYTES);
        let files = 1u64 << 32;
        Ok(StatFs {
            block_bytes: BLOCK_BYTES,
            blocks: total / block,
            blocks_free: free / block,
            blocks_available: available / block,
            files,
            files_free: files,
            name_max: NAME_MAX as u32,
        })
    }
}
