//! Entry points for the fuzz targets `protocol_request` and
//! `protocol_response` and their stable-toolchain replay
//! (`tests/codec_corpus.rs`): each feeds arbitrary bytes to a decoder,
//! which must return a message or an error and never panic. A message it
//! accepts must re-encode to exactly the input (the encoding is
//! canonical) and decode again to the same message, which is asserted: a
//! failure there is a bug worth a panic in a fuzzer.

use super::{decode_request, decode_response, encode_request, encode_response};

/// Decodes `data` as a request. Returns whether it was accepted.
pub fn request(data: &[u8]) -> bool {
    match decode_request(data) {
        Ok((request_id, request)) => {
            let mut again = Vec::new();
            encode_request(request_id, &request, &mut again);
            assert_eq!(again, data, "request {request:?} did not re-encode to its input");
            assert_eq!(decode_request(&again), Ok((request_id, request)), "request did not decode again");
            true
        }
        Err(_) => false,
    }
}

/// Decodes `data` as a response. Returns whether it was accepted.
pub fn response(data: &[u8]) -> bool {
    match decode_response(data) {
        Ok((request_id, response)) => {
            let mut again = Vec::new();
            encode_response(request_id, &response, &mut again);
            assert_eq!(again, data, "response {response:?} did not re-encode to its input");
            assert_eq!(decode_response(&again), Ok((request_id, response)), "response did not decode again");
            true
        }
        Err(_) => false,
    }
}
