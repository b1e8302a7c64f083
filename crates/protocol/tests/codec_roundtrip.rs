//! The codec against its rules: every request and response round-trips
//! exactly when `check_request`/`check_response` accept it, and otherwise
//! fails with the error the check predicted; every truncation of a valid
//! encoding is refused as truncated; no bit flip panics, and a flipped
//! message that decodes re-encodes to itself; every opcode and response
//! kind has a strategy; the header's layout is pinned byte by byte.

#![allow(clippy::unwrap_used)]

mod codec_strategies;

use std::collections::BTreeSet;

use codec_strategies::{request, response, Sizes};
use larder_protocol::codec::{
    check_request, check_response, data_answer, decode_request, decode_response, directory_entry_bytes, encode_request,
    encode_response, encode_response_split, fuzzing, opcode_of, request_id_of, scan_entry_bytes, DecodeError, Opcode,
    ResponseKind, DATA_PREFIX_BYTES, LISTING_BASE_BYTES, MAX_MESSAGE_BYTES, MAX_NAME_BYTES, MAX_PATH_BYTES,
    SPLIT_DATA_BYTES,
};
use larder_protocol::message::{Request, Response};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRng, TestRunner};

fn encoded_request(request_id: u64, request: &Request) -> Vec<u8> {
    let mut out = Vec::new();
    encode_request(request_id, request, &mut out);
    out
}

fn encoded_response(request_id: u64, response: &Response) -> Vec<u8> {
    let mut out = Vec::new();
    encode_response(request_id, response, &mut out);
    out
}

/// `data_answer` on a message's first bytes says exactly what decoding the
/// whole message says: a `Data` answer of that id whose data are the bytes
/// after the prefix, or not one.
fn data_answer_agrees_with_decoding(bytes: &[u8]) -> Result<(), TestCaseError> {
    let answer = bytes.get(..DATA_PREFIX_BYTES).and_then(|prefix| data_answer(prefix, bytes.len()));
    match decode_response(bytes) {
        Ok((request_id, Response::Data(data))) => {
            prop_assert_eq!(answer, Some((request_id, data.len())));
            prop_assert_eq!(&bytes[DATA_PREFIX_BYTES..], data.as_slice());
        }
        _ => prop_assert_eq!(answer, None),
    }
    Ok(())
}

proptest! {
    #![proptest_config(Config { cases: 512, ..Config::default() })]

    #[test]
    fn a_data_answer_is_seen_from_its_prefix_exactly_when_it_decodes(
        request_id in any::<u64>(),
        response in response(Sizes::Beyond),
    ) {
        data_answer_agrees_with_decoding(&encoded_response(request_id, &response))?;
    }

    #[test]
    fn a_broken_data_answer_is_not_seen_from_its_prefix(
        request_id in any::<u64>(),
        data in proptest::collection::vec(any::<u8>(), 0..64),
        damage in 0u8..5,
        value in any::<u32>(),
    ) {
        let mut bytes = encoded_response(request_id, &Response::Data(data));
        match damage {
            0 => bytes.push(value as u8),
            1 => { bytes.pop(); }
            2 => bytes[10..12].copy_from_slice(&(value as u16 | 1).to_le_bytes()),
            3 => bytes[12..16].copy_from_slice(&value.to_le_bytes()),
            _ => bytes[8..10].copy_from_slice(&(value as u16).to_le_bytes()),
        }
        data_answer_agrees_with_decoding(&bytes)?;
    }

    #[test]
    fn a_split_encoding_is_the_whole_one(request_id in any::<u64>(), response in response(Sizes::Beyond)) {
        // A server writes the two parts one after the other into a ring
        // record: together they are the message, whatever the answer.
        let mut head = vec![0xa5];
        let tail = encode_response_split(request_id, &response, &mut head);
        prop_assert_eq!(head[0], 0xa5, "appended, as encode_response appends");
        let mut joined = head[1..].to_vec();
        joined.extend_from_slice(tail);
        prop_assert_eq!(joined, encoded_response(request_id, &response));
        // Only a read's bytes are left out, and only from SPLIT_DATA_BYTES.
        match &response {
            Response::Data(data) if data.len() >= SPLIT_DATA_BYTES => prop_assert_eq!(tail, data.as_slice()),
            _ => prop_assert!(tail.is_empty()),
        }
    }

    #[test]
    fn listing_sizes_are_what_a_server_budgets(response in response(Sizes::Small)) {
        // A server fills a listing to fit a ring record by these sizes: a
        // scan page's is exact, a directory listing's one byte over.
        let budget = match &response {
            Response::Entries(entries) => LISTING_BASE_BYTES - 1 + entries.iter().map(directory_entry_bytes).sum::<usize>(),
            Response::ScanPage { entries, .. } => LISTING_BASE_BYTES + entries.iter().map(scan_entry_bytes).sum::<usize>(),
            _ => return Ok(()),
        };
        prop_assert_eq!(encoded_response(1, &response).len(), budget);
    }

    #[test]
    fn request_round_trips_exactly_when_checked(request_id in any::<u64>(), request in request(Sizes::Beyond)) {
        let bytes = encoded_request(request_id, &request);
        let checked = check_request(&request);
        match decode_request(&bytes) {
            Ok(decoded) => {
                prop_assert_eq!(checked, Ok(bytes.len()));
                prop_assert_eq!(decoded, (request_id, request));
            }
            Err(error) => prop_assert_eq!(checked, Err(error)),
        }
        prop_assert_eq!(request_id_of(&bytes), Some(request_id));
    }

    #[test]
    fn response_round_trips_exactly_when_checked(request_id in any::<u64>(), response in response(Sizes::Beyond)) {
        let bytes = encoded_response(request_id, &response);
        let checked = check_response(&response);
        match decode_response(&bytes) {
            Ok(decoded) => {
                prop_assert_eq!(checked, Ok(bytes.len()));
                prop_assert_eq!(decoded, (request_id, response));
            }
            Err(error) => prop_assert_eq!(checked, Err(error)),
        }
    }

    #[test]
    fn requests_at_their_limits_round_trip(request_id in any::<u64>(), request in request(Sizes::Limits)) {
        let bytes = encoded_request(request_id, &request);
        if bytes.len() <= MAX_MESSAGE_BYTES {
            prop_assert_eq!(check_request(&request), Ok(bytes.len()));
            prop_assert_eq!(decode_request(&bytes), Ok((request_id, request)));
        } else {
            let too_long = DecodeError::MessageTooLong { length: bytes.len(), limit: MAX_MESSAGE_BYTES };
            prop_assert_eq!(check_request(&request), Err(too_long.clone()));
            prop_assert_eq!(decode_request(&bytes), Err(too_long));
        }
    }

    #[test]
    fn responses_at_their_limits_round_trip(request_id in any::<u64>(), response in response(Sizes::Limits)) {
        let bytes = encoded_response(request_id, &response);
        if bytes.len() <= MAX_MESSAGE_BYTES {
            prop_assert_eq!(check_response(&response), Ok(bytes.len()));
            prop_assert_eq!(decode_response(&bytes), Ok((request_id, response)));
        } else {
            let too_long = DecodeError::MessageTooLong { length: bytes.len(), limit: MAX_MESSAGE_BYTES };
            prop_assert_eq!(check_response(&response), Err(too_long.clone()));
            prop_assert_eq!(decode_response(&bytes), Err(too_long));
        }
    }

    #[test]
    fn every_truncation_of_a_request_is_refused(request_id in any::<u64>(), request in request(Sizes::Small)) {
        let bytes = encoded_request(request_id, &request);
        for length in 0..bytes.len() {
            let result = decode_request(&bytes[..length]);
            prop_assert!(matches!(result, Err(DecodeError::Truncated { .. })), "{} of {} bytes: {:?}", length, bytes.len(), result);
        }
        let mut longer = bytes.clone();
        longer.push(0);
        prop_assert_eq!(decode_request(&longer), Err(DecodeError::TrailingBytes { count: 1 }));
    }

    #[test]
    fn every_truncation_of_a_response_is_refused(request_id in any::<u64>(), response in response(Sizes::Small)) {
        let bytes = encoded_response(request_id, &response);
        for length in 0..bytes.len() {
            let result = decode_response(&bytes[..length]);
            prop_assert!(matches!(result, Err(DecodeError::Truncated { .. })), "{} of {} bytes: {:?}", length, bytes.len(), result);
        }
        let mut longer = bytes.clone();
        longer.push(0);
        prop_assert_eq!(decode_response(&longer), Err(DecodeError::TrailingBytes { count: 1 }));
    }

    /// `fuzzing::request` and `fuzzing::response` panic if a message that
    /// decodes does not re-encode to its bytes.
    #[test]
    fn bit_flips_never_panic_and_stay_canonical(
        request_id in any::<u64>(),
        request in request(Sizes::Small),
        response in response(Sizes::Small),
    ) {
        for bytes in [encoded_request(request_id, &request), encoded_response(request_id, &response)] {
            let is_request = opcode_of(&bytes) == Some(request.opcode().code()) && fuzzing::request(&bytes);
            prop_assert!(is_request || fuzzing::response(&bytes));
            for bit in 0..bytes.len() * 8 {
                let mut flipped = bytes.clone();
                flipped[bit / 8] ^= 1 << (bit % 8);
                fuzzing::request(&flipped);
                fuzzing::response(&flipped);
            }
        }
    }
}

/// The opcodes a strategy produces in `samples` draws from a fixed seed.
fn sampled<T: std::fmt::Debug>(strategy: BoxedStrategy<T>, code: impl Fn(&T) -> u16) -> BTreeSet<u16> {
    let config = Config::default();
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(proptest::test_runner::RngAlgorithm::ChaCha));
    (0..4_000).map(|_| code(&strategy.new_tree(&mut runner).unwrap().current())).collect()
}

/// A request variant added without a codec does not compile (the codec's
/// matches are exhaustive); one added without a strategy fails here.
#[test]
fn every_opcode_has_a_strategy_and_a_unique_code() {
    let all: BTreeSet<u16> = Opcode::ALL.iter().map(|opcode| opcode.code()).collect();
    assert_eq!(all.len(), Opcode::ALL.len(), "two opcodes share a code");
    for code in 0..=u16::MAX {
        assert_eq!(Opcode::from_code(code).map(Opcode::code), all.contains(&code).then_some(code));
    }
    assert_eq!(sampled(request(Sizes::Small), |r| r.opcode().code()), all);
}

#[test]
fn every_response_kind_has_a_strategy_and_a_unique_code() {
    let all: BTreeSet<u16> = ResponseKind::ALL.iter().map(|kind| kind.code()).collect();
    assert_eq!(all.len(), ResponseKind::ALL.len(), "two response kinds share a code");
    for code in 0..=u16::MAX {
        assert_eq!(ResponseKind::from_code(code).map(ResponseKind::code), all.contains(&code).then_some(code));
    }
    assert_eq!(sampled(response(Sizes::Small), |r| r.kind().code()), all);
}

#[test]
fn unknown_codes_and_reserved_bits_are_refused() {
    for code in (0..=u16::MAX).filter(|&code| Opcode::from_code(code).is_none()) {
        let mut bytes = 7u64.to_le_bytes().to_vec();
        bytes.extend_from_slice(&code.to_le_bytes());
        bytes.extend_from_slice(&[0, 0]);
        assert_eq!(decode_request(&bytes), Err(DecodeError::UnknownOpcode(code)));
    }
    for code in (0..=u16::MAX).filter(|&code| ResponseKind::from_code(code).is_none()) {
        let mut bytes = 7u64.to_le_bytes().to_vec();
        bytes.extend_from_slice(&code.to_le_bytes());
        bytes.extend_from_slice(&[0, 0]);
        assert_eq!(decode_response(&bytes), Err(DecodeError::UnknownResponseKind(code)));
    }
    let mut ping = encoded_request(1, &Request::Ping);
    ping[11] = 0x80;
    assert_eq!(decode_request(&ping), Err(DecodeError::ReservedBits { field: "header.reserved", bits: 0x8000 }));
    let too_long = vec![0u8; MAX_MESSAGE_BYTES + 1];
    assert_eq!(
        decode_request(&too_long),
        Err(DecodeError::MessageTooLong { length: MAX_MESSAGE_BYTES + 1, limit: MAX_MESSAGE_BYTES })
    );
}

#[test]
fn bad_tags_flags_and_text_are_refused_by_field() {
    let rename = Request::Rename {
        parent: 1,
        name: b"a".to_vec(),
        new_parent: 2,
        new_name: b"b".to_vec(),
        flags: Default::default(),
    };
    let mut bytes = encoded_request(3, &rename);
    *bytes.last_mut().unwrap() = 4;
    assert_eq!(decode_request(&bytes), Err(DecodeError::ReservedBits { field: "Rename.flags", bits: 4 }));

    let resolve = Request::Resolve { path: b"/x".to_vec(), follow: true };
    let mut bytes = encoded_request(3, &resolve);
    *bytes.last_mut().unwrap() = 2;
    assert_eq!(decode_request(&bytes), Err(DecodeError::UnknownTag { field: "Resolve.follow", tag: 2 }));

    let open = Request::OpenPath { path: b"/x".to_vec(), flags: 0, read: 0, lease: false };
    let mut bytes = encoded_request(3, &open);
    *bytes.last_mut().unwrap() = 2;
    assert_eq!(decode_request(&bytes), Err(DecodeError::UnknownTag { field: "OpenPath.lease", tag: 2 }));
    // A path whose length runs past the message (no terminator: lengths
    // are counted, never searched for).
    let mut bytes = encoded_request(3, &open);
    bytes[12..16].copy_from_slice(&1000u32.to_le_bytes());
    assert!(decode_request(&bytes).is_err());
    let long = Request::OpenPath { path: vec![b'p'; MAX_PATH_BYTES + 1], flags: 0, read: 0, lease: false };
    let expected =
        DecodeError::FieldTooLong { field: "OpenPath.path", length: MAX_PATH_BYTES as u64 + 1, limit: MAX_PATH_BYTES };
    assert_eq!(check_request(&long), Err(expected.clone()));
    assert_eq!(decode_request(&encoded_request(3, &long)), Err(expected));

    let error = Response::Error { errno: 2, message: "ab".into() };
    let mut bytes = encoded_response(3, &error);
    *bytes.last_mut().unwrap() = 0xff;
    assert!(matches!(decode_response(&bytes), Err(DecodeError::NotUtf8 { field: "Error.message", .. })));

    let lookup = Request::Lookup { parent: 1, name: vec![b'n'; MAX_NAME_BYTES + 1] };
    let expected = DecodeError::FieldTooLong { field: "Lookup.name", length: 1025, limit: MAX_NAME_BYTES };
    assert_eq!(check_request(&lookup), Err(expected.clone()));
    assert_eq!(decode_request(&encoded_request(3, &lookup)), Err(expected));
}

/// The layout `docs/format.md` gives, byte by byte.
#[test]
fn encodings_are_pinned() {
    let lookup = Request::Lookup { parent: 0x0102, name: b"ab".to_vec() };
    assert_eq!(
        encoded_request(0x1122_3344_5566_7788, &lookup),
        [
            0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // request id
            16, 0, // opcode Lookup
            0, 0, // reserved
            0x02, 0x01, 0, 0, 0, 0, 0, 0, // parent
            2, 0, 0, 0, b'a', b'b', // name
        ]
    );
    let error = Response::Error { errno: -5, message: "é".into() };
    assert_eq!(
        encoded_response(9, &error),
        [9, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 0xfb, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0xc3, 0xa9]
    );
    // docs/format.md's OpenPath example.
    let open = Request::OpenPath { path: b"/a".to_vec(), flags: 0o400000, read: 0x3000, lease: true };
    assert_eq!(
        encoded_request(7, &open),
        [
            7, 0, 0, 0, 0, 0, 0, 0, // request id
            48, 0, // opcode OpenPath
            0, 0, // reserved
            2, 0, 0, 0, b'/', b'a', // path
            0, 0, 2, 0, // flags: O_NOFOLLOW
            0, 0x30, 0, 0, // read: 12,288 bytes
            1, // lease
        ]
    );
    let attributes = larder_protocol::message::Attributes {
        ino: 5,
        kind: larder_protocol::message::FileKind::File,
        mode: 0o100644,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        size: 2,
        blocks: 0,
        atime: Default::default(),
        mtime: Default::default(),
        ctime: Default::default(),
        btime: Default::default(),
        generation: 0,
    };
    let opened = Response::PathOpened {
        parent: 1,
        name: b"a".to_vec(),
        attributes: attributes.clone(),
        handle: 3,
        data: Some(b"hi".to_vec()),
        lease: Some(larder_protocol::message::LeaseGrant { slot: 4, sequence: 1, term_nanos: 1_000_000_000 }),
    };
    let bytes = encoded_response(7, &opened);
    assert_eq!(bytes.len(), 12 + 8 + 5 + 105 + 8 + 1 + 6 + 1 + 16, "the layout docs/format.md gives");
    assert_eq!(&bytes[8..10], &[27, 0], "kind PathOpened");
    assert_eq!(&bytes[12..25], &[1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, b'a'], "parent and name");
    assert_eq!(&bytes[130..138], &3u64.to_le_bytes(), "handle after the 105 bytes of attributes");
    assert_eq!(&bytes[138..145], &[1, 2, 0, 0, 0, b'h', b'i'], "data: option tag, length, bytes");
    assert_eq!(&bytes[145..150], &[1, 4, 0, 0, 0], "lease: option tag, slot");
    let bare = Response::PathOpened {
        parent: 1,
        name: b"a".to_vec(),
        attributes: attributes.clone(),
        handle: 3,
        data: None,
        lease: None,
    };
    assert_eq!(&encoded_response(7, &bare)[138..], &[0, 0], "no data, no lease: two zero tags");
    // docs/format.md's Create example and `Created`'s sizes (version 7).
    let create = Request::Create { parent: 1, name: b"a".to_vec(), mode: 0o644, flags: libc::O_RDWR, lease: true };
    assert_eq!(
        encoded_request(7, &create),
        [
            7, 0, 0, 0, 0, 0, 0, 0, // request id
            29, 0, // opcode Create
            0, 0, // reserved
            1, 0, 0, 0, 0, 0, 0, 0, // parent
            1, 0, 0, 0, b'a', // name
            0xa4, 1, 0, 0, // mode 0o644
            2, 0, 0, 0, // flags: O_RDWR
            1, // lease
        ]
    );
    let grant = larder_protocol::message::LeaseGrant { slot: 4, sequence: 1, term_nanos: 1_000_000_000 };
    let created = Response::Created { attributes: attributes.clone(), handle: 3, lease: Some(grant) };
    let bytes = encoded_response(7, &created);
    assert_eq!(bytes.len(), 142, "the layout docs/format.md gives");
    assert_eq!(&bytes[117..125], &3u64.to_le_bytes(), "handle after the 105 bytes of attributes");
    assert_eq!(&bytes[125..130], &[1, 4, 0, 0, 0], "lease: option tag, slot");
    let bare = Response::Created { attributes, handle: 3, lease: None };
    assert_eq!(encoded_response(7, &bare).len(), 126, "no lease: one zero tag");
    assert_eq!(request_id_of(&[1, 2, 3]), None);
    assert_eq!(opcode_of(&encoded_request(1, &Request::Stats)), Some(Opcode::Stats.code()));
    assert_eq!(
        Request::KvPut {
            bucket: Vec::new(),
            key: Vec::new(),
            value: larder_protocol::message::Payload::Inline(Vec::new()),
            durability: larder_protocol::message::Durability::Durable,
        }
        .to_string(),
        "KvPut"
    );
}

#[test]
fn a_data_answer_is_split_from_split_data_bytes_on() {
    for length in [0, 1, SPLIT_DATA_BYTES - 1, SPLIT_DATA_BYTES, 4096, 65_536] {
        let response = Response::Data((0..length).map(|i| i as u8).collect());
        let mut head = Vec::new();
        let tail = encode_response_split(9, &response, &mut head);
        assert_eq!(tail.len(), if length >= SPLIT_DATA_BYTES { length } else { 0 }, "{length} bytes");
        assert_eq!([head.as_slice(), tail].concat(), encoded_response(9, &response), "{length} bytes");
    }
}
