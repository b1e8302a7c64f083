//! The encoding of requests and responses (`docs/format.md`, "Server
//! protocol: messages").
//!
//! A message is a 12-byte header, `[u64 request id][u16 opcode][u16
//! reserved, 0]`, then its fields in order, little-endian, by explicit
//! encoding: integers in their width, booleans and option and enum tags as
//! one byte, byte strings and text as a `u32` length and the bytes, lists
//! as a `u32` count and the elements. The ring record around a message
//! carries its length and crc32c, and the protocol version is agreed at the
//! handshake, so the message carries neither.
//!
//! Decoding trusts nothing: every length and count is checked against a
//! named limit and against the bytes left before anything is allocated;
//! unknown opcodes and tags, booleans other than 0 and 1, nonzero reserved
//! bits, nanoseconds of a second or more, text that is not UTF-8 and
//! trailing bytes are refused. So the encoding is canonical: bytes that
//! decode re-encode to exactly themselves.
//!
//! Encoding never fails; a message that breaks a limit encodes to bytes the
//! peer refuses. [`check_request`] and [`check_response`] say beforehand
//! whether a message would decode, with the error the decoder would give.
//!
//! ```
//! use larder_protocol::codec::{check_request, decode_request, encode_request};
//! use larder_protocol::message::Request;
//!
//! let request = Request::Lookup { parent: 1, name: b"notes.txt".to_vec() };
//! let mut bytes = Vec::new();
//! encode_request(42, &request, &mut bytes);
//! assert_eq!(check_request(&request), Ok(bytes.len()));
//! assert_eq!(decode_request(&bytes), Ok((42, request)));
//! assert!(decode_request(&bytes[..bytes.len() - 1]).is_err());
//! ```

mod decode;
mod encode;
mod error;
pub mod fuzzing;
mod heap;
mod opcode;
mod request;
mod response;

pub use error::DecodeError;
pub use opcode::{Opcode, ResponseKind};

use crate::message::{Request, Response};
use decode::Reader;
use encode::{Encoder, Measure};

/// Largest message, header included. A ring must hold one such record.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// Largest run of bytes inline in a message: a write's or put's inline
/// payload, a read's data, a value, an extended attribute's value. Larger
/// transfers go through the client's data area or a streamed writer or
/// reader.
pub const MAX_DATA_BYTES: usize = 1 << 19;

/// Longest name: a file name, the last component of a resolved path, an
/// extended attribute's name, a bucket. The layers allow 255 bytes; a
/// longer name up to this limit reaches them and gets their error
/// (ENAMETOOLONG), so a client need not know their rules.
pub const MAX_NAME_BYTES: usize = 1024;

/// Longest path, symbolic link target or key (a key is a path in its
/// bucket). The fs layer allows 4096 bytes and the KV layer 4095; up to
/// this limit their errors answer.
pub const MAX_PATH_BYTES: usize = 8192;

/// Longest text: an error's message, the store's counters.
pub const MAX_TEXT_BYTES: usize = 64 << 10;

/// Most elements of a list: directory entries, names, scan entries, the
/// operations of a batch.
pub const MAX_LIST_ENTRIES: usize = 1 << 16;

/// Most operations one `MetadataBatch` may hold (and results one
/// `BatchApplied`): the batch is one transaction, which takes a lock per
/// name and object it changes.
pub const MAX_BATCH_OPERATIONS: usize = 1024;

/// Most pointer offsets one heap type may list (`larder_heap`'s limit).
pub const MAX_HEAP_TYPE_OFFSETS: usize = 4096;

/// Bytes of the header every message starts with.
pub const HEADER_BYTES: usize = 12;

/// Bytes of an `Entries` or `ScanPage` answer with no entries, at most:
/// the header, the count and (a scan page's) `more` flag. A server that
/// fills a listing to fit one ring record adds
/// [`directory_entry_bytes`] or [`scan_entry_bytes`] per entry to this.
pub const LISTING_BASE_BYTES: usize = HEADER_BYTES + 4 + 1;

/// Bytes `entry` adds to an encoded `Entries` answer.
pub fn directory_entry_bytes(entry: &crate::message::DirectoryEntry) -> usize {
    response::DIRECTORY_ENTRY_MIN_BYTES + entry.name.len()
}

/// Bytes `entry` adds to an encoded `ScanPage` answer.
pub fn scan_entry_bytes(entry: &crate::message::ScanEntry) -> usize {
    response::SCAN_ENTRY_MIN_BYTES + entry.key.len()
}

/// Appends the encoding of `request` with `request_id` to `out`.
pub fn encode_request(request_id: u64, request: &Request, out: &mut Vec<u8>) {
    let mut encoder = Encoder::new(out);
    encoder.header(request_id, request.opcode().code());
    request::encode(&mut encoder, request);
}

/// Decodes a whole request message: its request id and the request.
pub fn decode_request(bytes: &[u8]) -> Result<(u64, Request), DecodeError> {
    let (request_id, code, mut reader) = Reader::message(bytes)?;
    let opcode = Opcode::from_code(code).ok_or(DecodeError::UnknownOpcode(code))?;
    let request = request::decode(&mut reader, opcode)?;
    reader.finish()?;
    Ok((request_id, request))
}

/// Appends the encoding of `response` to the request `request_id` to
/// `out`.
pub fn encode_response(request_id: u64, response: &Response, out: &mut Vec<u8>) {
    let mut encoder = Encoder::new(out);
    encoder.header(request_id, response.kind().code());
    response::encode(&mut encoder, response);
}

/// Bytes from which [`encode_response_split`] leaves a `Data` answer's
/// bytes out of the encoding: below, one copy more costs less than
/// checksumming two parts instead of one.
pub const SPLIT_DATA_BYTES: usize = 1024;

/// As [`encode_response`], with the bytes of a `Data` answer of at least
/// [`SPLIT_DATA_BYTES`] left where they are: appends all of the encoding
/// but those bytes to `out` and returns them (every other answer is
/// appended whole and nothing is returned).
/// `out`'s new bytes followed by the returned ones are exactly
/// `encode_response`'s, so a server writes a read's bytes into the ring
/// record from where the read put them, not through a copy in `out`
/// first ([`crate::region::ServerRings::send_parts`]).
pub fn encode_response_split<'r>(request_id: u64, response: &'r Response, out: &mut Vec<u8>) -> &'r [u8] {
    match response {
        Response::Data(data) if data.len() >= SPLIT_DATA_BYTES => {
            let mut encoder = Encoder::new(out);
            encoder.header(request_id, response.kind().code());
            // The field's length as `bytes` writes it; a length over the
            // limit goes out and the peer refuses it, as there.
            encoder.length(data.len());
            data
        }
        _ => {
            encode_response(request_id, response, out);
            &[]
        }
    }
}

/// Bytes of a `Data` answer before its data: the header and the data's
/// `u32` length.
pub const DATA_PREFIX_BYTES: usize = HEADER_BYTES + 4;

/// The request id and data length of a `Data` answer of `message_bytes`
/// bytes whose first [`DATA_PREFIX_BYTES`] are `prefix`, if it is one that
/// [`decode_response`] accepts: kind `Data`, reserved bits 0, the length
/// within [`MAX_DATA_BYTES`] and its data running exactly to the message's
/// end. Its data are then the message's bytes after the prefix, as they
/// are, so a client can copy them straight where they go; `None` for any
/// other message (whose full decoding gives its answer or its error).
pub fn data_answer(prefix: &[u8], message_bytes: usize) -> Option<(u64, usize)> {
    if prefix.len() != DATA_PREFIX_BYTES {
        return None;
    }
    let request_id = u64::from_le_bytes(prefix.get(0..8)?.try_into().ok()?);
    let kind = u16::from_le_bytes(prefix.get(8..10)?.try_into().ok()?);
    let reserved = u16::from_le_bytes(prefix.get(10..12)?.try_into().ok()?);
    let length = usize::try_from(u32::from_le_bytes(prefix.get(12..16)?.try_into().ok()?)).ok()?;
    let is_data = kind == ResponseKind::Data.code() && reserved == 0;
    (is_data && length <= MAX_DATA_BYTES && message_bytes.checked_sub(DATA_PREFIX_BYTES) == Some(length))
        .then_some((request_id, length))
}

/// Decodes a whole response message: the id of the request it answers and
/// the response.
pub fn decode_response(bytes: &[u8]) -> Result<(u64, Response), DecodeError> {
    let (request_id, code, mut reader) = Reader::message(bytes)?;
    let kind = ResponseKind::from_code(code).ok_or(DecodeError::UnknownResponseKind(code))?;
    let response = response::decode(&mut reader, kind)?;
    reader.finish()?;
    Ok((request_id, response))
}

/// Whether `request` would decode once encoded, and if so the length of
/// its encoding: `Err` is the error [`decode_request`] would return (a
/// field or the whole message over its limit, or a value no decoder
/// accepts). A client checks this before it sends, so that a request the
/// server would refuse as a protocol violation becomes an error of the
/// call instead. Nothing is written or allocated.
pub fn check_request(request: &Request) -> Result<usize, DecodeError> {
    let mut measure = Measure::default();
    {
        let mut encoder = Encoder::new(&mut measure);
        encoder.header(0, request.opcode().code());
        request::encode(&mut encoder, request);
    }
    measure.result()
}

/// Whether `response` would decode once encoded, and if so the length of
/// its encoding; see [`check_request`]. The server checks what it built
/// before it sends it, so a client never sees a response it must refuse.
pub fn check_response(response: &Response) -> Result<usize, DecodeError> {
    let mut measure = Measure::default();
    {
        let mut encoder = Encoder::new(&mut measure);
        encoder.header(0, response.kind().code());
        response::encode(&mut encoder, response);
    }
    measure.result()
}

/// The request id in a message's header, if it has one, whether or not
/// the rest decodes: lets a server answer a request it cannot decode.
pub fn request_id_of(bytes: &[u8]) -> Option<u64> {
    let id: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(id))
}

/// The opcode in a message's header, if it has one, whether or not the
/// rest decodes (for logs).
pub fn opcode_of(bytes: &[u8]) -> Option<u16> {
    let code: [u8; 2] = bytes.get(8..10)?.try_into().ok()?;
    Some(u16::from_le_bytes(code))
}
