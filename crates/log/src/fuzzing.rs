//! Entry points for fuzz targets and their stable-toolchain replays: each
//! feeds arbitrary bytes to one on-disk decoder, which must return an error
//! or a value and never panic.

use std::path::Path;
use std::sync::Arc;

use larder_io::{OpenOptions, SimStorage, Storage, StorageRef};

use crate::clean::CleanMarker;
use crate::format::{decode_group_body, decode_record, GroupHeader, HeaderRead, SegmentHeader, GROUP_HEADER_BYTES};
use crate::{Log, Options};

/// Decodes `data` as a segment header. Returns whether it was accepted.
pub fn segment_header(data: &[u8]) -> bool {
    match SegmentHeader::decode(data) {
        HeaderRead::Valid(h) => {
            // What was accepted re-encodes to the same header.
            assert_eq!(SegmentHeader::decode(&h.encode_block()), HeaderRead::Valid(h), "header did not round-trip");
            true
        }
        _ => false,
    }
}

/// Decodes `data` as a clean-close marker (the log directory's `CLEAN`).
/// Returns whether it was accepted.
pub fn clean_marker(data: &[u8]) -> bool {
    match CleanMarker::decode(data) {
        Ok(m) => {
            // What was accepted re-encodes to the same bytes.
            assert_eq!(m.encode(), data, "marker did not round-trip");
            true
        }
        Err(_) => false,
    }
}

/// Decodes `data` as a group: its header, then its records chained from
/// the crc in the first record (so the chain check is passed by design),
/// then a record at every offset. Returns whether the group was accepted.
pub fn group(data: &[u8]) -> bool {
    for pos in 0..data.len().min(256) {
        let _ = decode_record(data, pos, 0, 0);
    }
    let Ok(h) = GroupHeader::decode(data) else { return false };
    let body = &data[GROUP_HEADER_BYTES..];
    let body = &body[..body.len().min(h.body_len as usize)];
    let prev = body.get(8..12).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let (records, stop) = decode_group_body(body, &h, prev);
    for (_, r) in &records {
        assert!(r.payload.end <= body.len(), "payload out of bounds");
    }
    stop.is_none()
}

/// Opens a log whose only segment holds `data`, replaying everything from
/// the segment's own first LSN. Returns whether open succeeded.
pub fn segment_file(data: &[u8]) -> bool {
    let sim = SimStorage::new(0);
    let dir = Path::new("/fuzz/log");
    let write = || -> crate::Result<()> {
        sim.create_dir_all(dir)?;
        let f = sim.open(&dir.join("0000000000000001.seg"), OpenOptions::CREATE_NEW)?;
        larder_io::write_all_at(&*f, data, 0)?;
        Ok(())
    };
    if write().is_err() {
        return false;
    }
    let covered = match SegmentHeader::decode(data) {
        HeaderRead::Valid(h) => h.first_lsn.saturating_sub(1),
        _ => 0,
    };
    let options =
        Options { segment_bytes: 16 << 10, max_segments: 2, buffered_sync_interval: None, ..Options::default() };
    let storage: StorageRef = Arc::new(sim);
    let mut last = covered;
    let opened = Log::open(storage, dir, options, covered, |lsn, _payload: &[u8]| {
        assert_eq!(lsn, last + 1, "replay out of order");
        last = lsn;
        Ok::<(), std::io::Error>(())
    });
    opened.is_ok()
}
