//! The file-system space a store keeps back from user data (DESIGN.md, "A
//! full store still deletes"): containers do not grow into it, so that on
//! a full file system the writes a delete needs still fit: log records
//! (and a segment or two more if a checkpoint lags), an index flush and a
//! merge's output, and the metadata of the delete itself.

use std::path::Path;

use larder_io::{OpenOptions, Storage};

use crate::error::Result;
use crate::store::Store;

/// Log segments kept back beyond those the log holds: the log reuses its
/// segments after each checkpoint, so one more covers a checkpoint that
/// lags while deletes are logged.
pub const RESERVE_LOG_SEGMENTS: u64 = 1;
/// Bytes kept back for index flushes and the metadata of deletes, beyond
/// a copy of the index as it is (the output of a merge of all of it): a
/// flush of a memtable of deletes is small.
pub const RESERVE_METADATA_BYTES: u64 = 2 << 20;

/// The reserve of the store in `dir`: [`RESERVE_LOG_SEGMENTS`] log
/// segments, the index's files as they are now (a merge's output is at
/// most their size) and [`RESERVE_METADATA_BYTES`].
pub(crate) fn reserve_bytes(storage: &dyn Storage, index_dir: &Path, log_segment_bytes: u64) -> Result<u64> {
    let mut index_bytes = 0u64;
    for name in storage.list_dir(index_dir)? {
        // What cannot be opened (none of the index's own files) counts 0.
        let len = storage.open(&index_dir.join(&name), OpenOptions::READ).and_then(|file| file.len());
        index_bytes = index_bytes.saturating_add(len.unwrap_or(0));
    }
    Ok(RESERVE_LOG_SEGMENTS
        .saturating_mul(log_segment_bytes)
        .saturating_add(index_bytes)
        .saturating_add(RESERVE_METADATA_BYTES))
}

impl Store {
    /// Fails with ENOSPC ([`crate::ObjectError::is_no_space`]) once the
    /// file system has no room beyond the store's reserve, for a call
    /// about to add `value_bytes` of data or a name. Calls that add data
    /// or names (puts, creates) check it first; deletes, truncates and
    /// removals do not, so they succeed on a full file system and give
    /// space back. Data larger than the inline limit goes to containers,
    /// which do not grow into the reserve and may still have free space:
    /// it is not checked here. This stops small objects and names, which
    /// live in the log and the index.
    ///
    /// The reserve follows the index as it grows: one log segment, the
    /// index's runs and memtables (what flushing and merging all of it
    /// would write) and [`RESERVE_METADATA_BYTES`].
    pub fn check_room(&self, value_bytes: u64) -> Result<()> {
        if value_bytes > u64::from(self.superblock.superblock.options.inline_max_bytes) {
            return Ok(());
        }
        self.check_room_using(0)
    }

    /// [`Store::check_room`] for a call that adds only a name (a file, a
    /// directory, a link, a symlink's short target), which may use half
    /// of [`RESERVE_METADATA_BYTES`]: a file system at its reserve may
    /// still hold free space inside its containers, which a new file's
    /// data can use, and each name adds only its index entry, so the
    /// other half still covers the deletes.
    pub fn check_room_for_name(&self) -> Result<()> {
        self.check_room_using(RESERVE_METADATA_BYTES / 2)
    }

    /// Fails once the file system has no room beyond the reserve, of
    /// which this call `may_use` some.
    fn check_room_using(&self, may_use: u64) -> Result<()> {
        let segment = self.superblock.superblock.options.log_segment_bytes;
        Ok(self.space.check_room(
            || {
                let index = self.index.stats();
                RESERVE_LOG_SEGMENTS
                    .saturating_mul(segment)
                    .saturating_add(index.run_bytes)
                    .saturating_add(index.memtable_data_bytes)
                    .saturating_add(RESERVE_METADATA_BYTES)
            },
            may_use,
        )?)
    }
}
