//! Container files: `<id:016x>.ctr`, zero-filled as they are created and
//! as they grow (never shrunk), so later overwrites change no file-system
//! metadata (format.md, section 12). A container's address space is
//! `container_bytes`; its file holds the part filled so far.

use std::path::{Path, PathBuf};

use larder_io::{write_all_at, FileRef, OpenOptions, Storage};

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Result, SpaceError};
use larder_io::RangeSet;

/// Suffix of container file names.
pub(crate) const SUFFIX: &str = ".ctr";

/// Bytes of zeros written per call when filling a container through the
/// page cache. The page cache keeps each write as a folio of its size, and
/// ext4 walks every block of a folio on each later write into it: filled
/// in 1 MiB writes (2 MiB folios), that walk was a tenth of a file-server
/// mix's CPU. With 64 KiB: the mix 41-50K ops/s against 37-44K (five
/// alternating runs at scale 4), and a 1 GiB fill took 0.89 s against
/// 1.12 s.
const ZERO_CHUNK: u64 = 64 << 10;

/// Bytes of zeros written per call when the fill goes direct (O_DIRECT):
/// nothing reaches the page cache, so no folio is left for later writes
/// to walk, and each call waits for the device: larger calls keep it busy.
const DIRECT_ZERO_CHUNK: u64 = larder_io::ZEROS_BYTES as u64;

/// Bytes filled between syncs. One sync at the end of a 1 GiB fill leaves
/// the kernel a gigabyte of dirty pages to write back at once, and was
/// measured here at 2.8 s; a sync every 8 MiB keeps the disk streaming and
/// took 0.54 s (1 MiB writes, ext4 on the 2-core test machine).
const SYNC_EVERY: u64 = 8 << 20;

/// The file name of container `id`.
pub fn file_name(id: u64) -> String {
    format!("{id:016x}{SUFFIX}")
}

/// The path of container `id` in `dir`.
pub(crate) fn path(dir: &Path, id: u64) -> PathBuf {
    dir.join(file_name(id))
}

/// The id of a container file name: exactly 16 lower-case hex digits then
/// `.ctr`. Other names are not containers and are left alone.
pub fn parse_file_name(name: &str) -> Option<u64> {
    let hex = name.strip_suffix(SUFFIX)?;
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// Creates container `id` of `bytes` bytes in `dir` and makes it durable:
/// writes zeros over the whole file, syncs its data, then syncs the
/// directory. Only after all three may any extent point into it.
///
/// Zeros are written rather than reserved with `fallocate`: a fallocated
/// range is "unwritten" to the file system, so the first write into each
/// part of it commits metadata (measured 1.5-2x slower); written zeros make
/// every later overwrite a pure data write. With `direct`, they are
/// written through a second, direct descriptor ([`filler`]).
pub(crate) fn create(
    storage: &dyn Storage,
    dir: &Path,
    id: u64,
    bytes: u64,
    direct: bool,
    pace: Pace<'_>,
) -> Result<FileRef> {
    let path = path(dir, id);
    let file = storage.open(&path, OpenOptions::CREATE_NEW)?;
    let filled = match direct {
        true => filler(storage, &path).and_then(|filler| fill_and_sync(&*filler, 0, bytes, pace)),
        false => fill_and_sync(&*file, 0, bytes, pace),
    };
    let filled = filled.map_err(SpaceError::from);
    let filled = match filled {
        Ok(true) => storage.sync_dir(dir).map_err(SpaceError::from),
        Ok(false) => Err(SpaceError::Stopped),
        Err(e) => Err(e),
    };
    if let Err(e) = filled {
        // Best effort: a partial file left behind is removed at the next
        // open anyway (it is short and no extent refers to it).
        let _ = storage.remove_file(&path);
        return Err(e);
    }
    Ok(file)
}

/// Grows container `file` from `from` to `to` bytes: writes zeros over
/// the new part and syncs the file's data (and with it its length). Only
/// then may any extent point into the new part. A crash or failure leaves
/// a file somewhere between the two lengths; the part past the old
/// length holds no extent, and open takes the file's length as it finds
/// it.
/// With `direct`, the zeros go through a second, direct descriptor of
/// the file, container `id` of `dir` ([`filler`]).
pub(crate) fn grow(
    storage: &dyn Storage,
    dir: &Path,
    id: u64,
    file: &dyn larder_io::File,
    range: (u64, u64),
    direct: bool,
    pace: Pace<'_>,
) -> Result<()> {
    let (from, to) = range;
    let filled = match direct {
        true => fill_and_sync(&*filler(storage, &path(dir, id))?, from, to, pace),
        false => fill_and_sync(file, from, to, pace),
    };
    match filled? {
        true => Ok(()),
        false => Err(SpaceError::Stopped),
    }
}

/// How fast a container is zero-filled.
#[derive(Clone, Copy)]
pub(crate) enum Pace<'a> {
    /// At full speed: something waits for it.
    Full,
    /// A spare made ahead of need: after each synced stretch, pause as long
    /// as it took, so the fill takes at most half the disk and one core
    /// and durable commits do not queue behind a gigabyte of zeros; stop
    /// (removing the partial file) once `stop` is set.
    Background { stop: &'a AtomicBool },
}

/// A descriptor of the container at `path` for its zero fill, direct
/// where the file system takes it (`Options::direct_fill`). Measured
/// under Garage's 1 MiB puts into a fresh store, the fill through the
/// page cache was 20% of the node's CPU, three times the blocks' own
/// writes: a direct write of an aligned buffer of zeros copies nothing.
fn filler(storage: &dyn Storage, path: &Path) -> larder_io::IoResult<FileRef> {
    storage.open(path, OpenOptions::WRITE.direct())
}

/// Fills and syncs; false if stopped first.
fn fill_and_sync(file: &dyn larder_io::File, from: u64, bytes: u64, pace: Pace<'_>) -> larder_io::IoResult<bool> {
    let chunk = if file.writes_direct() { DIRECT_ZERO_CHUNK } else { ZERO_CHUNK };
    let zeros = larder_io::zeros();
    let mut offset = from;
    let mut stretch = std::time::Instant::now();
    while offset < bytes {
        let n = chunk.min(bytes - offset) as usize;
        write_all_at(file, &zeros[..n], offset)?;
        offset += n as u64;
        if offset.is_multiple_of(SYNC_EVERY) && offset < bytes {
            file.sync_data()?;
            if let Pace::Background { stop } = pace {
                if stop.load(Ordering::Relaxed) {
                    return Ok(false);
                }
                std::thread::sleep(stretch.elapsed());
                stretch = std::time::Instant::now();
            }
        }
    }
    file.sync_data()?;
    Ok(true)
}

/// The blocks of a container that may not be allocated and written on
/// disk, from the file's holes (its end rounded up to whole blocks; all of
/// it when the storage cannot tell).
pub(crate) fn holes(file: &dyn larder_io::File, blocks: u64) -> Result<RangeSet> {
    let mut set = RangeSet::default();
    match file.holes()? {
        Some(holes) => {
            for (start, end) in holes {
                set.insert(start / crate::BLOCK_BYTES, end.div_ceil(crate::BLOCK_BYTES).min(blocks));
            }
        }
        None => set.insert(0, blocks),
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_strangers_are_ignored() {
        assert_eq!(file_name(0x2a), "000000000000002a.ctr");
        assert_eq!(parse_file_name("000000000000002a.ctr"), Some(0x2a));
        assert_eq!(parse_file_name("ffffffffffffffff.ctr"), Some(u64::MAX));
        for bad in
            ["000000000000002A.ctr", "00000000000002a.ctr", "000000000000002a.ctr.tmp", "x", "+00000000000002a.ctr"]
        {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
    }
}
