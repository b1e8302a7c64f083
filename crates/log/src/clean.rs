//! The clean-close marker (docs/format.md, section 11, "Clean-close
//! marker"): a small file `CLEAN` in the log directory, written by a clean
//! close once every record is durable, that lets the next open skip reading
//! the segments. It describes where the log ends (LSN, crc of that record,
//! the segment holding it) and which segment files exist; open trusts it
//! only if the caller's covered LSN is that end, the files are the ones it
//! names and the tail segment's header (block 0, read as always) is the
//! one it names and the newest. It is removed, durably, before the first
//! write to the log after the open that found it (a segment start, a
//! segment creation or removal, recovery's rewrites), so a marker on disk
//! always describes the segments as they are; one this build cannot read
//! is ignored (full recovery is always correct) and removed the same way.

use std::path::Path;

use larder_io::{read_exact_at, write_all_at, OpenOptions, Storage};

use crate::error::Result;
use crate::format::{HeaderRead, SegmentHeader, BLOCK};
use crate::recover::{LiveSegment, Recovered, RecoveryReport, MAX_SEGMENT_BYTES};
use crate::segment::SegmentFile;
use crate::Lsn;

/// The marker's file name in the log directory.
pub(crate) const CLEAN_FILE: &str = "CLEAN";
/// The first 8 bytes of the marker.
const CLEAN_MAGIC: [u8; 8] = *b"LRDRLCLN";
/// The marker's format version this build writes and reads.
const CLEAN_VERSION: u32 = 1;
/// Bytes of the marker up to its crc.
const CLEAN_BODY_BYTES: usize = 96;
/// Bytes of the whole marker.
pub(crate) const CLEAN_BYTES: usize = CLEAN_BODY_BYTES + 4;

/// A segment as the marker names it: its id and the epoch and nonce of its
/// current use (its header's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentUse {
    pub id: u64,
    pub epoch: u64,
    pub nonce: u64,
}

impl SegmentUse {
    pub(crate) fn of(header: &SegmentHeader) -> SegmentUse {
        SegmentUse { id: header.segment_id, epoch: header.epoch, nonce: header.nonce }
    }
}

/// What a clean close knew about the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CleanMarker {
    /// The last LSN; every record up to it was durable.
    pub end_lsn: Lsn,
    /// crc of record `end_lsn` (the chain's next `prev_crc`).
    pub last_crc: u32,
    /// The segment whose use holds `end_lsn` (or starts right after it);
    /// `None` for a log that never started a segment.
    pub tail: Option<SegmentUse>,
    /// The epoch the next segment start takes.
    pub next_epoch: u64,
    /// The highest segment file id (0: no segment file).
    pub highest_id: u64,
    /// How many segment files there are.
    pub segment_files: u64,
}

impl CleanMarker {
    /// The marker's bytes (docs/format.md, section 11).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(CLEAN_BYTES);
        out.extend_from_slice(&CLEAN_MAGIC);
        out.extend_from_slice(&CLEAN_VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // reserved
        out.extend_from_slice(&0u64.to_le_bytes()); // compat features
        out.extend_from_slice(&0u64.to_le_bytes()); // incompat features
        out.extend_from_slice(&self.end_lsn.to_le_bytes());
        out.extend_from_slice(&self.last_crc.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // reserved
        let tail = self.tail.unwrap_or(SegmentUse { id: 0, epoch: 0, nonce: 0 });
        out.extend_from_slice(&tail.id.to_le_bytes());
        out.extend_from_slice(&tail.epoch.to_le_bytes());
        out.extend_from_slice(&tail.nonce.to_le_bytes());
        out.extend_from_slice(&self.next_epoch.to_le_bytes());
        out.extend_from_slice(&self.highest_id.to_le_bytes());
        out.extend_from_slice(&self.segment_files.to_le_bytes());
        debug_assert_eq!(out.len(), CLEAN_BODY_BYTES);
        let c = larder_io::codec::crc(&out);
        out.extend_from_slice(&c.to_le_bytes());
        out
    }

    /// Decodes a marker; `Err(why)` for anything this build does not take
    /// as a marker it understands (the caller then recovers in full).
    pub(crate) fn decode(b: &[u8]) -> std::result::Result<CleanMarker, String> {
        if b.len() != CLEAN_BYTES {
            return Err(format!("{} bytes, not {CLEAN_BYTES}", b.len()));
        }
        let (body, stored) = b.split_at(CLEAN_BODY_BYTES);
        let u32_at = |at: usize| u32::from_le_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
        let u64_at = |at: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&body[at..at + 8]);
            u64::from_le_bytes(a)
        };
        let crc = u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]);
        if crc != larder_io::codec::crc(body) {
            return Err("crc mismatch".into());
        }
        if body[..8] != CLEAN_MAGIC {
            return Err("bad magic".into());
        }
        let version = u32_at(8);
        if version != CLEAN_VERSION {
            return Err(format!("version {version} (this build reads {CLEAN_VERSION})"));
        }
        let incompat = u64_at(24);
        if incompat != 0 {
            return Err(format!("unknown incompatible features {incompat:#x}"));
        }
        let tail_id = u64_at(48);
        let tail = (tail_id != 0).then(|| SegmentUse { id: tail_id, epoch: u64_at(56), nonce: u64_at(64) });
        let marker = CleanMarker {
            end_lsn: u64_at(32),
            last_crc: u32_at(40),
            tail,
            next_epoch: u64_at(72),
            highest_id: u64_at(80),
            segment_files: u64_at(88),
        };
        if tail.is_some_and(|t| t.id > marker.highest_id) || (marker.segment_files == 0) != (marker.highest_id == 0) {
            return Err("names a tail segment above the highest file, or files without an id".into());
        }
        Ok(marker)
    }
}

/// Whether a marker file is in `dir` at all (readable or not).
pub(crate) fn present(storage: &dyn Storage, dir: &Path) -> Result<bool> {
    Ok(storage.exists(&dir.join(CLEAN_FILE))?)
}

/// The marker in `dir`, if there is one this build understands.
pub(crate) fn read(storage: &dyn Storage, dir: &Path) -> Result<Option<CleanMarker>> {
    let path = dir.join(CLEAN_FILE);
    if !storage.exists(&path)? {
        return Ok(None);
    }
    let file = storage.open(&path, OpenOptions::READ)?;
    let len = file.len()?;
    if len != CLEAN_BYTES as u64 {
        tracing::info!(path = %path.display(), len, "clean-close marker has the wrong size; recovering in full");
        return Ok(None);
    }
    let mut buf = vec![0u8; CLEAN_BYTES];
    read_exact_at(&*file, &mut buf, 0)?;
    match CleanMarker::decode(&buf) {
        Ok(m) => Ok(Some(m)),
        Err(why) => {
            tracing::info!(path = %path.display(), %why, "clean-close marker not usable; recovering in full");
            Ok(None)
        }
    }
}

/// Writes `marker` into `dir` and makes it durable (the file, then its
/// name). A crash before it is durable leaves no marker or one whose crc
/// fails: either way the next open recovers in full.
pub(crate) fn write(storage: &dyn Storage, dir: &Path, marker: &CleanMarker) -> Result<()> {
    let path = dir.join(CLEAN_FILE);
    if storage.exists(&path)? {
        storage.remove_file(&path)?;
    }
    let file = storage.open(&path, OpenOptions::CREATE_NEW)?;
    write_all_at(&*file, &marker.encode(), 0)?;
    file.sync_data()?;
    storage.sync_dir(dir)?;
    Ok(())
}

/// Removes the marker from `dir` durably (before anything else is written
/// to the log).
pub(crate) fn remove(storage: &dyn Storage, dir: &Path) -> Result<()> {
    storage.remove_file(&dir.join(CLEAN_FILE))?;
    storage.sync_dir(dir)?;
    Ok(())
}

/// What an open from a marker hands on: the recovered state and the ids
/// and epochs to continue with.
pub(crate) struct CleanOpen {
    pub recovered: Recovered,
    pub next_id: u64,
    pub next_epoch: u64,
}

/// Opens the log from `marker` without reading past block 0 of any
/// segment, if the directory is what the marker says; `None` if anything
/// differs (the caller then recovers in full).
pub(crate) fn open_from(
    storage: &dyn Storage,
    dir: &Path,
    covered: Lsn,
    marker: &CleanMarker,
) -> Result<Option<CleanOpen>> {
    if marker.end_lsn != covered {
        tracing::info!(end = marker.end_lsn, covered, "clean-close marker's end is not the covered LSN");
        return Ok(None);
    }
    let names = crate::recover::segment_file_names(storage, dir)?;
    let highest = names.last().map_or(0, |(id, _)| *id);
    if names.len() as u64 != marker.segment_files || highest != marker.highest_id {
        tracing::info!(files = names.len(), highest, "segment files are not the ones the clean-close marker names");
        return Ok(None);
    }
    let mut tail: Option<(SegmentFile, SegmentHeader)> = None;
    let mut others: Vec<(SegmentFile, Option<SegmentHeader>)> = Vec::new();
    for (id, name) in names {
        let opened = crate::recover::SegmentHead::open(storage, dir, id, &name)?;
        let header = opened.header();
        let seg = opened.seg;
        match header {
            HeaderRead::Unused => others.push((seg, None)),
            HeaderRead::Valid(h)
                if h.segment_id == id
                    && h.first_lsn != 0
                    && h.segment_bytes.is_multiple_of(BLOCK)
                    && h.segment_bytes >= 4 * BLOCK
                    && h.segment_bytes <= MAX_SEGMENT_BYTES =>
            {
                if marker.tail == Some(SegmentUse::of(&h)) {
                    tail = Some((seg, h));
                } else {
                    others.push((seg, Some(h)));
                }
            }
            // Damage, a newer version or feature, or an impossible header:
            // the full recovery decides (and reports) what it is.
            _ => return Ok(None),
        }
    }
    let newest_other = others.iter().filter_map(|(_, h)| h.map(|h| h.epoch)).max();
    let recovered_tail = match (marker.tail, tail) {
        (None, None) if newest_other.is_none() => None,
        (Some(_), Some((seg, h)))
            if newest_other.is_none_or(|e| e < h.epoch)
                && h.first_lsn <= marker.end_lsn.saturating_add(1)
                && (h.first_lsn <= marker.end_lsn || h.prev_crc == marker.last_crc) =>
        {
            Some((seg, h))
        }
        _ => {
            tracing::info!("the clean-close marker's tail segment is not the newest one; recovering in full");
            return Ok(None);
        }
    };
    let max_epoch = recovered_tail.as_ref().map_or(0, |(_, h)| h.epoch).max(newest_other.unwrap_or(0));
    let segments = others.len() + usize::from(recovered_tail.is_some());
    let tail_use = recovered_tail.as_ref().map(|(_, h)| SegmentUse::of(h));
    let live: Vec<LiveSegment> =
        recovered_tail.into_iter().map(|(seg, _)| LiveSegment { seg, last_lsn: marker.end_lsn }).collect();
    let report = RecoveryReport {
        end_lsn: marker.end_lsn,
        acked_lsn: marker.end_lsn,
        segments,
        live_segments: live.len(),
        clean: true,
        ..RecoveryReport::default()
    };
    let recovered = Recovered {
        live,
        free: others.into_iter().map(|(seg, _)| seg).collect(),
        last_crc: marker.last_crc,
        tail: tail_use,
        report,
    };
    Ok(Some(CleanOpen { recovered, next_id: highest + 1, next_epoch: marker.next_epoch.max(max_epoch + 1) }))
}
