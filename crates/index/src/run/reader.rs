//! Opens and verifies a run file and answers point lookups from it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use larder_io::{read_exact_at, FileRef, Mapping, OpenOptions, Storage};

#[cfg(doc)]
use super::block::EntrySpan;
use super::block::{Block, BlockRef};
use super::block_index::BlockIndex;
use super::bloom::{Bloom, Layout};
use super::cache::BlockCache;
use super::fault_guard::Guard;
use super::lookup_many::TakePut;
use super::{
    BlockHandle, RunMeta, FOOTER_BYTES, RUN_FEATURE_LOCAL_FILTER, RUN_FORMAT_VERSION, RUN_KNOWN_INCOMPAT, RUN_MAGIC,
};
use crate::codec::{check_trailing_crc, crc, Decoder};
use crate::entry::{Op, RangeTombstone, Stamp};
use crate::error::{IndexError, Result};
use crate::huge::RegionFill;
use crate::merge::Registry;
use crate::prefetch::prefetch_lines;
use crate::stats::Stats;
use crate::MAX_KEY_BYTES;

/// An open, verified run: descriptor, block index, filter, tombstones.
#[derive(Debug)]
pub(crate) struct OpenRun {
    pub(crate) id: u64,
    pub(crate) path: PathBuf,
    file: FileRef,
    pub(crate) index: BlockIndex,
    pub(super) bloom: Option<Bloom>,
    pub(crate) tombstones: Vec<RangeTombstone>,
    /// Run operator id -> registry id.
    pub(crate) op_map: Vec<u32>,
    /// The mapping's registration with the fault guard (declared before
    /// `map`: it unregisters before the mapping is unmapped). With it, a
    /// read past a cut end counts a fault instead of killing the process.
    guard: Option<Guard>,
    /// The file mapped read-only, when point reads use the mapping.
    map: Option<Arc<Mapping>>,
    /// The length the manifest gives the file (checked at open).
    file_size: u64,
    /// Guard mapped reads against a cut file
    /// (`Options::check_mapped_run_length`): by the fault guard, or, for a
    /// mapping it could not register, by checking the file's length before
    /// each read.
    check_length: bool,
    /// One bit per data block: its checksum and offset table passed in the
    /// mapping once, so later point reads view it unchecked.
    checked: Box<[AtomicU64]>,
    /// Set for a run this index wrote, small enough to have its mapping
    /// populated once a reader uses it; cleared by the reader that asks.
    populate_wanted: AtomicBool,
    /// Bytes of the huge-page region holding the filter and block index
    /// that no array uses (see `huge`): memory the run holds.
    region_slack: usize,
}

fn corrupt(path: &Path, offset: u64) -> impl Fn(String) -> IndexError + '_ {
    move |what| IndexError::corrupt(path, offset, what)
}

fn read_section(file: &dyn larder_io::File, path: &Path, h: BlockHandle, what: &str) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; h.len as usize];
    read_exact_at(file, &mut buf, h.offset).map_err(|e| match e {
        larder_io::IoError::UnexpectedEof { .. } => IndexError::corrupt(path, h.offset, format!("{what} truncated")),
        e => e.into(),
    })?;
    Ok(buf)
}

impl OpenRun {
    /// Opens run `meta` and checks it against what the manifest says;
    /// with `map`, maps it for point reads if the storage maps files,
    /// and with `check_length` each mapped read first checks the file is
    /// still as long as it was.
    pub(crate) fn open(
        storage: &dyn Storage,
        path: &Path,
        meta: &RunMeta,
        registry: &Registry,
        (map, check_length): (bool, bool),
    ) -> Result<OpenRun> {
        let file = storage.open(path, OpenOptions::READ)?;
        let len = file.len()?;
        if len != meta.file_size {
            return Err(IndexError::corrupt(
                path,
                len,
                format!("run is {len} bytes, the manifest says {}", meta.file_size),
            ));
        }
        if len < FOOTER_BYTES as u64 {
            return Err(IndexError::corrupt(path, 0, "run is shorter than its footer"));
        }
        let footer_at = len - FOOTER_BYTES as u64;
        let footer = read_section(&*file, path, BlockHandle { offset: footer_at, len: FOOTER_BYTES as u32 }, "footer")?;
        let bad = corrupt(path, footer_at);
        let mut d = Decoder::new(&footer);
        let meta_offset = d.u64("meta offset").map_err(&bad)?;
        let meta_len = d.u32("meta length").map_err(&bad)?;
        let version = d.u32("version").map_err(&bad)?;
        let _compat = d.u64("compat features").map_err(&bad)?;
        let incompat = d.u64("incompat features").map_err(&bad)?;
        let stored = d.u32("footer checksum").map_err(&bad)?;
        // The checksum first (every version keeps it at footer byte 32,
        // over bytes 0..32): damage is corruption, never a newer version.
        if crc(&footer[..32]) != stored {
            return Err(bad("footer checksum mismatch".into()));
        }
        if footer[36..44] != RUN_MAGIC {
            return Err(bad("bad magic: not a larder run file".into()));
        }
        if version > RUN_FORMAT_VERSION {
            return Err(IndexError::NewerVersion { path: path.into(), found: version, supported: RUN_FORMAT_VERSION });
        }
        if version == 0 {
            return Err(bad("format version 0 was never written".into()));
        }
        if incompat & !RUN_KNOWN_INCOMPAT != 0 {
            return Err(IndexError::UnknownFeature { path: path.into(), flags: incompat & !RUN_KNOWN_INCOMPAT });
        }
        if meta_offset.checked_add(u64::from(meta_len)) != Some(footer_at) {
            return Err(bad(format!("meta block {meta_offset}+{meta_len} does not end at the footer")));
        }
        let raw = read_section(&*file, path, BlockHandle { offset: meta_offset, len: meta_len }, "meta block")?;
        let bad = corrupt(path, meta_offset);
        let body = check_trailing_crc(&raw).map_err(&bad)?;
        let mut d = Decoder::new(body);
        let entry_count = d.u64("entry count").map_err(&bad)?;
        let _block_count = d.u64("block count").map_err(&bad)?;
        let seq_min = d.u64("seq min").map_err(&bad)?;
        let seq_max = d.u64("seq max").map_err(&bad)?;
        let mut handles = [BlockHandle { offset: 0, len: 0 }; 3];
        for h in &mut handles {
            h.offset = d.u64("section offset").map_err(&bad)?;
            h.len = d.u32("section length").map_err(&bad)?;
            if h.offset.saturating_add(u64::from(h.len)) > meta_offset {
                return Err(bad(format!("section {}+{} overlaps the meta block", h.offset, h.len)));
            }
        }
        let min_key = d.length_prefixed(MAX_KEY_BYTES, "min key").map_err(&bad)?;
        let max_key = d.length_prefixed(MAX_KEY_BYTES, "max key").map_err(&bad)?;
        let op_count = d.u16("operator count").map_err(&bad)?;
        let op_count = d.count(op_count.into(), 1, "operator count").map_err(&bad)?;
        let mut op_map = Vec::with_capacity(op_count);
        for _ in 0..op_count {
            let name = d.length_prefixed(255, "operator name").map_err(&bad)?;
            let name = String::from_utf8(name.to_vec()).map_err(|_| bad("operator name is not UTF-8".into()))?;
            let id = registry
                .id_of(&name)
                .ok_or_else(|| IndexError::UnknownMergeOperator { path: path.into(), name: name.clone() })?;
            op_map.push(id);
        }
        if d.remaining() != 0 {
            return Err(bad(format!("{} trailing bytes in the meta block", d.remaining())));
        }
        if (entry_count, seq_min, seq_max, min_key, max_key)
            != (meta.entry_count, meta.seq_min, meta.seq_max, meta.min_key.as_slice(), meta.max_key.as_slice())
        {
            return Err(bad("meta block disagrees with the manifest".into()));
        }
        let [filter_h, index_h, ts_h] = handles;
        let layout = if incompat & RUN_FEATURE_LOCAL_FILTER != 0 { Layout::Local } else { Layout::Classic };
        let filter = if filter_h.len == 0 { None } else { Some(read_section(&*file, path, filter_h, "filter")?) };
        let raw = read_section(&*file, path, index_h, "block index")?;
        let body = check_trailing_crc(&raw).map_err(corrupt(path, index_h.offset))?;
        // What every get reads (filter lines, the block index's lookup
        // arrays) is built on huge pages when it is large enough: a TLB
        // miss each on 4 KiB pages (see `huge`).
        let hot = match (&filter, layout) {
            (Some(f), Layout::Local) => Bloom::region_bytes(f.len()),
            _ => 0,
        } + BlockIndex::region_bytes(body);
        let mut fill = RegionFill::new(hot);
        let bloom = match &filter {
            None => None,
            Some(raw) => Some(Bloom::decode_in(raw, layout, fill.as_mut()).map_err(corrupt(path, filter_h.offset))?),
        };
        drop(filter);
        let index =
            BlockIndex::decode_in(body, filter_h.offset, fill.as_mut()).map_err(corrupt(path, index_h.offset))?;
        let region_slack = fill.as_ref().map_or(0, RegionFill::slack);
        let raw = read_section(&*file, path, ts_h, "range tombstones")?;
        let tombstones = decode_tombstones(&raw).map_err(corrupt(path, ts_h.offset))?;
        if tombstones.len() as u32 != meta.tombstone_count {
            return Err(IndexError::corrupt(path, ts_h.offset, "tombstone count disagrees with the manifest"));
        }
        // Mapped only now that the file's length and every section were
        // checked; a file cut since then maps short and is refused too.
        let map = if map { file.map()? } else { None };
        if let Some(m) = &map {
            if m.len() as u64 != len {
                let what = format!("run is {} bytes now, {len} when opened: changed while opening", m.len());
                return Err(IndexError::corrupt(path, m.len() as u64, what));
            }
        }
        let guard = match &map {
            Some(m) if check_length => Guard::register(m),
            _ => None,
        };
        let checked = (0..index.len().div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
        Ok(OpenRun {
            guard,
            id: meta.id,
            path: path.to_path_buf(),
            file,
            index,
            bloom,
            tombstones,
            op_map,
            map,
            file_size: len,
            check_length,
            checked,
            populate_wanted: AtomicBool::new(false),
            region_slack,
        })
    }

    /// Memory this open run holds (counted against the metadata budget).
    pub(crate) fn metadata_bytes(&self) -> usize {
        self.index.size_bytes()
            + self.bloom.as_ref().map_or(0, Bloom::size_bytes)
            + self.tombstones.iter().map(|t| t.start.len() + t.end.len() + 32).sum::<usize>()
            + self.region_slack
            + 256
    }

    /// Reads data block `i`, through the cache when `cache` is given. A
    /// block read around the cache (by a merge, which rewrites what it
    /// reads) has every entry verified too.
    pub(crate) fn block(&self, i: usize, cache: Option<&BlockCache>, stats: &Stats) -> Result<Arc<Block>> {
        let h = self.index.handle(i);
        let load = || -> Result<Arc<Block>> {
            let raw = read_section(&*self.file, &self.path, h, "data block")?;
            stats.add(&stats.block_reads, 1);
            let block = Block::decode(raw).map_err(corrupt(&self.path, h.offset))?;
            if cache.is_none() {
                block.verify_entries(self.op_map.len()).map_err(corrupt(&self.path, h.offset))?;
            }
            Ok(Arc::new(block))
        };
        match cache {
            Some(c) => c.get_or_load(self.id, h.offset, stats, load),
            None => load(),
        }
    }

    /// Data block `i` of a mapped run for a merge, viewed in place (no
    /// read system call, copy or allocation) and checked in full every
    /// time, as [`OpenRun::block`] checks what a merge reads around the
    /// cache: checksum, offset table, then every entry. None if the run is
    /// not mapped or its mapping has no fault guard: a merge then reads
    /// with pread, so a file cut under it is an error, never a SIGBUS.
    pub(crate) fn merge_block(&self, i: usize, stats: &Stats) -> Result<Option<BlockRef<'_>>> {
        let (Some(map), Some(_)) = (&self.map, &self.guard) else { return Ok(None) };
        let (raw, h) = self.block_in(map, i)?;
        stats.add(&stats.block_reads, 1);
        let checked = BlockRef::check(raw).and_then(|b| b.verify_entries(self.op_map.len()).map(|()| b));
        // Pages cut under the mapping read as zeros: the fault says why.
        self.check_mapping()?;
        checked.map(Some).map_err(corrupt(&self.path, h.offset))
    }

    /// Data block `i` viewed in the mapping, checked the first time (no
    /// system call, copy or block-cache entry); `None` if the run is not
    /// mapped. Every page of the block has been read when this returns, so
    /// a cut file is refused here (see [`OpenRun::check_mapping`]).
    pub(super) fn mapped_block(&self, i: usize, check_length: bool, stats: &Stats) -> Result<Option<BlockRef<'_>>> {
        self.mapped_block_at(i, self.index.handle(i), check_length, stats)
    }

    /// [`OpenRun::mapped_block`] of block `i`, which lies at `h` (its
    /// handle, as the block index gives it).
    pub(super) fn mapped_block_at(
        &self,
        i: usize,
        h: BlockHandle,
        check_length: bool,
        stats: &Stats,
    ) -> Result<Option<BlockRef<'_>>> {
        let Some(map) = &self.map else { return Ok(None) };
        // A page of the mapping past the file's end faults (SIGBUS) when
        // touched. With the fault guard the fault is counted and the page
        // reads as zeros (checked below); a mapping the guard could not
        // register checks the file's length first (one fstat), and a cut
        // racing that check still faults (docs/design.md, "Point gets read
        // mapped runs").
        if check_length && self.check_length && self.guard.is_none() {
            self.check_file_length()?;
        }
        let raw = Self::block_slice(map, h)
            .ok_or_else(|| IndexError::corrupt(&self.path, h.offset, "data block truncated"))?;
        // Counted once: `IndexStats::block_reads` adds these in.
        stats.add(&stats.mapped_block_reads, 1);
        let (word, bit) = (&self.checked[i / 64], 1u64 << (i % 64));
        if word.load(Ordering::Relaxed) & bit != 0 {
            // Every line of the block starts loading before the count at its
            // end is read: that miss then overlaps the others.
            prefetch_lines(raw);
            let block = BlockRef::trusted(raw);
            self.check_mapping()?;
            // A page cut past the file's new end reads as zeros from the cut
            // on, without a fault: zeros that reach this block reach its
            // last byte, its checksum's. A zero there has the block checked
            // in full (one block in 256 otherwise).
            if raw.last() == Some(&0) && BlockRef::check(raw).is_err() {
                return Err(self.changed(h.offset));
            }
            return Ok(Some(block));
        }
        let checked = BlockRef::check(raw);
        self.check_mapping()?;
        let block = checked.map_err(corrupt(&self.path, h.offset))?;
        word.fetch_or(bit, Ordering::Relaxed);
        Ok(Some(block))
    }

    /// Refuses every read of a guarded mapping once a read of it faulted:
    /// its file was cut short (or a page could not be read), and what the
    /// faulting loads read are zeros. One atomic load; call it after the
    /// reads whose results it vouches for.
    pub(crate) fn check_mapping(&self) -> Result<()> {
        match &self.guard {
            Some(g) if g.faulted() => {
                let len = self.file.len().unwrap_or(0);
                if len < self.file_size {
                    return Err(self.truncated(len));
                }
                let what = "a read of the run's mapping faulted: a page could not be read";
                Err(IndexError::corrupt(&self.path, 0, what))
            }
            _ => Ok(()),
        }
    }

    /// Vouches for every read a merge made of the run in place
    /// ([`OpenRun::merge_block`]), once it has made them all: a cut inside
    /// a page the merge read after checking its block reads as zeros from
    /// the cut on without a fault, so the guard alone cannot tell; the
    /// file's length can (one `fstat` per run per merge). Nothing to check
    /// for a run the merge read with pread.
    pub(crate) fn check_read_in_place(&self) -> Result<()> {
        if self.map.is_none() || self.guard.is_none() {
            return Ok(());
        }
        self.check_mapping()?;
        self.check_file_length()
    }

    /// Refuses a run file shorter than the manifest says it is (cut
    /// under the index).
    fn check_file_length(&self) -> Result<()> {
        let len = self.file.len()?;
        if len < self.file_size {
            return Err(self.truncated(len));
        }
        Ok(())
    }

    /// Refuses a mapped block that reads as holding no entries, which its
    /// check at first view ruled out: the file changed under the mapping.
    pub(crate) fn changed(&self, offset: u64) -> IndexError {
        let len = self.file.len().unwrap_or(0);
        if len < self.file_size {
            return self.truncated(len);
        }
        IndexError::corrupt(&self.path, offset, "data block changed in the mapping since it was checked")
    }

    fn truncated(&self, len: u64) -> IndexError {
        let what = format!("run is {len} bytes, its footer ends at {}: truncated while open", self.file_size);
        IndexError::corrupt(&self.path, len, what)
    }

    /// Maps every page of the run's mapping now (see
    /// [`larder_io::Mapping::populate`]); says whether that was done.
    pub(crate) fn populate(&self) -> bool {
        self.map.as_ref().is_some_and(|m| m.populate())
    }

    /// Has the first reader to use the run ask for its mapping to be
    /// populated ([`OpenRun::take_populate_request`]); nothing if it is
    /// not mapped.
    pub(crate) fn want_populate(&self) {
        self.populate_wanted.store(self.map.is_some(), Ordering::Relaxed);
    }

    /// Whether the run still wants a reader to ask for its mapping to be
    /// populated (one load: for the check on every read).
    pub(crate) fn wants_populate(&self) -> bool {
        self.populate_wanted.load(Ordering::Relaxed)
    }

    /// Whether the caller, a reader, is the first to use a run that wants
    /// its mapping populated (true once; one load otherwise).
    pub(crate) fn take_populate_request(&self) -> bool {
        self.populate_wanted.load(Ordering::Relaxed) && self.populate_wanted.swap(false, Ordering::Relaxed)
    }

    /// Whether the run is mapped (data blocks can be viewed in place).
    pub(crate) fn is_mapped(&self) -> bool {
        self.map.is_some()
    }

    /// Checks data block `i` in the mapping for a scan, which then views
    /// it unchecked for every entry it takes ([`OpenRun::checked_view`]);
    /// false if the run is not mapped. Without the fault guard, a scan
    /// checks the file's length (as a point read does) at its first block
    /// only: one fstat per block was a tenth of a scan's time.
    pub(crate) fn scan_block(&self, i: usize, first: bool, stats: &Stats) -> Result<bool> {
        Ok(self.mapped_block(i, first, stats)?.is_some())
    }

    /// Data block `i` of a mapped run, which [`OpenRun::scan_block`]
    /// checked; an empty block if the run is not mapped.
    pub(crate) fn checked_view(&self, i: usize) -> BlockRef<'_> {
        BlockRef::trusted(self.mapped_bytes(i))
    }

    /// The bytes of data block `i` in the mapping, unparsed (empty if the
    /// run is not mapped): what a cursor's kept [`EntrySpan`]s index.
    pub(crate) fn mapped_bytes(&self, i: usize) -> &[u8] {
        let raw = self.map.as_deref().and_then(|map| Self::block_slice(map, self.index.handle(i)));
        raw.unwrap_or_default()
    }

    /// Data block `i`'s bytes in `map` (the run's mapping) and its handle;
    /// a handle reaching past the mapping is corrupt.
    fn block_in<'m>(&self, map: &'m [u8], i: usize) -> Result<(&'m [u8], BlockHandle)> {
        let h = self.index.handle(i);
        let raw = Self::block_slice(map, h)
            .ok_or_else(|| IndexError::corrupt(&self.path, h.offset, "data block truncated"))?;
        Ok((raw, h))
    }

    /// The bytes `h` names in `map`, if they lie within it.
    fn block_slice(map: &[u8], h: BlockHandle) -> Option<&[u8]> {
        let at = usize::try_from(h.offset).ok()?;
        map.get(at..at.checked_add(h.len as usize)?)
    }

    /// `len` bytes of the mapping from byte `at` (empty if the run is not
    /// mapped or they lie past its end): a block's bytes a cursor found
    /// before with [`OpenRun::mapped_bytes`].
    pub(crate) fn mapped_at(&self, at: usize, len: usize) -> &[u8] {
        let raw = self.map.as_deref().and_then(|map| map.get(at..at.checked_add(len)?));
        raw.unwrap_or_default()
    }

    /// Reads the handle of data block `i` (`i` below the block count), so
    /// a read of the block that follows finds it loaded.
    pub(crate) fn touch_handle(&self, i: usize) -> u8 {
        let h = self.index.handle(i);
        (h.offset as u8) ^ (h.len as u8)
    }

    /// Starts loading every cache line of data block `i` in the mapping
    /// (nothing if the run is not mapped). The lines of several runs'
    /// blocks then miss the cache in parallel, where each run's search
    /// would wait for its own one after another.
    pub(crate) fn touch_block(&self, i: usize) {
        prefetch_lines(self.mapped_bytes(i));
    }

    /// Starts loading the first and the last cache line of data block `i`
    /// in the mapping (its first entry; its entry count and the end of its
    /// offset table); nothing if the run is not mapped.
    pub(crate) fn touch_block_ends(&self, i: usize) {
        let raw = self.mapped_bytes(i);
        prefetch_lines(raw.get(..1).unwrap_or_default());
        prefetch_lines(raw.get(raw.len().saturating_sub(1)..).unwrap_or_default());
    }

    /// Starts loading the filter line a lookup of `hash` will probe (see
    /// `Bloom::prefetch`).
    pub(crate) fn prefetch_filter(&self, hash: u64) {
        if let Some(b) = &self.bloom {
            b.prefetch(hash);
        }
    }

    /// Appends the versions of `key` visible at `read_seq` (newest first)
    /// and says how the run was searched; with `take`, a put that settles
    /// the key is given to it instead (see [`TakePut`]). A filter's
    /// "absent" is not counted here: the caller counts them per read (one
    /// atomic add, not one per run it passes over).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn versions(
        &self,
        key: &[u8],
        hash: u64,
        read_seq: u64,
        cache: &BlockCache,
        stats: &Stats,
        out: &mut Vec<(Stamp, Op)>,
        take: Option<TakePut<'_>>,
    ) -> Result<Lookup> {
        if let Some(b) = &self.bloom {
            if !b.may_contain(hash) {
                return Ok(Lookup::FilterSaidAbsent);
            }
        }
        let (bi, h) = self.index.find_placed(key);
        let Some(h) = h else {
            if self.bloom.is_some() {
                stats.add(&stats.bloom_false_positives, 1);
            }
            return Ok(Lookup::PastLastBlock);
        };
        let cached;
        let block = match self.mapped_block_at(bi, h, true, stats)? {
            Some(view) => view,
            None => {
                cached = self.block(bi, Some(cache), stats)?;
                cached.view()
            }
        };
        let took = self.versions_in_block(&block, key, read_seq, stats, out, take);
        // A cut racing the read above: what it read may be zeros.
        self.check_mapping()?;
        Ok(if took { Lookup::TookPut } else { Lookup::ReadBlock })
    }
}

/// How [`OpenRun::versions`] searched a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Its filter said the key is absent.
    FilterSaidAbsent,
    /// The key is past the run's last block.
    PastLastBlock,
    /// A data block was read.
    ReadBlock,
    /// A data block was read and the put settling the key given to the
    /// caller's [`TakePut`].
    TookPut,
}

fn decode_tombstones(raw: &[u8]) -> std::result::Result<Vec<RangeTombstone>, String> {
    let body = check_trailing_crc(raw)?;
    let mut d = Decoder::new(body);
    let n = d.u32("tombstone count")?;
    // At least two empty keys' lengths, the seq and the sub each.
    let n = d.count(n.into(), 1 + 1 + 8 + 4, "tombstone count")?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let start = d.length_prefixed(MAX_KEY_BYTES, "tombstone start")?.to_vec();
        let end = d.length_prefixed(MAX_KEY_BYTES, "tombstone end")?.to_vec();
        let seq = d.u64("tombstone seq")?;
        let sub = d.u32("tombstone sub")?;
        if start >= end {
            return Err(format!("tombstone {i} has an empty range"));
        }
        out.push(RangeTombstone { start, end, stamp: Stamp { seq, sub } });
    }
    if d.remaining() != 0 {
        return Err(format!("{} trailing bytes after the tombstones", d.remaining()));
    }
    Ok(out)
}

/// Reads what the manifest would say about a run from the run's own footer
/// and meta block (for fuzzing and inspection tools); None if unreadable.
pub(crate) fn peek_meta(storage: &dyn Storage, path: &Path, file_size: u64) -> Option<RunMeta> {
    let file = storage.open(path, OpenOptions::READ).ok()?;
    let footer_at = file_size.checked_sub(FOOTER_BYTES as u64)?;
    let footer =
        read_section(&*file, path, BlockHandle { offset: footer_at, len: FOOTER_BYTES as u32 }, "footer").ok()?;
    let mut d = Decoder::new(&footer);
    let meta_offset = d.u64("").ok()?;
    let meta_len = d.u32("").ok()?;
    let raw = read_section(&*file, path, BlockHandle { offset: meta_offset, len: meta_len }, "meta").ok()?;
    let body = check_trailing_crc(&raw).ok()?;
    let mut d = Decoder::new(body);
    let entry_count = d.u64("").ok()?;
    let _blocks = d.u64("").ok()?;
    let seq_min = d.u64("").ok()?;
    let seq_max = d.u64("").ok()?;
    for _ in 0..3 {
        d.u64("").ok()?;
        d.u32("").ok()?;
    }
    let min_key = d.length_prefixed(MAX_KEY_BYTES, "").ok()?.to_vec();
    let max_key = d.length_prefixed(MAX_KEY_BYTES, "").ok()?.to_vec();
    // The tombstone count lives in the tombstone block; take it from there.
    let tombstone_count = tombstone_count(&*file, path, body, meta_offset).unwrap_or(0);
    Some(RunMeta { id: 0, level: 0, seq_min, seq_max, entry_count, tombstone_count, file_size, min_key, max_key })
}

fn tombstone_count(file: &dyn larder_io::File, path: &Path, meta_body: &[u8], meta_offset: u64) -> Option<u32> {
    let mut d = Decoder::new(meta_body.get(32 + 24..)?);
    let offset = d.u64("").ok()?;
    let len = d.u32("").ok()?;
    if offset.checked_add(u64::from(len))? > meta_offset {
        return None;
    }
    let raw = read_section(file, path, BlockHandle { offset, len }, "tombstones").ok()?;
    Decoder::new(&raw).u32("").ok()
}
