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
    check_request, check_response, decode_request, decode_response, directory_entry_bytes, encode_request,
    encode_response, fuzzing, opcode_of, request_id_of, scan_entry_bytes, DecodeError, Opcode, ResponseKind,
    LISTING_BASE_BYTES, MAX_MESSAGE_BYTES, MAX_NAME_BYTES,
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

proptest! {
    #![proptest_config(Config { cases: 512, ..Config::default() })]

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
