//! Recovery's check of a record's data: before a replayed record's batch
//! is applied, every extent its fmap puts name is read back from the
//! containers and checked against the entry's block crcs. A record whose
//! data never reached the disk (its container sync failed or a crash came
//! first while the log's sync succeeded) fails here, and the log ends
//! before it (DESIGN.md, layer 3). A record the log had acknowledged had
//! its data durable first, so a crc32c failure there is damage on the
//! medium: the store replays it and reads of the damaged blocks report
//! corruption (see `Store::open`).
//!
//! The containers are opened directly: the space manager is opened only
//! after replay, because it rebuilds free space from the replayed map.

use std::collections::HashMap;
use std::path::PathBuf;

use larder_index::{BatchOp, WriteBatch};
use larder_io::{read_exact_at, FileRef, OpenOptions, StorageRef};

use super::to_usize;
use crate::meta::{decode_fmap_key, verify_block, ExtentMapEntry, Map, MetaLimits, BLOCK_BYTES};

/// Blocks read per call while checking an extent (bounds the buffer).
const CHUNK_BLOCKS: u64 = 256;

/// Why a replayed record's data is not intact.
#[derive(Debug)]
pub(crate) enum DataDamage {
    /// The blocks were read and one fails its crc32c: never written, torn,
    /// or damaged on the medium since.
    Checksum(String),
    /// The blocks could not be read, or the record's map does not decode.
    Unreadable(String),
}

impl std::fmt::Display for DataDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataDamage::Checksum(what) | DataDamage::Unreadable(what) => f.write_str(what),
        }
    }
}

/// Checks replayed records' data; keeps the container files it opened.
pub(crate) struct ReplayVerifier {
    storage: StorageRef,
    data_dir: PathBuf,
    limits: MetaLimits,
    files: HashMap<u64, FileRef>,
}

impl ReplayVerifier {
    pub(crate) fn new(storage: StorageRef, data_dir: PathBuf, limits: MetaLimits) -> Self {
        ReplayVerifier { storage, data_dir, limits, files: HashMap::new() }
    }

    /// `Ok` if every extent the batch maps holds the bytes its crcs
    /// describe; otherwise what is wrong, naming the file and offset.
    pub(crate) fn check(&mut self, batch: &WriteBatch) -> Result<(), DataDamage> {
        for op in batch.iter() {
            let BatchOp::Put { key, value } = op else { continue };
            if key.first() != Some(&Map::Fmap.prefix()) {
                continue;
            }
            let (object, offset) = decode_fmap_key(key).map_err(|e| DataDamage::Unreadable(e.to_string()))?;
            let entry = ExtentMapEntry::decode(value, &self.limits)
                .map_err(|e| DataDamage::Unreadable(format!("object {object} offset {offset}: {e}")))?;
            self.check_entry(object, offset, &entry)?;
        }
        Ok(())
    }

    fn file(&mut self, container: u64) -> Result<FileRef, String> {
        if let Some(f) = self.files.get(&container) {
            return Ok(f.clone());
        }
        let path = self.data_dir.join(larder_space::container_file_name(container));
        let file = self.storage.open(&path, OpenOptions::READ).map_err(|e| e.to_string())?;
        self.files.insert(container, file.clone());
        Ok(file)
    }

    fn check_entry(&mut self, object: u64, offset: u64, entry: &ExtentMapEntry) -> Result<(), DataDamage> {
        if entry.unwritten {
            // It reads as zeros whatever its blocks hold: nothing to check.
            return Ok(());
        }
        let extent = entry.extent;
        let file = self.file(extent.container).map_err(DataDamage::Unreadable)?;
        let mut buf = Vec::new();
        let mut block = 0;
        while block < entry.blocks() {
            let n = (entry.blocks() - block).min(CHUNK_BLOCKS);
            buf.resize(to_usize(n * BLOCK_BYTES), 0);
            let at = extent.offset + block * BLOCK_BYTES;
            read_exact_at(&*file, &mut buf, at).map_err(|e| DataDamage::Unreadable(e.to_string()))?;
            for i in 0..n {
                let expected = entry.crcs.get(to_usize(block + i)).copied().unwrap_or_default();
                if !verify_block(&buf, to_usize(i), expected) {
                    return Err(DataDamage::Checksum(format!(
                        "{}: block at offset {} (object {object}, offset {}) fails its crc32c",
                        file.path().display(),
                        at + i * BLOCK_BYTES,
                        offset + (block + i) * BLOCK_BYTES
                    )));
                }
            }
            block += n;
        }
        Ok(())
    }
}
