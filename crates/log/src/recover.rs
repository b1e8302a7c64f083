//! Recovery: find the live segments, verify every record in LSN order,
//! decide where the log ends, make what it trusts durable, and replay what
//! the caller's index lacks.
//!
//! The rules (docs/format.md, section 11, "Recovery"):
//! 1. Segments with a valid header are ordered by epoch. The walk starts at
//!    the newest one whose `first_lsn <= covered + 1`; older ones are free.
//! 2. Within a segment, groups are read from block 1 on; a group belongs
//!    only if its epoch, segment id and nonce match the header and it
//!    starts at the next LSN. Records must carry consecutive LSNs, chain by
//!    crc and pass their own crc. The first failure ends the segment.
//! 3. The walk moves to the next segment only if its header continues the
//!    chain exactly (`first_lsn = last + 1`, `prev_crc = last crc`): a new
//!    segment started after an earlier recovery cut the previous one.
//! 4. The highest `acked_lsn` found in any valid header (the walk's, those
//!    after the point where the walk ended, later segments', and any group
//!    header in a segment whose own header is damaged) must not exceed the
//!    end; otherwise an acknowledged record was lost: corruption. A damaged
//!    header over groups newer than every valid header is corruption too.
//! 5. Every byte the walk trusts is made durable ([`Verified::make_durable`]):
//!    what recovery read may be only in the page cache (a process that died
//!    before its sync, or a sync that failed), and new records would
//!    otherwise be acknowledged on top of it.
//! 6. Only then, in a second pass, records above `covered` are replayed, so
//!    an open that fails before the replay callback runs has replayed
//!    nothing. The callback may end the log early ([`Replay::StopBefore`]).
//!
//! Each segment file is read once: block 0 to classify it, the rest when
//! the walk (or the look for later proof) reaches it. The walk keeps the
//! bytes of the segments a later step needs (records to replay, groups to
//! rewrite), so memory during open is bounded by the part of the log not
//! yet checkpointed, which replay puts in the index's memory anyway.

use std::path::{Path, PathBuf};

use larder_io::{read_exact_at, write_all_at, OpenOptions, Storage};

use crate::clean::SegmentUse;
use crate::error::{LogError, Result};
use crate::format::{
    align_up, decode_group_body, GroupHeader, HeaderRead, SegmentHeader, BLOCK, GROUP_HEADER_BYTES, LOG_FORMAT_VERSION,
};
use crate::segment::{parse_segment_file_name, SegmentFile};
use crate::Lsn;

/// The largest segment a valid header may describe (the largest
/// `Options::segment_bytes`); it also bounds what recovery reads at once.
pub(crate) const MAX_SEGMENT_BYTES: u64 = 1 << 30;
/// Bytes read per call when scanning a segment whose header is damaged
/// (its size is unknown, so it is never read whole).
const SCAN_CHUNK: u64 = 1 << 20;

/// A segment holding records of the live log.
#[derive(Debug)]
pub(crate) struct LiveSegment {
    pub seg: SegmentFile,
    /// The highest LSN in it (`first_lsn - 1` while empty).
    pub last_lsn: Lsn,
}

/// What the replay callback tells the log about a record.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Replay {
    /// The record was applied; go on.
    Continue,
    /// The record must not be applied (for example the data it refers to
    /// fails its checksum): the log ends before it. The record and every
    /// later one are discarded for good and new records continue at its
    /// LSN. Allowed only above [`RecoveryReport::acked_lsn`]; at or below
    /// it open fails with `CorruptRecord` naming the LSN.
    StopBefore,
    /// As [`Replay::StopBefore`], saying why (for example which file and
    /// block of the record's data fails its checksum): an open that fails
    /// with `CorruptRecord` puts the reason in its message, so the error
    /// names the damaged file and not only the log segment.
    Damaged(String),
}

impl From<()> for Replay {
    /// A callback returning `()` accepts every record.
    fn from((): ()) -> Replay {
        Replay::Continue
    }
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
    /// The highest LSN some header proves was acknowledged (durable before
    /// a later write). Records above it may never have been acknowledged;
    /// the replay callback may end the log at one of them.
    pub acked_lsn: Lsn,
    /// The LSN the replay callback stopped before, if it did: it and every
    /// later record were discarded.
    pub stopped_before: Option<Lsn>,
    /// Segment files found.
    pub segments: usize,
    /// Segments holding the live log.
    pub live_segments: usize,
    /// Where the log ended if not at a clean end (a torn last group, or the
    /// stale bytes of an earlier use): "file at offset: why".
    pub tail: Option<String>,
    /// Segment files whose header was damaged (a torn restart), treated as free.
    pub damaged_headers: usize,
    /// Groups (and empty segment headers) that no later header proved
    /// durable, rewritten with the bytes read and synced during open.
    pub rewritten_blocks: u64,
    /// Opened from a clean-close marker: no segment was read past its
    /// header and nothing was replayed or rewritten.
    pub clean: bool,
}

/// The state recovery hands to the writer.
pub(crate) struct Recovered {
    pub live: Vec<LiveSegment>,
    pub free: Vec<SegmentFile>,
    pub last_crc: u32,
    /// The use of the segment the walk ended in (where the log ends), if any.
    pub tail: Option<SegmentUse>,
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

/// One valid group of the walk.
#[derive(Clone, Copy, Debug)]
struct Extent {
    offset: u64,
    header: GroupHeader,
    /// The last LSN of the group that was valid.
    last_lsn: Lsn,
}

struct Scan {
    last_lsn: Lsn,
    last_crc: u32,
    max_acked: Lsn,
    stop: Stop,
    groups: Vec<Extent>,
}

struct Found {
    seg: SegmentFile,
    header: SegmentHeader,
    capacity: u64,
    /// Block 0 as read to find the header (shorter if the file is).
    head: Vec<u8>,
}

/// One segment of the walk: its scan, where the proof of acknowledged
/// records past its end stands, and its bytes if a later step needs them.
struct Walked {
    /// Index into `Verified::valid`.
    index: usize,
    scan: Scan,
    /// Highest `acked_lsn` of this use's group headers past where the scan
    /// stopped.
    acked_ahead: Lsn,
    /// The bytes read, kept when the replay, the rewrite of groups not
    /// proven durable, or a cut will need them; so each segment is read
    /// once.
    bytes: Option<Vec<u8>>,
}

/// One record as the scan hands it on.
struct RecordAt<'a> {
    lsn: Lsn,
    payload: &'a [u8],
    /// Offset of the record in the segment.
    offset: u64,
}

/// Returns whether to go on (`Continue`) or end the log before the record.
type RecordSink<'a> = &'a mut dyn FnMut(RecordAt<'_>) -> Result<Replay>;

/// The replay callback as recovery sees it: (LSN, payload, acked LSN).
pub(crate) type ReplaySink<'a> = &'a mut dyn FnMut(Lsn, &[u8], Lsn) -> Result<Replay>;

/// Reads the first `capacity` bytes of a segment, taking what was read of
/// block 0 from its header read.
fn read_segment(f: &Found) -> Result<Vec<u8>> {
    let (seg, capacity) = (&f.seg, f.capacity);
    if capacity > MAX_SEGMENT_BYTES {
        // Never reached for valid headers (their size is checked); a guard
        // against allocating whatever a stray file's length says.
        let what = format!("{capacity} bytes is larger than any segment ({MAX_SEGMENT_BYTES})");
        return Err(LogError::corrupt(&seg.path, 0, what));
    }
    let mut buf = vec![0u8; capacity as usize];
    let known = f.head.len().min(buf.len());
    buf[..known].copy_from_slice(&f.head[..known]);
    read_exact_at(&*seg.file, &mut buf[known..], known as u64)?;
    Ok(buf)
}

/// Reads the groups of one segment from block 1, continuing the chain at
/// (`lsn`, `crc`), passing each record to `sink`. If the sink stops before
/// a record, the scan ends just before it (`stop.clean` false, `stop.what`
/// says so) and returns that record's LSN too.
fn scan_segment(
    buf: &[u8],
    h: &SegmentHeader,
    mut lsn: Lsn,
    mut crc: u32,
    sink: RecordSink<'_>,
) -> Result<(Scan, Option<Lsn>)> {
    let mut off = BLOCK as usize;
    let mut max_acked = h.acked_lsn;
    let mut groups = Vec::new();
    let mut stopped = None;
    let stop = |group: usize, at: usize, what: String, clean: bool| Stop {
        group_offset: group as u64,
        offset: at as u64,
        what,
        clean,
    };
    let stop = 'groups: loop {
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
        if gh.epoch != h.epoch || gh.segment_id != h.segment_id || gh.nonce != h.nonce {
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
            // The record's own header (lsn, prev crc, length) is the 16
            // bytes before its payload.
            let at = RecordAt {
                lsn: l,
                payload: &body[r.payload.clone()],
                offset: (body_start + r.payload.start - 16) as u64,
            };
            if sink(at)? != Replay::Continue {
                stopped = Some(l);
                if lsn >= gh.first_lsn {
                    groups.push(Extent { offset: off as u64, header: gh, last_lsn: lsn });
                }
                break 'groups stop(off, off, format!("the replay callback stopped before record {l}"), false);
            }
            lsn = l;
            crc = r.crc;
        }
        if lsn >= gh.first_lsn {
            groups.push(Extent { offset: off as u64, header: gh, last_lsn: lsn });
        }
        if let Some((pos, what)) = bad {
            break stop(off, body_start + pos, what, false);
        }
        max_acked = max_acked.max(gh.acked_lsn);
        off += gh.padded_len() as usize;
    };
    Ok((Scan { last_lsn: lsn, last_crc: crc, max_acked, stop, groups }, stopped))
}

/// Which group headers count as evidence when scanning for them.
#[derive(Clone, Copy)]
struct Filter {
    segment_id: u64,
    /// The segment header's (epoch, nonce) if it is valid; any epoch (and
    /// nonce) counts in a segment whose header is damaged.
    header: Option<(u64, u64)>,
}

/// What the valid group headers passing a [`Filter`] claim.
#[derive(Clone, Copy, Debug, Default)]
struct Ahead {
    /// Highest `acked_lsn`.
    acked: Lsn,
    /// Highest epoch.
    epoch: u64,
    /// Highest LSN a group says it holds (`first_lsn + count - 1`).
    last_lsn: Lsn,
}

impl Ahead {
    fn merge(self, other: Ahead) -> Ahead {
        Ahead {
            acked: self.acked.max(other.acked),
            epoch: self.epoch.max(other.epoch),
            last_lsn: self.last_lsn.max(other.last_lsn),
        }
    }
}

/// What every valid group header in `buf[from..]` that passes `filter`
/// claims, checked block by block.
fn scan_ahead(buf: &[u8], from: u64, filter: Filter) -> Ahead {
    let mut ahead = Ahead::default();
    let mut off = align_up(from.max(BLOCK)) as usize;
    while off + GROUP_HEADER_BYTES <= buf.len() {
        if let Ok(gh) = GroupHeader::decode(&buf[off..]) {
            let matches = filter.header.is_none_or(|(e, n)| e == gh.epoch && n == gh.nonce);
            if matches && gh.segment_id == filter.segment_id {
                let last_lsn = gh.first_lsn.saturating_add(u64::from(gh.count)).saturating_sub(1);
                ahead = ahead.merge(Ahead { acked: gh.acked_lsn, epoch: gh.epoch, last_lsn });
            }
        }
        off += BLOCK as usize;
    }
    ahead
}

/// [`scan_ahead`] over a whole file of unknown size, a chunk at a time.
fn scan_file_ahead(seg: &SegmentFile, filter: Filter) -> Result<Ahead> {
    let len = seg.capacity()?;
    let mut ahead = Ahead::default();
    let mut at = BLOCK;
    while at < len {
        let n = SCAN_CHUNK.min(len - at);
        let mut buf = vec![0u8; n as usize];
        read_exact_at(&*seg.file, &mut buf, at)?;
        // Chunks are block-aligned, so every block is checked once; offset
        // BLOCK in the scan is offset 0 of the chunk.
        let mut padded = vec![0u8; BLOCK as usize];
        padded.extend_from_slice(&buf);
        ahead = ahead.merge(scan_ahead(&padded, BLOCK, filter));
        at += n;
    }
    Ok(ahead)
}

/// A verified log, before anything is replayed.
pub(crate) struct Verified {
    dir: PathBuf,
    covered: Lsn,
    valid: Vec<Found>,
    /// The walked segments, in order.
    walked: Vec<Walked>,
    free: Vec<SegmentFile>,
    /// Where the walk starts: (LSN before it, crc of that record).
    start: (Lsn, u32),
    end_lsn: Lsn,
    last_crc: u32,
    next_id: u64,
    next_epoch: u64,
    report: RecoveryReport,
}

/// Opens every segment in `dir` and verifies the log (pass 1): no replay.
/// The segment files in `dir` (id, file name), by id.
pub(crate) fn segment_file_names(storage: &dyn Storage, dir: &Path) -> Result<Vec<(u64, String)>> {
    let mut names: Vec<(u64, String)> =
        storage.list_dir(dir)?.into_iter().filter_map(|n| parse_segment_file_name(&n).map(|id| (id, n))).collect();
    names.sort();
    Ok(names)
}

/// A segment file opened with its first block read.
pub(crate) struct SegmentHead {
    pub(crate) seg: SegmentFile,
    /// The file's length in bytes.
    pub(crate) len: u64,
    /// Block 0 (the whole file if shorter).
    pub(crate) head: Vec<u8>,
}

impl SegmentHead {
    /// Opens segment file `name` (id `id`) of `dir` and reads block 0.
    pub(crate) fn open(storage: &dyn Storage, dir: &Path, id: u64, name: &str) -> Result<SegmentHead> {
        let path = dir.join(name);
        let file = storage.open(&path, OpenOptions::WRITE.direct())?;
        let len = file.len()?;
        let mut head = vec![0u8; len.min(BLOCK) as usize];
        read_exact_at(&*file, &mut head, 0)?;
        Ok(SegmentHead { seg: SegmentFile { id, path, file }, len, head })
    }

    /// The header block 0 holds.
    pub(crate) fn header(&self) -> HeaderRead {
        SegmentHeader::decode(&self.head)
    }
}

pub(crate) fn verify(storage: &dyn Storage, dir: &Path, covered: Lsn) -> Result<Verified> {
    let names = segment_file_names(storage, dir)?;
    let mut report = RecoveryReport { segments: names.len(), ..Default::default() };
    let next_id = names.last().map_or(1, |(id, _)| id + 1);
    let mut valid: Vec<Found> = Vec::new();
    let mut damaged: Vec<SegmentFile> = Vec::new();
    let mut free: Vec<SegmentFile> = Vec::new();
    for (id, name) in names {
        let SegmentHead { seg, len, head } = SegmentHead::open(storage, dir, id, &name)?;
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
                    || header.segment_bytes > MAX_SEGMENT_BYTES
                {
                    let what = format!("impossible first LSN {} or size {}", header.first_lsn, header.segment_bytes);
                    return Err(LogError::corrupt(&seg.path, 0, what));
                }
                let capacity = (len / BLOCK * BLOCK).min(header.segment_bytes);
                valid.push(Found { seg, header, capacity, head });
            }
        }
    }
    report.damaged_headers = damaged.len();
    valid.sort_by_key(|f| (f.header.epoch, f.seg.id));

    // Evidence of acknowledged records in segments whose header is damaged.
    let mut max_acked: Lsn = 0;
    let newest_header = valid.last().map_or(0, |f| f.header.epoch);
    let mut max_epoch = newest_header;
    let mut damaged_evidence: Option<(PathBuf, Lsn)> = None;
    // A damaged segment holding records above `covered` (the index lacks
    // them): if the walk then fails, this header is why.
    let mut damaged_needed: Option<(PathBuf, Lsn)> = None;
    for seg in &damaged {
        let Ahead { acked, epoch, last_lsn } = scan_file_ahead(seg, Filter { segment_id: seg.id, header: None })?;
        if last_lsn > covered && damaged_needed.as_ref().is_none_or(|(_, l)| last_lsn > *l) {
            damaged_needed = Some((seg.path.clone(), last_lsn));
        }
        if epoch > newest_header {
            // Groups are written only after their segment's header sync
            // returned, and every start takes a new, larger epoch: a group
            // newer than every valid header proves this header had been
            // durable, so it rotted; its records may be acknowledged ones.
            let what = format!(
                "segment header is damaged, but the segment holds groups of epoch {epoch}, newer than every \
                 valid segment header (epoch {newest_header}): the header had been made durable"
            );
            return Err(LogError::corrupt(&seg.path, 0, what));
        }
        max_epoch = max_epoch.max(epoch);
        if acked > max_acked {
            max_acked = acked;
            damaged_evidence = Some((seg.path.clone(), acked));
        }
    }

    let walk = move || -> Result<Verified> {
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
            report.acked_lsn = covered.min(max_acked);
            return Ok(Verified {
                dir: dir.to_path_buf(),
                covered,
                valid: Vec::new(),
                walked: Vec::new(),
                free,
                start: (covered, 0),
                end_lsn: covered,
                last_crc: 0,
                next_id,
                next_epoch: max_epoch + 1,
                report,
            });
        };

        let first = &valid[start].header;
        let (mut lsn, mut crc) = (first.first_lsn - 1, first.prev_crc);
        let walk_start = (lsn, crc);
        let mut walked: Vec<Walked> = Vec::new();
        for (i, f) in valid.iter().enumerate().skip(start) {
            if !walked.is_empty() && (f.header.first_lsn != lsn.wrapping_add(1) || f.header.prev_crc != crc) {
                break;
            }
            let buf = read_segment(f)?;
            let (scan, _) = scan_segment(&buf, &f.header, lsn, crc, &mut |_| Ok(Replay::Continue))?;
            max_acked = max_acked.max(scan.max_acked);
            (lsn, crc) = (scan.last_lsn, scan.last_crc);
            // Proof past the end is used only for the last segment walked,
            // which is not known yet; looking costs no read.
            let filter = Filter { segment_id: f.seg.id, header: Some((f.header.epoch, f.header.nonce)) };
            let acked_ahead = scan_ahead(&buf, scan.stop.group_offset, filter).acked;
            // `max_acked` only grows from here, so a segment holding nothing
            // to replay and no group above it now never needs its bytes again.
            let needed = scan.last_lsn > covered || scan.groups.iter().any(|g| g.last_lsn > max_acked);
            walked.push(Walked { index: i, scan, acked_ahead, bytes: needed.then_some(buf) });
        }
        let end_lsn = lsn;
        let Some(end) = walked.last() else {
            return Err(LogError::corrupt(&valid[start].seg.path, 0, "recovery walk is empty"));
        };
        let (end_index, end_scan) = (end.index, &end.scan);
        let end_seg = &valid[end_index];
        // Proof past the end that more had been acknowledged.
        max_acked = max_acked.max(end.acked_ahead);
        for f in &valid[end_index + 1..] {
            let buf = read_segment(f)?;
            let filter = Filter { segment_id: f.seg.id, header: Some((f.header.epoch, f.header.nonce)) };
            let acked = scan_ahead(&buf, BLOCK, filter).acked;
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
            report.tail = Some(format!(
                "{} at offset {}: {}",
                end_seg.seg.path.display(),
                end_scan.stop.offset,
                end_scan.stop.what
            ));
        }
        free.extend(damaged);
        report.end_lsn = end_lsn;
        report.acked_lsn = max_acked;
        Ok(Verified {
            dir: dir.to_path_buf(),
            covered,
            valid,
            walked,
            free,
            start: walk_start,
            end_lsn,
            last_crc: crc,
            next_id,
            next_epoch: max_epoch + 1,
            report,
        })
    };
    walk().map_err(|e| match (e, damaged_needed) {
        (
            e @ (LogError::MissingRecords { .. } | LogError::CorruptRecord { .. } | LogError::IndexAhead { .. }),
            Some((path, last_lsn)),
        ) => {
            let what = format!(
                "segment header is damaged over records the log needs (up to LSN {last_lsn}, above the \
                 {covered} the caller covers), so the walk failed: {e}"
            );
            LogError::corrupt(&path, 0, what)
        }
        (e, _) => e,
    })
}

impl Verified {
    /// Segments that will be free after the replay: unused, damaged, and
    /// valid ones outside the walk.
    pub(crate) fn free_count(&self) -> usize {
        self.free.len() + self.valid.len() - self.walked.len()
    }

    /// Segment files found.
    pub(crate) fn segment_count(&self) -> usize {
        self.report.segments
    }

    /// The id the next created segment takes.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id
    }

    /// The epoch the next segment start takes.
    pub(crate) fn next_epoch(&self) -> u64 {
        self.next_epoch
    }

    /// The highest LSN some header proves was acknowledged.
    pub(crate) fn acked_lsn(&self) -> Lsn {
        self.report.acked_lsn
    }

    /// The last valid LSN.
    pub(crate) fn end_lsn(&self) -> Lsn {
        self.end_lsn
    }

    /// Makes every byte the walk trusts durable before anything is replayed
    /// or appended on top of it.
    ///
    /// What recovery read may be in the page cache only: the previous
    /// process died between a group's write and its `fdatasync`, or the
    /// sync failed, which may leave the pages clean but never written, so
    /// a later sync of the file would not write them. So every group that
    /// no later `acked_lsn` proves durable (its last LSN above the acked
    /// LSN), and the header of a walked segment that holds no group (its
    /// sync may have failed too), is written again with the very bytes
    /// read, then each walked segment is synced. The bytes are identical,
    /// so a torn rewrite leaves, sector by sector, either the old disk
    /// bytes or the ones read: at worst the torn tail the crash would have
    /// left anyway, and nothing was replayed yet.
    pub(crate) fn make_durable(&mut self) -> Result<()> {
        let acked = self.report.acked_lsn;
        for w in &self.walked {
            let (f, scan) = (&self.valid[w.index], &w.scan);
            let stale: Vec<&Extent> = scan.groups.iter().filter(|g| g.last_lsn > acked).collect();
            if scan.groups.is_empty() {
                // The file may be shorter than a block (a creation cut by
                // a crash); rewrite what there is of block 0.
                write_all_at(&*f.seg.file, &f.head, 0)?;
                self.report.rewritten_blocks += 1;
            }
            if !stale.is_empty() {
                let Some(buf) = &w.bytes else {
                    return Err(LogError::corrupt(&f.seg.path, 0, "recovery dropped the bytes of a group to rewrite"));
                };
                for g in stale {
                    let range = g.offset as usize..(g.offset + g.header.padded_len()) as usize;
                    let Some(bytes) = buf.get(range) else {
                        return Err(LogError::corrupt(&f.seg.path, g.offset, "group runs past the bytes read"));
                    };
                    write_all_at(&*f.seg.file, bytes, g.offset)?;
                    self.report.rewritten_blocks += g.header.padded_len() / BLOCK;
                }
            }
            f.seg.file.sync_data()?;
        }
        Ok(())
    }

    /// Pass 2: replays every record above `covered` from the bytes pass 1
    /// read and verified (no segment is read twice). If `replay` stops
    /// before a record, the log is cut there durably.
    pub(crate) fn replay(mut self, replay: ReplaySink<'_>) -> Result<Recovered> {
        let covered = self.covered;
        let acked = self.report.acked_lsn;
        let (mut lsn, mut crc) = self.start;
        let mut cut: Option<(usize, Lsn, u64)> = None;
        for (wi, w) in self.walked.iter().enumerate() {
            let (f, scan1) = (&self.valid[w.index], &w.scan);
            if scan1.last_lsn > covered {
                let Some(buf) = &w.bytes else {
                    return Err(LogError::corrupt(&f.seg.path, 0, "recovery dropped the bytes of records to replay"));
                };
                let report = &mut self.report;
                let mut stop_offset = 0;
                let mut stop_reason = None;
                let mut sink = |r: RecordAt<'_>| -> Result<Replay> {
                    if r.lsn <= covered {
                        report.verified += 1;
                        return Ok(Replay::Continue);
                    }
                    let decision = replay(r.lsn, r.payload, acked)?;
                    match &decision {
                        Replay::Continue => report.replayed += 1,
                        Replay::StopBefore => stop_offset = r.offset,
                        Replay::Damaged(why) => {
                            stop_offset = r.offset;
                            stop_reason = Some(why.clone());
                        }
                    }
                    Ok(decision)
                };
                let (scan2, stopped) = scan_segment(buf, &f.header, lsn, crc, &mut sink)?;
                if let Some(at) = stopped {
                    if at <= acked {
                        return Err(LogError::CorruptRecord {
                            path: f.seg.path.clone(),
                            offset: stop_offset,
                            lsn: at,
                            acked,
                            what: match stop_reason {
                                Some(why) => format!("the record's data is damaged: {why}"),
                                None => "the replay callback found the record's data damaged".into(),
                            },
                        });
                    }
                    cut = Some((wi, at, stop_offset));
                    crc = scan2.last_crc;
                    break;
                }
                if scan2.last_lsn != scan1.last_lsn {
                    let what = "segment scanned differently on the second recovery pass";
                    return Err(LogError::corrupt(&f.seg.path, scan2.stop.offset, what));
                }
            } else {
                self.report.verified += scan1.last_lsn.saturating_sub(lsn);
            }
            (lsn, crc) = (scan1.last_lsn, scan1.last_crc);
        }
        if let Some((wi, at, offset)) = cut {
            self.cut(wi, at, offset)?;
            self.end_lsn = at - 1;
            self.last_crc = crc;
            self.report.end_lsn = at - 1;
            self.report.stopped_before = Some(at);
            let f = &self.valid[self.walked[wi].index];
            self.report.tail = Some(format!(
                "{} at offset {offset}: the replay callback stopped before record {at}",
                f.seg.path.display()
            ));
            self.walked.truncate(wi + 1);
            self.walked[wi].scan.last_lsn = at - 1;
        }
        let tail = self.walked.last().map(|w| SegmentUse::of(&self.valid[w.index].header));
        let mut live = Vec::new();
        let mut free = self.free;
        for (i, f) in self.valid.into_iter().enumerate() {
            match self.walked.iter().find(|w| w.index == i) {
                Some(w) => live.push(LiveSegment { seg: f.seg, last_lsn: w.scan.last_lsn }),
                _ => free.push(f.seg),
            }
        }
        self.report.live_segments = live.len();
        tracing::debug!(dir = %self.dir.display(), end = self.end_lsn, "recovery done");
        Ok(Recovered { live, free, last_crc: self.last_crc, tail, report: self.report })
    }

    /// Ends the log durably before record `at` (at `offset` in walked
    /// segment `wi`): rewrites its group to hold only the records before
    /// it (or zeros if none) and zeros the rest of the group, then syncs.
    ///
    /// `at` is above every `acked_lsn` found, so it lies in the last
    /// segment of the walk (a segment is started only once every group
    /// before it was acknowledged, and says so in its header). Groups after
    /// its group may follow in that segment (written while it was in
    /// flight), each claiming less than `at` acknowledged; they are left as
    /// they are: once the group is cut, the next group the walk expects
    /// starts at LSN `at`, which none of them does, and new records go to
    /// a new segment. Either half of a torn cut leaves record `at`
    /// unreadable or the whole group as it was (the callback will then
    /// stop at it again).
    fn cut(&self, wi: usize, at: Lsn, offset: u64) -> Result<()> {
        let w = &self.walked[wi];
        let (f, scan) = (&self.valid[w.index], &w.scan);
        let last_walked = wi + 1 == self.walked.len();
        let at_group = scan.groups.iter().rposition(|g| g.header.first_lsn <= at);
        let later_claim_less = |n: usize| scan.groups[n + 1..].iter().all(|l| l.header.acked_lsn < at);
        let Some(g) = at_group.filter(|&n| last_walked && later_claim_less(n)).map(|n| &scan.groups[n]) else {
            let what = format!("cannot end the log before record {at}: later groups claim it acknowledged");
            return Err(LogError::corrupt(&f.seg.path, offset, what));
        };
        let range = g.offset as usize..(g.offset + g.header.padded_len()) as usize;
        let Some(mut image) = w.bytes.as_ref().and_then(|b| b.get(range)).map(<[u8]>::to_vec) else {
            return Err(LogError::corrupt(&f.seg.path, g.offset, "the group to cut is not among the bytes read"));
        };
        let keep = at - g.header.first_lsn;
        let body_start = g.offset + GROUP_HEADER_BYTES as u64;
        if keep == 0 {
            image.fill(0);
        } else {
            let mut head = Vec::with_capacity(GROUP_HEADER_BYTES);
            let header = GroupHeader { count: keep as u32, body_len: (offset - body_start) as u32, ..g.header };
            header.encode_into(&mut head);
            image[..GROUP_HEADER_BYTES].copy_from_slice(&head);
            image[(offset - g.offset) as usize..].fill(0);
        }
        write_all_at(&*f.seg.file, &image, g.offset)?;
        f.seg.file.sync_data()?;
        tracing::warn!(path = %f.seg.path.display(), offset, lsn = at, "replay stopped; log cut before this record");
        Ok(())
    }
}
