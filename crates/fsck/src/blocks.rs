//! Rule 9: every block of every referenced extent, read back from its
//! container, has the crc32c its fmap entry records.
//!
//! The fmap is read a second time from the same snapshot rather than kept
//! from the first pass: checksums are 4 bytes per 4 KiB of data, too much
//! to hold for a large store. Entries the first pass reported as
//! undecodable or in a missing container are skipped here.

use std::collections::BTreeSet;

use larder_io::read_exact_at;
use larder_object::meta::{map_prefix, verify_block, ExtentMapEntry, Map, MetaKey, MetaLimits, BLOCK_BYTES};
use larder_object::Store;

use crate::error::Result;
use crate::model::Problems;
use crate::problem::Problem;
use crate::report::{Phase, Progress, Skipped};
use crate::scan::damage;

/// Blocks read per container read: 1 MiB.
const CHUNK_BLOCKS: u64 = 256;

/// What the checksum phase needs besides the store.
pub(crate) struct BlockCheck<'a> {
    pub(crate) store: &'a Store,
    pub(crate) snapshot: &'a larder_index::Snapshot,
    pub(crate) limits: MetaLimits,
    /// Blocks the first pass found, for the progress total.
    pub(crate) total: u64,
    /// Whether the first pass read the whole fmap: if not, the failure
    /// met again here was reported already.
    pub(crate) fmap_complete: bool,
}

impl BlockCheck<'_> {
    /// Verifies every block; returns how many matched their crc32c.
    pub(crate) fn run(
        &self,
        problems: &mut Problems,
        skipped: &mut BTreeSet<Skipped>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<u64> {
        let mut verified = 0u64;
        let mut done = 0u64;
        let prefix = map_prefix(Map::Fmap);
        let iter = match self.snapshot.prefix(&prefix, true) {
            Ok(iter) => iter,
            Err(e) => return self.unreadable(e, problems, skipped).map(|()| 0),
        };
        for kv in iter {
            let (key, value) = match kv {
                Ok(kv) => kv,
                Err(e) => {
                    self.unreadable(e, problems, skipped)?;
                    break;
                }
            };
            let Ok(MetaKey::Extent { object, offset }) = MetaKey::decode(&key) else { continue };
            let Ok(entry) = ExtentMapEntry::decode(&value, &self.limits) else { continue };
            if entry.check_at(offset).is_err() {
                continue;
            }
            verified += self.entry(object, offset, &entry, problems, &mut done, progress)?;
        }
        progress(Progress { phase: Phase::Checksums, done, total: Some(self.total) });
        Ok(verified)
    }

    /// Reports a read failure met in this phase (unless the first pass did
    /// already), or returns it if it is fatal.
    fn unreadable(
        &self,
        e: larder_index::IndexError,
        problems: &mut Problems,
        skipped: &mut BTreeSet<Skipped>,
    ) -> Result<()> {
        let error = damage(e)?;
        if self.fmap_complete {
            let from = Some(map_prefix(Map::Fmap).to_vec());
            problems.push(Problem::IndexUnreadable { error, from, to: None });
        }
        skipped.insert(Skipped::Checksums);
        Ok(())
    }

    /// Verifies the blocks of one entry; returns how many matched.
    fn entry(
        &self,
        object: u64,
        offset: u64,
        entry: &ExtentMapEntry,
        problems: &mut Problems,
        done: &mut u64,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<u64> {
        let extent = entry.extent;
        if entry.unwritten {
            // Set aside by fallocate, reading as zeros: no checksums.
            *done += entry.blocks();
            return Ok(0);
        }
        let Some(file) = self.store.space().container_file(extent.container) else { return Ok(0) };
        let mut verified = 0;
        let blocks = entry.blocks();
        let mut first = 0u64;
        let mut buf = Vec::new();
        while first < blocks {
            let n = (blocks - first).min(CHUNK_BLOCKS);
            // `n` is at most CHUNK_BLOCKS, so this fits memory.
            buf.resize((n * BLOCK_BYTES) as usize, 0);
            let at = extent.offset + first * BLOCK_BYTES;
            read_exact_at(&*file, &mut buf, at)?;
            for i in 0..n {
                let expected = entry.crcs.get((first + i) as usize).copied();
                if expected.is_some_and(|crc| verify_block(&buf, i as usize, crc)) {
                    verified += 1;
                } else {
                    problems.push(Problem::ChecksumMismatch {
                        object,
                        offset: offset + (first + i) * BLOCK_BYTES,
                        path: file.path().to_path_buf(),
                        container_offset: at + i * BLOCK_BYTES,
                    });
                }
            }
            first += n;
            *done += n;
            progress(Progress { phase: Phase::Checksums, done: *done, total: Some(self.total) });
        }
        Ok(verified)
    }
}
