//! Segment files: naming, creation (zero-filled ahead of need) and header
//! rewrites when a segment is (re)started.
//!
//! A segment is written in full with zeros when created, synced, and its
//! name made durable by a directory sync, so later group writes never
//! extend the file and `fdatasync` never has to persist allocation
//! metadata. Segments are never truncated, hole-punched or deleted while
//! the log runs; a freed one is restarted by rewriting its header with a
//! new epoch.

use std::path::{Path, PathBuf};

use larder_io::{write_all_at, FileRef, OpenOptions, Storage};

use crate::error::Result;
use crate::format::{SegmentHeader, BLOCK};

/// Zeros written per call when filling a segment.
const FILL_CHUNK: usize = larder_io::ZEROS_BYTES;

/// `<id:016x>.seg`.
pub(crate) fn segment_file_name(id: u64) -> String {
    format!("{id:016x}.seg")
}

/// The id of a segment file name; strict lower-case hex, 16 digits.
pub(crate) fn parse_segment_file_name(name: &str) -> Option<u64> {
    let hex = name.strip_suffix(".seg")?;
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// A fresh, non-zero 64-bit value for a segment start's nonce. It only has
/// to be unpredictable to whoever chooses record payloads (they never see
/// the log files), so the standard library's randomly keyed hasher, fed the
/// time and a counter, is enough; no random-number crate is needed.
pub(crate) fn new_nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    h.write_u128(nanos);
    h.write_u32(std::process::id());
    h.finish().max(1)
}

/// An open segment file.
#[derive(Clone, Debug)]
pub(crate) struct SegmentFile {
    pub id: u64,
    pub path: PathBuf,
    pub file: FileRef,
}

impl SegmentFile {
    /// Creates a segment of `bytes` zeros and makes it and its name durable.
    pub(crate) fn new_zeroed(storage: &dyn Storage, dir: &Path, id: u64, bytes: u64) -> Result<SegmentFile> {
        let path = dir.join(segment_file_name(id));
        let file = storage.open(&path, OpenOptions::CREATE_NEW.direct())?;
        fill_zeros(&*file, 0, bytes)?;
        file.sync_data()?;
        // The zeros' pages are clean now; dropped, so the log's small
        // writes bring in small pages (see `File::drop_cache`).
        file.drop_cache(0, bytes)?;
        storage.sync_dir(dir)?;
        Ok(SegmentFile { id, path, file })
    }

    /// Starts (or restarts) the segment: writes `header` over block 0 and
    /// syncs it, so no group of the new epoch can be durable before the
    /// header that makes it belong. A segment shorter than its size (a
    /// creation cut by a crash) is zero-extended first, in the same sync.
    pub(crate) fn start(&self, header: &SegmentHeader) -> Result<()> {
        let len = self.file.len()?;
        if len < header.segment_bytes {
            fill_zeros(&*self.file, len, header.segment_bytes - len)?;
        }
        write_all_at(&*self.file, &header.encode_block(), 0)?;
        self.file.sync_data()?;
        if len < header.segment_bytes {
            self.file.drop_cache(len, header.segment_bytes - len)?;
        }
        Ok(())
    }

    /// Usable length: the file's length in whole blocks.
    pub(crate) fn capacity(&self) -> Result<u64> {
        Ok(self.file.len()? / BLOCK * BLOCK)
    }
}

fn fill_zeros(file: &dyn larder_io::File, from: u64, len: u64) -> Result<()> {
    // Aligned: the segment's descriptor writes direct, without a bounce copy.
    let zeros = &larder_io::zeros()[..FILL_CHUNK.min(len as usize)];
    let mut off = from;
    let end = from + len;
    while off < end {
        let n = (end - off).min(zeros.len() as u64) as usize;
        write_all_at(file, &zeros[..n], off)?;
        off += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_strict_lower_hex() {
        assert_eq!(segment_file_name(42), "000000000000002a.seg");
        assert_eq!(parse_segment_file_name("000000000000002a.seg"), Some(42));
        assert_eq!(parse_segment_file_name("000000000000002A.seg"), None);
        assert_eq!(parse_segment_file_name("2a.seg"), None);
        assert_eq!(parse_segment_file_name("+00000000000002a.seg"), None);
        assert_eq!(parse_segment_file_name("000000000000002a.run"), None);
    }
}
