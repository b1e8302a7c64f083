//! Writes a run file from entries in internal order.

use std::path::{Path, PathBuf};

use larder_io::{write_all_at, FileRef, OpenOptions, Storage};

use super::block::BlockBuilder;
use super::bloom::{key_hash, BloomBuilder};
use super::{BlockHandle, RunMeta, FOOTER_BYTES, RUN_FEATURE_LOCAL_FILTER, RUN_FORMAT_VERSION, RUN_MAGIC};
use crate::codec::{crc, put_bytes, put_u16, put_u32, put_u64};
use crate::entry::{Op, OpRef, RangeTombstone, Stamp};
use crate::error::Result;
use crate::merge::Registry;

/// Write-buffer size: run files are written in large sequential writes.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// Bytes written between two starts of their write-back: the device
/// writes a run while the rest is built, and the sync that ends it waits
/// for the tail alone.
const WRITE_BACK_BYTES: u64 = 8 << 20;

/// Builds one run file. Entries must arrive in internal order.
pub(crate) struct RunWriter {
    file: FileRef,
    path: PathBuf,
    written: u64,
    /// Where the bytes whose write-back has not been started begin.
    write_back_from: u64,
    buf: Vec<u8>,
    block: BlockBuilder,
    block_size: usize,
    index: Vec<u8>,
    index_count: u32,
    block_last_key: Vec<u8>,
    bloom: Option<BloomBuilder>,
    /// Registry ids of operators used, in first-use order (the run's table).
    operators: Vec<u32>,
    tombstones: Vec<RangeTombstone>,
    entry_count: u64,
    min_key: Option<Vec<u8>>,
    max_key: Vec<u8>,
    /// Bytes of entries written (for write-amplification accounting).
    pub(crate) bytes: u64,
}

impl RunWriter {
    /// Creates the file (it must not exist).
    pub(crate) fn create(
        storage: &dyn Storage,
        path: &Path,
        block_size: usize,
        bloom_bits_per_key: u32,
        expected_keys: u64,
    ) -> Result<Self> {
        let file = storage.open(path, OpenOptions::CREATE_NEW)?;
        Ok(RunWriter {
            file,
            path: path.to_path_buf(),
            written: 0,
            write_back_from: 0,
            buf: Vec::with_capacity(WRITE_BUFFER_BYTES + block_size * 2),
            block: BlockBuilder::new(),
            block_size,
            index: Vec::new(),
            index_count: 0,
            block_last_key: Vec::new(),
            bloom: (bloom_bits_per_key > 0).then(|| BloomBuilder::new(expected_keys, bloom_bits_per_key)),
            operators: Vec::new(),
            tombstones: Vec::new(),
            entry_count: 0,
            min_key: None,
            max_key: Vec::new(),
            bytes: 0,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Adds one entry; it must sort after every entry added before.
    pub(crate) fn add(&mut self, key: &[u8], stamp: Stamp, op: &Op) -> Result<()> {
        self.add_ref(key, stamp, op.borrowed())
    }

    /// [`RunWriter::add`] of a borrowed operation.
    pub(crate) fn add_ref(&mut self, key: &[u8], stamp: Stamp, op: OpRef<'_>) -> Result<()> {
        let new_key = self.entry_count == 0 || key != self.block_last_key.as_slice();
        if new_key && !self.block.is_empty() && self.block.estimated_len(&self.buf) >= self.block_size {
            self.finish_block()?;
        }
        if new_key {
            if let Some(b) = &mut self.bloom {
                b.add(key_hash(key));
            }
            self.block_last_key.clear();
            self.block_last_key.extend_from_slice(key);
            if self.min_key.is_none() {
                self.min_key = Some(key.to_vec());
            }
        }
        let run_op_id = match op {
            OpRef::Merge { operator, .. } => match self.operators.iter().position(|o| *o == operator) {
                Some(i) => i as u32,
                None => {
                    self.operators.push(operator);
                    (self.operators.len() - 1) as u32
                }
            },
            _ => 0,
        };
        self.block.add(&mut self.buf, key, stamp, op, run_op_id);
        self.entry_count += 1;
        self.bytes += (key.len() + op.payload_len() + 12) as u64;
        Ok(())
    }

    /// Adds a range tombstone (any order).
    pub(crate) fn add_tombstone(&mut self, t: RangeTombstone) {
        self.tombstones.push(t);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entry_count == 0 && self.tombstones.is_empty()
    }

    fn finish_block(&mut self) -> Result<()> {
        // The block is built in place at the end of the write buffer.
        let start = self.block.finish(&mut self.buf);
        let len = self.buf.len() - start;
        check_u32_len("data block", len)?;
        let handle = BlockHandle { offset: self.written + start as u64, len: len as u32 };
        put_bytes(&mut self.index, &self.block_last_key);
        put_u64(&mut self.index, handle.offset);
        put_u32(&mut self.index, handle.len);
        self.index_count += 1;
        if self.block_last_key.as_slice() > self.max_key.as_slice() {
            self.max_key.clone_from(&self.block_last_key);
        }
        if self.buf.len() >= WRITE_BUFFER_BYTES {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> Result<()> {
        write_all_at(&*self.file, &self.buf, self.written)?;
        self.written += self.buf.len() as u64;
        self.buf.clear();
        if self.written - self.write_back_from >= WRITE_BACK_BYTES {
            self.file.start_write_back(self.write_back_from, self.written - self.write_back_from)?;
            self.write_back_from = self.written;
        }
        Ok(())
    }

    fn append_section(&mut self, bytes: &[u8]) -> Result<BlockHandle> {
        check_u32_len("run section", bytes.len())?;
        let handle = BlockHandle { offset: self.written + self.buf.len() as u64, len: bytes.len() as u32 };
        self.buf.extend_from_slice(bytes);
        Ok(handle)
    }

    /// Writes filter, index, tombstones, meta and footer, then syncs the
    /// file. The caller syncs the directory before referring to the run.
    pub(crate) fn finish(mut self, id: u64, level: u32, seq_range: (u64, u64), registry: &Registry) -> Result<RunMeta> {
        if !self.block.is_empty() {
            self.finish_block()?;
        }
        let filter = match self.bloom.take() {
            Some(b) => self.append_section(&b.finish())?,
            None => BlockHandle { offset: self.written + self.buf.len() as u64, len: 0 },
        };
        let mut index = Vec::with_capacity(self.index.len() + 8);
        put_u32(&mut index, self.index_count);
        index.extend_from_slice(&self.index);
        let c = crc(&index);
        put_u32(&mut index, c);
        let index_handle = self.append_section(&index)?;

        self.tombstones.sort_by(|a, b| a.start.cmp(&b.start).then(b.stamp.cmp(&a.stamp)));
        let mut ts = Vec::new();
        put_u32(&mut ts, self.tombstones.len() as u32);
        let mut min_key = self.min_key.take();
        for t in &self.tombstones {
            put_bytes(&mut ts, &t.start);
            put_bytes(&mut ts, &t.end);
            put_u64(&mut ts, t.stamp.seq);
            put_u32(&mut ts, t.stamp.sub);
            if min_key.as_ref().is_none_or(|m| t.start < *m) {
                min_key = Some(t.start.clone());
            }
            if t.end > self.max_key {
                self.max_key.clone_from(&t.end);
            }
        }
        let c = crc(&ts);
        put_u32(&mut ts, c);
        check_u32_len("tombstone count", self.tombstones.len())?;
        let ts_handle = self.append_section(&ts)?;

        let min_key = min_key.unwrap_or_default();
        let mut meta = Vec::new();
        put_u64(&mut meta, self.entry_count);
        put_u64(&mut meta, u64::from(self.index_count));
        put_u64(&mut meta, seq_range.0);
        put_u64(&mut meta, seq_range.1);
        for h in [filter, index_handle, ts_handle] {
            put_u64(&mut meta, h.offset);
            put_u32(&mut meta, h.len);
        }
        put_bytes(&mut meta, &min_key);
        put_bytes(&mut meta, &self.max_key);
        put_u16(&mut meta, self.operators.len() as u16);
        for &o in &self.operators {
            put_bytes(&mut meta, registry.name_of(o).as_bytes());
        }
        let c = crc(&meta);
        put_u32(&mut meta, c);
        let meta_handle = self.append_section(&meta)?;

        let mut footer = Vec::with_capacity(FOOTER_BYTES);
        put_u64(&mut footer, meta_handle.offset);
        put_u32(&mut footer, meta_handle.len);
        put_u32(&mut footer, RUN_FORMAT_VERSION);
        put_u64(&mut footer, 0); // compat features
        let incompat = if filter.len > 0 { RUN_FEATURE_LOCAL_FILTER } else { 0 };
        put_u64(&mut footer, incompat);
        let c = crc(&footer);
        put_u32(&mut footer, c);
        footer.extend_from_slice(&RUN_MAGIC);
        debug_assert_eq!(footer.len(), FOOTER_BYTES);
        self.buf.extend_from_slice(&footer);
        self.flush_buf()?;
        self.file.sync_data()?;
        Ok(RunMeta {
            id,
            level,
            seq_min: seq_range.0,
            seq_max: seq_range.1,
            entry_count: self.entry_count,
            tombstone_count: self.tombstones.len() as u32,
            file_size: self.written,
            min_key,
            max_key: self.max_key,
        })
    }
}

/// Refuses a length that does not fit the format's u32 field (a block
/// holding one key's versions can exceed it only with huge values).
fn check_u32_len(what: &'static str, len: usize) -> Result<()> {
    if len > u32::MAX as usize {
        return Err(crate::IndexError::TooLarge { what, len: len as u64, limit: u32::MAX.into() });
    }
    Ok(())
}
