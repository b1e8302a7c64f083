//! Entry points for the fuzz targets (`fuzz/fuzz_targets/protocol_*.rs`)
//! and their stable replay (`tests/fuzz_corpus.rs`): arbitrary bytes must
//! be accepted or refused, never panic, never touch memory outside the
//! ring.

use crate::handshake::Frame;
use crate::layout::{Layout, PAGE_BYTES, RING_CONTROL_BYTES};
use crate::region::Region;
use crate::PROTOCOL_VERSION;

/// The layout the ring target lays its input over: one worker, the
/// smallest rings, one page of data area.
pub const FUZZ_LAYOUT: Layout =
    Layout { workers: 1, request_ring_bytes: 4096, completion_ring_bytes: 4096, data_bytes: PAGE_BYTES };

/// Bytes of a ring's control block and slots: the input is laid over this
/// much of the request ring (and of the completion ring), zero-padded or
/// cut.
pub const RING_INPUT_BYTES: usize = RING_CONTROL_BYTES as usize + 4096;

/// Lays `data` over the request ring's control block and slots as a
/// hostile client would write them, then receives until the ring is empty
/// or a violation. The same bytes over the completion ring then face a
/// completion `send` (the client's consumer position is hostile too).
/// Returns whether the server received everything without a violation.
///
/// # Panics
/// If receiving does not end: each record takes at least 8 of the at most
/// 4096 bytes published, so more than 513 receives is a bug.
pub fn ring(data: &[u8]) -> bool {
    let Ok(region) = Region::anonymous(FUZZ_LAYOUT) else {
        return false;
    };
    let mut input = data[..data.len().min(RING_INPUT_BYTES)].to_vec();
    input.resize(RING_INPUT_BYTES, 0);
    let layout = region.layout();
    let (Ok(()), Ok(())) = (
        region.write_bytes(layout.request_ring(0).control, &input),
        region.write_bytes(layout.completion_ring(0).control, &input),
    ) else {
        return false;
    };
    let Ok(rings) = region.server_rings(0) else {
        return false;
    };
    let mut out = Vec::new();
    let mut received = 0;
    let clean = loop {
        match rings.receive(&mut out) {
            Ok(true) => {
                received += 1;
                assert!(received <= 513, "receive did not end");
                assert!(out.len() <= rings.max_record() as usize);
            }
            Ok(false) => break true,
            Err(_) => break false,
        }
    };
    let _ = rings.send(&data[..data.len().min(64)]);
    clean
}

/// Decodes `data` as a handshake frame. An accepted frame of this version
/// must encode back to the same bytes.
///
/// # Panics
/// If an accepted frame of this version does not round-trip.
pub fn handshake(data: &[u8]) -> bool {
    match Frame::decode(data) {
        Ok(frame) => {
            let ours = data.get(4..8) == Some(&PROTOCOL_VERSION.to_le_bytes()[..]);
            if ours {
                assert_eq!(frame.encode(), data, "an accepted frame does not re-encode to itself");
            }
            true
        }
        Err(_) => false,
    }
}

/// Decodes `data` as a descriptor frame (`crate::descriptor`). An accepted
/// frame must encode back to the same bytes.
///
/// # Panics
/// If an accepted frame does not round-trip.
pub fn descriptor_frame(data: &[u8]) -> bool {
    match crate::descriptor::decode_frame(data) {
        Ok(tag) => {
            assert_eq!(&crate::descriptor::encode_frame(tag)[..], data, "an accepted frame does not re-encode");
            true
        }
        Err(_) => false,
    }
}
