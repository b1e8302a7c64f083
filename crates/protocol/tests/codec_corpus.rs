//! Stable replay of the codec's fuzz entry points
//! (`larder_protocol::codec::fuzzing`): 20,000 inputs per decoder from a
//! fixed generator (random bytes and damaged real encodings: bit flips,
//! truncations, overwritten and appended bytes). Each entry point must
//! return without panicking and accepts only inputs that re-encode to
//! themselves; the number accepted is pinned, so a change in what a
//! decoder accepts (a format change) shows up here. The committed seed
//! corpora of the fuzz targets (`fuzz/corpus/protocol_*`) are replayed
//! here, and regenerated from the same messages by the ignored
//! `generate_fuzz_corpus`.

#![allow(clippy::unwrap_used)]

#[path = "../../../fuzz/corpus_files.rs"]
mod corpus_files;

use std::collections::BTreeSet;

use larder_protocol::codec::{encode_request, encode_response, fuzzing, Opcode, ResponseKind};
use larder_protocol::message::*;

/// SplitMix64: fixed forever, so the inputs never change with a crate
/// upgrade.
struct Generator(u64);

impl Generator {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn time(seconds: i64) -> Timestamp {
    Timestamp { seconds, nanoseconds: 123_456_789 }
}

fn file_attributes() -> Attributes {
    Attributes {
        ino: 4242,
        kind: FileKind::File,
        mode: 0o100644,
        nlink: 1,
        uid: 1000,
        gid: 1000,
        rdev: 0,
        size: 16384,
        blocks: 32,
        atime: time(1_795_000_000),
        mtime: time(1_795_000_001),
        ctime: time(1_795_000_002),
        btime: time(1_794_000_000),
        generation: 7,
    }
}

/// A request of every opcode, as a client would send them.
fn requests() -> Vec<Request> {
    let name = |s: &str| s.as_bytes().to_vec();
    let slice = BufferSlice { offset: 65536, length: 16384 };
    vec![
        Request::Ping,
        Request::Lease { target: LeaseTarget::Object(4242) },
        Request::Lease { target: LeaseTarget::Namespace },
        Request::Lease { target: LeaseTarget::Subtree(4243) },
        Request::Lookup { parent: 1, name: name("notes.txt") },
        Request::GetAttributes { ino: 4242 },
        Request::SetAttributes {
            ino: 4242,
            set: SetAttributes {
                mode: Some(0o600),
                uid: None,
                gid: Some(100),
                size: Some(0),
                atime: Some(TimeChange::Now),
                mtime: Some(TimeChange::At(time(1_795_000_000))),
            },
            handle: Some(3),
        },
        Request::Resolve { path: name("/home/user/notes.txt"), follow: true },
        Request::Mknod { parent: 1, name: name("fifo"), mode: 0o010644, rdev: 0 },
        Request::Mkdir { parent: 1, name: name("photos"), mode: 0o755 },
        Request::Symlink { parent: 1, name: name("latest"), target: name("photos/2026") },
        Request::Readlink { ino: 77 },
        Request::Link { ino: 4242, parent: 9, name: name("notes-link.txt") },
        Request::Unlink { parent: 1, name: name("old.txt") },
        Request::Rmdir { parent: 1, name: name("empty") },
        Request::Rename {
            parent: 1,
            name: name("a.tmp"),
            new_parent: 9,
            new_name: name("a"),
            flags: RenameFlags { noreplace: true, exchange: false },
        },
        Request::Open { ino: 4242, flags: 0o2 | 0o2000 },
        Request::Create { parent: 1, name: name("new.log"), mode: 0o644, flags: 0o100 | 0o200 | 0o1, lease: false },
        Request::Create { parent: 1, name: name("page.html"), mode: 0o644, flags: 0o100 | 0o2, lease: true },
        Request::Read { handle: 3, offset: 0, length: 16384 },
        Request::ReadBuffer { handle: 3, offset: 16384, into: slice },
        Request::Write { handle: 3, offset: 100, data: Payload::Inline(b"hello, larder\n".repeat(4)) },
        Request::Fsync { handle: 3 },
        Request::Fallocate { handle: 3, offset: 0, length: 1 << 20, mode: 0 },
        Request::Release { handle: 3 },
        Request::OpenDirectory { ino: 1 },
        Request::ReadDirectory { handle: 4, offset: 0, max_entries: 128 },
        Request::ReleaseDirectory { handle: 4 },
        Request::FsyncDirectory { handle: 4 },
        Request::Access { ino: 4242, mask: 4 | 2 },
        Request::StatFs,
        Request::GetXattr { ino: 4242, name: name("user.origin") },
        Request::SetXattr {
            ino: 4242,
            name: name("user.origin"),
            value: name("camera"),
            flags: XattrFlags { create: true, replace: false },
        },
        Request::ListXattr { ino: 4242 },
        Request::RemoveXattr { ino: 4242, name: name("user.origin") },
        Request::Sync,
        Request::KvPut {
            bucket: name("photos"),
            key: name("2026/11/beach.jpg"),
            value: Payload::Buffer(slice),
            durability: Durability::Durable,
        },
        Request::KvGet { bucket: name("photos"), key: name("2026/11/beach.jpg"), into: None },
        Request::KvHead { bucket: name("photos"), key: name("2026/11/beach.jpg") },
        Request::KvDelete { bucket: name("photos"), key: name("2026/11/old.jpg"), durability: Durability::Buffered },
        Request::KvScan { bucket: name("photos"), start: name("2026/"), end: Some(name("2027/")), max_entries: 100 },
        Request::KvWriteBatch {
            bucket: name("photos"),
            operations: vec![
                KvOperation::Put { key: name("a"), value: Payload::Inline(name("first")) },
                KvOperation::Delete { key: name("b") },
                KvOperation::Put { key: name("c"), value: Payload::Buffer(slice) },
            ],
            durability: Durability::Durable,
        },
        Request::KvWriterOpen { bucket: name("videos"), key: name("long.mp4"), durability: Durability::Durable },
        Request::KvWriterFinish { handle: 12 },
        Request::KvReaderOpen { bucket: name("videos"), key: name("long.mp4") },
        Request::CreateBucket { bucket: name("photos") },
        Request::DeleteBucket { bucket: name("scratch") },
        Request::ListBuckets,
        Request::Stats,
        Request::HeapOpen { path: name("/heaps/locate") },
        Request::Heap { heap: 1, operation: HeapOperation::Alloc { size: 4096 } },
        Request::Heap { heap: 1, operation: HeapOperation::Attach { object: 77, write: true, tag: 5, received: 4 } },
        Request::Heap { heap: 1, operation: HeapOperation::Size { object: 77 } },
        Request::Heap { heap: 1, operation: HeapOperation::GetByName { name: name("index") } },
        Request::Heap { heap: 1, operation: HeapOperation::AddName { object: 77, name: name("index") } },
        Request::Heap { heap: 1, operation: HeapOperation::Names { object: 77 } },
        Request::Heap { heap: 1, operation: HeapOperation::Free { object: 77 } },
        Request::Heap { heap: 1, operation: HeapOperation::Copy { object: 77 } },
        Request::Heap { heap: 1, operation: HeapOperation::Clone { object: 77 } },
        Request::Heap { heap: 1, operation: HeapOperation::AllocType { offsets: vec![0, 24, 48] } },
        Request::Heap { heap: 1, operation: HeapOperation::AttachType { object: 77, type_id: 78 } },
        Request::Heap { heap: 1, operation: HeapOperation::TypeOf { object: 77 } },
        Request::Heap { heap: 1, operation: HeapOperation::Grow { object: 77, size: 8192 } },
        Request::Heap {
            heap: 1,
            operation: HeapOperation::Check {
                pointer: HeapPointer { object: 77, offset: 64, generation: 3 },
                length: 24,
            },
        },
        Request::Heap { heap: 1, operation: HeapOperation::Sync },
        Request::Heap { heap: 1, operation: HeapOperation::AllocIn { object: 77, size: 40, align: 8 } },
        Request::Heap {
            heap: 1,
            operation: HeapOperation::FreeIn { pointer: HeapPointer { object: 77, offset: 4160, generation: 9 } },
        },
        Request::HeapClose { heap: 1, sync: true },
        Request::MetadataBatch {
            operations: vec![
                Request::Mkdir { parent: 1, name: name("inbox"), mode: 0o700 },
                Request::Rename {
                    parent: 1,
                    name: name("draft"),
                    new_parent: 9,
                    new_name: name("sent"),
                    flags: RenameFlags::default(),
                },
                Request::Unlink { parent: 9, name: name("old") },
            ],
            durability: Durability::Durable,
        },
        Request::OpenPath { path: name("/www/m000042"), flags: 0, read: 49152, lease: true },
        Request::OpenPath { path: name("/www/latest"), flags: 0o2 | 0o400000, read: 0, lease: false },
    ]
}

/// A response of every kind, as a server would send them.
fn responses() -> Vec<Response> {
    let name = |s: &str| s.as_bytes().to_vec();
    vec![
        Response::Done,
        Response::Pong { epoch: 0x5eed },
        Response::Attributes(file_attributes()),
        Response::Resolved { parent: 9, name: name("notes.txt"), attributes: Some(file_attributes()) },
        Response::Handle(3),
        Response::Opened { handle: 5, size: 1 << 30 },
        Response::Created { attributes: file_attributes(), handle: 6, lease: None },
        Response::Created {
            attributes: file_attributes(),
            handle: 7,
            lease: Some(LeaseGrant { slot: 3, sequence: 9, term_nanos: 1_000_000_000 }),
        },
        Response::Data(b"some bytes of a file\n".repeat(8)),
        Response::Length(16384),
        Response::Entries(vec![
            DirectoryEntry { ino: 9, kind: FileKind::Directory, name: name("photos"), next: 1 },
            DirectoryEntry { ino: 4242, kind: FileKind::File, name: name("notes.txt"), next: 2 },
            DirectoryEntry { ino: 77, kind: FileKind::Symlink, name: name("latest"), next: 3 },
        ]),
        Response::Names(vec![name("user.origin"), name("user.tags")]),
        Response::FsStats(FsStats {
            block_bytes: 4096,
            blocks: 1 << 24,
            blocks_free: 1 << 23,
            blocks_available: (1 << 23) - 1024,
            files: 1 << 32,
            files_free: (1 << 32) - 5000,
            name_max: 255,
        }),
        Response::Value(Some(name("a small value"))),
        Response::ValueInBuffer { length: 16384 },
        Response::Head(Some(KeyHead { object: 991, size: 16384 })),
        Response::Deleted(true),
        Response::ScanPage {
            entries: vec![
                ScanEntry { key: name("2026/11/beach.jpg"), object: 991, size: 16384 },
                ScanEntry { key: name("2026/11/city.jpg"), object: 992, size: 20000 },
            ],
            more: true,
        },
        Response::Text("objects: 12\nbytes: 4096\n".into()),
        Response::Redirect { worker: 2 },
        Response::Error { errno: 2, message: "no such file or directory: notes.txt".into() },
        Response::BatchApplied(vec![Some(file_attributes()), None, None]),
        Response::Lease(LeaseGrant { slot: 17, sequence: 3, term_nanos: 1_000_000_000 }),
        Response::HeapObject(77),
        Response::HeapAttached { object: 77, size: 4096, writable: true },
        Response::HeapType(Some(78)),
        Response::HeapType(None),
        Response::HeapBlock { pointer: HeapPointer { object: 77, offset: 4160, generation: 9 }, object_size: 8192 },
        Response::PathOpened {
            parent: 9,
            name: name("m000042"),
            attributes: file_attributes(),
            handle: 7,
            data: Some(b"<html>a page</html>\n".repeat(4)),
            lease: Some(LeaseGrant { slot: 18, sequence: 2, term_nanos: 1_000_000_000 }),
        },
        Response::PathOpened {
            parent: 9,
            name: name("notes.txt"),
            attributes: file_attributes(),
            handle: 8,
            data: None,
            lease: None,
        },
    ]
}

fn request_seeds() -> Vec<Vec<u8>> {
    let requests = requests();
    let opcodes: BTreeSet<Opcode> = requests.iter().map(Request::opcode).collect();
    assert_eq!(opcodes.len(), Opcode::ALL.len(), "a seed for every opcode");
    requests
        .iter()
        .enumerate()
        .map(|(i, request)| {
            let mut out = Vec::new();
            encode_request(1000 + i as u64, request, &mut out);
            out
        })
        .collect()
}

fn response_seeds() -> Vec<Vec<u8>> {
    let responses = responses();
    let kinds: BTreeSet<ResponseKind> = responses.iter().map(Response::kind).collect();
    assert_eq!(kinds.len(), ResponseKind::ALL.len(), "a seed for every response kind");
    responses
        .iter()
        .enumerate()
        .map(|(i, response)| {
            let mut out = Vec::new();
            encode_response(1000 + i as u64, response, &mut out);
            out
        })
        .collect()
}

/// Random bytes, or a seed damaged: bits flipped, cut short, a stretch
/// overwritten, bytes appended.
fn input(g: &mut Generator, seeds: &[Vec<u8>]) -> Vec<u8> {
    if g.below(8) == 0 {
        let length = g.below(64);
        return (0..length).map(|_| g.next() as u8).collect();
    }
    let mut bytes = seeds[g.below(seeds.len())].clone();
    match g.below(4) {
        0 => {
            for _ in 0..=g.below(3) {
                let bit = g.below(bytes.len() * 8);
                bytes[bit / 8] ^= 1 << (bit % 8);
            }
        }
        1 => bytes.truncate(g.below(bytes.len())),
        2 => {
            let at = g.below(bytes.len());
            let end = (at + 1 + g.below(8)).min(bytes.len());
            for byte in &mut bytes[at..end] {
                *byte = g.next() as u8;
            }
        }
        _ => bytes.extend((0..=g.below(8)).map(|_| g.next() as u8)),
    }
    bytes
}

fn replay(decode: fn(&[u8]) -> bool, seeds: &[Vec<u8>], seed: u64) -> usize {
    for s in seeds {
        assert!(decode(s), "seed {s:?} refused");
    }
    let mut g = Generator(seed);
    (0..20_000).filter(|_| decode(&input(&mut g, seeds))).count()
}

/// Damaged requests that still decode: the stretches a bit flip or an
/// overwrite can change without breaking a rule (ids, offsets, modes,
/// byte-string contents).
const PINNED_REQUESTS: usize = 5101;

/// Damaged responses that still decode.
const PINNED_RESPONSES: usize = 5662;

#[test]
fn request_decoder_replay() {
    let accepted = replay(fuzzing::request, &request_seeds(), 0x5245_5155_4553_5453);
    println!("requests accepted: {accepted}");
    assert_eq!(accepted, PINNED_REQUESTS, "what the request decoder accepts changed (a format change?)");
}

#[test]
fn response_decoder_replay() {
    let accepted = replay(fuzzing::response, &response_seeds(), 0x5245_5350_4f4e_5345);
    println!("responses accepted: {accepted}");
    assert_eq!(accepted, PINNED_RESPONSES, "what the response decoder accepts changed (a format change?)");
}

/// The fuzz targets of the codec, their entry points and valid seeds.
fn fuzz_targets() -> [corpus_files::Target; 2] {
    [
        ("protocol_request", fuzzing::request, request_seeds()),
        ("protocol_response", fuzzing::response, response_seeds()),
    ]
}

#[test]
#[ignore = "rewrites the committed fuzz seed corpus; run with --ignored"]
fn generate_fuzz_corpus() {
    for (target, decode, valid) in fuzz_targets() {
        // Damaged copies of a few seeds: enough for the replay to prove
        // refusals, few enough to keep the corpus small.
        let near = corpus_files::near_seeds(&valid[..6], decode);
        corpus_files::write_corpus(target, decode, &valid, &near);
    }
}

#[test]
fn fuzz_corpus_replays() {
    for (target, decode, _) in fuzz_targets() {
        corpus_files::replay_corpus(target, decode);
    }
}
