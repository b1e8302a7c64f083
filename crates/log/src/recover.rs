//! Recovery: find the live segments, verify every record in LSN order,
//! decide where the log ends, and replay what the caller's index lacks.
//!
//! The rules (docs/format.md, section 11, "Recovery"):
//! 1. Segments with a valid header are ordered by epoch. The walk starts at
//!    the newest one whose `first_lsn <= covered + 1`; older ones are free.
//! 2. Within a segment, groups are read from block 1 on; a group belongs
//!    only if its epoch and segment id match the header and it starts at
//!    the next LSN. Records must carry consecutive LSNs, chain by crc and
//!    pass their own crc. The first failure ends the segment.
//! 3. The walk moves to the next segment only if its header continues the
//!    chain exactly (`first_lsn = last + 1`, `prev_crc = last crc`): a new
//!    segment started after an earlier recovery cut the previous one.
//! 4. The highest `acked_lsn` found in any valid header (the walk's, those
//!    after the point where the walk ended, later segments', and any group
//!    header in a segment whose own header is damaged) must not exceed the
//!    end; otherwise an acknowledged record was lost: corruption.
//! 5. Only then, in a second pass, records above `covered` are replayed,
//!    so a failed open has replayed nothing.

use std::path::Path;

use larder_io::{read_exact_at, OpenOptions, Storage};

use crate::error::{LogError, Result};
use crate::format::{
    align_up, decode_group_body, GroupHeader, HeaderRead, SegmentHeader, BLOCK, GROUP_HEADER_BYTES, LOG_FORMAT_VERSION,
};
use crate::segment::{parse_segment_file_name, SegmentFile};
use crate::Lsn;

/// A segment holding records of the live log.
#[derive(Debug)]
pub(crate) struct LiveSegment {
    pub seg: SegmentFile,
    /// The highest LSN in it (`first_lsn - 1` while empty).
    pub last_lsn: Lsn,
}

/// What open learned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Records passed to the replay callback.
    pub replayed: u64,
    /// Records verified but not replayed (at or below the covered LSN).
    pub verified: u64,
    /// The last valid LSN; new records start after it.
    pub end_lsn: Lsn,
    /// Segment files found.
    pub segments: usize,
    /// Segments holding the live log.
    pub live_segments: usize,
    /// Where the log ended if not at a clean end (a torn last group, or the
    /// stale bytes of an earlier use): "file at offset: why".
    pub tail: Option<String>,
    /// Segment files whose header was damaged (a torn restart), treated as free.
    pub damaged_headers: usize,
}

/// The state recovery hands to the writer.
pub(crate) struct Recovered {
    pub live: Vec<LiveSegment>,
    pub free: Vec<SegmentFile>,
    pub next_id: u64,
    pub next_epoch: u64,
    pub last_crc: u32,
    pub report: RecoveryReport,
}

/// Where and why a segment's valid records end.
#[derive(Debug)]
struct Stop {
    /// Offset of the group where reading stopped.
    group_offset: u64,
    /// Offset of the first bad byte (the group, or a record in it).
    offset: u64,
    what: String,
    /// The block held zeros: the segment's clean end.
    clean: bool,
}

struct Scan {
    last_lsn: Lsn,
    last_crc: u32,
    max_acked: Lsn,
    stop: Stop,
}

struct Found {
    seg: SegmentFile,
    header: SegmentHeader,
    capacity: u64,
}

type RecordSink<'a> = &'a mut dyn FnMut(Lsn, &[u8]) -> Result<()>;

/// Reads the first `capacity` bytes of a segment.
fn read_segment(seg: &SegmentFile, capacity: u64) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; capacity as usize];
    read_exact_at(&*seg.file, &mut buf, 0)?;
    Ok(buf)
}

/// Reads the groups of one segment from block 1, continuing the chain at
/// (`lsn`, `crc`), passing each record to `sink`.
fn scan_segment(buf: &[u8], h: &SegmentHeader, mut lsn: Lsn, mut crc: u32, sink: RecordSink<'_>) -> Result<Scan> {
    let mut off = BLOCK as usize;
    let mut max_acked = h.acked_lsn;
    let stop = |group: usize, at: usize, what: String, clean: bool| Stop {
        group_offset: group as u64,
        offset: at as u64,
        what,
        clean,
    };
    let stop = loop {
        if off + GROUP_HEADER_BYTES > buf.len() {
            break stop(off, off, "end of segment".into(), true);
        }
        let gh = match GroupHeader::decode(&buf[off..]) {
            Ok(gh) => gh,
            Err(what) => {
                let clean = buf[off..off + GROUP_HEADER_BYTES].iter().all(|&b| b == 0);
                break stop(off, off, what, clean);
            }
        };
        if gh.epoch != h.epoch || gh.segment_id != h.segment_id {
            let what = format!("stale group of epoch {} (segment epoch {})", gh.epoch, h.epoch);
            break stop(off, off, what, false);
        }
        if gh.first_lsn != lsn.wrapping_add(1) {
            let what = format!("group starts at LSN {}, expected {}", gh.first_lsn, lsn.wrapping_add(1));
            break stop(off, off, what, false);
        }
        let body_start = off + GROUP_HEADER_BYTES;
        let Some(body) = buf.get(body_start..body_start + gh.body_len as usize) else {
            break stop(off, off, "group runs past the end of the segment".into(), false);
        };
        let (records, bad) = decode_group_body(body, &gh, crc);
        for (l, r) in records {
            sink(l, &body[r.payload])?;
            lsn = l;
            crc = r.crc;
        }
        if let Some((pos, what)) = bad {
            break stop(off, body_start + pos, what, false);
        }
        max_acked = max_acked.max(gh.acked_lsn);
        off += gh.padded_len() as usize;
    };
    Ok(Scan { last_lsn: lsn, last_crc: crc, max_acked, stop })
}

/// Highest `acked_lsn` (and epoch) of any valid group header in
/// `buf[from..]`, checked block by block; `epoch` filters when given.
fn scan_ahead(buf: &[u8], from: u64, epoch: Option<u64>, segment_id: u64) -> (Lsn, u64) {
    let (mut acked, mut max_epoch) = (0, 0);
    let mut off = align_up(from.max(BLOCK)) as usize;
    while off + GROUP_HEADER_BYTES <= buf.len() {
        if let Ok(gh) = GroupHeader::decode(&buf[off..]) {
            if epoch.is_none_or(|e| e == gh.epoch) && gh.segment_id == segment_id {
                acked = acked.max(gh.acked_lsn);
                max_epoch = max_epoch.max(gh.epoch);
            }
        }
        off += BLOCK as usize;
    }
    (acked, max_epoch)
}

/// Opens every segment in `dir`, verifies the log and replays records
/// above `covered` through `replay`.
pub(crate) fn recover(storage: &dyn Storage, dir: &Path, covered: Lsn, replay: RecordSink<'_>) -> Result<Recovered> {
    let mut names: Vec<(u64, String)> =
        storage.list_dir(dir)?.into_iter().filter_map(|n| parse_segment_file_name(&n).map(|id| (id, n))).collect();
    names.sort();
    let mut report = RecoveryReport { segments: names.len(), ..Default::default() };
    let next_id = names.last().map_or(1, |(id, _)| id + 1);
    let mut valid: Vec<Found> = Vec::new();
    let mut damaged: Vec<SegmentFile> = Vec::new();
    let mut free: Vec<SegmentFile> = Vec::new();
    for (id, name) in names {
        let path = dir.join(&name);
        let file = storage.open(&path, OpenOptions::WRITE)?;
        let len = file.len()?;
        let mut head = vec![0u8; len.min(BLOCK) as usize];
        read_exact_at(&*file, &mut head, 0)?;
        let seg = SegmentFile { id, path, file };
        match SegmentHeader::decode(&head) {
            HeaderRead::Unused => free.push(seg),
            HeaderRead::Invalid(what) => {
                tracing::warn!(path = %seg.path.display(), %what, "segment header is damaged; treating it as free");
                damaged.push(seg);
            }
            HeaderRead::Newer(found) => {
                return Err(LogError::NewerVersion { path: seg.path, found, supported: LOG_FORMAT_VERSION })
            }
            HeaderRead::UnknownFeature(flags) => return Err(LogError::UnknownFeature { path: seg.path, flags }),
            HeaderRead::Valid(header) => {
                if header.segment_id != id {
                    let what = format!("header names segment {}", header.segment_id);
                    return Err(LogError::corrupt(&seg.path, 0, what));
                }
                if header.first_lsn == 0
                    || !header.segment_bytes.is_multiple_of(BLOCK)
                    || header.segment_bytes < 4 * BLOCK
                {
                    let what = format!("impossible first LSN {} or size {}", header.first_lsn, header.segment_bytes);
                    return Err(LogError::corrupt(&seg.path, 0, what));
                }
                let capacity = (len / BLOCK * BLOCK).min(header.segment_bytes);
                valid.push(Found { seg, header, capacity });
            }
        }
    }
    report.damaged_headers = damaged.len();
    valid.sort_by_key(|f| (f.header.epoch, f.seg.id));

    // Evidence of acknowledged records in segments whose header is damaged.
    let mut max_acked: Lsn = 0;
    let mut max_epoch = valid.last().map_or(0, |f| f.header.epoch);
    let mut damaged_evidence: Option<(std::path::PathBuf, Lsn)> = None;
    for seg in &damaged {
        let buf = read_segment(seg, seg.capacity()?)?;
        let (acked, epoch) = scan_ahead(&buf, BLOCK, None, seg.id);
        max_epoch = max_epoch.max(epoch);
        if acked > max_acked {
            max_acked = acked;
            damaged_evidence = Some((seg.path.clone(), acked));
        }
    }

    let start = valid.iter().rposition(|f| f.header.first_lsn <= covered.saturating_add(1));
    let Some(start) = start else {
        if let Some(first) = valid.iter().map(|f| f.header.first_lsn).min() {
            return Err(LogError::MissingRecords { dir: dir.to_path_buf(), covered, log_start: first });
        }
        // A new log (or one that never started a segment).
        if let Some((path, acked)) = damaged_evidence.filter(|(_, a)| *a > covered) {
            return Err(LogError::CorruptRecord {
                path,
                offset: 0,
                lsn: covered + 1,
                acked,
                what: "segment header damaged".into(),
            });
        }
        free.extend(damaged);
        report.end_lsn = covered;
        return Ok(Recovered { live: Vec::new(), free, next_id, next_epoch: max_epoch + 1, last_crc: 0, report });
    };

    // Pass 1: verify the walk without replaying.
    let first = &valid[start].header;
    let (mut lsn, mut crc) = (first.first_lsn - 1, first.prev_crc);
    let mut walked: Vec<(usize, Scan)> = Vec::new();
    for (i, f) in valid.iter().enumerate().skip(start) {
        if !walked.is_empty() && (f.header.first_lsn != lsn.wrapping_add(1) || f.header.prev_crc != crc) {
            break;
        }
        let buf = read_segment(&f.seg, f.capacity)?;
        let scan = scan_segment(&buf, &f.header, lsn, crc, &mut |_, _| Ok(()))?;
        max_acked = max_acked.max(scan.max_acked);
        (lsn, crc) = (scan.last_lsn, scan.last_crc);
        walked.push((i, scan));
    }
    let end_lsn = lsn;
    let Some((end_index, end_scan)) = walked.last() else {
        return Err(LogError::corrupt(&valid[start].seg.path, 0, "recovery walk is empty"));
    };
    let end_seg = &valid[*end_index];
    // Look past the end for proof that more had been acknowledged.
    {
        let buf = read_segment(&end_seg.seg, end_seg.capacity)?;
        let (acked, _) = scan_ahead(&buf, end_scan.stop.group_offset, Some(end_seg.header.epoch), end_seg.seg.id);
        max_acked = max_acked.max(acked);
    }
    for f in &valid[end_index + 1..] {
        let buf = read_segment(&f.seg, f.capacity)?;
        let (acked, _) = scan_ahead(&buf, BLOCK, Some(f.header.epoch), f.seg.id);
        max_acked = max_acked.max(acked).max(f.header.acked_lsn);
    }
    if max_acked > end_lsn {
        return Err(LogError::CorruptRecord {
            path: end_seg.seg.path.clone(),
            offset: end_scan.stop.offset,
            lsn: end_lsn + 1,
            acked: max_acked,
            what: end_scan.stop.what.clone(),
        });
    }
    if end_lsn < covered {
        return Err(LogError::IndexAhead { dir: dir.to_path_buf(), covered, log_end: end_lsn });
    }
    if !end_scan.stop.clean {
        report.tail =
            Some(format!("{} at offset {}: {}", end_seg.seg.path.display(), end_scan.stop.offset, end_scan.stop.what));
    }

    // Pass 2: replay, reading again what pass 1 verified.
    let (mut lsn, mut crc) = (first.first_lsn - 1, first.prev_crc);
    for (i, scan1) in &walked {
        let f = &valid[*i];
        if scan1.last_lsn > covered {
            let buf = read_segment(&f.seg, f.capacity)?;
            let mut sink = |l: Lsn, payload: &[u8]| -> Result<()> {
                if l > covered {
                    report.replayed += 1;
                    replay(l, payload)
                } else {
                    report.verified += 1;
                    Ok(())
                }
            };
            let scan2 = scan_segment(&buf, &f.header, lsn, crc, &mut sink)?;
            if scan2.last_lsn != scan1.last_lsn {
                let what = "segment read differently on the second recovery pass";
                return Err(LogError::corrupt(&f.seg.path, scan2.stop.offset, what));
            }
        } else {
            report.verified += scan1.last_lsn.saturating_sub(lsn);
        }
        (lsn, crc) = (scan1.last_lsn, scan1.last_crc);
    }

    let mut live = Vec::new();
    for (i, f) in valid.into_iter().enumerate() {
        match walked.iter().find(|(w, _)| *w == i) {
            Some((_, scan)) => live.push(LiveSegment { seg: f.seg, last_lsn: scan.last_lsn }),
            _ => free.push(f.seg),
        }
    }
    free.extend(damaged);
    report.end_lsn = end_lsn;
    report.live_segments = live.len();
    Ok(Recovered { live, free, next_id, next_epoch: max_epoch + 1, last_crc: crc, report })
}
